#include "model/safetensors_file.h"

#include <ATen/ATen.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/bounded_json.h"

namespace rapidqa::model {
namespace {

constexpr std::uint64_t kMaxHeaderBytes = 100ull << 20;  // the format's own limit

std::size_t dtype_size(const std::string& dtype) {
  if (dtype == "F32" || dtype == "I32" || dtype == "U32") return 4;
  if (dtype == "F16" || dtype == "BF16" || dtype == "I16" || dtype == "U16") return 2;
  if (dtype == "F64" || dtype == "I64" || dtype == "U64") return 8;
  if (dtype == "I8" || dtype == "U8" || dtype == "BOOL") return 1;
  return 0;
}

// The most dimensions a tensor may declare; BERT-family weights have one or two.
constexpr std::size_t kMaxRank = 32;

// out = a * b, false when it overflows.
bool multiply_checked(std::uint64_t a, std::uint64_t b, std::uint64_t& out) {
  return !__builtin_mul_overflow(a, b, &out);
}

// One header entry's fields, type-checked; messages never quote the file.
Result<TensorInfo> read_entry(const nlohmann::json& value) {
  if (!value.is_object()) return Status::data_loss("entry is not a JSON object");
  const auto dtype = value.find("dtype");
  const auto shape = value.find("shape");
  const auto offsets = value.find("data_offsets");
  if (dtype == value.end() || shape == value.end() || offsets == value.end()) {
    return Status::data_loss("entry needs dtype, shape and data_offsets");
  }
  if (!dtype->is_string()) return Status::data_loss("dtype is not a string");
  if (!shape->is_array() || shape->size() > kMaxRank) {
    return Status::data_loss(fmt::format("shape is not a list of at most {} dimensions", kMaxRank));
  }
  TensorInfo info;
  info.dtype = dtype->get<std::string>();
  for (const auto& d : *shape) {
    // number_unsigned: a non-negative integer that fits in 64 bits.
    if (!d.is_number_unsigned() || d.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX)) {
      return Status::data_loss("shape holds a dimension that is not a non-negative 64-bit integer");
    }
    info.shape.push_back(d.get<std::int64_t>());
  }
  if (!offsets->is_array() || offsets->size() != 2 || !(*offsets)[0].is_number_unsigned() ||
      !(*offsets)[1].is_number_unsigned()) {
    return Status::data_loss("data_offsets must hold two non-negative integers");
  }
  info.begin = (*offsets)[0].get<std::uint64_t>();
  info.end = (*offsets)[1].get<std::uint64_t>();
  return info;
}

}  // namespace

struct SafetensorsFile::Mapping {
  void* address = nullptr;
  std::size_t length = 0;
  ~Mapping() {
    if (address && address != MAP_FAILED) munmap(address, length);
  }
};

Result<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  // O_NONBLOCK: a FIFO named model.safetensors must not hang the open; only
  // regular files are read.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    return errno == ENOENT ? Status::not_found(fmt::format("{}: no such file", path))
                           : Status::io_error(fmt::format("{}: {}", path, std::strerror(errno)));
  }
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    ::close(fd);
    return Status::io_error(fmt::format("{}: {}", path, std::strerror(errno)));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::data_loss(fmt::format("{}: not a regular file", path));
  }
  const auto size = static_cast<std::uint64_t>(st.st_size);
  if (size < 8) {
    ::close(fd);
    return Status::data_loss(fmt::format("{}: {} bytes is too short for a safetensors file", path, size));
  }
  auto mapping = std::make_shared<Mapping>();
  mapping->length = static_cast<std::size_t>(size);
  // Private and writable (copy on write) so a stray in-place op can never
  // reach the file or fault; pages are shared until written.
  mapping->address = mmap(nullptr, mapping->length, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (mapping->address == MAP_FAILED) {
    return Status::io_error(fmt::format("{}: cannot map: {}", path, std::strerror(errno)));
  }
  const auto* bytes = static_cast<const std::uint8_t*>(mapping->address);
  std::uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | bytes[i];
  if (header_len > kMaxHeaderBytes || header_len > size - 8) {
    return Status::data_loss(
        fmt::format("{}: header length {} does not fit in a {}-byte file (truncated or not safetensors)", path,
                    header_len, size));
  }
  auto parsed = detail::parse_json_bounded(
      std::string_view(reinterpret_cast<const char*>(bytes + 8), static_cast<std::size_t>(header_len)));
  if (!parsed) return Status::data_loss(fmt::format("{}: header: {}", path, parsed.status().message()));
  const nlohmann::json& header = parsed.value();
  if (!header.is_object()) return Status::data_loss(fmt::format("{}: header is not a JSON object", path));

  SafetensorsFile file;
  file.path_ = path;
  file.data_ = bytes + 8 + header_len;
  const std::uint64_t data_size = size - 8 - header_len;
  for (const auto& [name, value] : header.items()) {
    if (name == "__metadata__") {
      if (value.is_object()) {
        for (const auto& [k, v] : value.items()) {
          if (v.is_string()) file.metadata_[k] = v.get<std::string>();
        }
      }
      continue;
    }
    // Named for the lambda: C++17 lambdas cannot capture a structured binding.
    const std::string& tensor_name = name;
    auto bad = [&](const std::string& why) {
      return Status::data_loss(fmt::format("{}: tensor '{}': {}", path, detail::clip_for_message(tensor_name), why));
    };
    auto info = read_entry(value);
    if (!info) return bad(info.status().message());
    // Every size is computed with overflow checks: a shape whose element
    // count wraps to a small number would otherwise pass the byte-range
    // check below and be read past its data.
    std::uint64_t elements = 1;
    for (const std::int64_t d : info->shape) {
      if (!multiply_checked(elements, static_cast<std::uint64_t>(d), elements)) {
        return bad("shape's element count overflows 64 bits");
      }
    }
    const std::size_t element_size = dtype_size(info->dtype);
    if (element_size == 0) return bad(fmt::format("unknown dtype '{}'", detail::clip_for_message(info->dtype)));
    std::uint64_t needed = 0;
    if (!multiply_checked(elements, element_size, needed)) return bad("shape's byte size overflows 64 bits");
    if (info->end < info->begin) {
      return bad(fmt::format("data_offsets [{}, {}) end before they begin", info->begin, info->end));
    }
    if (info->end > data_size) {
      return bad(fmt::format("byte range [{}, {}) lies outside the {}-byte data section (file truncated?)",
                             info->begin, info->end, data_size));
    }
    if (info->end - info->begin != needed) {
      return bad(fmt::format("byte range holds {} bytes but shape and dtype need {}", info->end - info->begin,
                             needed));
    }
    file.tensors_.emplace(name, std::move(info).value());
  }
  file.mapping_ = std::move(mapping);
  return file;
}

Result<at::Tensor> SafetensorsFile::tensor(const std::string& name) const {
  const auto it = tensors_.find(name);
  if (it == tensors_.end()) return Status::not_found(fmt::format("{}: no tensor named '{}'", path_, name));
  const TensorInfo& info = it->second;
  const std::uint8_t* start = data_ + info.begin;
  // An empty tensor's storage may be null: memcpy from or to null is
  // undefined even for zero bytes.
  auto copy_into = [&](at::Tensor& out) {
    if (info.end > info.begin) std::memcpy(out.data_ptr(), start, info.end - info.begin);
  };
  if (info.dtype == "F32") {
    if (reinterpret_cast<std::uintptr_t>(start) % alignof(float) == 0) {
      auto keep_alive = mapping_;
      return at::from_blob(const_cast<std::uint8_t*>(start), info.shape, [keep_alive](void*) {},
                           at::TensorOptions().dtype(at::kFloat));
    }
    auto out = at::empty(info.shape, at::kFloat);
    copy_into(out);
    return out;
  }
  if (info.dtype == "F16" || info.dtype == "BF16") {
    const auto type = info.dtype == "F16" ? at::kHalf : at::kBFloat16;
    auto narrow = at::empty(info.shape, type);
    copy_into(narrow);
    return narrow.to(at::kFloat);
  }
  if (info.dtype == "I8") {
    // Quantized weights stay 8-bit; the quantized layers widen nothing.
    auto out = at::empty(info.shape, at::kChar);
    copy_into(out);
    return out;
  }
  return Status::invalid_argument(
      fmt::format("{}: tensor '{}' has dtype {}; supported are F32, F16, BF16 and I8", path_,
                  detail::clip_for_message(name), info.dtype));
}

Status write_safetensors(const std::string& path, const std::map<std::string, at::Tensor>& tensors,
                         const std::map<std::string, std::string>& metadata) {
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::vector<at::Tensor> data;
  std::uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    const bool int8 = t.scalar_type() == at::kChar;
    at::Tensor c = int8 ? t.contiguous() : t.to(at::kFloat).contiguous();
    const auto bytes = static_cast<std::uint64_t>(c.numel()) * c.element_size();
    header[name] = {{"dtype", int8 ? "I8" : "F32"},
                    {"shape", c.sizes().vec()},
                    {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
    data.push_back(std::move(c));
  }
  std::string text = header.dump();
  while ((text.size() + 8) % 8 != 0) text.push_back(' ');  // keep the data 8-byte aligned
  const std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    if (!out) return Status::io_error(fmt::format("{}: cannot create", temporary));
    std::uint64_t n = text.size();
    unsigned char len[8];
    for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>((n >> (8 * i)) & 0xff);
    out.write(reinterpret_cast<const char*>(len), 8);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    for (const auto& c : data) {
      out.write(static_cast<const char*>(c.data_ptr()), static_cast<std::streamsize>(c.numel() * c.element_size()));
    }
    out.flush();
    if (!out) return Status::io_error(fmt::format("{}: write failed", temporary));
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    return Status::io_error(fmt::format("{}: cannot rename into place: {}", path, std::strerror(errno)));
  }
  return Status::ok();
}

}  // namespace rapidqa::model

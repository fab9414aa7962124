#include "model/safetensors_file.h"

#include <ATen/ATen.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

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

}  // namespace

struct SafetensorsFile::Mapping {
  void* address = nullptr;
  std::size_t length = 0;
  ~Mapping() {
    if (address && address != MAP_FAILED) munmap(address, length);
  }
};

Result<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return errno == ENOENT ? Status::not_found(fmt::format("{}: no such file", path))
                           : Status::io_error(fmt::format("{}: {}", path, std::strerror(errno)));
  }
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    ::close(fd);
    return Status::io_error(fmt::format("{}: {}", path, std::strerror(errno)));
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
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(bytes + 8, bytes + 8 + header_len);
  } catch (const std::exception& e) {
    return Status::data_loss(fmt::format("{}: header is not valid JSON: {}", path, e.what()));
  }
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
    auto bad = [&](const std::string& why) {
      return Status::data_loss(fmt::format("{}: tensor '{}': {}", path, name, why));
    };
    if (!value.is_object() || !value.contains("dtype") || !value.contains("shape") ||
        !value.contains("data_offsets")) {
      return bad("entry needs dtype, shape and data_offsets");
    }
    TensorInfo info;
    try {
      info.dtype = value.at("dtype").get<std::string>();
      info.shape = value.at("shape").get<std::vector<std::int64_t>>();
      const auto offsets = value.at("data_offsets").get<std::vector<std::uint64_t>>();
      if (offsets.size() != 2) return bad("data_offsets must hold two numbers");
      info.begin = offsets[0];
      info.end = offsets[1];
    } catch (const std::exception& e) {
      return bad(std::string("malformed entry: ") + e.what());
    }
    std::uint64_t elements = 1;
    for (auto d : info.shape) {
      if (d < 0) return bad("negative dimension");
      elements *= static_cast<std::uint64_t>(d);
    }
    const std::size_t element_size = dtype_size(info.dtype);
    if (element_size == 0) return bad(fmt::format("unknown dtype '{}'", info.dtype));
    if (info.end < info.begin || info.end > data_size) {
      return bad(fmt::format("byte range [{}, {}) lies outside the {}-byte data section (file truncated?)",
                             info.begin, info.end, data_size));
    }
    if (info.end - info.begin != elements * element_size) {
      return bad(fmt::format("byte range holds {} bytes but shape and dtype need {}", info.end - info.begin,
                             elements * element_size));
    }
    file.tensors_.emplace(name, std::move(info));
  }
  file.mapping_ = std::move(mapping);
  return file;
}

Result<at::Tensor> SafetensorsFile::tensor(const std::string& name) const {
  const auto it = tensors_.find(name);
  if (it == tensors_.end()) return Status::not_found(fmt::format("{}: no tensor named '{}'", path_, name));
  const TensorInfo& info = it->second;
  const std::uint8_t* start = data_ + info.begin;
  if (info.dtype == "F32") {
    if (reinterpret_cast<std::uintptr_t>(start) % alignof(float) == 0) {
      auto keep_alive = mapping_;
      return at::from_blob(const_cast<std::uint8_t*>(start), info.shape, [keep_alive](void*) {},
                           at::TensorOptions().dtype(at::kFloat));
    }
    auto out = at::empty(info.shape, at::kFloat);
    std::memcpy(out.data_ptr(), start, info.end - info.begin);
    return out;
  }
  if (info.dtype == "F16" || info.dtype == "BF16") {
    const auto type = info.dtype == "F16" ? at::kHalf : at::kBFloat16;
    auto narrow = at::empty(info.shape, type);
    std::memcpy(narrow.data_ptr(), start, info.end - info.begin);
    return narrow.to(at::kFloat);
  }
  if (info.dtype == "I8") {
    // Quantized weights stay 8-bit; the quantized layers widen nothing.
    auto out = at::empty(info.shape, at::kChar);
    std::memcpy(out.data_ptr(), start, info.end - info.begin);
    return out;
  }
  return Status::invalid_argument(
      fmt::format("{}: tensor '{}' has dtype {}; supported are F32, F16, BF16 and I8", path_, name, info.dtype));
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

// Reading the parameters of a TorchScript file without loading it as a
// module: torch::jit::load would compile the archive's code/ and run its
// __setstate__ methods, so a .pt file could run anything it likes. Here the
// zip archive is opened with LibTorch's reader, data.pkl is interpreted by
// torchscript_pickle.cpp (which calls nothing), and each tensor is copied
// out of its storage record after checking the record holds the bytes the
// pickle claims.
#include <ATen/ATen.h>
#include <caffe2/serialize/inline_container.h>
#include <c10/util/Exception.h>

#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "common/bounded_json.h"
#include "model/torchscript_pickle.h"
#include "model/transformer_model.h"

namespace rapidqa::model {
namespace {

at::ScalarType scalar_type_of(const std::string& storage_type) {
  if (storage_type == "FloatStorage") return at::kFloat;
  if (storage_type == "DoubleStorage") return at::kDouble;
  if (storage_type == "HalfStorage") return at::kHalf;
  if (storage_type == "BFloat16Storage") return at::kBFloat16;
  if (storage_type == "LongStorage") return at::kLong;
  if (storage_type == "IntStorage") return at::kInt;
  if (storage_type == "ShortStorage") return at::kShort;
  if (storage_type == "CharStorage") return at::kChar;
  if (storage_type == "ByteStorage") return at::kByte;
  return at::kBool;  // storage_element_size() admits nothing else
}

// LibTorch's messages carry a backtrace after the first line.
std::string first_line(const std::string& what) {
  return detail::clip_for_message(what.substr(0, what.find('\n')), 160);
}

Result<std::map<std::string, at::Tensor>> read_archive(const std::string& path) {
  caffe2::serialize::PyTorchStreamReader archive(path);
  if (!archive.hasRecord("data.pkl")) {
    return Status::data_loss(fmt::format("{}: no data.pkl in the archive (not a TorchScript file?)", path));
  }
  const auto [pickle, pickle_size] = archive.getRecord("data.pkl");
  auto described = read_pickled_tensors(std::string_view(static_cast<const char*>(pickle.get()), pickle_size));
  if (!described) return Status(described.status().code(), fmt::format("{}: {}", path, described.status().message()));

  // One flat tensor per storage record, shared by the views into it.
  std::map<std::string, at::Tensor> storages;
  std::map<std::string, at::Tensor> tensors;
  for (const auto& [name, info] : described.value()) {
    const at::ScalarType type = scalar_type_of(info.storage_type);
    const std::string record = "data/" + info.storage_key;
    auto found = storages.find(record);
    if (found == storages.end()) {
      if (!archive.hasRecord(record)) {
        return Status::data_loss(fmt::format("{}: tensor '{}': storage record '{}' is missing", path,
                                             detail::clip_for_message(name), detail::clip_for_message(record)));
      }
      std::uint64_t needed = 0;
      if (__builtin_mul_overflow(static_cast<std::uint64_t>(info.storage_numel),
                                 static_cast<std::uint64_t>(storage_element_size(info.storage_type)), &needed)) {
        return Status::data_loss(fmt::format("{}: tensor '{}': storage size overflows", path,
                                             detail::clip_for_message(name)));
      }
      // The record first: its size, not the pickle's claim, decides what is
      // allocated.
      const auto [data, size] = archive.getRecord(record);
      if (size < needed) {
        return Status::data_loss(fmt::format("{}: tensor '{}': storage record holds {} bytes but the pickle "
                                             "declares {}",
                                             path, detail::clip_for_message(name), size, needed));
      }
      at::Tensor flat = at::empty({info.storage_numel}, at::TensorOptions().dtype(type));
      if (needed > 0) std::memcpy(flat.data_ptr(), data.get(), needed);
      found = storages.emplace(record, flat).first;
    } else if (found->second.scalar_type() != type) {
      return Status::data_loss(fmt::format("{}: tensor '{}': storage record '{}' is read as two types", path,
                                           detail::clip_for_message(name), detail::clip_for_message(record)));
    }
    // The pickle reader checked the view lies inside the storage.
    tensors.emplace(name, found->second.as_strided(info.sizes, info.strides, info.offset).clone());
  }
  if (tensors.empty()) {
    return Status::invalid_argument(fmt::format("{}: the TorchScript file holds no tensors", path));
  }
  return tensors;
}

}  // namespace

Result<std::map<std::string, at::Tensor>> read_torchscript_parameters(const std::string& path) {
  std::error_code ec;
  // A FIFO or device named model.pt would block or never end.
  if (!std::filesystem::is_regular_file(path, ec)) {
    return Status::invalid_argument(fmt::format("{}: not a regular file", path));
  }
  try {
    return read_archive(path);
  } catch (const c10::Error& e) {
    return Status::data_loss(
        fmt::format("{}: not a readable TorchScript archive: {}", path, first_line(e.what_without_backtrace())));
  } catch (const std::bad_alloc&) {
    return Status::resource_exhausted(fmt::format("{}: out of memory reading the TorchScript archive", path));
  } catch (const std::exception& e) {
    return Status::data_loss(fmt::format("{}: not a readable TorchScript archive: {}", path, first_line(e.what())));
  }
}

}  // namespace rapidqa::model

#include "model/checkpoint_files.h"

#include <filesystem>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/bounded_file.h"
#include "common/bounded_json.h"
#include "model/safetensors_file.h"
#include "model/transformer_model.h"

namespace rapidqa::model {
namespace fs = std::filesystem;
namespace {

// A real index is a few hundred kilobytes (one line per tensor).
constexpr std::size_t kMaxIndexBytes = 64u << 20;
// Far above any checkpoint (bge-m3 ships 2 shards, 65B models a few hundred).
constexpr std::size_t kMaxShards = 4096;

bool is_safetensors(const fs::path& path) { return path.extension() == ".safetensors"; }

// A shard named by an index: a plain file name, a regular file in the
// index's own directory (a link is followed only if it stays there).
Result<fs::path> shard_path(const fs::path& dir, const std::string& name, const std::string& index) {
  const fs::path relative(name);
  if (name.empty() || relative.has_parent_path() || relative.is_absolute() || name == "." || name == ".." ||
      name.find('\0') != std::string::npos) {
    return Status::invalid_argument(fmt::format(
        "{}: shard '{}' is not a plain file name in the model directory", index, detail::clip_for_message(name)));
  }
  const fs::path path = dir / relative;
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) {
    return Status::not_found(fmt::format("{}: shard '{}' is missing or not a regular file", index,
                                         detail::clip_for_message(name)));
  }
  const fs::path real = fs::weakly_canonical(path, ec), real_dir = fs::weakly_canonical(dir, ec);
  if (ec || real.parent_path() != real_dir) {
    return Status::invalid_argument(fmt::format("{}: shard '{}' links outside the model directory", index,
                                                detail::clip_for_message(name)));
  }
  return path;
}

// A shard index's weight map as tensor names by shard file name.
Result<std::map<std::string, std::set<std::string>>> read_weight_map(const fs::path& index_path) {
  const std::string index = index_path.string();
  auto text = detail::read_file_bounded(index, kMaxIndexBytes, "checkpoint index");
  if (!text) return text.status();
  auto parsed = detail::parse_json_bounded(text.value());
  if (!parsed) return Status::invalid_argument(fmt::format("{}: {}", index, parsed.status().message()));
  const auto& j = parsed.value();
  const auto map = j.is_object() ? j.find("weight_map") : j.end();
  if (!j.is_object() || map == j.end() || !map->is_object() || map->empty()) {
    return Status::invalid_argument(
        fmt::format("{}: expected an object with a non-empty 'weight_map' of tensor name -> shard file", index));
  }
  std::map<std::string, std::set<std::string>> names_by_shard;
  for (const auto& [name, shard] : map->items()) {
    if (!shard.is_string()) {
      return Status::invalid_argument(fmt::format("{}: weight_map['{}'] is not a file name", index,
                                                  detail::clip_for_message(name)));
    }
    names_by_shard[shard.get<std::string>()].insert(name);
  }
  if (names_by_shard.size() > kMaxShards) {
    return Status::invalid_argument(
        fmt::format("{}: names {} shards (at most {})", index, names_by_shard.size(), kMaxShards));
  }
  return names_by_shard;
}

Result<CheckpointTensors> read_sharded(const fs::path& index_path) {
  const std::string index = index_path.string();
  auto weight_map = read_weight_map(index_path);
  if (!weight_map) return weight_map.status();
  const auto& names_by_shard = weight_map.value();
  const bool safetensors_index = index_path.filename().string().rfind("model.safetensors", 0) == 0;
  CheckpointTensors out;
  out.source = index;
  for (const auto& [shard, names] : names_by_shard) {
    auto path = shard_path(index_path.parent_path(), shard, index);
    if (!path) return path.status();
    if (is_safetensors(*path) != safetensors_index) {
      return Status::invalid_argument(fmt::format("{}: shard '{}' is not of the index's format", index,
                                                  detail::clip_for_message(shard)));
    }
    auto tensors = read_weight_file(path->string());
    if (!tensors) return tensors.status();
    for (const std::string& name : names) {
      if (!tensors->count(name)) {
        return Status::data_loss(fmt::format("{}: tensor '{}' is not in shard '{}' where the index puts it", index,
                                             detail::clip_for_message(name), detail::clip_for_message(shard)));
      }
    }
    for (auto& [name, tensor] : tensors.value()) {
      if (!out.tensors.emplace(name, std::move(tensor)).second) {
        return Status::data_loss(fmt::format("{}: tensor '{}' is in two shards", index,
                                             detail::clip_for_message(name)));
      }
    }
  }
  return out;
}

}  // namespace

Result<std::string> find_checkpoint_file(const std::string& model_dir) {
  const fs::path dir(model_dir);
  std::error_code ec;
  for (const char* name : {"model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                           "pytorch_model.bin.index.json"}) {
    if (fs::exists(dir / name, ec)) return (dir / name).string();
  }
  fs::path script;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (entry.path().extension() == ".pt" && (script.empty() || entry.path().filename() == "model.pt")) {
      script = entry.path();
    }
  }
  if (!script.empty()) return script.string();
  return Status::not_found(fmt::format(
      "{}: no weights: looked for model.safetensors, model.safetensors.index.json, pytorch_model.bin, "
      "pytorch_model.bin.index.json and a TorchScript .pt file",
      model_dir));
}

Result<std::map<std::string, at::Tensor>> read_weight_file(const std::string& path) {
  if (!is_safetensors(path)) {
    return read_pytorch_archive(path);
  }
  auto file = SafetensorsFile::open(path);
  if (!file) return file.status();
  std::map<std::string, at::Tensor> tensors;
  for (const auto& [name, info] : file->tensors()) {
    auto tensor = file->tensor(name);
    if (!tensor) return tensor.status();
    tensors.emplace(name, std::move(tensor).value());
  }
  return tensors;
}

std::uint64_t checkpoint_bytes(const std::string& model_dir) {
  const auto file = find_checkpoint_file(model_dir);
  if (!file) return 0;
  const fs::path path(file.value());
  std::error_code ec;
  if (path.extension() != ".json") {
    const auto size = fs::file_size(path, ec);
    return ec ? 0 : size;
  }
  const auto weight_map = read_weight_map(path);
  if (!weight_map) return 0;
  std::uint64_t bytes = 0;
  for (const auto& [shard, names] : weight_map.value()) {
    auto shard_file = shard_path(path.parent_path(), shard, path.string());
    if (!shard_file) continue;
    const auto size = fs::file_size(*shard_file, ec);
    if (!ec) bytes += size;
  }
  return bytes;
}

Result<CheckpointTensors> read_checkpoint_tensors(const std::string& model_dir) {
  auto file = find_checkpoint_file(model_dir);
  if (!file) return file.status();
  const fs::path path(file.value());
  if (path.extension() == ".json") return read_sharded(path);
  auto tensors = read_weight_file(path.string());
  if (!tensors) return tensors.status();
  return CheckpointTensors{std::move(tensors).value(), path.string()};
}

}  // namespace rapidqa::model

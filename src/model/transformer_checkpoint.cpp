#include "model/transformer_checkpoint.h"

#include <ATen/ATen.h>

#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "common/guard.h"
#include "model/int8_linear.h"
#include "model/safetensors_file.h"

namespace rapidqa::model {
namespace {

void put_embedding(std::map<std::string, at::Tensor>& out, const std::string& name, const EmbeddingTable& table) {
  if (!table.defined()) return;
  out[name + ".weight"] = table.values();
  if (table.is_quantized()) out[name + ".weight_scale"] = table.scales();
}

// One linear layer, or rows [first, first + count) of it (a fused product).
void put_linear(std::map<std::string, at::Tensor>& out, const std::string& name, const LinearOp& op,
                std::int64_t first, std::int64_t count) {
  const at::Tensor bias = op.dense_bias();
  if (bias.defined()) out[name + ".bias"] = bias.narrow(0, first, count).contiguous();
  if (const auto* q = dynamic_cast<const Int8Linear*>(&op)) {
    out[name + ".weight"] = q->quantized_weight().values.narrow(0, first, count).contiguous();
    out[name + ".weight_scale"] = q->quantized_weight().scales.narrow(0, first, count).contiguous();
    const InputQuantization& input = q->input_quantization();
    if (!input.dynamic) out[name + ".input_range"] = at::tensor({input.range_min, input.range_max});
    return;
  }
  out[name + ".weight"] = op.dense_weight().narrow(0, first, count).contiguous();
}

void put_linear(std::map<std::string, at::Tensor>& out, const std::string& name, const LinearOp& op) {
  put_linear(out, name, op, 0, op.out_features());
}

void put_norm(std::map<std::string, at::Tensor>& out, const std::string& name, const LayerNormWeights& norm) {
  out[name + ".weight"] = norm.weight;
  out[name + ".bias"] = norm.bias;
}

bool is_weight_file(const std::filesystem::path& p) {
  const std::string ext = p.extension().string();
  const std::string name = p.filename().string();
  const auto ends_with = [&](const std::string& tail) {
    return name.size() >= tail.size() && name.compare(name.size() - tail.size(), tail.size(), tail) == 0;
  };
  // A sharded checkpoint's index names weight files that are not copied.
  if (ends_with(".safetensors.index.json") || ends_with(".bin.index.json")) return true;
  return ext == ".safetensors" || ext == ".pt" || ext == ".bin" || ext == ".onnx" || ext == ".h5" ||
         ext == ".msgpack" || ext == ".ckpt";
}

}  // namespace

std::map<std::string, at::Tensor> checkpoint_tensors(const TransformerModel& model) {
  std::map<std::string, at::Tensor> out;
  put_embedding(out, "embeddings.word_embeddings", model.word_embeddings);
  put_embedding(out, "embeddings.position_embeddings", model.position_embeddings);
  put_embedding(out, "embeddings.token_type_embeddings", model.token_type_embeddings);
  put_norm(out, "embeddings.LayerNorm", model.embedding_norm);
  if (model.embedding_projection) put_linear(out, "embeddings_project", *model.embedding_projection);
  if (model.relative_attention_bias.defined()) {
    out["encoder.relative_attention_bias.weight"] = model.relative_attention_bias;
  }
  const LayerNames n = names_for(model.config.architecture);
  for (std::size_t i = 0; i < model.layers.size(); ++i) {
    const TransformerLayer& layer = model.layers[i];
    const std::string p = n.layer_prefix + std::to_string(i) + ".";
    const std::int64_t width = layer.num_heads * layer.head_dim;
    put_linear(out, p + n.query, *layer.qkv, 0, width);
    put_linear(out, p + n.key, *layer.qkv, width, width);
    put_linear(out, p + n.value, *layer.qkv, 2 * width, width);
    put_linear(out, p + n.attention_output, *layer.attention_output);
    put_norm(out, p + n.attention_norm, layer.attention_norm);
    put_linear(out, p + n.intermediate, *layer.intermediate);
    put_linear(out, p + n.output, *layer.output);
    put_norm(out, p + n.output_norm, layer.output_norm);
  }
  if (model.pooler) put_linear(out, "pooler.dense", *model.pooler);
  if (model.qa_head) put_linear(out, "qa_outputs", *model.qa_head);
  return out;
}

Status copy_model_files(const std::string& source_dir, const std::string& out_dir) {
  namespace fs = std::filesystem;
  return detail::guarded("copying the model files", [&]() -> Status {
    std::error_code ec;
    fs::create_directories(out_dir, ec);
    if (ec) return Status::io_error(fmt::format("{}: cannot create: {}", out_dir, ec.message()));
    // Weight files in module folders (a sentence-transformers Dense
    // module's) are copied: only the transformer's own are rewritten.
    for (auto it = fs::recursive_directory_iterator(source_dir); it != fs::recursive_directory_iterator(); ++it) {
      const fs::directory_entry& entry = *it;
      const fs::path target = fs::path(out_dir) / fs::relative(entry.path(), source_dir);
      if (entry.is_directory()) {
        fs::create_directories(target);
      } else if (entry.is_regular_file() && (it.depth() > 0 || !is_weight_file(entry.path()))) {
        fs::copy_file(entry.path(), target, fs::copy_options::overwrite_existing);
      }
    }
    return Status::ok();
  });
}

Status save_transformer(const TransformerModel& model, const std::string& source_dir, const std::string& out_dir,
                        const std::map<std::string, std::string>& metadata, const std::string& config_json) {
  return save_checkpoint(checkpoint_tensors(model), source_dir, out_dir, metadata, config_json);
}

Status save_checkpoint(const std::map<std::string, at::Tensor>& tensors, const std::string& source_dir,
                       const std::string& out_dir, const std::map<std::string, std::string>& metadata,
                       const std::string& config_json) {
  namespace fs = std::filesystem;
  return detail::guarded("saving the model", [&]() -> Status {
    std::error_code ec;
    if (fs::exists(out_dir) && fs::exists(source_dir) && fs::equivalent(source_dir, out_dir, ec)) {
      return Status::invalid_argument(fmt::format("output directory '{}' is the input directory", out_dir));
    }
    if (!source_dir.empty()) {
      const Status copied = copy_model_files(source_dir, out_dir);
      if (!copied.is_ok()) return copied;
    } else {
      fs::create_directories(out_dir, ec);
      if (ec) return Status::io_error(fmt::format("{}: cannot create: {}", out_dir, ec.message()));
    }
    // Weight files from an earlier save in out_dir would shadow ours.
    for (const char* stale : {"model.pt"}) fs::remove(fs::path(out_dir) / stale, ec);
    if (!config_json.empty()) {
      std::ofstream config(fs::path(out_dir) / "config.json", std::ios::trunc);
      config << config_json;
      if (!config) return Status::io_error(fmt::format("{}/config.json: write failed", out_dir));
    }
    return write_safetensors((fs::path(out_dir) / "model.safetensors").string(), tensors, metadata);
  });
}

}  // namespace rapidqa::model

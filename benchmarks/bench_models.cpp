#include "bench_models.h"

#include <ATen/ATen.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <stdexcept>

#include "model/transformer_checkpoint.h"
#include "rapidqa/compute_runtime.h"
#include "rapidqa/knowledge_file.h"
#include "rapidqa/transformer_encoder.h"

namespace rapidqa::bench {
namespace {

model::TransformerConfig config_for(const Shape& s) {
  model::TransformerConfig c;
  c.vocab_size = 30522;
  c.hidden_size = s.hidden;
  c.num_layers = s.layers;
  c.num_heads = s.heads;
  c.intermediate_size = s.intermediate;
  c.max_position_embeddings = 512;
  return c;
}

std::map<std::string, at::Tensor> random_tensors(const model::TransformerConfig& c) {
  at::manual_seed(0);
  std::map<std::string, at::Tensor> t;
  auto normal = [](std::vector<std::int64_t> shape) { return at::randn(shape) * 0.02; };
  t["embeddings.word_embeddings.weight"] = normal({c.vocab_size, c.hidden_size});
  t["embeddings.position_embeddings.weight"] = normal({512, c.hidden_size});
  t["embeddings.token_type_embeddings.weight"] = normal({2, c.hidden_size});
  t["embeddings.LayerNorm.weight"] = at::ones({c.hidden_size});
  t["embeddings.LayerNorm.bias"] = at::zeros({c.hidden_size});
  for (std::int64_t i = 0; i < c.num_layers; ++i) {
    const std::string p = "encoder.layer." + std::to_string(i) + ".";
    for (const char* n : {"attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense"}) {
      t[p + n + ".weight"] = normal({c.hidden_size, c.hidden_size});
      t[p + n + ".bias"] = normal({c.hidden_size});
    }
    t[p + "intermediate.dense.weight"] = normal({c.intermediate_size, c.hidden_size});
    t[p + "intermediate.dense.bias"] = normal({c.intermediate_size});
    t[p + "output.dense.weight"] = normal({c.hidden_size, c.intermediate_size});
    t[p + "output.dense.bias"] = normal({c.hidden_size});
    for (const char* n : {"attention.output.LayerNorm", "output.LayerNorm"}) {
      t[p + n + ".weight"] = at::ones({c.hidden_size});
      t[p + n + ".bias"] = at::zeros({c.hidden_size});
    }
  }
  return t;
}

std::shared_ptr<model::TransformerModel> build(int shape_index) {
  const Shape& s = kShapes[shape_index];
  if (const char* dir = std::getenv("RAPIDQA_BENCH_MODELS")) {
    const auto path = std::filesystem::path(dir) / s.name;
    if (std::filesystem::exists(path / "config.json")) {
      auto loaded = model::load_transformer(path.string());
      if (!loaded) throw std::runtime_error(loaded.status().to_string());
      return std::const_pointer_cast<model::TransformerModel>(loaded.value());
    }
  }
  const model::TransformerConfig c = config_for(s);
  return model::build_transformer(c, random_tensors(c), s.name).value();
}

// Random weights under the names the configuration's family uses.
std::map<std::string, at::Tensor> family_tensors(const model::TransformerConfig& c) {
  at::manual_seed(1);
  std::map<std::string, at::Tensor> t;
  auto normal = [](std::vector<std::int64_t> shape) { return at::randn(shape) * 0.02; };
  const std::int64_t h = c.hidden_size, e = c.embedding_width(), i = c.intermediate_size;
  auto linear = [&](const std::string& name, std::int64_t out, std::int64_t in) {
    t[name + ".weight"] = normal({out, in});
    t[name + ".bias"] = normal({out});
  };
  auto norm = [&](const std::string& name, std::int64_t width) {
    t[name + ".weight"] = at::ones({width});
    t[name + ".bias"] = at::zeros({width});
  };
  t["embeddings.word_embeddings.weight"] = normal({c.vocab_size, e});
  t["embeddings.position_embeddings.weight"] = normal({c.max_position_embeddings, e});
  if (c.type_vocab_size > 0) t["embeddings.token_type_embeddings.weight"] = normal({c.type_vocab_size, e});
  norm("embeddings.LayerNorm", e);
  if (e != h) linear("embeddings_project", h, e);
  if (c.relative_attention_buckets > 0) {
    t["encoder.relative_attention_bias.weight"] = normal({c.relative_attention_buckets, c.num_heads});
  }
  const model::LayerNames n = model::names_for(c.architecture);
  for (std::int64_t layer = 0; layer < c.num_layers; ++layer) {
    const std::string p = n.layer_prefix + std::to_string(layer) + ".";
    for (const std::string* name : {&n.query, &n.key, &n.value, &n.attention_output}) linear(p + *name, h, h);
    norm(p + n.attention_norm, h);
    linear(p + n.intermediate, i, h);
    linear(p + n.output, h, i);
    norm(p + n.output_norm, h);
  }
  return t;
}

}  // namespace

const Family kFamilies[6] = {
    {"bert-base", R"({"model_type": "bert", "vocab_size": 30522, "hidden_size": 768, "num_hidden_layers": 12,
        "num_attention_heads": 12, "intermediate_size": 3072, "max_position_embeddings": 512})"},
    {"roberta-base", R"({"model_type": "roberta", "vocab_size": 50265, "hidden_size": 768, "num_hidden_layers": 12,
        "num_attention_heads": 12, "intermediate_size": 3072, "max_position_embeddings": 514,
        "type_vocab_size": 1, "pad_token_id": 1, "layer_norm_eps": 1e-5})"},
    {"xlm-roberta-base", R"({"model_type": "xlm-roberta", "vocab_size": 250002, "hidden_size": 768,
        "num_hidden_layers": 12, "num_attention_heads": 12, "intermediate_size": 3072,
        "max_position_embeddings": 514, "type_vocab_size": 1, "pad_token_id": 1, "layer_norm_eps": 1e-5})"},
    {"mpnet-base", R"({"model_type": "mpnet", "vocab_size": 30527, "hidden_size": 768, "num_hidden_layers": 12,
        "num_attention_heads": 12, "intermediate_size": 3072, "max_position_embeddings": 514,
        "pad_token_id": 1, "layer_norm_eps": 1e-5, "relative_attention_num_buckets": 32})"},
    {"electra-small", R"({"model_type": "electra", "vocab_size": 30522, "embedding_size": 128, "hidden_size": 256,
        "num_hidden_layers": 12, "num_attention_heads": 4, "intermediate_size": 1024,
        "max_position_embeddings": 512})"},
    {"distilbert-base", R"({"model_type": "distilbert", "vocab_size": 30522, "dim": 768, "n_layers": 6,
        "n_heads": 12, "hidden_dim": 3072, "max_position_embeddings": 512})"},
};

std::shared_ptr<model::TransformerModel> family_model(int family_index) {
  static std::map<int, std::shared_ptr<model::TransformerModel>> cache;
  auto& slot = cache[family_index];
  if (slot) return slot;
  const Family& f = kFamilies[family_index];
  auto config = model::TransformerConfig::from_json_text(f.config_json, f.name);
  if (!config) throw std::runtime_error(config.status().to_string());
  auto built = model::build_transformer(config.value(), family_tensors(config.value()), f.name);
  if (!built) throw std::runtime_error(built.status().to_string());
  slot = std::move(built).value();
  return slot;
}

double family_forward_flops(int family_index, std::int64_t batch, std::int64_t seq) {
  const model::TransformerConfig& c = family_model(family_index)->config;
  const double rows = static_cast<double>(batch * seq);
  const double h = static_cast<double>(c.hidden_size), i = static_cast<double>(c.intermediate_size);
  const double per_layer =
      2.0 * rows * (4 * h * h + 2 * h * i) + 2.0 * 2.0 * static_cast<double>(batch) * static_cast<double>(seq * seq) * h;
  const double projection = 2.0 * rows * h * static_cast<double>(c.embedding_width()) * (c.embedding_size > 0);
  return per_layer * static_cast<double>(c.num_layers) + projection;
}

std::shared_ptr<model::TransformerModel> model_for(int shape_index) {
  static std::map<int, std::shared_ptr<model::TransformerModel>> cache;
  auto& slot = cache[shape_index];
  if (!slot) slot = build(shape_index);
  return slot;
}

std::shared_ptr<model::TransformerModel> fresh_model_for(int shape_index) {
  const auto& shared = model_for(shape_index);
  return model::build_transformer(shared->config, model::checkpoint_tensors(*shared), kShapes[shape_index].name)
      .value();
}

void configure_threads(int threads) {
  ComputeThreads t;
  t.intra_op = threads;
  (void)configure_compute_threads(t);
}

train::FaqSplit trained_model_split(const std::string& model_dir) {
  auto kb = read_knowledge_file(RAPIDQA_BENCH_FAQ);
  train::FaqSplitOptions split_options;
  split_options.seed = train::training_split_seed(model_dir, 1);
  return train::split_faq(kb.value().entries, split_options).value();
}

train::EncodeFn runtime_encoder(const std::string& model_dir) {
  TransformerEncoderOptions o;
  o.model_dir = model_dir;
  auto encoder = TransformerEncoder::load(o).value();
  return [encoder](const std::vector<std::string>& texts, std::vector<float>& v) { return encoder->encode(texts, v); };
}

}  // namespace rapidqa::bench

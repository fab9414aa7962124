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

}  // namespace

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

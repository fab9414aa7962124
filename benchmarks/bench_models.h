// The transformer shapes the benchmarks measure (BERT-base, MiniLM-L6) and
// their models: random weights built once per shape, or, when the
// environment variable RAPIDQA_BENCH_MODELS names a directory holding
// <shape>/config.json and model.safetensors, the weights found there (the
// PyTorch comparison scripts write them, so both sides run the same weights).
// Also what the benchmarks of models share: thread setup, and the trained
// model's FAQ split and encoder for held-out top-1.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "model/transformer_model.h"
#include "train/faq_split.h"

namespace rapidqa::bench {

struct Shape {
  const char* name;
  std::int64_t layers, hidden, heads, intermediate;
};
constexpr Shape kShapes[] = {{"bert-base", 12, 768, 12, 3072}, {"minilm-l6", 6, 384, 12, 1536}};

// The model families the runtime runs, each at the shape of its most used
// base checkpoint (ELECTRA at its small discriminator's: embeddings of 128
// projected to 256), as config.json describes them.
struct Family {
  const char* name;
  const char* config_json;
};
extern const Family kFamilies[6];

// A family's model with random weights under its own tensor names, built
// once and shared (callers must not rewrite it).
std::shared_ptr<model::TransformerModel> family_model(int family_index);
// Multiply-adds of one forward pass of a family's model, as 2 FLOPs each.
double family_forward_flops(int family_index, std::int64_t batch, std::int64_t seq);

// Shared: callers must not rewrite it (copy through checkpoint_tensors).
std::shared_ptr<model::TransformerModel> model_for(int shape_index);
// A fresh model of the same weights that the caller may rewrite (quantize).
std::shared_ptr<model::TransformerModel> fresh_model_for(int shape_index);

// LibTorch's intra-op threads for the benchmark that follows.
void configure_threads(int threads);

// The bundled FAQ split as the rapidqa-train model in `model_dir` was
// trained on it (its seed read from the directory), for held-out top-1.
train::FaqSplit trained_model_split(const std::string& model_dir);

// The runtime encoder of a model directory, as top1_accuracy takes it.
train::EncodeFn runtime_encoder(const std::string& model_dir);

}  // namespace rapidqa::bench

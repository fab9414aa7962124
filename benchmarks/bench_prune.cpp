// The Pruner's targets on the trained model (RAPIDQA_TRAINED_MODEL, a
// rapidqa-train output directory with at least 128 positions): the
// unpruned model and the model the default schedule prunes from it, side by
// side in one run.
//
//   BM_PrunedEncoding  one forward pass at batch 8, sequence 128, with the
//                      parameters (all, and the encoder layers'), the size
//                      of model.safetensors and held-out top-1 retrieval
//                      on the bundled FAQ as counters
//
// Variants: 0 unpruned, 1 pruned by the schedule, 2 pruned, then INT8
// (auto table, calibrated on the FAQ's training phrasings). The pruning
// runs once, at the first pruned variant, into <model>-bench-pruned (or
// use RAPIDQA_PRUNED_MODEL, an existing rapidqa-prune output of the same
// model). Skipped without the variable.
#include <ATen/ATen.h>
#include <benchmark/benchmark.h>
#include <c10/core/InferenceMode.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include "bench_models.h"
#include "model/model_bundle.h"
#include "rapidqa/pruner.h"
#include "rapidqa/quantizer.h"

namespace {

namespace fs = std::filesystem;
using rapidqa::bench::configure_threads;
using rapidqa::bench::runtime_encoder;
using rapidqa::bench::trained_model_split;
using rapidqa::model::ModelInputs;
using rapidqa::model::TransformerModel;

constexpr const char* kVariantNames[] = {"unpruned", "pruned", "pruned + int8"};

struct Variant {
  std::string dir;
  std::shared_ptr<const TransformerModel> model;
  double top1 = 0;
};

// The directory of each variant, made once per run; empty with the reason
// in `error` when the trained model is missing or pruning failed.
std::string variant_dir(int variant, std::string& error) {
  static std::map<int, std::string> dirs;
  static std::string failure;
  if (auto it = dirs.find(variant); it != dirs.end()) return it->second;
  if (!failure.empty()) {
    error = failure;
    return {};
  }
  const char* trained = std::getenv("RAPIDQA_TRAINED_MODEL");
  if (!trained) {
    error = failure = "set RAPIDQA_TRAINED_MODEL to a rapidqa-train output directory";
    return {};
  }
  std::string dir = trained;
  if (variant == 1) {
    if (const char* pruned = std::getenv("RAPIDQA_PRUNED_MODEL")) {
      dir = pruned;
    } else {
      dir = std::string(trained) + "-bench-pruned";
      rapidqa::PrunerOptions options;
      options.knowledge_file = RAPIDQA_BENCH_FAQ;
      options.progress = [](const std::string& line) { std::fprintf(stderr, "prune: %s\n", line.c_str()); };
      auto report = rapidqa::prune_model(trained, dir, options);
      if (!report) {
        error = failure = report.status().to_string();
        return {};
      }
      std::fprintf(stderr, "%s", report->to_text().c_str());
    }
  }
  if (variant == 2) {
    dir = variant_dir(1, error);
    if (dir.empty()) return {};
    const std::string quantized = dir + "-int8";
    rapidqa::QuantizerOptions options;
    options.precision_table = "auto";
    // Calibrated on the FAQ's training phrasings, as a user would: auto
    // measures each layer on them.
    for (const auto& p : trained_model_split(dir).training) options.calibration_texts.push_back(p.text);
    if (auto r = rapidqa::quantize_model(dir, quantized, options); !r) {
      error = failure = r.status().to_string();
      return {};
    }
    dir = quantized;
  }
  return dirs[variant] = dir;
}

void BM_PrunedEncoding(benchmark::State& state) {
  const int variant = static_cast<int>(state.range(0));
  const std::int64_t batch = 8, seq = 128;
  configure_threads(2);
  std::string error;
  const std::string dir = variant_dir(variant, error);
  if (dir.empty()) {
    state.SkipWithError(error.c_str());
    return;
  }
  auto bundle = rapidqa::model::load_model_bundle(dir, -1);
  if (!bundle) {
    state.SkipWithError(bundle.status().to_string().c_str());
    return;
  }
  const TransformerModel& m = *bundle->model;
  if (m.config.max_position_embeddings < seq) {
    state.SkipWithError("the trained model has fewer than 128 positions: train it with --positions 128");
    return;
  }
  const double top1 =
      rapidqa::train::top1_accuracy(runtime_encoder(dir), trained_model_split(dir)).value().top1();
  c10::InferenceMode inference;
  at::manual_seed(7);
  ModelInputs in;
  in.input_ids = at::randint(5, m.config.vocab_size, {batch, seq}, at::kLong);
  in.attention_mask = at::ones({batch, seq}, at::kLong);
  in.token_type_ids = at::zeros({batch, seq}, at::kLong);
  for (int i = 0; i < 2; ++i) benchmark::DoNotOptimize(m.forward(in));
  for (auto _ : state) benchmark::DoNotOptimize(m.forward(in));
  state.SetLabel(kVariantNames[variant]);
  state.counters["seq_per_s"] =
      benchmark::Counter(static_cast<double>(batch), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["params"] = static_cast<double>(m.parameter_count());
  state.counters["layer_params"] = static_cast<double>(m.layer_parameter_count());
  state.counters["file_MB"] = static_cast<double>(fs::file_size(fs::path(dir) / "model.safetensors")) / 1e6;
  state.counters["top1"] = top1;
}
BENCHMARK(BM_PrunedEncoding)
    ->ArgName("variant")
    ->Arg(0)->Arg(1)->Arg(2)
    ->Unit(benchmark::kMillisecond)
    ->MinTime(3.0)
    ->UseRealTime();

}  // namespace

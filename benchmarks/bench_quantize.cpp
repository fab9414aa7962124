// The Quantizer's targets: BERT-base and MiniLM-L6 shapes (random weights,
// or RAPIDQA_BENCH_MODELS, see bench_models.h) in FP32 and in each INT8
// variant, side by side in one run.
//
//   BM_QuantizedForward   latency and sequences/s, weight memory
//   BM_QuantizedFidelity  sentence-vector cosine to FP32 and top-1
//                         retrieval agreement over 1,000 texts
//
// Variants: 0 FP32, 1 the practice's table (attention FP32), 2 auto,
// 3 auto with static calibration, 4 every layer INT8. All INT8 variants
// are dynamic unless named static. benchmarks/compare_quantized.py adds
// PyTorch's quantize_dynamic on the same weights.
#include <ATen/ATen.h>
#include <benchmark/benchmark.h>
#include <c10/core/InferenceMode.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <vector>

#include "bench_models.h"
#include "compress/quantizer.h"
#include "model/int8_gemm.h"
#include "model/pooling.h"
#include "train/faq_split.h"

namespace {

using rapidqa::bench::configure_threads;
using rapidqa::bench::kShapes;
using rapidqa::bench::runtime_encoder;
using rapidqa::model::ModelInputs;
using rapidqa::model::TransformerModel;

constexpr const char* kVariantNames[] = {"fp32", "int8 default table", "int8 auto", "int8 auto static", "int8 all"};

ModelInputs random_batch(std::int64_t batch, std::int64_t seq, std::uint64_t seed) {
  at::manual_seed(seed);
  ModelInputs in;
  in.input_ids = at::randint(1000, 29000, {batch, seq}, at::kLong);
  in.attention_mask = at::ones({batch, seq}, at::kLong);
  in.token_type_ids = at::zeros({batch, seq}, at::kLong);
  return in;
}

std::shared_ptr<TransformerModel> variant_model(int shape, int variant) {
  static std::map<std::pair<int, int>, std::shared_ptr<TransformerModel>> cache;
  auto& slot = cache[{shape, variant}];
  if (slot) return slot;
  if (variant == 0) return slot = rapidqa::bench::model_for(shape);
  auto m = rapidqa::bench::fresh_model_for(shape);
  std::vector<ModelInputs> calibration;
  for (int i = 0; i < 8; ++i) calibration.push_back(random_batch(8, 64, 100 + i));
  rapidqa::QuantizerOptions options;
  options.mode = variant == 3 ? rapidqa::QuantizationMode::kStatic : rapidqa::QuantizationMode::kDynamic;
  const char* table = variant == 1 ? "default" : variant == 4 ? "int8" : "auto";
  auto precision = rapidqa::compress::PrecisionTable::named_or_file(table).value();
  auto report = rapidqa::compress::quantize_transformer(*m, calibration, precision, options);
  if (!report) throw std::runtime_error(report.status().to_string());
  return slot = m;
}

void BM_QuantizedForward(benchmark::State& state) {
  const int shape = static_cast<int>(state.range(0));
  const std::int64_t batch = state.range(1), seq = state.range(2);
  const int variant = static_cast<int>(state.range(3));
  configure_threads(2);
  c10::InferenceMode inference;
  auto model = variant_model(shape, variant);
  const ModelInputs in = random_batch(batch, seq, 7);
  for (int i = 0; i < 2; ++i) benchmark::DoNotOptimize(model->forward(in));
  for (auto _ : state) benchmark::DoNotOptimize(model->forward(in));
  state.SetLabel(std::string(kShapes[shape].name) + " " + kVariantNames[variant]);
  state.counters["seq_per_s"] =
      benchmark::Counter(static_cast<double>(batch), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["weight_MB"] = static_cast<double>(model->weight_bytes()) / 1e6;
  state.counters["weight_ratio"] =
      static_cast<double>(model->weight_bytes()) / static_cast<double>(variant_model(shape, 0)->weight_bytes());
}

// args: shape, batch, seq, variant
BENCHMARK(BM_QuantizedForward)
    ->ArgNames({"shape", "batch", "seq", "variant"})
    ->Args({0, 8, 128, 0})->Args({0, 8, 128, 1})->Args({0, 8, 128, 2})->Args({0, 8, 128, 3})->Args({0, 8, 128, 4})
    ->Args({1, 1, 32, 0})->Args({1, 1, 32, 1})->Args({1, 1, 32, 2})->Args({1, 1, 32, 3})->Args({1, 1, 32, 4})
    ->Args({1, 8, 128, 0})->Args({1, 8, 128, 2})
    // INT8 over the side-by-side grid (benchmarks/ort_side_by_side): every
    // layer quantized (what ORT's dynamic quantization does) and auto.
    ->Apply([](benchmark::internal::Benchmark* b) {
      for (int shape : {0, 1}) {
        for (int batch : {1, 8, 32}) {
          for (int seq : {32, 128}) {
            const bool listed = (shape == 0 && batch == 8 && seq == 128) || (shape == 1 && batch == 1 && seq == 32);
            if (!listed) b->Args({shape, batch, seq, 4});
            if (!listed && !(shape == 1 && batch == 8 && seq == 128)) b->Args({shape, batch, seq, 2});
          }
        }
      }
    })
    ->Unit(benchmark::kMillisecond)
    ->MinTime(2.0)
    ->UseRealTime();

// 1,000 random texts of 6-24 tokens as the index, and as queries the same
// texts with two tokens replaced: FP32 finds most queries' own text first;
// the INT8 model should pick the same text as FP32 (agreement) and give
// vectors close to FP32's (cosine).
void BM_QuantizedFidelity(benchmark::State& state) {
  const int shape = static_cast<int>(state.range(0));
  const int variant = static_cast<int>(state.range(1));
  configure_threads(2);
  c10::InferenceMode inference;
  constexpr int kTexts = 1000;
  at::manual_seed(42);
  std::vector<ModelInputs> index_batches, query_batches;
  for (int start = 0; start < kTexts; start += 50) {
    const std::int64_t seq = 6 + (start / 50) % 19;
    ModelInputs in = random_batch(50, seq, 1000 + start);
    ModelInputs query = in;
    query.input_ids = in.input_ids.clone();
    for (int r = 0; r < 2; ++r) {
      const at::Tensor pos = at::randint(1, seq, {50}, at::kLong);
      query.input_ids.scatter_(1, pos.unsqueeze(1), at::randint(1000, 29000, {50, 1}, at::kLong));
    }
    index_batches.push_back(std::move(in));
    query_batches.push_back(std::move(query));
  }
  auto embed = [](const TransformerModel& m, const std::vector<ModelInputs>& batches) {
    std::vector<at::Tensor> out;
    for (const auto& b : batches) {
      out.push_back(rapidqa::model::pool_hidden(m.forward(b), b.attention_mask, rapidqa::Pooling::kMean, true));
    }
    return at::cat(out, 0);
  };
  auto fp32 = variant_model(shape, 0);
  auto quantized = variant_model(shape, variant);
  double cosine_mean = 0, cosine_min = 0, agreement = 0, fp32_hits = 0, int8_hits = 0;
  for (auto _ : state) {
    const at::Tensor index_fp32 = embed(*fp32, index_batches), query_fp32 = embed(*fp32, query_batches);
    const at::Tensor index_int8 = embed(*quantized, index_batches), query_int8 = embed(*quantized, query_batches);
    const at::Tensor cosines = at::cat({(index_fp32 * index_int8).sum(1), (query_fp32 * query_int8).sum(1)});
    cosine_mean = cosines.mean().item<double>();
    cosine_min = cosines.min().item<double>();
    const at::Tensor top_fp32 = query_fp32.mm(index_fp32.t()).argmax(1);
    const at::Tensor top_int8 = query_int8.mm(index_int8.t()).argmax(1);
    const at::Tensor own = at::arange(kTexts, at::kLong);
    agreement = top_fp32.eq(top_int8).to(at::kDouble).mean().item<double>();
    fp32_hits = top_fp32.eq(own).to(at::kDouble).mean().item<double>();
    int8_hits = top_int8.eq(own).to(at::kDouble).mean().item<double>();
  }
  state.SetLabel(std::string(kShapes[shape].name) + " " + kVariantNames[variant]);
  state.counters["cosine_mean"] = cosine_mean;
  state.counters["cosine_min"] = cosine_min;
  state.counters["top1_agreement"] = agreement;
  state.counters["fp32_top1"] = fp32_hits;
  state.counters["int8_top1"] = int8_hits;
}

BENCHMARK(BM_QuantizedFidelity)
    ->ArgNames({"shape", "variant"})
    ->ArgsProduct({{0, 1}, {1, 2, 3, 4}})
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace

namespace {

// The trained model (RAPIDQA_TRAINED_MODEL, from rapidqa-train) in FP32 and
// quantized with the auto table: held-out top-1 retrieval on the bundled
// FAQ, and top-1 agreement between the two. Skipped without the variable.
void BM_TrainedModelQuantized(benchmark::State& state) {
  const char* dir = std::getenv("RAPIDQA_TRAINED_MODEL");
  if (!dir) {
    state.SkipWithError("set RAPIDQA_TRAINED_MODEL to a rapidqa-train output directory");
    return;
  }
  configure_threads(2);
  const std::string out = std::string(dir) + "-bench-int8";
  const auto split = rapidqa::bench::trained_model_split(dir);
  rapidqa::QuantizerOptions options;
  options.precision_table = "auto";
  options.mode = state.range(0) ? rapidqa::QuantizationMode::kStatic : rapidqa::QuantizationMode::kDynamic;
  for (const auto& p : split.training) options.calibration_texts.push_back(p.text);
  if (auto r = rapidqa::quantize_model(dir, out, options); !r) {
    state.SkipWithError(r.status().to_string().c_str());
    return;
  }
  double fp32 = 0, int8 = 0;
  for (auto _ : state) {
    fp32 = rapidqa::train::top1_accuracy(runtime_encoder(dir), split).value().top1();
    int8 = rapidqa::train::top1_accuracy(runtime_encoder(out), split).value().top1();
  }
  state.counters["fp32_top1"] = fp32;
  state.counters["int8_top1"] = int8;
  state.counters["drop_points"] = 100.0 * (fp32 - int8);
  state.SetLabel(state.range(0) ? "auto static" : "auto dynamic");
}
BENCHMARK(BM_TrainedModelQuantized)->ArgName("static")->Arg(0)->Arg(1)->Iterations(1)->Unit(benchmark::kMillisecond);

}  // namespace

namespace {

// The INT8 product kernel alone (src/model/int8_gemm.*), on one thread:
// rows x k inputs into n columns, in GOPS (2 per multiply-add). cold:1
// cycles through enough copies of the weights (over 256 MB) that each call
// reads its weights from memory, as a forward pass does at small batches;
// cold:0 keeps one copy in the caches. Skipped on CPUs without AVX-512 VNNI.
void BM_Int8Gemm(benchmark::State& state) {
  const std::int64_t rows = state.range(0), k = state.range(1), n = state.range(2);
  const bool cold = state.range(3) != 0;
  if (!rapidqa::model::vnni_gemm_available()) {
    state.SkipWithError("no AVX-512 VNNI on this CPU");
    return;
  }
  at::manual_seed(3);
  const at::Tensor a = at::randint(0, 256, {rows, k}, at::kByte);
  const at::Tensor w = at::randint(-128, 128, {n, k}, at::kChar);
  const at::Tensor scales = at::rand({n}) * 1e-3 + 1e-5, bias = at::randn({n});
  constexpr std::int64_t kColdBytes = std::int64_t{256} << 20;
  const std::int64_t copies = cold ? (kColdBytes + n * k - 1) / (n * k) : 1;
  std::vector<rapidqa::model::PackedInt8Matrix> packed;
  packed.reserve(static_cast<std::size_t>(copies));
  for (std::int64_t i = 0; i < copies; ++i) packed.emplace_back(w.data_ptr<std::int8_t>(), n, k);
  rapidqa::model::Int8Epilogue e;
  e.zero_point = 12;
  e.channel_scales = scales.data_ptr<float>();
  e.bias = bias.data_ptr<float>();
  at::Tensor y = at::empty({rows, n});
  std::size_t next = 0;
  for (auto _ : state) {
    rapidqa::model::int8_gemm_columns(a.data_ptr<std::uint8_t>(), k, rows, packed[next], 0, n, e,
                                      y.data_ptr<float>(), n);
    next = next + 1 == packed.size() ? 0 : next + 1;
    benchmark::ClobberMemory();
  }
  state.counters["GOPS"] = benchmark::Counter(2.0 * static_cast<double>(rows * k * n),
                                              benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
}

}  // namespace

BENCHMARK(BM_Int8Gemm)
    ->ArgNames({"rows", "k", "n", "cold"})
    ->ArgsProduct({{32}, {768}, {768, 3072}, {0, 1}})
    ->Args({192, 768, 768, 0})->Args({64, 3072, 768, 0})->Args({32, 3072, 768, 1})->Args({128, 768, 3072, 1})
    ->Unit(benchmark::kMicrosecond)->UseRealTime();

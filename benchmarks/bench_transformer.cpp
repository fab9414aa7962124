// The transformer runtime at BERT-base and MiniLM-L6 shapes with random
// weights: latency, sequences per second and achieved GFLOP/s, next to this
// machine's sgemm peak measured in the same run (BM_SgemmPeak), and the FP32
// product itself through each backend for each shape (BM_LinearBackend).
// benchmarks/compare_pytorch.py runs these side by side with PyTorch eager.
#include <ATen/ATen.h>
#include <benchmark/benchmark.h>
#include <cblas.h>
#include <omp.h>
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <cctype>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>
#include <memory>

#include "bench_models.h"
#include "model/bf16_linear.h"
#include "model/onednn_linear.h"
#include "model/packed_linear.h"
#include "model/linear_op.h"
#include "model/transformer_model.h"
#include "rapidqa/knowledge_file.h"

extern "C" void openblas_set_num_threads(int num_threads);

namespace {

using rapidqa::bench::configure_threads;
using rapidqa::bench::kShapes;
using rapidqa::bench::model_for;
using rapidqa::bench::Shape;

// Multiply-adds of one forward pass, counted as 2 FLOPs each: the four
// hidden-sized products, the two FFN products, and the two attention
// products per head.
double forward_flops(const Shape& s, std::int64_t batch, std::int64_t seq) {
  const double rows = static_cast<double>(batch * seq);
  const double h = static_cast<double>(s.hidden), i = static_cast<double>(s.intermediate);
  const double per_layer = 2.0 * rows * (4 * h * h + 2 * h * i) + 2.0 * 2.0 * static_cast<double>(batch) * seq * seq * h;
  return per_layer * static_cast<double>(s.layers);
}

void BM_TransformerForward(benchmark::State& state) {
  const int shape_index = static_cast<int>(state.range(0));
  const std::int64_t batch = state.range(1), seq = state.range(2);
  configure_threads(static_cast<int>(state.range(3)));
  const Shape& shape = kShapes[shape_index];
  auto model = model_for(shape_index);
  rapidqa::model::ModelInputs in;
  in.input_ids = at::randint(1000, 29000, {batch, seq}, at::kLong);
  in.attention_mask = at::ones({batch, seq}, at::kLong);
  in.token_type_ids = at::zeros({batch, seq}, at::kLong);
  for (int i = 0; i < 2; ++i) benchmark::DoNotOptimize(model->forward(in));  // warm-up
  for (auto _ : state) benchmark::DoNotOptimize(model->forward(in));
  const double flops = forward_flops(shape, batch, seq);
  state.SetLabel(shape.name);
  state.counters["seq_per_s"] = benchmark::Counter(static_cast<double>(batch), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["GFLOPs"] = benchmark::Counter(flops / 1e9, benchmark::Counter::kIsIterationInvariantRate);
}

// Token counts of real questions: the bundled FAQ's questions and
// alternates as the load study's whole-word vocabulary tokenizes them
// ([CLS], one token per word, punctuation mark or CJK character, [SEP]), `count` of them
// spread evenly over the file.
std::vector<std::int64_t> faq_lengths(std::size_t count) {
  auto kb = rapidqa::read_knowledge_file(RAPIDQA_BENCH_FAQ);
  if (!kb) throw std::runtime_error(kb.status().to_string());
  std::vector<std::int64_t> all;
  for (const auto& e : kb->entries) {
    std::vector<const std::string*> texts{&e.question};
    for (const auto& a : e.alternates) texts.push_back(&a);
    for (const std::string* text : texts) {
      std::int64_t tokens = 2;
      bool in_word = false;
      for (const unsigned char c : *text) {
        if (c >= 0x80 && c < 0xC0) continue;  // UTF-8 continuation byte
        if (c >= 0xE0) {                       // a CJK character: a token of its own
          ++tokens;
          in_word = false;
          continue;
        }
        const bool word = std::isalnum(c) || c >= 0xC0 || c == '\'';
        if (word && !in_word) ++tokens;
        if (!word && !std::isspace(c)) ++tokens;
        in_word = word;
      }
      all.push_back(tokens);
    }
  }
  std::vector<std::int64_t> picked;
  for (std::size_t i = 0; i < count; ++i) picked.push_back(all[i * all.size() / count]);
  return picked;
}

// A ragged batch of 32 real question lengths (faq_lengths), padded to the
// longest with the attention mask marking the padding, as a batcher hands
// it over. The label lists the lengths, so a side-by-side script can give
// another runtime the same batch.
void BM_RaggedForward(benchmark::State& state) {
  const int shape_index = static_cast<int>(state.range(0));
  const std::int64_t batch = state.range(1);
  configure_threads(2);
  const auto lengths = faq_lengths(static_cast<std::size_t>(batch));
  const std::int64_t seq = *std::max_element(lengths.begin(), lengths.end());
  auto model = model_for(shape_index);
  rapidqa::model::ModelInputs in;
  in.input_ids = at::randint(1000, 29000, {batch, seq}, at::kLong);
  in.attention_mask = at::zeros({batch, seq}, at::kLong);
  in.token_type_ids = at::zeros({batch, seq}, at::kLong);
  std::int64_t tokens = 0;
  std::string label = std::string(kShapes[shape_index].name) + " lengths=";
  for (std::int64_t b = 0; b < batch; ++b) {
    const std::int64_t n = lengths[static_cast<std::size_t>(b)];
    in.attention_mask[b].narrow(0, 0, n).fill_(1);
    in.input_ids[b].narrow(0, n, seq - n).fill_(0);
    tokens += n;
    label += (b ? "," : "") + std::to_string(n);
  }
  for (int i = 0; i < 2; ++i) benchmark::DoNotOptimize(model->forward(in));
  for (auto _ : state) benchmark::DoNotOptimize(model->forward(in));
  state.SetLabel(label);
  state.counters["tokens"] = static_cast<double>(tokens);
  state.counters["padded_tokens"] = static_cast<double>(batch * seq);
  state.counters["seq_per_s"] = benchmark::Counter(static_cast<double>(batch), benchmark::Counter::kIsIterationInvariantRate);
}

BENCHMARK(BM_RaggedForward)
    ->ArgNames({"shape", "batch"})
    ->ArgsProduct({{0, 1}, {32}})
    ->Unit(benchmark::kMillisecond)
    ->MinTime(2.0)
    ->UseRealTime();

// The same forward with every linear layer in BF16 (convert_to_bf16), and
// its fidelity to FP32 on the same input: the cosine of the mean-pooled
// vectors (worst over the batch) and the largest hidden-state difference.
void BM_Bf16Forward(benchmark::State& state) {
  const int shape_index = static_cast<int>(state.range(0));
  const std::int64_t batch = state.range(1), seq = state.range(2);
  configure_threads(2);
  if (!rapidqa::model::bf16_native()) {
    state.SkipWithError("this CPU has no native BF16");
    return;
  }
  static std::map<int, std::shared_ptr<rapidqa::model::TransformerModel>> converted;
  auto& model = converted[shape_index];
  if (!model) {
    model = rapidqa::bench::fresh_model_for(shape_index);
    const auto status = rapidqa::model::convert_to_bf16(*model);
    if (!status.is_ok()) {
      state.SkipWithError(status.to_string().c_str());
      return;
    }
  }
  rapidqa::model::ModelInputs in;
  in.input_ids = at::randint(1000, 29000, {batch, seq}, at::kLong);
  in.attention_mask = at::ones({batch, seq}, at::kLong);
  in.token_type_ids = at::zeros({batch, seq}, at::kLong);
  for (int i = 0; i < 2; ++i) benchmark::DoNotOptimize(model->forward(in));
  for (auto _ : state) benchmark::DoNotOptimize(model->forward(in));
  const at::Tensor ours = model->forward(in), reference = model_for(shape_index)->forward(in);
  const at::Tensor a = ours.mean(1), b = reference.mean(1);
  state.counters["min_cosine"] = at::cosine_similarity(a, b, 1).min().item<double>();
  state.counters["max_abs_diff"] = (ours - reference).abs().max().item<double>();
  state.counters["GFLOPs"] =
      benchmark::Counter(forward_flops(kShapes[shape_index], batch, seq) / 1e9, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(std::string(kShapes[shape_index].name) + " bf16");
}

BENCHMARK(BM_Bf16Forward)
    ->ArgNames({"shape", "batch", "seq"})
    ->ArgsProduct({{0, 1}, {1, 8, 32}, {32, 128}})
    ->Unit(benchmark::kMillisecond)
    ->MinTime(2.0)
    ->UseRealTime();

// Every model family the runtime runs, at its base checkpoint's shape
// (kFamilies): what a user's choice of family costs per forward pass.
void BM_FamilyForward(benchmark::State& state) {
  const int family = static_cast<int>(state.range(0));
  const std::int64_t batch = state.range(1), seq = state.range(2);
  configure_threads(2);
  auto model = rapidqa::bench::family_model(family);
  rapidqa::model::ModelInputs in;
  in.input_ids = at::randint(3, 30000, {batch, seq}, at::kLong);
  in.attention_mask = at::ones({batch, seq}, at::kLong);
  in.token_type_ids = at::zeros({batch, seq}, at::kLong);
  for (int i = 0; i < 2; ++i) benchmark::DoNotOptimize(model->forward(in));  // warm-up
  for (auto _ : state) benchmark::DoNotOptimize(model->forward(in));
  state.SetLabel(rapidqa::bench::kFamilies[family].name);
  state.counters["seq_per_s"] = benchmark::Counter(static_cast<double>(batch), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["GFLOPs"] = benchmark::Counter(rapidqa::bench::family_forward_flops(family, batch, seq) / 1e9,
                                                benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_FamilyForward)
    ->ArgNames({"family", "batch", "seq"})
    ->ArgsProduct({{0, 1, 2, 3, 4, 5}, {1, 8}, {32, 128}})
    ->Unit(benchmark::kMillisecond)
    ->MinTime(1.0)
    ->UseRealTime();

// args: shape, batch, seq, threads
BENCHMARK(BM_TransformerForward)
    ->ArgNames({"shape", "batch", "seq", "threads"})
    ->ArgsProduct({{0, 1}, {1, 8, 32}, {32, 128}, {2}})
    ->Unit(benchmark::kMillisecond)
    ->MinTime(2.0)
    ->UseRealTime();

// The largest FP32 matrix-product rate this machine reaches on a
// BERT-sized product (1024 x 768 by 768 x 3072), through each backend
// BM_LinearBackend measures; the best is the peak the model runtime is
// compared against.
void BM_SgemmPeak(benchmark::State& state);

// One FP32 linear layer (768 -> 3072, the FFN's first product) at each
// row count through three backends: our split over single-threaded
// OpenBLAS, OpenBLAS's own threading, and oneDNN's f32 matmul with weights
// reordered once into its preferred layout.
void BM_LinearBackend(benchmark::State& state) {
  const std::int64_t m = state.range(0), k = 768, n = 3072;
  const int backend = static_cast<int>(state.range(1));
  configure_threads(2);
  at::Tensor x = at::randn({m, k}), w = at::randn({n, k}), bias = at::randn({n});
  if (backend == 0) {
    rapidqa::model::DenseLinear linear(w, bias);
    for (auto _ : state) benchmark::DoNotOptimize(linear.forward(x));
    state.SetLabel("rapidqa split OpenBLAS");
  } else if (backend == 1) {
    openblas_set_num_threads(2);
    at::Tensor out = at::empty({m, n});
    for (auto _ : state) {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<blasint>(m), static_cast<blasint>(n),
                  static_cast<blasint>(k), 1.0f, x.data_ptr<float>(), static_cast<blasint>(k), w.data_ptr<float>(),
                  static_cast<blasint>(k), 0.0f, out.data_ptr<float>(), static_cast<blasint>(n));
      out.add_(bias);
      benchmark::ClobberMemory();
    }
    openblas_set_num_threads(1);
    state.SetLabel("OpenBLAS threading");
  } else if (backend == 3 || backend == 4) {
    // The runtime's own layers: oneDNN tiles or the packed AVX-512 kernel,
    // both over the WorkPool.
    std::unique_ptr<rapidqa::model::LinearOp> linear;
    if (backend == 3) {
      linear = std::make_unique<rapidqa::model::OneDnnLinear>(w, bias, rapidqa::model::Activation::kNone);
    } else if (rapidqa::model::packed_linear_available()) {
      linear = std::make_unique<rapidqa::model::PackedLinear>(w, bias);
    } else {
      state.SkipWithError("no AVX-512 on this CPU");
      return;
    }
    at::Tensor out;
    for (auto _ : state) benchmark::DoNotOptimize(out = linear->forward(x));
    if (!at::allclose(out, at::addmm(bias, x, w.t()), 1e-3, 1e-3)) state.SkipWithError("result differs from the reference");
    state.SetLabel(backend == 3 ? "rapidqa oneDNN tiles" : "rapidqa packed AVX-512");
  } else {
    using namespace dnnl;
    // oneDNN's own OpenMP threading over both cores: the runtime keeps
    // OpenMP at one thread (its WorkPool splits the work), so set it here.
    struct TwoOpenMpThreads {
      TwoOpenMpThreads() { omp_set_num_threads(2); }
      ~TwoOpenMpThreads() { omp_set_num_threads(1); }
    } two_threads;
    engine eng(engine::kind::cpu, 0);
    stream strm(eng);
    const memory::desc src_md({m, k}, memory::data_type::f32, memory::format_tag::ab);
    const memory::desc wei_any({k, n}, memory::data_type::f32, memory::format_tag::any);
    const memory::desc bias_md({1, n}, memory::data_type::f32, memory::format_tag::ab);
    const memory::desc dst_md({m, n}, memory::data_type::f32, memory::format_tag::ab);
    const matmul::primitive_desc pd(matmul::desc(src_md, wei_any, bias_md, dst_md), eng);  // oneDNN 2.x API
    // Weights are [n, k] row-major, i.e. [k, n] with format "ba".
    memory user_w({{k, n}, memory::data_type::f32, memory::format_tag::ba}, eng, w.data_ptr<float>());
    memory wei(pd.weights_desc(), eng);
    reorder(user_w, wei).execute(strm, user_w, wei);
    at::Tensor out = at::empty({m, n});
    memory src(src_md, eng, x.data_ptr<float>()), b(bias_md, eng, bias.data_ptr<float>()),
        dst(dst_md, eng, out.data_ptr<float>());
    const matmul prim(pd);
    for (auto _ : state) {
      prim.execute(strm, {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wei}, {DNNL_ARG_BIAS, b}, {DNNL_ARG_DST, dst}});
      strm.wait();
    }
    // Check the product once, so a mis-set primitive cannot report speed
    // for work it did not do.
    const at::Tensor expected = at::addmm(bias, x, w.t());
    if (!at::allclose(out, expected, 1e-3, 1e-3)) state.SkipWithError("oneDNN result differs from the reference");
    state.SetLabel("oneDNN f32 matmul");
  }
  state.counters["GFLOPs"] =
      benchmark::Counter(2.0 * static_cast<double>(m * n * k) / 1e9, benchmark::Counter::kIsIterationInvariantRate);
}
void BM_SgemmPeak(benchmark::State& state) { BM_LinearBackend(state); }

BENCHMARK(BM_SgemmPeak)->ArgNames({"rows", "backend"})->ArgsProduct({{1024, 2048}, {0, 1, 2, 3, 4}})->Unit(benchmark::kMillisecond)->UseRealTime();

BENCHMARK(BM_LinearBackend)
    ->ArgNames({"rows", "backend"})
    ->ArgsProduct({{1, 8, 32, 128, 512, 1024}, {0, 1, 2, 3, 4}})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

}  // namespace

namespace {

// The FP32 product kernel alone (src/model/packed_linear.*), on one
// thread, in GFLOP/s: compare with BM_SgemmPeak's oneDNN figure (per
// thread) in the same run. Skipped without AVX-512.
void BM_Fp32Gemm(benchmark::State& state) {
  const std::int64_t rows = state.range(0), k = state.range(1), n = state.range(2);
  if (!rapidqa::model::packed_linear_available()) {
    state.SkipWithError("no AVX-512 on this CPU");
    return;
  }
  at::manual_seed(3);
  const at::Tensor x = at::randn({rows, k}), w = at::randn({n, k}), bias = at::randn({n});
  const rapidqa::model::PackedFloatMatrix packed(w.data_ptr<float>(), n, k);
  at::Tensor y = at::empty({rows, n});
  for (auto _ : state) {
    rapidqa::model::fp32_gemm_columns(x.data_ptr<float>(), k, rows, packed, 0, n, bias.data_ptr<float>(),
                                      rapidqa::model::Activation::kNone, y.data_ptr<float>(), n);
    benchmark::ClobberMemory();
  }
  state.counters["GFLOPs"] = benchmark::Counter(2.0 * static_cast<double>(rows * k * n),
                                                benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
}

}  // namespace

BENCHMARK(BM_Fp32Gemm)
    ->ArgNames({"rows", "k", "n"})
    ->Args({32, 768, 768})->Args({192, 768, 768})->Args({32, 768, 3072})->Args({64, 3072, 768})
    ->Unit(benchmark::kMicrosecond)->UseRealTime();

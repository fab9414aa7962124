#include "model/onednn_linear.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <oneapi/dnnl/dnnl.hpp>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <stdexcept>
#include <vector>

#include "common/timing.h"
#include "model/packed_linear.h"
#include "model/tiled_matmul.h"

namespace rapidqa::model {

dnnl::engine& cpu_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

struct OneDnnLinear::Impl {
  TilePrimitives packed;
  at::Tensor bias_storage;  // [out] or undefined
};

namespace {

// The tile's destination: rows of `width` floats inside rows of `stride`.
dnnl::memory::desc strided_rows(dnnl::memory::dim rows, dnnl::memory::dim width, dnnl::memory::dim stride,
                                dnnl::memory::data_type type) {
  return dnnl::memory::desc({rows, width}, type, dnnl::memory::dims{stride, 1});
}

}  // namespace

void TilePrimitives::build(std::int64_t out,
                           const std::function<dnnl::matmul::primitive_desc(std::int64_t)>& describe,
                           const std::function<dnnl::memory(std::int64_t, std::int64_t)>& plain) {
  tiles = ColumnTiles(out);
  std::vector<dnnl::matmul::primitive_desc> descs;
  descs.push_back(describe(tiles.width()));
  if (tiles.size(tiles.count() - 1) != tiles.width()) descs.push_back(describe(tiles.size(tiles.count() - 1)));
  for (const auto& pd : descs) primitives.emplace_back(pd);
  dnnl::stream s(cpu_engine());
  for (std::int64_t tile = 0; tile < tiles.count(); ++tile) {
    const std::int64_t width = tiles.size(tile);
    const auto& pd = descs[width == tiles.width() ? 0 : 1];
    dnnl::memory user = plain(tiles.begin(tile), width);
    dnnl::memory packed(pd.weights_desc(), cpu_engine());
    dnnl::reorder(user, packed).execute(s, user, packed);
    packed_bytes += pd.weights_desc().get_size();
    weights.push_back(std::move(packed));
  }
  s.wait();
}

void TilePrimitives::execute_dense(std::int64_t tile, std::int64_t r0, std::int64_t count,
                                   std::unordered_map<int, dnnl::memory>& args, float* y, std::int64_t stride) const {
  const std::int64_t n0 = tiles.begin(tile), width = tiles.size(tile);
  thread_local std::vector<float> block;
  if (block.size() < static_cast<std::size_t>(count * width)) block.resize(static_cast<std::size_t>(count * width));
  args[DNNL_ARG_DST] = dnnl::memory({{count, width}, dnnl::memory::data_type::f32, dnnl::memory::format_tag::ab},
                                    cpu_engine(), block.data());
  primitive_for(tile).execute(thread_stream(), args);
  for (std::int64_t r = 0; r < count; ++r) {
    std::copy(block.data() + r * width, block.data() + (r + 1) * width, y + (r0 + r) * stride + n0);
  }
}

void append_activation(dnnl::post_ops& ops, Activation activation) {
  using dnnl::algorithm;
  switch (activation) {
    case Activation::kNone: return;
    case Activation::kGelu: ops.append_eltwise(1.0f, algorithm::eltwise_gelu_erf, 0.0f, 0.0f); return;
    case Activation::kGeluTanh: ops.append_eltwise(1.0f, algorithm::eltwise_gelu_tanh, 0.0f, 0.0f); return;
    case Activation::kRelu: ops.append_eltwise(1.0f, algorithm::eltwise_relu, 0.0f, 0.0f); return;
    case Activation::kTanh: ops.append_eltwise(1.0f, algorithm::eltwise_tanh, 0.0f, 0.0f); return;
  }
}

dnnl::stream& thread_stream() {
  thread_local dnnl::stream stream(cpu_engine());
  return stream;
}

OneDnnLinear::OneDnnLinear(const at::Tensor& weight_in, const at::Tensor& bias_in, Activation activation)
    : impl_(std::make_unique<Impl>()), activation_(activation) {
  using namespace dnnl;
  const at::Tensor weight = weight_in.to(at::kFloat).contiguous();
  if (weight.dim() != 2) throw std::invalid_argument("OneDnnLinear: weight must be 2-D");
  out_ = weight.size(0);
  in_ = weight.size(1);
  const bool has_bias = bias_in.defined();
  const memory::dim runtime_rows = DNNL_RUNTIME_DIM_VAL;
  post_ops ops;
  append_activation(ops, activation);
  primitive_attr attr;
  attr.set_post_ops(ops);
  impl_->packed.build(
      out_,
      [&](std::int64_t width) {
        const memory::desc src_md({runtime_rows, in_}, memory::data_type::f32, memory::format_tag::ab);
        const memory::desc weights_any({in_, width}, memory::data_type::f32, memory::format_tag::any);
        const memory::desc dst_md = strided_rows(runtime_rows, width, out_, memory::data_type::f32);
        const memory::desc bias_md({1, width}, memory::data_type::f32, memory::format_tag::ab);
        const matmul::desc desc = has_bias ? matmul::desc(src_md, weights_any, bias_md, dst_md)
                                           : matmul::desc(src_md, weights_any, dst_md);
        return matmul::primitive_desc(desc, attr, cpu_engine());
      },
      [&](std::int64_t n0, std::int64_t width) {
        // Our weights are [out, in] row-major: a tile's rows are [in, width] in layout "ba".
        return memory({{in_, width}, memory::data_type::f32, memory::format_tag::ba}, cpu_engine(),
                      weight.data_ptr<float>() + n0 * in_);
      });
  if (has_bias) impl_->bias_storage = bias_in.to(at::kFloat).contiguous().clone();
}

OneDnnLinear::~OneDnnLinear() = default;

std::size_t OneDnnLinear::weight_bytes() const {
  return impl_->packed.packed_bytes +
         (impl_->bias_storage.defined() ? static_cast<std::size_t>(out_) * sizeof(float) : 0);
}

at::Tensor OneDnnLinear::dense_weight() const {
  using namespace dnnl;
  at::Tensor weight = at::empty({out_, in_}, at::kFloat);
  stream s(cpu_engine());
  const TilePrimitives& packed = impl_->packed;
  for (std::int64_t tile = 0; tile < packed.tiles.count(); ++tile) {
    const std::int64_t n0 = packed.tiles.begin(tile), width = packed.tiles.size(tile);
    memory plain({{in_, width}, memory::data_type::f32, memory::format_tag::ba}, cpu_engine(),
                 weight.data_ptr<float>() + n0 * in_);
    memory tile_weights = packed.weights[static_cast<std::size_t>(tile)];  // a handle: shares the data
    reorder(tile_weights, plain).execute(s, tile_weights, plain);
  }
  s.wait();
  return weight;
}

at::Tensor OneDnnLinear::dense_bias() const { return impl_->bias_storage; }

at::Tensor OneDnnLinear::forward(const at::Tensor& input) const {
  LinearIo io = prepare_linear_io(input, in_, out_);
  forward_rows(io.input.data_ptr<float>(), io.rows, io.output.data_ptr<float>());
  return io.output;
}

void OneDnnLinear::forward_rows(const float* x, std::int64_t rows, float* y) const {
  using namespace dnnl;
  const TilePrimitives& packed = impl_->packed;
  float* bias = impl_->bias_storage.defined() ? impl_->bias_storage.data_ptr<float>() : nullptr;
  run_tiled(rows, packed.tiles, [&](std::int64_t r0, std::int64_t count, std::int64_t tile) {
    const std::int64_t n0 = packed.tiles.begin(tile), width = packed.tiles.size(tile);
    const engine& eng = cpu_engine();
    memory src({{count, in_}, memory::data_type::f32, memory::format_tag::ab}, eng,
               const_cast<float*>(x + r0 * in_));
    memory dst(strided_rows(count, width, out_, memory::data_type::f32), eng, y + r0 * out_ + n0);
    std::unordered_map<int, memory> args{
        {DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, packed.weights[static_cast<std::size_t>(tile)]}, {DNNL_ARG_DST, dst}};
    if (bias) {
      args.emplace(DNNL_ARG_BIAS,
                   memory({{1, width}, memory::data_type::f32, memory::format_tag::ab}, eng, bias + n0));
    }
    packed.primitive_for(tile).execute(thread_stream(), args);
  });
}

namespace {

Fp32Backend backend_from_environment() {
  const char* v = std::getenv("RAPIDQA_FP32_BACKEND");
  if (!v) return Fp32Backend::kAuto;
  if (std::strcmp(v, "openblas") == 0) return Fp32Backend::kOpenBlas;
  if (std::strcmp(v, "onednn") == 0) return Fp32Backend::kOneDnn;
  if (std::strcmp(v, "packed") == 0) return Fp32Backend::kPacked;
  return Fp32Backend::kAuto;
}

}  // namespace

std::unique_ptr<LinearOp> make_fp32_linear(const at::Tensor& weight, const at::Tensor& bias, Activation activation,
                                           Fp32Backend backend) {
  if (backend == Fp32Backend::kAuto) backend = backend_from_environment();
  if (backend == Fp32Backend::kOpenBlas) return std::make_unique<DenseLinear>(weight, bias, activation);
  // The packed kernel measured faster than oneDNN at every row count from
  // 1 to 1024 wherever it runs (BM_LinearBackend, docs/performance.md).
  if ((backend == Fp32Backend::kAuto || backend == Fp32Backend::kPacked) && packed_linear_available()) {
    return std::make_unique<PackedLinear>(weight, bias, activation);
  }
  auto onednn = std::make_unique<OneDnnLinear>(weight, bias, activation);
  if (backend == Fp32Backend::kOneDnn) return onednn;

  // Measured once per shape: a small and a large batch of rows, summed, so
  // neither the single-question case nor the batched case is sacrificed.
  static std::mutex mu;
  static std::map<std::pair<std::int64_t, std::int64_t>, bool> onednn_faster;  // guarded by mu
  const auto shape = std::make_pair(weight.size(0), weight.size(1));
  {
    std::lock_guard<std::mutex> lock(mu);
    if (const auto it = onednn_faster.find(shape); it != onednn_faster.end()) {
      if (it->second) return onednn;
      return std::make_unique<DenseLinear>(weight, bias, activation);
    }
  }
  c10::InferenceMode inference;
  auto blas = std::make_unique<DenseLinear>(weight, bias, activation);
  // Side by side, as the pruner and the quantizer time: three interleaved
  // samples of at least 1.5 ms (at most 50 calls) each, medians.
  timing::TimingOptions timed;
  timed.samples = 3;
  timed.min_sample_time = std::chrono::microseconds(1500);
  timed.max_calls_per_sample = 50;
  timing::Seconds blas_time{0}, onednn_time{0};
  for (std::int64_t rows : {32, 256}) {
    const at::Tensor x = at::randn({rows, weight.size(1)});
    const timing::PairedTimes t =
        timing::interleaved_median_times([&] { (void)blas->forward(x); }, [&] { (void)onednn->forward(x); }, timed);
    blas_time += t.first;
    onednn_time += t.second;
  }
  const bool use_onednn = onednn_time < blas_time;
  {
    std::lock_guard<std::mutex> lock(mu);
    onednn_faster.emplace(shape, use_onednn);
  }
  if (use_onednn) return onednn;
  return blas;
}

}  // namespace rapidqa::model

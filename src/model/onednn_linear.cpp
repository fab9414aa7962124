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

#include "model/tiled_matmul.h"

namespace rapidqa::model {
namespace {

}  // namespace

dnnl::engine& cpu_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

struct OneDnnLinear::Impl {
  ColumnTiles tiles;
  // One primitive per tile width: [0] the common width, [1] a narrower
  // last tile when the columns do not divide evenly.
  std::vector<dnnl::matmul> primitives;
  std::vector<dnnl::memory> weights;  // per tile, reordered once into its primitive's layout
  at::Tensor bias_storage;            // [out] or undefined
  std::size_t weight_bytes = 0;

  const dnnl::matmul& primitive_for(std::int64_t tile) const {
    return tiles.size(tile) == tiles.width() ? primitives[0] : primitives[1];
  }
};

namespace {

// The tile's destination: rows of `width` floats inside rows of `stride`.
dnnl::memory::desc strided_rows(dnnl::memory::dim rows, dnnl::memory::dim width, dnnl::memory::dim stride,
                                dnnl::memory::data_type type) {
  return dnnl::memory::desc({rows, width}, type, dnnl::memory::dims{stride, 1});
}

}  // namespace

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
  impl_->tiles = ColumnTiles(out_);
  const bool has_bias = bias_in.defined();
  const memory::dim runtime_rows = DNNL_RUNTIME_DIM_VAL;
  post_ops ops;
  append_activation(ops, activation);
  primitive_attr attr;
  attr.set_post_ops(ops);
  std::vector<matmul::primitive_desc> descs;
  for (const std::int64_t width : {impl_->tiles.width(), impl_->tiles.size(impl_->tiles.count() - 1)}) {
    if (descs.size() == 1 && width == impl_->tiles.width()) break;
    const memory::desc src_md({runtime_rows, in_}, memory::data_type::f32, memory::format_tag::ab);
    const memory::desc weights_any({in_, width}, memory::data_type::f32, memory::format_tag::any);
    const memory::desc dst_md = strided_rows(runtime_rows, width, out_, memory::data_type::f32);
    const memory::desc bias_md({1, width}, memory::data_type::f32, memory::format_tag::ab);
    const matmul::desc desc = has_bias ? matmul::desc(src_md, weights_any, bias_md, dst_md)
                                       : matmul::desc(src_md, weights_any, dst_md);
    descs.emplace_back(desc, attr, cpu_engine());
    impl_->primitives.emplace_back(descs.back());
  }
  stream s(cpu_engine());
  for (std::int64_t tile = 0; tile < impl_->tiles.count(); ++tile) {
    const std::int64_t n0 = impl_->tiles.begin(tile), width = impl_->tiles.size(tile);
    const auto& pd = descs[width == impl_->tiles.width() ? 0 : 1];
    // Our weights are [out, in] row-major: the tile's rows are [in, width] in layout "ba".
    memory user_weights({{in_, width}, memory::data_type::f32, memory::format_tag::ba}, cpu_engine(),
                        weight.data_ptr<float>() + n0 * in_);
    memory packed(pd.weights_desc(), cpu_engine());
    reorder(user_weights, packed).execute(s, user_weights, packed);
    impl_->weight_bytes += pd.weights_desc().get_size();
    impl_->weights.push_back(std::move(packed));
  }
  s.wait();
  if (has_bias) {
    impl_->bias_storage = bias_in.to(at::kFloat).contiguous().clone();
    impl_->weight_bytes += static_cast<std::size_t>(out_) * sizeof(float);
  }
}

OneDnnLinear::~OneDnnLinear() = default;

std::size_t OneDnnLinear::weight_bytes() const { return impl_->weight_bytes; }

at::Tensor OneDnnLinear::dense_weight() const {
  using namespace dnnl;
  at::Tensor weight = at::empty({out_, in_}, at::kFloat);
  stream s(cpu_engine());
  for (std::int64_t tile = 0; tile < impl_->tiles.count(); ++tile) {
    const std::int64_t n0 = impl_->tiles.begin(tile), width = impl_->tiles.size(tile);
    memory plain({{in_, width}, memory::data_type::f32, memory::format_tag::ba}, cpu_engine(),
                 weight.data_ptr<float>() + n0 * in_);
    reorder(impl_->weights[static_cast<std::size_t>(tile)], plain)
        .execute(s, impl_->weights[static_cast<std::size_t>(tile)], plain);
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
  const Impl& impl = *impl_;
  float* bias = impl.bias_storage.defined() ? impl.bias_storage.data_ptr<float>() : nullptr;
  run_tiled(rows, impl.tiles, [&](std::int64_t r0, std::int64_t count, std::int64_t tile) {
    const std::int64_t n0 = impl.tiles.begin(tile), width = impl.tiles.size(tile);
    const engine& eng = cpu_engine();
    memory src({{count, in_}, memory::data_type::f32, memory::format_tag::ab}, eng,
               const_cast<float*>(x + r0 * in_));
    memory dst(strided_rows(count, width, out_, memory::data_type::f32), eng, y + r0 * out_ + n0);
    std::unordered_map<int, memory> args{
        {DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, impl.weights[static_cast<std::size_t>(tile)]}, {DNNL_ARG_DST, dst}};
    if (bias) {
      args.emplace(DNNL_ARG_BIAS,
                   memory({{1, width}, memory::data_type::f32, memory::format_tag::ab}, eng, bias + n0));
    }
    impl.primitive_for(tile).execute(thread_stream(), args);
  });
}

namespace {

double seconds_per_call(const LinearOp& op, const at::Tensor& x) {
  (void)op.forward(x);  // warm-up
  const auto start = std::chrono::steady_clock::now();
  int calls = 0;
  double elapsed = 0;
  do {
    (void)op.forward(x);
    ++calls;
    elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  } while (elapsed < 0.004 && calls < 50);
  return elapsed / calls;
}

Fp32Backend backend_from_environment() {
  const char* v = std::getenv("RAPIDQA_FP32_BACKEND");
  if (!v) return Fp32Backend::kAuto;
  if (std::strcmp(v, "openblas") == 0) return Fp32Backend::kOpenBlas;
  if (std::strcmp(v, "onednn") == 0) return Fp32Backend::kOneDnn;
  return Fp32Backend::kAuto;
}

}  // namespace

std::unique_ptr<LinearOp> make_fp32_linear(const at::Tensor& weight, const at::Tensor& bias, Activation activation,
                                           Fp32Backend backend) {
  if (backend == Fp32Backend::kAuto) backend = backend_from_environment();
  if (backend == Fp32Backend::kOpenBlas) return std::make_unique<DenseLinear>(weight, bias, activation);
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
  double blas_time = 0, onednn_time = 0;
  for (std::int64_t rows : {32, 256}) {
    const at::Tensor x = at::randn({rows, weight.size(1)});
    blas_time += seconds_per_call(*blas, x);
    onednn_time += seconds_per_call(*onednn, x);
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

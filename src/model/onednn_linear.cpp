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

namespace rapidqa::model {
namespace {

dnnl::engine& cpu_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

}  // namespace

struct OneDnnLinear::Impl {
  dnnl::matmul primitive;
  dnnl::memory weights;  // reordered once, in the primitive's layout
  dnnl::memory bias;     // [1, out] or empty
  at::Tensor bias_storage;
  std::size_t weight_bytes = 0;
};

OneDnnLinear::OneDnnLinear(const at::Tensor& weight_in, const at::Tensor& bias_in, Activation activation)
    : impl_(std::make_unique<Impl>()), activation_(activation) {
  using namespace dnnl;
  const at::Tensor weight = weight_in.to(at::kFloat).contiguous();
  if (weight.dim() != 2) throw std::invalid_argument("OneDnnLinear: weight must be 2-D");
  out_ = weight.size(0);
  in_ = weight.size(1);
  const memory::dim runtime_rows = DNNL_RUNTIME_DIM_VAL;
  const memory::desc src_md({runtime_rows, in_}, memory::data_type::f32, memory::format_tag::ab);
  const memory::desc weights_any({in_, out_}, memory::data_type::f32, memory::format_tag::any);
  const memory::desc dst_md({runtime_rows, out_}, memory::data_type::f32, memory::format_tag::ab);
  const memory::desc bias_md({1, out_}, memory::data_type::f32, memory::format_tag::ab);
  post_ops ops;
  switch (activation) {
    case Activation::kNone: break;
    case Activation::kGelu: ops.append_eltwise(1.0f, algorithm::eltwise_gelu_erf, 0.0f, 0.0f); break;
    case Activation::kGeluTanh: ops.append_eltwise(1.0f, algorithm::eltwise_gelu_tanh, 0.0f, 0.0f); break;
    case Activation::kRelu: ops.append_eltwise(1.0f, algorithm::eltwise_relu, 0.0f, 0.0f); break;
    case Activation::kTanh: ops.append_eltwise(1.0f, algorithm::eltwise_tanh, 0.0f, 0.0f); break;
  }
  primitive_attr attr;
  attr.set_post_ops(ops);
  const bool has_bias = bias_in.defined();
  const matmul::desc desc = has_bias ? matmul::desc(src_md, weights_any, bias_md, dst_md)
                                     : matmul::desc(src_md, weights_any, dst_md);
  const matmul::primitive_desc pd(desc, attr, cpu_engine());
  impl_->primitive = matmul(pd);
  // Our weights are [out, in] row-major, which is [in, out] in layout "ba".
  memory user_weights({{in_, out_}, memory::data_type::f32, memory::format_tag::ba}, cpu_engine(),
                      weight.data_ptr<float>());
  impl_->weights = memory(pd.weights_desc(), cpu_engine());
  stream s(cpu_engine());
  reorder(user_weights, impl_->weights).execute(s, user_weights, impl_->weights);
  s.wait();
  impl_->weight_bytes = pd.weights_desc().get_size();
  if (has_bias) {
    impl_->bias_storage = bias_in.to(at::kFloat).contiguous().clone();
    impl_->bias = memory(bias_md, cpu_engine(), impl_->bias_storage.data_ptr<float>());
    impl_->weight_bytes += static_cast<std::size_t>(out_) * sizeof(float);
  }
}

OneDnnLinear::~OneDnnLinear() = default;

std::size_t OneDnnLinear::weight_bytes() const { return impl_->weight_bytes; }

at::Tensor OneDnnLinear::dense_weight() const {
  using namespace dnnl;
  at::Tensor weight = at::empty({out_, in_}, at::kFloat);
  memory plain({{in_, out_}, memory::data_type::f32, memory::format_tag::ba}, cpu_engine(), weight.data_ptr<float>());
  stream s(cpu_engine());
  reorder(impl_->weights, plain).execute(s, impl_->weights, plain);
  s.wait();
  return weight;
}

at::Tensor OneDnnLinear::dense_bias() const { return impl_->bias_storage; }

at::Tensor OneDnnLinear::forward(const at::Tensor& input) const {
  using namespace dnnl;
  LinearIo io = prepare_linear_io(input, in_, out_);
  const at::Tensor& x = io.input;
  at::Tensor& out = io.output;
  const std::int64_t rows = io.rows;
  if (rows == 0) return out;
  memory src({{rows, in_}, memory::data_type::f32, memory::format_tag::ab}, cpu_engine(), x.data_ptr<float>());
  memory dst({{rows, out_}, memory::data_type::f32, memory::format_tag::ab}, cpu_engine(), out.data_ptr<float>());
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, impl_->weights}, {DNNL_ARG_DST, dst}};
  if (impl_->bias_storage.defined()) args.emplace(DNNL_ARG_BIAS, impl_->bias);
  stream s(cpu_engine());
  impl_->primitive.execute(s, args);
  s.wait();
  return out;
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

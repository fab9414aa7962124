#include "model/linear_op.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <cblas.h>

#include <algorithm>
#include <stdexcept>

#include "model/tiled_matmul.h"

namespace rapidqa::model {

void apply_activation_(at::Tensor& t, Activation activation) {
  switch (activation) {
    case Activation::kNone: return;
    case Activation::kGelu: at::gelu_(t); return;
    case Activation::kGeluTanh: at::gelu_(t, "tanh"); return;
    case Activation::kRelu: at::relu_(t); return;
    case Activation::kTanh: at::tanh_(t); return;
  }
}

void apply_activation_rows(float* x, std::int64_t rows, std::int64_t width, std::int64_t stride,
                           Activation activation) {
  if (activation == Activation::kNone || rows == 0) return;
  // Inference mode is per thread and pool threads do not inherit it.
  c10::InferenceMode inference;
  at::Tensor view = at::from_blob(x, {rows, width}, {stride, 1}, at::kFloat);
  apply_activation_(view, activation);
}

void LinearOp::forward_rows(const float* x, std::int64_t rows, float* y) const {
  c10::InferenceMode inference;
  const at::Tensor in = at::from_blob(const_cast<float*>(x), {rows, in_features()}, at::kFloat);
  const at::Tensor out = forward(in).contiguous();
  std::copy(out.data_ptr<float>(), out.data_ptr<float>() + rows * out_features(), y);
}

LinearIo prepare_linear_io(const at::Tensor& input, std::int64_t in_features, std::int64_t out_features) {
  if (input.dim() == 0 || input.size(-1) != in_features) {
    throw std::invalid_argument("linear layer: input has " + std::to_string(input.dim() ? input.size(-1) : 0) +
                                " features, the weight expects " + std::to_string(in_features));
  }
  LinearIo io;
  io.input = input.contiguous();
  io.rows = io.input.numel() / in_features;
  auto out_sizes = io.input.sizes().vec();
  out_sizes.back() = out_features;
  io.output = at::empty(out_sizes, io.input.options());
  return io;
}

DenseLinear::DenseLinear(at::Tensor weight, at::Tensor bias, Activation activation)
    : weight_(weight.to(at::kFloat).contiguous()), activation_(activation) {
  if (weight_.dim() != 2) throw std::invalid_argument("DenseLinear: weight must be 2-D");
  if (bias.defined()) {
    bias_ = bias.to(at::kFloat).contiguous();
    if (bias_.dim() != 1 || bias_.size(0) != weight_.size(0)) {
      throw std::invalid_argument("DenseLinear: bias length must equal the output features");
    }
  }
}

std::size_t DenseLinear::weight_bytes() const {
  return static_cast<std::size_t>(weight_.numel() + (bias_.defined() ? bias_.numel() : 0)) * sizeof(float);
}

at::Tensor DenseLinear::forward(const at::Tensor& input) const {
  LinearIo io = prepare_linear_io(input, weight_.size(1), weight_.size(0));
  forward_rows(io.input.data_ptr<float>(), io.rows, io.output.data_ptr<float>());
  return io.output;
}

void DenseLinear::forward_rows(const float* a, std::int64_t m, float* c) const {
  const std::int64_t k = weight_.size(1);
  const std::int64_t n = weight_.size(0);
  const float* w = weight_.data_ptr<float>();
  const float* bias = bias_.defined() ? bias_.data_ptr<float>() : nullptr;
  const ColumnTiles tiles(n);
  run_tiled(m, tiles, [&](std::int64_t r0, std::int64_t rows, std::int64_t tile) {
    const std::int64_t n0 = tiles.begin(tile), width = tiles.size(tile);
    float* out = c + r0 * n + n0;
    // Bias first, then accumulate the product onto it (beta = 1).
    float beta = 0.0f;
    if (bias) {
      for (std::int64_t r = 0; r < rows; ++r) std::copy(bias + n0, bias + n0 + width, out + r * n);
      beta = 1.0f;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<blasint>(rows), static_cast<blasint>(width),
                static_cast<blasint>(k), 1.0f, a + r0 * k, static_cast<blasint>(k), w + n0 * k,
                static_cast<blasint>(k), beta, out, static_cast<blasint>(n));
    apply_activation_rows(out, rows, width, n, activation_);
  });
}

}  // namespace rapidqa::model

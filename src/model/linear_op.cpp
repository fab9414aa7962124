#include "model/linear_op.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>
#include <cblas.h>

#include <algorithm>
#include <stdexcept>

namespace rapidqa::model {
namespace {

// Column blocks are multiples of this, so each thread's slice of the
// weight matrix starts on a cache line and OpenBLAS's kernels see whole
// register tiles.
constexpr std::int64_t kColumnGrain = 64;

// Splits [0, n) into `parts` ranges of whole grains.
std::pair<std::int64_t, std::int64_t> block_range(std::int64_t n, std::int64_t parts, std::int64_t index) {
  const std::int64_t grains = (n + kColumnGrain - 1) / kColumnGrain;
  const std::int64_t begin = grains * index / parts * kColumnGrain;
  const std::int64_t end = std::min(n, grains * (index + 1) / parts * kColumnGrain);
  return {std::min(begin, n), end};
}

}  // namespace

void apply_activation_(at::Tensor& t, Activation activation) {
  switch (activation) {
    case Activation::kNone: return;
    case Activation::kGelu: at::gelu_(t); return;
    case Activation::kGeluTanh: at::gelu_(t, "tanh"); return;
    case Activation::kRelu: at::relu_(t); return;
    case Activation::kTanh: at::tanh_(t); return;
  }
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
  const std::int64_t k = weight_.size(1);
  const std::int64_t n = weight_.size(0);
  LinearIo io = prepare_linear_io(input, k, n);
  const at::Tensor& x = io.input;
  at::Tensor& out = io.output;
  const std::int64_t m = io.rows;
  if (m == 0) return out;
  const float* a = x.data_ptr<float>();
  const float* w = weight_.data_ptr<float>();
  const float* bias = bias_.defined() ? bias_.data_ptr<float>() : nullptr;
  float* c = out.data_ptr<float>();
  const std::int64_t parts =
      std::max<std::int64_t>(1, std::min<std::int64_t>(at::get_num_threads(), (n + kColumnGrain - 1) / kColumnGrain));
  const Activation act = activation_;
  at::parallel_for(0, parts, 1, [&](std::int64_t first, std::int64_t last) {
    // Inference mode is per thread and the pool's threads do not inherit
    // it; the activation below writes in place into an inference tensor.
    c10::InferenceMode inference;
    for (std::int64_t p = first; p < last; ++p) {
      const auto [n0, n1] = block_range(n, parts, p);
      if (n1 <= n0) continue;
      const std::int64_t width = n1 - n0;
      // Bias first, then accumulate the product onto it (beta = 1).
      float beta = 0.0f;
      if (bias) {
        for (std::int64_t r = 0; r < m; ++r) std::copy(bias + n0, bias + n1, c + r * n + n0);
        beta = 1.0f;
      }
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<blasint>(m), static_cast<blasint>(width),
                  static_cast<blasint>(k), 1.0f, a, static_cast<blasint>(k), w + n0 * k, static_cast<blasint>(k),
                  beta, c + n0, static_cast<blasint>(n));
      if (act != Activation::kNone) {
        // The block as a strided view; ATen's vectorised kernels apply the
        // activation while it is cache-hot.
        at::Tensor block = out.view({m, n}).narrow(1, n0, width);
        apply_activation_(block, act);
      }
    }
  });
  return out;
}

}  // namespace rapidqa::model

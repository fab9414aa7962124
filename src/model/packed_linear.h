// PackedLinear: the FP32 linear layer on the runtime's own AVX-512 kernel.
// Weights are packed once into panels of 16 output columns (for each input,
// the panel's 16 weights side by side, one register), and a 6-row by
// 4-panel register block accumulates over the whole input length with one
// broadcast per row and input, then adds the bias and applies the
// activation in registers before the one store. Products are cut into
// column tiles on the WorkPool (tiled_matmul.h), like every layer.
//
// oneDNN 2.6's f32 matmul (OneDnnLinear) runs the same products at 83-90%
// of the machine's peak; this kernel avoids its per-call argument set-up
// and strided-output handling and measures faster at every BERT shape
// (benchmarks: BM_Fp32Gemm, BM_LinearBackend). It needs AVX-512
// (packed_linear_available()); make_fp32_linear picks it there.
//
// Thread safety: forward() is const and thread-safe.
#pragma once

#include <ATen/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>

#include "model/gemm_blocking.h"
#include "model/linear_op.h"
#include "model/tiled_matmul.h"

namespace rapidqa::model {

// True where the CPU has AVX-512 and ONEDNN_MAX_CPU_ISA allows it.
bool packed_linear_available();

class PackedFloatMatrix {
 public:
  static constexpr std::int64_t kPanelWidth = 16;

  PackedFloatMatrix() = default;
  // weights: [n, k] float, row-major (one row per output column).
  PackedFloatMatrix(const float* weights, std::int64_t n, std::int64_t k);

  std::int64_t columns() const { return n_; }
  std::int64_t inputs() const { return k_; }
  std::int64_t panels() const { return (n_ + kPanelWidth - 1) / kPanelWidth; }
  std::int64_t panel_floats() const { return k_ * kPanelWidth; }
  const float* panel(std::int64_t p) const { return data_.get() + p * panel_floats(); }
  std::size_t bytes() const { return static_cast<std::size_t>(panels() * panel_floats()) * sizeof(float); }
  // The weights back as [n, k].
  at::Tensor unpack() const;

 private:
  std::int64_t n_ = 0, k_ = 0;
  gemm::AlignedArray<float> data_;
};

// y[r * ldy + c] = activation(sum_i x[r * ldx + i] w[c, i] + bias[c]) for
// rows [0, rows) and columns c in [n0, n0 + count); n0 a multiple of
// kPanelWidth; bias [n] or null. Requires packed_linear_available(); runs
// on the calling thread.
void fp32_gemm_columns(const float* x, std::int64_t ldx, std::int64_t rows, const PackedFloatMatrix& w,
                       std::int64_t n0, std::int64_t count, const float* bias, Activation activation, float* y,
                       std::int64_t ldy);

class PackedLinear final : public LinearOp {
 public:
  // weight [out, in], bias [out] or undefined. Throws std::logic_error
  // where packed_linear_available() is false.
  PackedLinear(const at::Tensor& weight, const at::Tensor& bias, Activation activation = Activation::kNone);

  at::Tensor forward(const at::Tensor& input) const override;
  void forward_rows(const float* x, std::int64_t rows, float* y) const override;
  std::int64_t in_features() const override { return packed_.inputs(); }
  std::int64_t out_features() const override { return packed_.columns(); }
  Activation activation() const override { return activation_; }
  std::string kind() const override { return "f32"; }
  std::size_t weight_bytes() const override;
  at::Tensor dense_weight() const override { return packed_.unpack(); }
  at::Tensor dense_bias() const override { return bias_; }

 private:
  PackedFloatMatrix packed_;
  ColumnTiles tiles_;
  at::Tensor bias_;  // [out] float32 or undefined
  Activation activation_;
};

}  // namespace rapidqa::model

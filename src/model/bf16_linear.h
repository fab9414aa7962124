// Bf16Linear: a linear layer whose weights and inputs are bfloat16 (8-bit
// exponent like float32, 8 bits of mantissa) and whose products accumulate
// in float32, through oneDNN's matmul on the CPU's BF16 dot-product
// instructions (AVX512-BF16, AMX-BF16). Half the weight memory of FP32 and
// up to twice its speed, at about three significant digits per weight; no
// calibration, unlike INT8. Laid out like OneDnnLinear: one single-threaded
// primitive per column tile on the WorkPool, bias and activation fused.
//
// Thread safety: forward() is const and thread-safe.
#pragma once

#include <ATen/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>

#include "model/linear_op.h"

namespace rapidqa::model {

// True when oneDNN (as limited by ONEDNN_MAX_CPU_ISA) runs BF16 products
// on native instructions here. Elsewhere oneDNN would emulate them, slower
// than FP32, so the runtime refuses BF16 there.
bool bf16_native();
// The CPU feature BF16 needs, for error messages.
const char* bf16_requirement();

class Bf16Linear final : public LinearOp {
 public:
  // weight [out, in] (rounded to bfloat16, nearest even), bias [out] float
  // or undefined. Throws std::invalid_argument for other shapes.
  Bf16Linear(const at::Tensor& weight, const at::Tensor& bias, Activation activation);
  ~Bf16Linear() override;

  at::Tensor forward(const at::Tensor& input) const override;
  void forward_rows(const float* x, std::int64_t rows, float* y) const override;
  std::int64_t in_features() const override { return in_; }
  std::int64_t out_features() const override { return out_; }
  Activation activation() const override { return activation_; }
  std::string kind() const override { return "bf16"; }
  std::size_t weight_bytes() const override;
  at::Tensor dense_weight() const override;  // the bfloat16 weights, widened
  at::Tensor dense_bias() const override { return bias_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  at::Tensor bias_;
  std::int64_t in_ = 0, out_ = 0;
  Activation activation_;
};

// Rounds n floats to bfloat16 (nearest even), as 16-bit patterns.
void round_to_bf16(const float* x, std::int64_t n, std::uint16_t* out);

}  // namespace rapidqa::model

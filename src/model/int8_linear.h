// Int8Linear: a linear layer with INT8 weights (per output channel,
// symmetric) and u8 activations (per tensor, with a zero point), over
// column tiles on the WorkPool (tiled_matmul.h). On CPUs with AVX-512 VNNI
// each tile runs the runtime's own kernel (int8_gemm.h); elsewhere a
// single-threaded oneDNN matmul per tile, its weights reordered once into
// oneDNN's blocked layout, the input's and each channel's scales applied
// as output scales, the zero point by oneDNN's exact s32 compensation and
// the bias and activation fused as post-ops. Either way one call turns
// u8 x s8 into the layer's float output.
//
// Activations are quantized either per call from the batch's own range
// (dynamic) or with a range calibrated beforehand (static, which skips the
// min/max pass). On CPUs without VNNI, oneDNN multiplies with vpmaddubsw,
// whose 16-bit pair sums saturate (255 * 127 * 2 > 32767): there the
// activations use 7 bits (0..127), as PyTorch's reduce_range does, and
// static inputs beyond the calibrated range are clamped rather than
// wrapped.
//
// Thread safety: forward() is const and thread-safe.
#pragma once

#include <ATen/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>

#include "model/linear_op.h"

namespace rapidqa::model {

// real = scale * (q - zero_point)
struct QuantParams {
  float scale = 1.0f;
  std::int32_t zero_point = 0;
};

// The affine quantization parameters of a range, by the formula of
// PyTorch's observers (_calculate_qparams, per_tensor_affine): the range is
// widened to include 0, scale = (max - min) / (qmax - qmin) but at least
// float epsilon, zero_point = qmin - round(min / scale), clamped; all in
// float32 with round half to even, as torch.round does.
QuantParams affine_qparams(float min_value, float max_value, std::int32_t qmin, std::int32_t qmax);
// The symmetric version (per_tensor_symmetric / per_channel_symmetric):
// scale = max(|min|, |max|) / ((qmax - qmin) / 2); the zero point is 0 for
// a signed type and (qmin + qmax + 1) / 2 for an unsigned one.
QuantParams symmetric_qparams(float min_value, float max_value, std::int32_t qmin, std::int32_t qmax);

// Per-output-channel symmetric INT8 weights, as PyTorch's
// PerChannelMinMaxObserver(qscheme=per_channel_symmetric, dtype=qint8)
// followed by quantize_per_channel: values [out, in] int8, scales [out].
struct QuantizedWeight {
  at::Tensor values;  // [out, in] int8
  at::Tensor scales;  // [out] float32
  at::Tensor dequantize() const;  // [out, in] float32
};
QuantizedWeight quantize_weight_per_channel(const at::Tensor& weight);
// True when every scale is finite and above zero (what Int8Linear and
// quantized embedding tables require).
bool all_positive_and_finite(const at::Tensor& scales);

// How a layer quantizes its input.
struct InputQuantization {
  bool dynamic = true;         // measure the range of every call's input
  float range_min = 0.0f;      // the calibrated range (static only); the
  float range_max = 0.0f;      // parameters follow from it and the bit width
  bool reduced_range = false;  // 7-bit activations (0..127)
};

// True when oneDNN's int8 kernels on this CPU (as limited by
// ONEDNN_MAX_CPU_ISA) lack VNNI/AMX and so saturate with full-range u8.
bool int8_needs_reduced_range();
// The activation range [0, qmax] for a layer: 127 or 255.
inline std::int32_t activation_qmax(bool reduced_range) { return reduced_range ? 127 : 255; }

class Int8Linear final : public LinearOp {
 public:
  // bias [out] float or undefined. input.reduced_range is forced on where
  // the CPU needs it. Throws std::invalid_argument for a scale that is not
  // finite and positive or a static range that is not finite with min <= max.
  Int8Linear(QuantizedWeight weight, const at::Tensor& bias, Activation activation, InputQuantization input);
  ~Int8Linear() override;

  at::Tensor forward(const at::Tensor& input) const override;
  void forward_rows(const float* x, std::int64_t rows, float* y) const override;
  std::int64_t in_features() const override { return in_; }
  std::int64_t out_features() const override { return out_; }
  Activation activation() const override { return activation_; }
  std::string kind() const override { return input_.dynamic ? "int8-dynamic" : "int8-static"; }
  std::size_t weight_bytes() const override;
  at::Tensor dense_weight() const override { return weight_.dequantize(); }
  at::Tensor dense_bias() const override { return bias_; }

  const QuantizedWeight& quantized_weight() const { return weight_; }
  const InputQuantization& input_quantization() const { return input_; }
  // The input's parameters of a static layer.
  QuantParams static_input_params() const { return static_params_; }

 private:
  void forward_rows_vnni(const float* x, std::int64_t rows, float* y) const;

  struct Impl;
  std::unique_ptr<Impl> impl_;
  QuantizedWeight weight_;
  at::Tensor bias_;  // [out] float32 or undefined
  Activation activation_;
  InputQuantization input_;
  QuantParams static_params_;
  std::int64_t in_ = 0, out_ = 0;
};

// Quantizes x (float32, contiguous) to u8 with the given parameters,
// rounding half to even and clamping to [0, qmax]; AVX2 where available.
void quantize_to_u8(const float* x, std::int64_t count, QuantParams params, std::int32_t qmax, std::uint8_t* out);

}  // namespace rapidqa::model

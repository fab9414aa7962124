// LinearOp: one linear layer of the transformer runtime (y = x W^T + b,
// then an optional activation), behind an interface so the Quantizer can
// swap in INT8 kernels and the Pruner can reshape it without the forward
// code changing.
//
// Thread safety: forward() is const and thread-safe.
#pragma once

#include <ATen/Tensor.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "model/transformer_config.h"

namespace rapidqa::model {

class LinearOp {
 public:
  virtual ~LinearOp() = default;
  // input [..., in_features] float32, contiguous -> [..., out_features].
  virtual at::Tensor forward(const at::Tensor& input) const = 0;
  // The same on raw rows: x [rows, in_features] -> y [rows, out_features],
  // both contiguous and not overlapping, y written whole. What the model's
  // forward pass calls: no tensor is allocated. The default goes through
  // forward(); the runtime's own layers override it.
  virtual void forward_rows(const float* x, std::int64_t rows, float* y) const;
  virtual std::int64_t in_features() const = 0;
  virtual std::int64_t out_features() const = 0;
  virtual Activation activation() const = 0;
  virtual std::string kind() const = 0;          // "f32", "int8", ...
  virtual std::size_t weight_bytes() const = 0;  // memory held by weights and bias
  // The layer's weight [out, in] and bias [out] (undefined: none) as float32,
  // dequantized where the layer is quantized: what the Quantizer and the
  // Pruner start from. A fresh tensor or a view the caller must not modify.
  virtual at::Tensor dense_weight() const = 0;
  virtual at::Tensor dense_bias() const = 0;
};

// FP32 weights through OpenBLAS. The output is split into column tiles
// (tiled_matmul.h), each one single-threaded sgemm on a WorkPool thread,
// followed by bias and activation while the tile is still in cache: small
// batches then use every core, which OpenBLAS's own threading does not
// manage for skinny products. OpenBLAS itself must run single-threaded
// (configure_compute_threads does that).
class DenseLinear final : public LinearOp {
 public:
  // weight [out, in], bias [out] (may be undefined: no bias).
  DenseLinear(at::Tensor weight, at::Tensor bias, Activation activation = Activation::kNone);

  at::Tensor forward(const at::Tensor& input) const override;
  void forward_rows(const float* x, std::int64_t rows, float* y) const override;
  std::int64_t in_features() const override { return weight_.size(1); }
  std::int64_t out_features() const override { return weight_.size(0); }
  Activation activation() const override { return activation_; }
  std::string kind() const override { return "f32"; }
  std::size_t weight_bytes() const override;
  at::Tensor dense_weight() const override { return weight_; }
  at::Tensor dense_bias() const override { return bias_; }

  const at::Tensor& weight() const { return weight_; }
  const at::Tensor& bias() const { return bias_; }

 private:
  at::Tensor weight_;  // [out, in], contiguous float32
  at::Tensor bias_;    // [out] or undefined
  Activation activation_;
};

// The contiguous input and a fresh output of a linear layer: input
// [..., in_features] -> output [..., out_features], and the row count.
// Throws std::invalid_argument when the input width is not in_features.
struct LinearIo {
  at::Tensor input;
  at::Tensor output;
  std::int64_t rows = 0;
};
LinearIo prepare_linear_io(const at::Tensor& input, std::int64_t in_features, std::int64_t out_features);

// Applies an activation in place on a float tensor.
void apply_activation_(at::Tensor& t, Activation activation);
// The same on `rows` rows of `width` floats, `stride` apart.
void apply_activation_rows(float* x, std::int64_t rows, std::int64_t width, std::int64_t stride,
                           Activation activation);

}  // namespace rapidqa::model

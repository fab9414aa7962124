// The INT8 matrix product for CPUs with AVX-512 VNNI: u8 activations times
// s8 weights accumulated exactly in s32 by vpdpbusd, with the zero point's
// correction, the scales, the bias and the activation applied in registers
// before the float result is stored (one pass, no s32 scratch).
//
// oneDNN 2.6's int8 matmul reaches about half of what VNNI can do on one
// core for the BERT shapes (it re-derives the zero-point compensation per
// call and stores through a dense scratch block); this kernel owns the
// weight layout instead: panels of 16 output columns, each holding every
// group of 4 consecutive inputs of its 16 columns as one 64-byte row, so
// one vpdpbusd multiplies 4 inputs into 16 columns, and the column sums the
// zero point needs are computed once when the weights are packed.
//
// Int8Linear uses it where vnni_gemm_available() holds and oneDNN (with its
// saturation-safe reduced range) elsewhere, so ONEDNN_MAX_CPU_ISA=AVX2
// tests the other path.
//
// Thread safety: PackedInt8Matrix is immutable after construction;
// int8_gemm_columns may run concurrently on it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "model/gemm_blocking.h"
#include "model/transformer_config.h"

namespace rapidqa::model {

// True when the CPU has AVX-512 VNNI (and BW) and ONEDNN_MAX_CPU_ISA, which
// limits every kernel of the runtime alike, allows it.
bool vnni_gemm_available();

class PackedInt8Matrix {
 public:
  static constexpr std::int64_t kPanelWidth = 16;  // output columns per panel
  static constexpr std::int64_t kGroup = 4;        // inputs per vpdpbusd lane

  PackedInt8Matrix() = default;
  // weights: [n, k] int8, row-major (one row per output column).
  PackedInt8Matrix(const std::int8_t* weights, std::int64_t n, std::int64_t k);

  std::int64_t columns() const { return n_; }
  std::int64_t inputs() const { return k_; }
  // The input length rounded up to a whole group: activation rows must be
  // readable this far (the kernel reads 4 bytes at a time), and the padding
  // multiplies zero weights.
  std::int64_t padded_inputs() const { return k_padded_; }
  std::int64_t panels() const { return (n_ + kPanelWidth - 1) / kPanelWidth; }
  const std::int8_t* panel(std::int64_t p) const { return data_.get() + p * panel_bytes(); }
  std::int64_t panel_bytes() const { return k_padded_ * kPanelWidth; }
  // Sum over the inputs of each column's weights, padded with zeros to
  // whole panels.
  const std::int32_t* column_sums() const { return column_sums_.get(); }
  std::size_t bytes() const;

 private:
  std::int64_t n_ = 0, k_ = 0, k_padded_ = 0;
  gemm::AlignedArray<std::int8_t> data_;
  gemm::AlignedArray<std::int32_t> column_sums_;
};

// What turns a column's s32 sum into the layer's output:
//   y = activation(input_scale * channel_scales[n] * (sum - zero_point * column_sum[n]) + bias[n]).
struct Int8Epilogue {
  float input_scale = 1.0f;
  std::int32_t zero_point = 0;
  const float* channel_scales = nullptr;  // [n]
  const float* bias = nullptr;            // [n] or null
  Activation activation = Activation::kNone;
};

// y[r * ldy + c] for rows [0, rows) and columns c in [n0, n0 + count) of
// the product of a (u8, rows lda bytes apart, each readable to
// padded_inputs()) with the packed weights. n0 must be a multiple of
// kPanelWidth. Requires vnni_gemm_available(); runs on the calling thread.
void int8_gemm_columns(const std::uint8_t* a, std::int64_t lda, std::int64_t rows, const PackedInt8Matrix& w,
                       std::int64_t n0, std::int64_t count, const Int8Epilogue& epilogue, float* y, std::int64_t ldy);

}  // namespace rapidqa::model

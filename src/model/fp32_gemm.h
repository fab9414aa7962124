// The runtime's FP32 register-block product (packed_linear.cpp) over
// weights laid out as panels of 16 output columns that are not a
// PackedFloatMatrix: the attention's keys packed per head, or its values read
// in place (each value row's 64 floats are four panels' weights for one
// input). Kept free of LibTorch so the small kernels can call it.
//
// Thread safety: stateless; runs on the calling thread.
#pragma once

#include <cstdint>

namespace rapidqa::model {

// Panel p's 16 weights for input i start at
// first + p * panel_stride + i * input_stride (16 when packed).
struct FloatPanels {
  const float* first = nullptr;
  std::int64_t panel_stride = 0;
  std::int64_t input_stride = 0;
  std::int64_t inputs = 0;
};

// y[r * ldy + c] = sum_i x[r * ldx + i] w(i, c) for rows [0, rows) and
// columns [0, count); w's panels past count are read as far as the last
// panel touching count. Requires AVX-512 (cpu_features().avx512).
void fp32_gemm_panels(const float* x, std::int64_t ldx, std::int64_t rows, const FloatPanels& w, std::int64_t count,
                      float* y, std::int64_t ldy);

}  // namespace rapidqa::model

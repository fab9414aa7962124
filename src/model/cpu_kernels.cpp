#include "model/cpu_kernels.h"

#include <cblas.h>
#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "model/cpu_features.h"
#include "model/fp32_gemm.h"
#include "model/vector_math.h"

namespace rapidqa::model::kernels {
namespace {

enum class Isa { kScalar, kAvx2, kAvx512 };

// Keys per panel of the attention's transposed keys: one AVX-512 register.
constexpr std::int64_t kKeyPanel = 16;

Isa detect_isa() {
  // cpu_features() honours ONEDNN_MAX_CPU_ISA, so the AVX2 path of these
  // kernels is tested with the same switch as oneDNN's.
  const CpuFeatures& f = cpu_features();
  return f.avx512 ? Isa::kAvx512 : f.avx2 ? Isa::kAvx2 : Isa::kScalar;
}

Isa isa() {
  static const Isa value = detect_isa();
  return value;
}

using vmath::exp256;
using vmath::exp512;

__attribute__((target("avx512f"))) void softmax_row_avx512(float* x, std::int64_t n) {
  __m512 vmax = _mm512_set1_ps(-INFINITY);
  std::int64_t i = 0;
  for (; i + 16 <= n; i += 16) vmax = _mm512_max_ps(vmax, _mm512_loadu_ps(x + i));
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    vmax = _mm512_mask_max_ps(vmax, m, vmax, _mm512_maskz_loadu_ps(m, x + i));
  }
  const __m512 max = _mm512_set1_ps(_mm512_reduce_max_ps(vmax));
  __m512 vsum = _mm512_setzero_ps();
  for (i = 0; i + 16 <= n; i += 16) {
    const __m512 e = exp512(_mm512_sub_ps(_mm512_loadu_ps(x + i), max));
    _mm512_storeu_ps(x + i, e);
    vsum = _mm512_add_ps(vsum, e);
  }
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    const __m512 e = exp512(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), max));
    _mm512_mask_storeu_ps(x + i, m, e);
    vsum = _mm512_mask_add_ps(vsum, m, vsum, e);
  }
  const __m512 inv = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(vsum));
  for (i = 0; i + 16 <= n; i += 16) _mm512_storeu_ps(x + i, _mm512_mul_ps(_mm512_loadu_ps(x + i), inv));
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(x + i, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), inv));
  }
}

__attribute__((target("avx2,fma"))) float hsum256(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
  return _mm_cvtss_f32(s);
}

__attribute__((target("avx2,fma"))) void softmax_row_avx2(float* x, std::int64_t n) {
  float max = -INFINITY;
  for (std::int64_t i = 0; i < n; ++i) max = std::max(max, x[i]);
  const __m256 vmax = _mm256_set1_ps(max);
  __m256 vsum = _mm256_setzero_ps();
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 e = exp256(_mm256_sub_ps(_mm256_loadu_ps(x + i), vmax));
    _mm256_storeu_ps(x + i, e);
    vsum = _mm256_add_ps(vsum, e);
  }
  float sum = hsum256(vsum);
  for (; i < n; ++i) {
    x[i] = std::exp(x[i] - max);
    sum += x[i];
  }
  const float inv = 1.0f / sum;
  for (i = 0; i < n; ++i) x[i] *= inv;
}

void softmax_row_scalar(float* x, std::int64_t n) {
  const float max = *std::max_element(x, x + n);
  float sum = 0;
  for (std::int64_t i = 0; i < n; ++i) sum += (x[i] = std::exp(x[i] - max));
  const float inv = 1.0f / sum;
  for (std::int64_t i = 0; i < n; ++i) x[i] *= inv;
}

// One row's residual add and LayerNorm, written with 16 independent
// partial sums so the compiler vectorises it at whatever width the calling
// function targets (always inlined into the per-ISA wrappers below).
__attribute__((always_inline)) inline void layer_norm_row(float* x, const float* residual, const float* gamma,
                                                          const float* beta, float eps, std::int64_t n) {
  constexpr int kLanes = 16;
  float part[kLanes] = {};
  std::int64_t i = 0;
  if (residual) {
    for (; i + kLanes <= n; i += kLanes) {
      for (int j = 0; j < kLanes; ++j) part[j] += (x[i + j] += residual[i + j]);
    }
    for (; i < n; ++i) part[0] += (x[i] += residual[i]);
  } else {
    for (; i + kLanes <= n; i += kLanes) {
      for (int j = 0; j < kLanes; ++j) part[j] += x[i + j];
    }
    for (; i < n; ++i) part[0] += x[i];
  }
  float sum = 0;
  for (float p : part) sum += p;
  const float mean = sum / static_cast<float>(n);
  float sq[kLanes] = {};
  for (i = 0; i + kLanes <= n; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) {
      const float d = x[i + j] - mean;
      sq[j] += d * d;
    }
  }
  for (; i < n; ++i) sq[0] += (x[i] - mean) * (x[i] - mean);
  float var = 0;
  for (float s : sq) var += s;
  const float rstd = 1.0f / std::sqrt(var / static_cast<float>(n) + eps);
  for (i = 0; i < n; ++i) x[i] = (x[i] - mean) * rstd * gamma[i] + beta[i];
}

__attribute__((target("avx512f"))) void layer_norm_avx512(float* x, const float* residual, const float* gamma,
                                                          const float* beta, float eps, std::int64_t rows,
                                                          std::int64_t n) {
  for (std::int64_t r = 0; r < rows; ++r) layer_norm_row(x + r * n, residual ? residual + r * n : nullptr, gamma, beta, eps, n);
}

__attribute__((target("avx2,fma"))) void layer_norm_avx2(float* x, const float* residual, const float* gamma,
                                                         const float* beta, float eps, std::int64_t rows,
                                                         std::int64_t n) {
  for (std::int64_t r = 0; r < rows; ++r) layer_norm_row(x + r * n, residual ? residual + r * n : nullptr, gamma, beta, eps, n);
}

void layer_norm_scalar(float* x, const float* residual, const float* gamma, const float* beta, float eps,
                       std::int64_t rows, std::int64_t n) {
  for (std::int64_t r = 0; r < rows; ++r) layer_norm_row(x + r * n, residual ? residual + r * n : nullptr, gamma, beta, eps, n);
}

__attribute__((always_inline)) inline void min_max_lanes(const float* x, std::int64_t n, float* lowest,
                                                         float* highest) {
  constexpr int kLanes = 16;
  float lo[kLanes], hi[kLanes];
  for (int j = 0; j < kLanes; ++j) lo[j] = hi[j] = x[0];
  std::int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) {
      lo[j] = x[i + j] < lo[j] ? x[i + j] : lo[j];
      hi[j] = x[i + j] > hi[j] ? x[i + j] : hi[j];
    }
  }
  for (; i < n; ++i) {
    lo[0] = std::min(lo[0], x[i]);
    hi[0] = std::max(hi[0], x[i]);
  }
  *lowest = *std::min_element(lo, lo + kLanes);
  *highest = *std::max_element(hi, hi + kLanes);
}

// GCC 12 leaves min_max_lanes' sixteen lanes scalar (a vminss and a
// vmaxss per float), so the vector paths are written out: four registers
// of each, so that the compare latency does not bind. min(v, acc) keeps
// acc where v is NaN, as the lanes' x < lo ? x : lo does.
__attribute__((target("avx512f"))) void min_max_avx512(const float* x, std::int64_t n, float* lowest,
                                                       float* highest) {
  if (n < 64) {
    min_max_lanes(x, n, lowest, highest);
    return;
  }
  __m512 lo[4], hi[4];
  for (int k = 0; k < 4; ++k) lo[k] = hi[k] = _mm512_loadu_ps(x + 16 * k);
  std::int64_t i = 64;
  for (; i + 64 <= n; i += 64) {
    for (int k = 0; k < 4; ++k) {
      const __m512 v = _mm512_loadu_ps(x + i + 16 * k);
      lo[k] = _mm512_min_ps(v, lo[k]);
      hi[k] = _mm512_max_ps(v, hi[k]);
    }
  }
  const __m512 l = _mm512_min_ps(_mm512_min_ps(lo[0], lo[1]), _mm512_min_ps(lo[2], lo[3]));
  const __m512 h = _mm512_max_ps(_mm512_max_ps(hi[0], hi[1]), _mm512_max_ps(hi[2], hi[3]));
  float least = _mm512_reduce_min_ps(l), most = _mm512_reduce_max_ps(h);
  for (; i < n; ++i) {
    least = x[i] < least ? x[i] : least;
    most = x[i] > most ? x[i] : most;
  }
  *lowest = least;
  *highest = most;
}

__attribute__((target("avx2,fma"))) void min_max_avx2(const float* x, std::int64_t n, float* lowest, float* highest) {
  if (n < 32) {
    min_max_lanes(x, n, lowest, highest);
    return;
  }
  __m256 lo[4], hi[4];
  for (int k = 0; k < 4; ++k) lo[k] = hi[k] = _mm256_loadu_ps(x + 8 * k);
  std::int64_t i = 32;
  for (; i + 32 <= n; i += 32) {
    for (int k = 0; k < 4; ++k) {
      const __m256 v = _mm256_loadu_ps(x + i + 8 * k);
      lo[k] = _mm256_min_ps(v, lo[k]);
      hi[k] = _mm256_max_ps(v, hi[k]);
    }
  }
  alignas(32) float l[8], h[8];
  _mm256_store_ps(l, _mm256_min_ps(_mm256_min_ps(lo[0], lo[1]), _mm256_min_ps(lo[2], lo[3])));
  _mm256_store_ps(h, _mm256_max_ps(_mm256_max_ps(hi[0], hi[1]), _mm256_max_ps(hi[2], hi[3])));
  float least = *std::min_element(l, l + 8), most = *std::max_element(h, h + 8);
  for (; i < n; ++i) {
    least = x[i] < least ? x[i] : least;
    most = x[i] > most ? x[i] : most;
  }
  *lowest = least;
  *highest = most;
}

}  // namespace

void min_max(const float* x, std::int64_t n, float* lowest, float* highest) {
  switch (isa()) {
    case Isa::kAvx512: min_max_avx512(x, n, lowest, highest); return;
    case Isa::kAvx2: min_max_avx2(x, n, lowest, highest); return;
    case Isa::kScalar: min_max_lanes(x, n, lowest, highest); return;
  }
}

const char* vector_isa() {
  switch (isa()) {
    case Isa::kAvx512: return "avx512";
    case Isa::kAvx2: return "avx2";
    case Isa::kScalar: break;
  }
  return "scalar";
}

void softmax_rows(float* x, std::int64_t rows, std::int64_t cols, std::int64_t stride) {
  const Isa which = isa();
  for (std::int64_t r = 0; r < rows; ++r) {
    float* row = x + r * stride;
    if (which == Isa::kAvx512) {
      softmax_row_avx512(row, cols);
    } else if (which == Isa::kAvx2) {
      softmax_row_avx2(row, cols);
    } else {
      softmax_row_scalar(row, cols);
    }
  }
}

void residual_layer_norm(float* x, const float* residual, const float* gamma, const float* beta, float eps,
                         std::int64_t rows, std::int64_t width) {
  switch (isa()) {
    case Isa::kAvx512: layer_norm_avx512(x, residual, gamma, beta, eps, rows, width); return;
    case Isa::kAvx2: layer_norm_avx2(x, residual, gamma, beta, eps, rows, width); return;
    case Isa::kScalar: layer_norm_scalar(x, residual, gamma, beta, eps, rows, width); return;
  }
}

namespace {

std::int64_t key_panels(std::int64_t tokens) { return (tokens + kKeyPanel - 1) / kKeyPanel; }

}  // namespace

std::int64_t attention_scratch_floats(std::int64_t tokens, std::int64_t head_dim) {
  return tokens * tokens + key_panels(tokens) * kKeyPanel * head_dim;
}

void attention_head(const float* q, const float* k, const float* v, std::int64_t qkv_stride, std::int64_t tokens,
                    std::int64_t head_dim, float* out, std::int64_t out_stride, float* scratch,
                    const float* relative_bias) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  float* scores = scratch;
  // With AVX-512 both products run the runtime's FP32 register blocks
  // (fp32_gemm.h); OpenBLAS's small-matrix path (Haswell kernels on CPUs
  // it does not know, plus its packing copies) cost 3-6% of a BERT-base
  // forward. The values are read in place as panels, so a head's width must
  // be whole panels; other widths keep OpenBLAS.
  const bool own_kernel = isa() == Isa::kAvx512 && head_dim % kKeyPanel == 0;
  if (own_kernel) {
    // The keys, scaled, transposed into panels of 16 keys: the scores'
    // "weights", one panel per 16 columns of the score matrix.
    float* keys = scratch + tokens * tokens;
    for (std::int64_t p = 0; p < key_panels(tokens); ++p) {
      float* panel = keys + p * head_dim * kKeyPanel;
      const std::int64_t lanes = std::min(kKeyPanel, tokens - p * kKeyPanel);
      for (std::int64_t lane = 0; lane < lanes; ++lane) {
        const float* key = k + (p * kKeyPanel + lane) * qkv_stride;
        for (std::int64_t i = 0; i < head_dim; ++i) panel[i * kKeyPanel + lane] = scale * key[i];
      }
      for (std::int64_t lane = lanes; lane < kKeyPanel; ++lane) {
        for (std::int64_t i = 0; i < head_dim; ++i) panel[i * kKeyPanel + lane] = 0.0f;
      }
    }
    fp32_gemm_panels(q, qkv_stride, tokens, FloatPanels{keys, head_dim * kKeyPanel, kKeyPanel, head_dim}, tokens,
                     scores, tokens);
  } else {
    const auto t = static_cast<blasint>(tokens), d = static_cast<blasint>(head_dim);
    const auto ld = static_cast<blasint>(qkv_stride);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, t, t, d, scale, q, ld, k, ld, 0.0f, scores, t);
  }
  if (relative_bias) {
    for (std::int64_t i = 0; i < tokens; ++i) {
      float* row = scores + i * tokens;
      const float* bias = relative_bias - i;  // bias[j] is the bias for distance j - i
      for (std::int64_t j = 0; j < tokens; ++j) row[j] += bias[j];
    }
  }
  softmax_rows(scores, tokens, tokens, tokens);
  if (own_kernel) {
    // Value row j's head_dim floats are panels' weights for input j.
    fp32_gemm_panels(scores, tokens, tokens, FloatPanels{v, kKeyPanel, qkv_stride, tokens}, head_dim, out, out_stride);
  } else {
    const auto t = static_cast<blasint>(tokens), d = static_cast<blasint>(head_dim);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, t, d, t, 1.0f, scores, t, v,
                static_cast<blasint>(qkv_stride), 0.0f, out, static_cast<blasint>(out_stride));
  }
}

}  // namespace rapidqa::model::kernels

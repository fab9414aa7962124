// Vectorised transcendental functions shared by the runtime's kernels
// (cpu_kernels.cpp's softmax, int8_gemm.cpp's activation epilogue). Each
// carries its own target attribute, so a translation unit built for the
// baseline ISA can include this header and call these only from functions
// it dispatches to at run time.
#pragma once

#include <immintrin.h>

#include <cmath>

#include "model/transformer_config.h"

namespace rapidqa::model::vmath {

// |x| and copysign through integer masks: the float forms of these are
// AVX512DQ, which the kernels do not otherwise need.
__attribute__((target("avx512f"))) inline __m512 abs512(__m512 x) {
  return _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(0x7fffffff)));
}
__attribute__((target("avx512f"))) inline __m512 with_sign_of512(__m512 magnitude, __m512 sign_source) {
  const __m512i sign = _mm512_and_si512(_mm512_castps_si512(sign_source), _mm512_set1_epi32(static_cast<int>(0x80000000u)));
  return _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(magnitude), sign));
}

// exp(x) = 2^n * p(r) with n = round(x / ln 2), r = x - n ln 2 (split in
// two for precision) and p the degree-6 Taylor polynomial, within 2 ulp
// over the range; inputs below -87 flush to 0 (expf underflows there) and
// inputs above 88 saturate near FLT_MAX instead of overflowing.
constexpr float kLog2e = 1.44269504088896341f;
constexpr float kLn2Hi = 0.693359375f;
constexpr float kLn2Lo = -2.12194440e-4f;
constexpr float kExpMin = -87.0f;
constexpr float kExpMax = 88.0f;
constexpr float kExpPoly[] = {1.0f / 720, 1.0f / 120, 1.0f / 24, 1.0f / 6, 0.5f, 1.0f, 1.0f};

__attribute__((target("avx512f"))) inline __m512 exp512(__m512 x) {
  x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(kExpMin)), _mm512_set1_ps(kExpMax));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(kLog2e)), _MM_FROUND_TO_NEAREST_INT);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(kLn2Hi), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(kLn2Lo), r);
  __m512 p = _mm512_set1_ps(kExpPoly[0]);
  for (int i = 1; i < 7; ++i) p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kExpPoly[i]));
  return _mm512_scalef_ps(p, n);
}

__attribute__((target("avx2,fma"))) inline __m256 exp256(__m256 x) {
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(kExpMin)), _mm256_set1_ps(kExpMax));
  const __m256 n =
      _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(kLog2e)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(kLn2Hi), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(kLn2Lo), r);
  __m256 p = _mm256_set1_ps(kExpPoly[0]);
  for (int i = 1; i < 7; ++i) p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kExpPoly[i]));
  // 2^n through the exponent field; -126 <= n <= 127 after the clamps.
  const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

// erf(x) by Abramowitz and Stegun 7.1.26 (absolute error below 1.5e-7),
// the approximation oneDNN's gelu_erf uses: for t = 1 / (1 + p|x|),
// erf(|x|) = 1 - t (a1 + t (a2 + t (a3 + t (a4 + t a5)))) exp(-x^2).
__attribute__((target("avx512f"))) inline __m512 erf512(__m512 x) {
  const __m512 ax = abs512(x);
  const __m512 t = _mm512_div_ps(_mm512_set1_ps(1.0f), _mm512_fmadd_ps(_mm512_set1_ps(0.3275911f), ax, _mm512_set1_ps(1.0f)));
  __m512 p = _mm512_set1_ps(1.061405429f);
  p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(-1.453152027f));
  p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(1.421413741f));
  p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(-0.284496736f));
  p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(0.254829592f));
  p = _mm512_mul_ps(p, t);
  const __m512 e = exp512(_mm512_mul_ps(_mm512_sub_ps(_mm512_setzero_ps(), ax), ax));
  const __m512 y = _mm512_fnmadd_ps(p, e, _mm512_set1_ps(1.0f));
  return with_sign_of512(y, x);
}

// tanh(x) = sign(x) (1 - 2 / (exp(2|x|) + 1)); exact enough away from 0,
// and near 0 (|x| < 2^-5) the odd polynomial x - x^3/3 + 2x^5/15 avoids
// the cancellation.
__attribute__((target("avx512f"))) inline __m512 tanh512(__m512 x) {
  const __m512 ax = abs512(x);
  const __m512 e = exp512(_mm512_add_ps(ax, ax));
  const __m512 far = _mm512_fnmadd_ps(_mm512_set1_ps(2.0f), _mm512_div_ps(_mm512_set1_ps(1.0f), _mm512_add_ps(e, _mm512_set1_ps(1.0f))),
                                      _mm512_set1_ps(1.0f));
  const __m512 x2 = _mm512_mul_ps(ax, ax);
  const __m512 near = _mm512_mul_ps(
      ax, _mm512_fmadd_ps(x2, _mm512_fmadd_ps(x2, _mm512_set1_ps(2.0f / 15), _mm512_set1_ps(-1.0f / 3)), _mm512_set1_ps(1.0f)));
  const __mmask16 small = _mm512_cmp_ps_mask(ax, _mm512_set1_ps(0.03125f), _CMP_LT_OQ);
  const __m512 y = _mm512_mask_blend_ps(small, far, near);
  return with_sign_of512(y, x);
}

// A layer's activation on 16 floats (the GEMM kernels' epilogues).
__attribute__((target("avx512f"))) inline __m512 activate512(__m512 v, Activation activation) {
  switch (activation) {
    case Activation::kNone: return v;
    case Activation::kRelu: return _mm512_max_ps(v, _mm512_setzero_ps());
    case Activation::kGelu: {
      const __m512 e = erf512(_mm512_mul_ps(v, _mm512_set1_ps(0.70710678118654752f)));
      return _mm512_mul_ps(_mm512_mul_ps(v, _mm512_set1_ps(0.5f)), _mm512_add_ps(e, _mm512_set1_ps(1.0f)));
    }
    case Activation::kGeluTanh: {
      // 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))
      const __m512 inner = _mm512_mul_ps(
          _mm512_set1_ps(0.79788456080286536f),
          _mm512_fmadd_ps(_mm512_mul_ps(_mm512_mul_ps(v, v), v), _mm512_set1_ps(0.044715f), v));
      const __m512 t = tanh512(inner);
      return _mm512_mul_ps(_mm512_mul_ps(v, _mm512_set1_ps(0.5f)), _mm512_add_ps(t, _mm512_set1_ps(1.0f)));
    }
    case Activation::kTanh: return tanh512(v);
  }
  return v;
}

}  // namespace rapidqa::model::vmath

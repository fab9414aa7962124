#include "index/int8_code_scorer.h"

#include <immintrin.h>

#include <cstring>

#include "common/simd_accumulate.h"
#include "index/simd_flat_index.h"

namespace rapidqa::index {
namespace {

float code_scale(const std::uint8_t* code, std::size_t d) {
  float scale;
  std::memcpy(&scale, code + d, sizeof scale);
  return scale;
}

__attribute__((target("avx2"))) std::int32_t horizontal_sum(__m256i v) {
  __m128i sum = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  sum = _mm_hadd_epi32(sum, sum);
  sum = _mm_hadd_epi32(sum, sum);
  return _mm_cvtsi128_si32(sum);
}

// a . b via vpdpbusd, which needs one unsigned side: (a + 128) . b, less
// 128 * sum b (the sum against a vector of ones).
__attribute__((target("avx512f,avx512bw,avx512vnni"))) std::int32_t dot_codes_vnni(const std::int8_t* a,
                                                                                   const std::int8_t* b,
                                                                                   std::size_t d) {
  __m512i dot = _mm512_setzero_si512(), sum = _mm512_setzero_si512();
  const __m512i ones = _mm512_set1_epi8(1), flip = _mm512_set1_epi8(static_cast<char>(0x80));
  for (std::size_t j = 0; j < d; j += 64) {
    const __mmask64 valid = d - j >= 64 ? ~0ULL : (~0ULL) >> (64 - (d - j));
    const __m512i va = _mm512_maskz_loadu_epi8(valid, a + j), vb = _mm512_maskz_loadu_epi8(valid, b + j);
    simd::dot_accumulate_u8s8(dot, _mm512_xor_si512(va, flip), vb);
    simd::dot_accumulate_u8s8(sum, ones, vb);
  }
  return _mm512_reduce_add_epi32(_mm512_sub_epi32(dot, _mm512_slli_epi32(sum, 7)));
}

__attribute__((target("avx2"))) std::int32_t dot_codes_avx2(const std::int8_t* a, const std::int8_t* b,
                                                            std::size_t d) {
  __m256i acc = _mm256_setzero_si256();
  std::size_t j = 0;
  for (; j + 16 <= d; j += 16) {
    const __m256i va = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a + j)));
    const __m256i vb = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + j)));
    acc = _mm256_add_epi32(acc, _mm256_madd_epi16(va, vb));
  }
  std::int32_t result = horizontal_sum(acc);
  for (; j < d; ++j) result += static_cast<std::int32_t>(a[j]) * b[j];
  return result;
}

// Eight 32-bit partial sums of q . c over 32 bytes: |q| times c carrying
// q's sign.
__attribute__((target("avx2"))) inline __m256i signed_block_avx2(const std::uint8_t* code, const std::int8_t* q,
                                                                 const std::uint8_t* magnitude, __m256i ones16) {
  const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(code));
  const __m256i sq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q));
  const __m256i m = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(magnitude));
  return _mm256_madd_epi16(_mm256_maddubs_epi16(m, _mm256_sign_epi8(c, sq)), ones16);
}

}  // namespace

Int8CodeScorer::Int8CodeScorer(const float* query, std::size_t d)
    : query_(query), d_(d), kernel_(scan_kernel()) {
  // Whole 64-byte loads of the query never read past it (QueryCode pads);
  // the VNNI tail load of a code is masked and the AVX2 tail runs scalar,
  // so the padding is never multiplied with a code byte.
  if (kernel_ != ScanKernel::kPortable) code_ = quantize_query(query, d, kernel_);
  if (kernel_ == ScanKernel::kAvx2) {
    // The centred query (bytes - offset, within [-63, 63]) as magnitude and
    // sign: vpsignb moves the query's sign onto the code, so one
    // vpmaddubsw per 32 bytes scores it, with no second pass for the
    // code's sum. Zero past d.
    const std::size_t padded = (d + 63) / 64 * 64;
    signed_query_.assign(padded, 0);
    query_magnitude_.assign(padded, 0);
    for (std::size_t j = 0; j < d; ++j) {
      const int centred = static_cast<int>(code_.bytes[j]) - code_.offset;
      signed_query_[j] = static_cast<std::int8_t>(centred);
      query_magnitude_[j] = static_cast<std::uint8_t>(centred < 0 ? -centred : centred);
    }
  }
}

void Int8CodeScorer::prefetch(const std::uint8_t* code) const {
  const char* at = reinterpret_cast<const char*>(code);
  const std::size_t bytes = d_ + sizeof(float);
  for (std::size_t offset = 0; offset < bytes; offset += 64) _mm_prefetch(at + offset, _MM_HINT_T0);
  _mm_prefetch(at + bytes - 1, _MM_HINT_T0);
}

float Int8CodeScorer::score(const std::uint8_t* code) const {
  switch (kernel_) {
    case ScanKernel::kAvx512Vnni: return score_vnni(code);
    case ScanKernel::kAvx2: return score_avx2(code);
    case ScanKernel::kPortable: break;
  }
  return int8_code_inner_product(query_, code, d_);
}

// sum (u_j - offset) c_j: vpdpbusd gives sum u_j c_j, and against a vector
// of ones the code sum to take offset times away.
__attribute__((target("avx512f,avx512bw,avx512vnni"))) float Int8CodeScorer::score_vnni(
    const std::uint8_t* code) const {
  __m512i dot = _mm512_setzero_si512(), sum = _mm512_setzero_si512();
  const __m512i ones = _mm512_set1_epi8(1);
  for (std::size_t j = 0; j < d_; j += 64) {
    const __mmask64 valid = d_ - j >= 64 ? ~0ULL : (~0ULL) >> (64 - (d_ - j));
    const __m512i c = _mm512_maskz_loadu_epi8(valid, code + j);
    simd::dot_accumulate_u8s8(dot, _mm512_loadu_si512(code_.bytes.data() + j), c);
    simd::dot_accumulate_u8s8(sum, ones, c);
  }
  const std::int32_t centred =
      _mm512_reduce_add_epi32(_mm512_sub_epi32(dot, _mm512_mullo_epi32(sum, _mm512_set1_epi32(code_.offset))));
  return static_cast<float>(centred) * code_scale(code, d_) * code_.scale;
}

// sum q_j c_j with the centred query q: vpmaddubsw of |q| (unsigned, at
// most 63) with c carrying q's sign (vpsignb), so the 16-bit pair sums stay
// under 2 * 63 * 127 and cannot saturate; codes are symmetric (never -128,
// whose sign cannot flip). Two accumulators over 64 bytes a step keep both
// multiply ports busy.
__attribute__((target("avx2"))) float Int8CodeScorer::score_avx2(const std::uint8_t* code) const {
  __m256i acc0 = _mm256_setzero_si256(), acc1 = _mm256_setzero_si256();
  const __m256i ones16 = _mm256_set1_epi16(1);
  const std::int8_t* q = signed_query_.data();
  const std::uint8_t* m = query_magnitude_.data();
  std::size_t j = 0;
  for (; j + 64 <= d_; j += 64) {
    acc0 = _mm256_add_epi32(acc0, signed_block_avx2(code + j, q + j, m + j, ones16));
    acc1 = _mm256_add_epi32(acc1, signed_block_avx2(code + j + 32, q + j + 32, m + j + 32, ones16));
  }
  for (; j + 32 <= d_; j += 32) acc0 = _mm256_add_epi32(acc0, signed_block_avx2(code + j, q + j, m + j, ones16));
  std::int32_t centred = horizontal_sum(_mm256_add_epi32(acc0, acc1));
  for (; j < d_; ++j) centred += static_cast<std::int32_t>(signed_query_[j]) * static_cast<std::int8_t>(code[j]);
  return static_cast<float>(centred) * code_scale(code, d_) * code_.scale;
}

std::int32_t dot_codes(const std::int8_t* a, const std::int8_t* b, std::size_t d) {
  switch (scan_kernel()) {
    case ScanKernel::kAvx512Vnni: return dot_codes_vnni(a, b, d);
    case ScanKernel::kAvx2: return dot_codes_avx2(a, b, d);
    case ScanKernel::kPortable: break;
  }
  std::int32_t result = 0;
  for (std::size_t j = 0; j < d; ++j) result += static_cast<std::int32_t>(a[j]) * b[j];
  return result;
}

}  // namespace rapidqa::index

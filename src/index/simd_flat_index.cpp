#include "index/simd_flat_index.h"

#include <faiss/impl/IDSelector.h>
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace rapidqa::index {
namespace {

__attribute__((target("avx2,fma"))) float inner_product_avx2(const float* a, const float* b, std::size_t d) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  std::size_t i = 0;
  for (; i + 16 <= d; i += 16) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), acc1);
  }
  for (; i + 8 <= d; i += 8) acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
  acc0 = _mm256_add_ps(acc0, acc1);
  __m128 sum = _mm_add_ps(_mm256_castps256_ps128(acc0), _mm256_extractf128_ps(acc0, 1));
  sum = _mm_hadd_ps(sum, sum);
  sum = _mm_hadd_ps(sum, sum);
  float result = _mm_cvtss_f32(sum);
  for (; i < d; ++i) result += a[i] * b[i];
  return result;
}

float inner_product_portable(const float* a, const float* b, std::size_t d) {
  float result = 0;
  for (std::size_t i = 0; i < d; ++i) result += a[i] * b[i];
  return result;
}

// q . (scale * c) for a float query and an int8 code.
__attribute__((target("avx2,fma"))) float inner_product_int8_avx2(const float* q, const std::int8_t* c,
                                                                  std::size_t d) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  std::size_t i = 0;
  for (; i + 16 <= d; i += 16) {
    const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(c + i));
    const __m256 lo = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(bytes));
    const __m256 hi = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(bytes, 8)));
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), lo, acc0);
    acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i + 8), hi, acc1);
  }
  acc0 = _mm256_add_ps(acc0, acc1);
  __m128 sum = _mm_add_ps(_mm256_castps256_ps128(acc0), _mm256_extractf128_ps(acc0, 1));
  sum = _mm_hadd_ps(sum, sum);
  sum = _mm_hadd_ps(sum, sum);
  float result = _mm_cvtss_f32(sum);
  for (; i < d; ++i) result += q[i] * static_cast<float>(c[i]);
  return result;
}

// Integer dot product of two int8 codes (graph construction compares stored
// vectors with each other).
__attribute__((target("avx2,fma"))) std::int32_t dot_int8_int8_avx2(const std::int8_t* a, const std::int8_t* b,
                                                                    std::size_t d) {
  __m256i acc = _mm256_setzero_si256();
  std::size_t i = 0;
  for (; i + 16 <= d; i += 16) {
    const __m256i va = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a + i)));
    const __m256i vb = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + i)));
    acc = _mm256_add_epi32(acc, _mm256_madd_epi16(va, vb));
  }
  __m128i sum = _mm_add_epi32(_mm256_castsi256_si128(acc), _mm256_extracti128_si256(acc, 1));
  sum = _mm_hadd_epi32(sum, sum);
  sum = _mm_hadd_epi32(sum, sum);
  std::int32_t result = _mm_cvtsi128_si32(sum);
  for (; i < d; ++i) result += static_cast<std::int32_t>(a[i]) * b[i];
  return result;
}

std::int32_t dot_int8_int8_portable(const std::int8_t* a, const std::int8_t* b, std::size_t d) {
  std::int32_t result = 0;
  for (std::size_t i = 0; i < d; ++i) result += static_cast<std::int32_t>(a[i]) * b[i];
  return result;
}

float inner_product_int8_portable(const float* q, const std::int8_t* c, std::size_t d) {
  float result = 0;
  for (std::size_t i = 0; i < d; ++i) result += q[i] * static_cast<float>(c[i]);
  return result;
}

using Kernel = float (*)(const float*, const float*, std::size_t);
using Int8Kernel = float (*)(const float*, const std::int8_t*, std::size_t);
using CodeKernel = std::int32_t (*)(const std::int8_t*, const std::int8_t*, std::size_t);

bool has_avx2_fma() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

const Kernel kKernel = has_avx2_fma() ? inner_product_avx2 : inner_product_portable;
const Int8Kernel kInt8Kernel = has_avx2_fma() ? inner_product_int8_avx2 : inner_product_int8_portable;
const CodeKernel kCodeKernel = has_avx2_fma() ? dot_int8_int8_avx2 : dot_int8_int8_portable;

// Code layout: d int8 values, then the float scale.
float int8_code_dot(const float* q, const std::uint8_t* code, std::size_t d) {
  float scale;
  std::memcpy(&scale, code + d, sizeof scale);
  return scale * kInt8Kernel(q, reinterpret_cast<const std::int8_t*>(code), d);
}

struct Int8IPComputer final : faiss::FlatCodesDistanceComputer {
  Int8IPComputer(const std::uint8_t* codes, std::size_t d)
      : faiss::FlatCodesDistanceComputer(codes, d + sizeof(float)), d(d) {}
  void set_query(const float* x) override { query = x; }
  float distance_to_code(const std::uint8_t* code) override { return int8_code_dot(query, code, d); }
  float symmetric_dis(idx_t i, idx_t j) override {
    const std::uint8_t* ci = codes + i * code_size;
    const std::uint8_t* cj = codes + j * code_size;
    float si, sj;
    std::memcpy(&si, ci + d, sizeof si);
    std::memcpy(&sj, cj + d, sizeof sj);
    return si * sj *
           static_cast<float>(kCodeKernel(reinterpret_cast<const std::int8_t*>(ci), reinterpret_cast<const std::int8_t*>(cj), d));
  }
  std::size_t d;
  const float* query = nullptr;
};

struct SimdIPComputer final : faiss::FlatCodesDistanceComputer {
  SimdIPComputer(const float* base, std::size_t d)
      : faiss::FlatCodesDistanceComputer(reinterpret_cast<const std::uint8_t*>(base), d * sizeof(float)),
        base(base), d(d) {}
  void set_query(const float* x) override { query = x; }
  float distance_to_code(const std::uint8_t* code) override {
    return kKernel(query, reinterpret_cast<const float*>(code), d);
  }
  float symmetric_dis(idx_t i, idx_t j) override { return kKernel(base + i * d, base + j * d, d); }

  const float* base;
  std::size_t d;
  const float* query = nullptr;
};

}  // namespace

float inner_product(const float* a, const float* b, std::size_t d) { return kKernel(a, b, d); }

faiss::FlatCodesDistanceComputer* SimdFlatIP::get_FlatCodesDistanceComputer() const {
  return new SimdIPComputer(get_xb(), static_cast<std::size_t>(d));
}

namespace {

// Exact top-k over every row that sel admits, scored by score(query, row).
template <typename Score>
void top_k_search(faiss::Index::idx_t n, faiss::Index::idx_t ntotal, std::size_t dim, const float* x,
                  faiss::Index::idx_t k, float* distances, faiss::Index::idx_t* labels, const faiss::IDSelector* sel,
                  Score score) {
  using idx_t = faiss::Index::idx_t;
  // Results sorted best first; a k-sized array beats a heap for the small k
  // a question asks for.
  std::vector<std::pair<float, idx_t>> best;
  for (idx_t q = 0; q < n; ++q) {
    const float* query = x + static_cast<std::size_t>(q) * dim;
    best.clear();
    for (idx_t row = 0; row < ntotal; ++row) {
      if (sel && !sel->is_member(row)) continue;
      const float sim = score(query, row);
      if (static_cast<idx_t>(best.size()) == k && sim <= best.back().first) continue;
      auto pos = std::upper_bound(best.begin(), best.end(), sim,
                                  [](float v, const std::pair<float, idx_t>& e) { return v > e.first; });
      best.insert(pos, {sim, row});
      if (static_cast<idx_t>(best.size()) > k) best.pop_back();
    }
    for (idx_t j = 0; j < k; ++j) {
      const bool have = j < static_cast<idx_t>(best.size());
      distances[q * k + j] = have ? best[static_cast<std::size_t>(j)].first : -std::numeric_limits<float>::infinity();
      labels[q * k + j] = have ? best[static_cast<std::size_t>(j)].second : -1;
    }
  }
}

}  // namespace

void SimdFlatIP::search(idx_t n, const float* x, idx_t k, float* distances, idx_t* labels,
                        const faiss::SearchParameters* params) const {
  const auto dim = static_cast<std::size_t>(d);
  const float* base = get_xb();
  top_k_search(n, ntotal, dim, x, k, distances, labels, params ? params->sel : nullptr,
               [&](const float* q, idx_t row) { return kKernel(q, base + static_cast<std::size_t>(row) * dim, dim); });
}

Int8FlatIP::Int8FlatIP(idx_t d)
    : faiss::IndexFlatCodes(static_cast<std::size_t>(d) + sizeof(float), d, faiss::METRIC_INNER_PRODUCT) {}

void Int8FlatIP::sa_encode(idx_t n, const float* x, std::uint8_t* bytes) const {
  const auto dim = static_cast<std::size_t>(d);
  for (idx_t i = 0; i < n; ++i) {
    const float* v = x + static_cast<std::size_t>(i) * dim;
    std::uint8_t* code = bytes + static_cast<std::size_t>(i) * code_size;
    float max_abs = 0;
    for (std::size_t t = 0; t < dim; ++t) max_abs = std::max(max_abs, std::abs(v[t]));
    const float scale = max_abs > 0 ? max_abs / 127.0f : 1.0f;
    for (std::size_t t = 0; t < dim; ++t) {
      const long q = std::lround(v[t] / scale);
      reinterpret_cast<std::int8_t*>(code)[t] = static_cast<std::int8_t>(std::clamp<long>(q, -127, 127));
    }
    std::memcpy(code + dim, &scale, sizeof scale);
  }
}

void Int8FlatIP::sa_decode(idx_t n, const std::uint8_t* bytes, float* x) const {
  const auto dim = static_cast<std::size_t>(d);
  for (idx_t i = 0; i < n; ++i) {
    const std::uint8_t* code = bytes + static_cast<std::size_t>(i) * code_size;
    float scale;
    std::memcpy(&scale, code + dim, sizeof scale);
    for (std::size_t t = 0; t < dim; ++t) {
      x[static_cast<std::size_t>(i) * dim + t] = scale * static_cast<float>(reinterpret_cast<const std::int8_t*>(code)[t]);
    }
  }
}

faiss::FlatCodesDistanceComputer* Int8FlatIP::get_FlatCodesDistanceComputer() const {
  return new Int8IPComputer(codes.data(), static_cast<std::size_t>(d));
}

void Int8FlatIP::search(idx_t n, const float* x, idx_t k, float* distances, idx_t* labels,
                        const faiss::SearchParameters* params) const {
  const auto dim = static_cast<std::size_t>(d);
  top_k_search(n, ntotal, dim, x, k, distances, labels, params ? params->sel : nullptr,
               [&](const float* q, idx_t row) { return int8_code_dot(q, codes.data() + row * code_size, dim); });
}

}  // namespace rapidqa::index

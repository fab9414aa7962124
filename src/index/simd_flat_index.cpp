#include "index/simd_flat_index.h"

#include <faiss/impl/IDSelector.h>
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <optional>
#include <vector>

#include "common/parallel_parts.h"
#include "index/int8_code_scorer.h"

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

float inner_product_int8_portable(const float* q, const std::int8_t* c, std::size_t d) {
  float result = 0;
  for (std::size_t i = 0; i < d; ++i) result += q[i] * static_cast<float>(c[i]);
  return result;
}

using Kernel = float (*)(const float*, const float*, std::size_t);
using Int8Kernel = float (*)(const float*, const std::int8_t*, std::size_t);

bool has_avx2_fma() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

const Kernel kKernel = has_avx2_fma() ? inner_product_avx2 : inner_product_portable;
const Int8Kernel kInt8Kernel = has_avx2_fma() ? inner_product_int8_avx2 : inner_product_int8_portable;

}  // namespace

// Code layout: d int8 values, then the float scale.
float int8_code_inner_product(const float* q, const std::uint8_t* code, std::size_t d) {
  float scale;
  std::memcpy(&scale, code + d, sizeof scale);
  return scale * kInt8Kernel(q, reinterpret_cast<const std::int8_t*>(code), d);
}

namespace {

// Graph construction over int8 storage: a new vector against stored codes
// (the query quantized once per inserted vector) and stored codes against
// each other.
struct Int8IPComputer final : faiss::FlatCodesDistanceComputer {
  Int8IPComputer(const std::uint8_t* codes, std::size_t d)
      : faiss::FlatCodesDistanceComputer(codes, d + sizeof(float)), d(d) {}
  void set_query(const float* x) override { scorer.emplace(x, d); }
  float distance_to_code(const std::uint8_t* code) override { return scorer->score(code); }
  float symmetric_dis(idx_t i, idx_t j) override {
    const std::uint8_t* ci = codes + i * code_size;
    const std::uint8_t* cj = codes + j * code_size;
    float si, sj;
    std::memcpy(&si, ci + d, sizeof si);
    std::memcpy(&sj, cj + d, sizeof sj);
    return si * sj *
           static_cast<float>(dot_codes(reinterpret_cast<const std::int8_t*>(ci), reinterpret_cast<const std::int8_t*>(cj), d));
  }
  std::size_t d;
  std::optional<Int8CodeScorer> scorer;
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


// The largest of a block's kBlockRows scores, in SSE registers (every
// x86-64 CPU has them). The int8 pass's scores are finite (codes and scales
// are made from finite values only), so no NaN can hide a larger score.
float largest_of_block(const float* scores) {
  static_assert(Int8Rows::kBlockRows == 16, "four vectors of four scores");
  __m128 m = _mm_max_ps(_mm_max_ps(_mm_loadu_ps(scores), _mm_loadu_ps(scores + 4)),
                        _mm_max_ps(_mm_loadu_ps(scores + 8), _mm_loadu_ps(scores + 12)));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
  return _mm_cvtss_f32(m);
}

// The best `capacity` (score, row) pairs offered so far, kept as a
// reservoir of up to twice that: when it fills, nth_element keeps the best
// half and raises the threshold a new score must beat. Amortised O(1) per
// accepted score; a heap costs a sift per accepted score, which dominated
// the scan of a small index.
class Candidates {
 public:
  explicit Candidates(std::size_t capacity) : capacity_(std::max<std::size_t>(capacity, 1)) {
    items_.reserve(2 * capacity_);
  }

  // Offers rows first_row.. with their approximate scores; maxima[b] is the
  // largest score of block b (block_maxima). Past the first rows almost no
  // score beats the threshold, so a block whose largest does not is passed
  // over without looking at its rows.
  void offer(const float* scores, std::size_t count, std::int64_t first_row, const float* maxima,
             const faiss::IDSelector* sel) {
    for (std::size_t b = 0, i = 0; i < count; ++b, i += Int8Rows::kBlockRows) {
      if (maxima[b] > threshold_) offer_each(scores, i, std::min(count, i + Int8Rows::kBlockRows), first_row, sel);
    }
  }
  // Scores at or below `floor` need not be offered: a caller that knows
  // `capacity` scores above it (without a selector) says so up front.
  void raise_threshold(float floor) { threshold_ = std::max(threshold_, floor); }
  std::size_t capacity() const { return capacity_; }

  // The best `capacity` offered, in no particular order.
  const std::vector<std::pair<float, std::int64_t>>& best() {
    if (items_.size() > capacity_) keep_best();
    return items_;
  }

 private:
  void offer_each(const float* scores, std::size_t from, std::size_t to, std::int64_t first_row,
                  const faiss::IDSelector* sel) {
    for (std::size_t i = from; i < to; ++i) {
      if (!(scores[i] > threshold_)) continue;
      const std::int64_t row = first_row + static_cast<std::int64_t>(i);
      if (sel && !sel->is_member(row)) continue;
      items_.emplace_back(scores[i], row);
      if (items_.size() == 2 * capacity_) keep_best();
    }
  }

  void keep_best() {
    std::nth_element(items_.begin(), items_.begin() + static_cast<std::ptrdiff_t>(capacity_ - 1), items_.end(),
                     std::greater<>());
    items_.resize(capacity_);
    threshold_ = items_.back().first;
  }

  std::size_t capacity_;
  float threshold_ = -std::numeric_limits<float>::infinity();
  std::vector<std::pair<float, std::int64_t>> items_;
};

// Candidates kept per query for the exact re-ranking. int8 rounding moves
// a random pair's score by about 1e-3; the more rows, the more of them lie
// that close to the k-th best, so the slack grows with the square root of
// the row count (8 at 1k rows, 40 at 100k, 64 from 262k).
std::size_t rerank_count(std::size_t k, std::size_t rows) {
  const auto slack = static_cast<std::size_t>(std::sqrt(static_cast<double>(rows)) / 8);
  return k + std::clamp<std::size_t>(slack, 8, 64);
}


// The largest of each block's scores in scores[0, count), the last block
// possibly short.
void block_maxima(const float* scores, std::size_t count, std::vector<float>& maxima) {
  maxima.clear();
  std::size_t first = 0;
  for (; first + Int8Rows::kBlockRows <= count; first += Int8Rows::kBlockRows) {
    maxima.push_back(largest_of_block(scores + first));
  }
  if (first < count) maxima.push_back(*std::max_element(scores + first, scores + count));
}

// Sets a first threshold before any score is offered: if `capacity` blocks
// of 16 rows each hold a score of at least m, at least `capacity` scores
// reach m, so nothing below the capacity-th largest block maximum can be
// among the best. Without it, the first rows of a scan all enter the
// reservoir and selection cost more than scoring a thousand rows.
void start_above_block_maxima(const std::vector<float>& maxima, Candidates& best, std::vector<float>& scratch) {
  if (maxima.size() < best.capacity()) return;
  scratch.assign(maxima.begin(), maxima.end());  // the maxima stay in block order for offer()
  const auto nth = scratch.begin() + static_cast<std::ptrdiff_t>(best.capacity() - 1);
  std::nth_element(scratch.begin(), nth, scratch.end(), std::greater<>());
  // Just below it: a score equal to the floor must still be offered.
  best.raise_threshold(std::nextafter(*nth, -std::numeric_limits<float>::infinity()));
}

}  // namespace

void SimdFlatIP::add(idx_t n, const float* x) {
  faiss::IndexFlatIP::add(n, x);
  int8_rows.append(static_cast<std::size_t>(n), x);
}

void SimdFlatIP::reset() {
  faiss::IndexFlatIP::reset();
  int8_rows.clear();
}

std::size_t SimdFlatIP::remove_ids(const faiss::IDSelector& sel) {
  const std::size_t removed = faiss::IndexFlatIP::remove_ids(sel);
  int8_rows.clear();
  int8_rows.append(static_cast<std::size_t>(ntotal), get_xb());
  return removed;
}

std::size_t SimdFlatIP::memory_bytes() const { return codes.capacity() + int8_rows.memory_bytes(); }

void SimdFlatIP::search(idx_t n, const float* x, idx_t k, float* distances, idx_t* labels,
                        const faiss::SearchParameters* params) const {
  // Rows scored per chunk: the chunk's scores stay in L1 while the
  // candidates are picked from them.
  constexpr std::size_t kChunkBlocks = 64;
  constexpr std::size_t kChunkRows = kChunkBlocks * Int8Rows::kBlockRows;
  const auto dim = static_cast<std::size_t>(d);
  const auto rows = static_cast<std::size_t>(ntotal);
  const faiss::IDSelector* sel = params ? params->sel : nullptr;
  const ScanKernel kernel = scan_kernel();
  const std::size_t keep = std::min(rows, rerank_count(static_cast<std::size_t>(k), rows));
  // Scratch kept per thread: a small index's whole search costs less than
  // allocating and zeroing these each call.
  thread_local std::vector<float> scores;
  thread_local std::vector<std::pair<float, idx_t>> exact;
  thread_local std::vector<float> maxima, ordered_maxima;
  scores.resize(Int8Rows::kMaxQueries * kChunkRows);
  for (idx_t q0 = 0; q0 < n; q0 += static_cast<idx_t>(Int8Rows::kMaxQueries)) {
    const auto nq = static_cast<std::size_t>(std::min<idx_t>(static_cast<idx_t>(Int8Rows::kMaxQueries), n - q0));
    QueryCode codes[Int8Rows::kMaxQueries];
    const QueryCode* code_of[Int8Rows::kMaxQueries];
    std::vector<Candidates> best;
    for (std::size_t q = 0; q < nq; ++q) {
      codes[q] = quantize_query(x + (static_cast<std::size_t>(q0) + q) * dim, dim, kernel);
      code_of[q] = &codes[q];
      best.emplace_back(keep);
    }
    for (std::size_t block = 0; block < int8_rows.blocks(); block += kChunkBlocks) {
      const std::size_t count = std::min(kChunkBlocks, int8_rows.blocks() - block);
      int8_rows.score(code_of, nq, block, count, scores.data(), kChunkRows, kernel);
      const std::size_t first_row = block * Int8Rows::kBlockRows;
      const std::size_t valid = std::min(count * Int8Rows::kBlockRows, rows - first_row);
      for (std::size_t q = 0; q < nq; ++q) {
        const float* chunk = scores.data() + q * kChunkRows;
        block_maxima(chunk, valid, maxima);
        if (block == 0 && !sel) start_above_block_maxima(maxima, best[q], ordered_maxima);
        best[q].offer(chunk, valid, static_cast<std::int64_t>(first_row), maxima.data(), sel);
      }
    }
    for (std::size_t q = 0; q < nq; ++q) {
      const float* query = x + (static_cast<std::size_t>(q0) + q) * dim;
      exact.clear();
      // The candidates' floats are scattered over the index and mostly out
      // of cache: ask for all of them before reading the first.
      for (const auto& candidate : best[q].best()) {
        const auto* bytes = reinterpret_cast<const char*>(get_xb() + static_cast<std::size_t>(candidate.second) * dim);
        for (std::size_t offset = 0; offset < dim * sizeof(float); offset += 64) __builtin_prefetch(bytes + offset);
      }
      for (const auto& [approximate, row] : best[q].best()) {
        const float score = kKernel(query, get_xb() + static_cast<std::size_t>(row) * dim, dim);
        // A NaN (a non-finite stored vector) would break the sort's ordering.
        exact.emplace_back(std::isnan(score) ? -std::numeric_limits<float>::infinity() : score, row);
      }
      // Best first; equal scores in row order, so results do not depend on
      // the order the reservoir kept them in.
      std::sort(exact.begin(), exact.end(), [](const auto& a, const auto& b) {
        return a.first != b.first ? a.first > b.first : a.second < b.second;
      });
      const idx_t out = (q0 + static_cast<idx_t>(q)) * k;
      for (idx_t j = 0; j < k; ++j) {
        const bool have = j < static_cast<idx_t>(exact.size());
        distances[out + j] = have ? exact[static_cast<std::size_t>(j)].first : -std::numeric_limits<float>::infinity();
        labels[out + j] = have ? exact[static_cast<std::size_t>(j)].second : -1;
      }
    }
  }
}

Int8FlatIP::Int8FlatIP(idx_t d)
    : faiss::IndexFlatCodes(static_cast<std::size_t>(d) + sizeof(float), d, faiss::METRIC_INNER_PRODUCT) {}

void Int8FlatIP::sa_encode(idx_t n, const float* x, std::uint8_t* bytes) const {
  const auto dim = static_cast<std::size_t>(d);
  const auto encode = [&](idx_t begin, idx_t end) {
    for (idx_t i = begin; i < end; ++i) {
      std::uint8_t* code = bytes + static_cast<std::size_t>(i) * code_size;
      const float scale =
          quantize_row(x + static_cast<std::size_t>(i) * dim, dim, reinterpret_cast<std::int8_t*>(code));
      std::memcpy(code + dim, &scale, sizeof scale);
    }
  };
  // A loaded index encodes all its rows at once (millions at a restart):
  // those are split over the cores; an insert's few rows stay here.
  constexpr std::size_t kRowsPerThread = std::size_t{1} << 16;
  const auto rows = static_cast<std::size_t>(n);
  const std::size_t threads = detail::threads_for(rows, kRowsPerThread);
  detail::run_parts(threads, threads, [&](std::size_t part) {
    encode(static_cast<idx_t>(rows * part / threads), static_cast<idx_t>(rows * (part + 1) / threads));
  });
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
               [&](const float* q, idx_t row) { return int8_code_inner_product(q, codes.data() + row * code_size, dim); });
}

}  // namespace rapidqa::index

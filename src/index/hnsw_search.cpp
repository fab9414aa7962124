#include "index/hnsw_search.h"

#include <faiss/IndexHNSW.h>
#include <faiss/impl/IDSelector.h>
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <utility>

#include "common/simd_accumulate.h"
#include "index/int8_rows.h"
#include "index/simd_flat_index.h"

namespace rapidqa::index {
namespace {

// One query against Int8FlatIP codes (d bytes, then the float scale).
class CodeScorer {
 public:
  CodeScorer(const float* query, std::size_t d, const std::uint8_t* codes)
      : query_(query), d_(d), code_size_(d + sizeof(float)), codes_(codes),
        vnni_(scan_kernel() == ScanKernel::kAvx512Vnni) {
    if (vnni_) {
      const QueryCode code = quantize_query(query, d, ScanKernel::kAvx512Vnni);
      // Padded to whole 64-byte loads; the code's tail load is masked, so
      // what the padding holds is multiplied by zero.
      bytes_.assign((d + 63) / 64 * 64, 0);
      std::copy(code.bytes.begin(), code.bytes.begin() + static_cast<std::ptrdiff_t>(d), bytes_.begin());
      scale_ = code.scale;
    }
  }

  void prefetch(std::int64_t row) const {
    const char* at = reinterpret_cast<const char*>(code(row));
    for (std::size_t offset = 0; offset < code_size_; offset += 64) _mm_prefetch(at + offset, _MM_HINT_T0);
    _mm_prefetch(at + code_size_ - 1, _MM_HINT_T0);
  }

  float score(std::int64_t row) const {
    return vnni_ ? score_vnni(code(row)) : int8_code_inner_product(query_, code(row), d_);
  }

 private:
  const std::uint8_t* code(std::int64_t row) const { return codes_ + static_cast<std::size_t>(row) * code_size_; }

  // sum (u_j - 128) c_j: vpdpbusd gives sum u_j c_j, and against a vector
  // of ones the code sum to subtract.
  __attribute__((target("avx512f,avx512bw,avx512vnni"))) float score_vnni(const std::uint8_t* code) const {
    __m512i dot = _mm512_setzero_si512(), sum = _mm512_setzero_si512();
    const __m512i ones = _mm512_set1_epi8(1);
    std::size_t j = 0;
    for (; j + 64 <= d_; j += 64) {
      const __m512i c = _mm512_loadu_si512(code + j);
      simd::dot_accumulate_u8s8(dot, _mm512_loadu_si512(bytes_.data() + j), c);
      simd::dot_accumulate_u8s8(sum, ones, c);
    }
    if (j < d_) {
      const __m512i c = _mm512_maskz_loadu_epi8((~0ULL) >> (64 - (d_ - j)), code + j);
      simd::dot_accumulate_u8s8(dot, _mm512_loadu_si512(bytes_.data() + j), c);
      simd::dot_accumulate_u8s8(sum, ones, c);
    }
    const std::int32_t centred = _mm512_reduce_add_epi32(_mm512_sub_epi32(dot, _mm512_slli_epi32(sum, 7)));
    float code_scale;
    std::memcpy(&code_scale, code + d_, sizeof code_scale);
    return static_cast<float>(centred) * code_scale * scale_;
  }

  const float* query_;
  std::size_t d_, code_size_;
  const std::uint8_t* codes_;
  bool vnni_;
  std::vector<std::uint8_t> bytes_;
  float scale_ = 1;
};

// Per-thread state reused across searches: marks with an epoch, so a new
// search clears nothing, and the two heaps.
struct Scratch {
  std::vector<std::uint16_t> marks;
  std::uint16_t epoch = 0;
  std::vector<std::pair<float, std::int64_t>> candidates;  // max-heap: the best is expanded next
  std::vector<std::pair<float, std::int64_t>> results;     // min-heap: the worst kept is dropped first
  std::vector<std::int64_t> fresh;

  void begin(std::size_t rows) {
    if (marks.size() < rows) marks.resize(rows, 0);
    if (++epoch == 0) {  // wrapped: old marks could read as this search's
      std::fill(marks.begin(), marks.end(), 0);
      epoch = 1;
    }
    candidates.clear();
    results.clear();
  }
  // True the first time a row is seen in this search.
  bool visit(std::int64_t row) {
    auto& mark = marks[static_cast<std::size_t>(row)];
    if (mark == epoch) return false;
    mark = epoch;
    return true;
  }
};

}  // namespace

std::vector<GraphHit> search_int8_graph(const faiss::IndexHNSW& index, const float* query, std::size_t count,
                                        int breadth, const faiss::IDSelector* sel) {
  const faiss::HNSW& graph = index.hnsw;
  std::vector<GraphHit> hits;
  if (count == 0 || index.ntotal == 0 || graph.entry_point < 0) return hits;
  const auto& storage = static_cast<const faiss::IndexFlatCodes&>(*index.storage);
  const CodeScorer scorer(query, static_cast<std::size_t>(index.d), storage.codes.data());
  const auto neighbours_of = [&graph](std::int64_t node, int level) {
    const std::size_t base = graph.offsets[static_cast<std::size_t>(node)];
    return std::make_pair(graph.neighbors.data() + base + graph.cum_nneighbor_per_level[level],
                          graph.neighbors.data() + base + graph.cum_nneighbor_per_level[level + 1]);
  };

  // Upper levels: move to a better neighbour while there is one.
  std::int64_t entry = graph.entry_point;
  float entry_score = scorer.score(entry);
  for (int level = graph.max_level; level >= 1; --level) {
    for (bool moved = true; moved;) {
      moved = false;
      const auto [first, last] = neighbours_of(entry, level);
      for (auto it = first; it != last && *it >= 0; ++it) scorer.prefetch(*it);
      for (auto it = first; it != last && *it >= 0; ++it) {
        const float s = scorer.score(*it);
        if (s > entry_score) entry_score = s, entry = *it, moved = true;
      }
    }
  }

  // Level 0: best-first, keeping the `ef` best seen.
  thread_local Scratch scratch;
  scratch.begin(static_cast<std::size_t>(index.ntotal));
  const std::size_t ef = std::max<std::size_t>(static_cast<std::size_t>(std::max(breadth, 1)), count);
  auto& candidates = scratch.candidates;
  auto& results = scratch.results;
  const auto keep = [&](float s, std::int64_t row) {
    if (sel && !sel->is_member(row)) return;
    results.emplace_back(s, row);
    std::push_heap(results.begin(), results.end(), std::greater<>());
    if (results.size() > ef) {
      std::pop_heap(results.begin(), results.end(), std::greater<>());
      results.pop_back();
    }
  };
  scratch.visit(entry);
  candidates.emplace_back(entry_score, entry);
  keep(entry_score, entry);
  while (!candidates.empty()) {
    const auto [score, node] = candidates.front();
    if (results.size() >= ef && score < results.front().first) break;
    std::pop_heap(candidates.begin(), candidates.end());
    candidates.pop_back();
    // Gather and prefetch every new neighbour before scoring any: their
    // codes arrive while the first are being scored.
    scratch.fresh.clear();
    const auto [first, last] = neighbours_of(node, 0);
    for (auto it = first; it != last && *it >= 0; ++it) {
      if (!scratch.visit(*it)) continue;
      scratch.fresh.push_back(*it);
      scorer.prefetch(*it);
    }
    for (const std::int64_t row : scratch.fresh) {
      const float s = scorer.score(row);
      if (results.size() >= ef && !(s > results.front().first)) continue;
      candidates.emplace_back(s, row);
      std::push_heap(candidates.begin(), candidates.end());
      keep(s, row);
    }
  }
  std::sort(results.begin(), results.end(), std::greater<>());
  for (std::size_t i = 0; i < std::min(count, results.size()); ++i) hits.push_back({results[i].first, results[i].second});
  return hits;
}

}  // namespace rapidqa::index

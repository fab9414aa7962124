#include "index/hnsw_search.h"

#include <faiss/IndexHNSW.h>
#include <faiss/impl/IDSelector.h>

#include <algorithm>
#include <functional>
#include <utility>

#include "index/int8_code_scorer.h"

namespace rapidqa::index {
namespace {

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
  const Int8CodeScorer scorer(query, static_cast<std::size_t>(index.d));
  const std::size_t code_size = storage.code_size;
  const std::uint8_t* codes = storage.codes.data();
  const auto code = [&](std::int64_t row) { return codes + static_cast<std::size_t>(row) * code_size; };
  const auto neighbours_of = [&graph](std::int64_t node, int level) {
    const std::size_t base = graph.offsets[static_cast<std::size_t>(node)];
    return std::make_pair(graph.neighbors.data() + base + graph.cum_nneighbor_per_level[level],
                          graph.neighbors.data() + base + graph.cum_nneighbor_per_level[level + 1]);
  };

  // Upper levels: move to a better neighbour while there is one.
  std::int64_t entry = graph.entry_point;
  float entry_score = scorer.score(code(entry));
  for (int level = graph.max_level; level >= 1; --level) {
    for (bool moved = true; moved;) {
      moved = false;
      const auto [first, last] = neighbours_of(entry, level);
      for (auto it = first; it != last && *it >= 0; ++it) scorer.prefetch(code(*it));
      for (auto it = first; it != last && *it >= 0; ++it) {
        const float s = scorer.score(code(*it));
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
      scorer.prefetch(code(*it));
    }
    for (const std::int64_t row : scratch.fresh) {
      const float s = scorer.score(code(row));
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

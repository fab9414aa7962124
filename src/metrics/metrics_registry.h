// The engine's live metrics: one latency histogram per stage and the
// counters behind MetricsSnapshot.
//
// Thread safety: thread-safe (atomics only).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>

#include "metrics/latency_histogram.h"
#include "rapidqa/answer.h"
#include "rapidqa/metrics.h"

namespace rapidqa::metrics {

class MetricsRegistry {
 public:
  void record_answer(const Answer& answer, bool looked_up_result_cache, bool looked_up_knowledge_cache,
                     bool looked_up_semantic_cache);
  void record_error() { errors_.fetch_add(1, std::memory_order_relaxed); }
  MetricsSnapshot snapshot() const;
  void reset();

 private:
  std::array<LatencyHistogram, kStageCount> stages_;
  std::atomic<std::uint64_t> asks_{0}, errors_{0};
  std::atomic<std::uint64_t> result_hits_{0}, result_misses_{0};
  std::atomic<std::uint64_t> semantic_hits_{0}, semantic_misses_{0};
  std::atomic<std::uint64_t> knowledge_hits_{0}, knowledge_misses_{0};
  std::atomic<std::uint64_t> fallbacks_{0}, degraded_{0};
};

}  // namespace rapidqa::metrics

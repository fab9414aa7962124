// The engine's live metrics: one latency histogram per stage and the
// counters behind MetricsSnapshot.
//
// Thread safety: thread-safe: recording uses atomics only; closing a window
// takes a mutex (a sample recorded while a window closes may land in the
// next window).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>

#include "metrics/latency_histogram.h"
#include "rapidqa/answer.h"
#include "rapidqa/load_sample.h"
#include "rapidqa/clock.h"
#include "rapidqa/metrics.h"

namespace rapidqa::metrics {

class MetricsRegistry {
 public:
  MetricsRegistry() : clock_(steady_clock_instance()), window_started_(clock_->now()) {}
  // Before any use (QAEngine::create): the windows' clock and the rule.
  void configure(std::shared_ptr<Clock> clock, LatencyAnomalyOptions rule) {
    clock_ = std::move(clock);
    rule_ = rule;
    window_started_ = clock_->now();
  }

  void record_answer(const Answer& answer, bool looked_up_result_cache, bool looked_up_knowledge_cache,
                     bool looked_up_semantic_cache);
  void record_error() { errors_.fetch_add(1, std::memory_order_relaxed); }
  MetricsSnapshot snapshot() const;
  void reset();

  // Closes the current window of total latency (since the previous call):
  // its p99 and QPS, for the AutoTuner, and the anomaly check against the
  // moving baseline of earlier windows.
  LoadSample roll_window();

 private:
  std::array<LatencyHistogram, kStageCount> stages_;
  std::atomic<std::uint64_t> asks_{0}, errors_{0};
  std::atomic<std::uint64_t> result_hits_{0}, result_misses_{0};
  std::atomic<std::uint64_t> semantic_hits_{0}, semantic_misses_{0};
  std::atomic<std::uint64_t> knowledge_hits_{0}, knowledge_misses_{0};
  std::atomic<std::uint64_t> fallbacks_{0}, degraded_{0};

  std::shared_ptr<Clock> clock_;
  LatencyAnomalyOptions rule_;
  // Two windows: asks record into the current one while roll_window reads
  // and clears the other.
  std::array<LatencyHistogram, 2> windows_;
  std::array<std::atomic<std::uint64_t>, 2> window_degraded_{};
  std::atomic<std::size_t> current_window_{0};
  mutable std::mutex window_mu_;
  Clock::time_point window_started_;   // guarded by window_mu_
  std::size_t baseline_windows_ = 0;   // guarded by window_mu_
  double baseline_p99_ns_ = 0;         // guarded by window_mu_
  LatencyAnomaly anomaly_;             // guarded by window_mu_
};

}  // namespace rapidqa::metrics

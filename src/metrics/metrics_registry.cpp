#include "metrics/metrics_registry.h"

#include <fmt/format.h>

namespace rapidqa {

double MetricsSnapshot::result_cache_hit_ratio() const {
  const auto total = result_cache_hits + result_cache_misses;
  return total == 0 ? 0.0 : static_cast<double>(result_cache_hits) / static_cast<double>(total);
}

double MetricsSnapshot::semantic_cache_hit_ratio() const {
  const auto total = semantic_cache_hits + semantic_cache_misses;
  return total == 0 ? 0.0 : static_cast<double>(semantic_cache_hits) / static_cast<double>(total);
}

std::string MetricsSnapshot::format_table() const {
  auto us = [](std::chrono::nanoseconds ns) { return static_cast<double>(ns.count()) / 1000.0; };
  std::string out = fmt::format("{:<16}{:>10}{:>12}{:>12}{:>12}{:>12}\n", "stage", "count", "p50 us", "p95 us",
                                "p99 us", "mean us");
  for (std::size_t i = 0; i < kStageCount; ++i) {
    const auto& s = stages[i];
    out += fmt::format("{:<16}{:>10}{:>12.1f}{:>12.1f}{:>12.1f}{:>12.1f}\n", stage_name(static_cast<Stage>(i)),
                       s.count, us(s.p50), us(s.p95), us(s.p99), us(s.mean));
  }
  out += fmt::format("asks {}  errors {}  result-cache hit ratio {:.3f}  semantic-cache hit ratio {:.3f}  "
                     "fallback {}  degraded {}  rebuilds {} (dropped {})\n",
                     asks, errors, result_cache_hit_ratio(), semantic_cache_hit_ratio(), fallback_answers,
                     degraded_answers, rebuilds_completed, rebuilds_dropped);
  // A relay has either connected or counted an outage; without one the line stays out.
  if (redis_connected || redis_outages > 0) {
    out += fmt::format("redis {}  outages {}  changes published {} received {} replayed {} queued {} dropped {}  "
                       "malformed {}  gaps {}\n",
                       redis_connected ? "connected" : "down", redis_outages, changes_published, changes_received,
                       changes_replayed, changes_queued, changes_dropped, changes_malformed, redis_gaps);
  }
  return out;
}

namespace metrics {

void MetricsRegistry::record_answer(const Answer& answer, bool looked_up_result_cache,
                                    bool looked_up_semantic_cache) {
  asks_.fetch_add(1, std::memory_order_relaxed);
  for (std::size_t i = 0; i < kStageCount; ++i) {
    const auto stage = static_cast<Stage>(i);
    // Stages that did not run are not recorded, so their percentiles
    // describe only the requests that paid for them.
    if (answer.timings[stage].count() > 0 || stage == Stage::kTotal) stages_[i].record(answer.timings[stage]);
  }
  if (looked_up_result_cache) {
    (answer.tier == AnswerTier::kResultCache ? result_hits_ : result_misses_).fetch_add(1, std::memory_order_relaxed);
  }
  if (looked_up_semantic_cache) {
    (answer.tier == AnswerTier::kSemanticCache ? semantic_hits_ : semantic_misses_)
        .fetch_add(1, std::memory_order_relaxed);
  }
  if (answer.tier == AnswerTier::kFallback) fallbacks_.fetch_add(1, std::memory_order_relaxed);
  if (answer.degraded) degraded_.fetch_add(1, std::memory_order_relaxed);
}

MetricsSnapshot MetricsRegistry::snapshot() const {
  MetricsSnapshot s;
  for (std::size_t i = 0; i < kStageCount; ++i) s.stages[i] = stages_[i].summary();
  s.asks = asks_.load(std::memory_order_relaxed);
  s.errors = errors_.load(std::memory_order_relaxed);
  s.result_cache_hits = result_hits_.load(std::memory_order_relaxed);
  s.result_cache_misses = result_misses_.load(std::memory_order_relaxed);
  s.semantic_cache_hits = semantic_hits_.load(std::memory_order_relaxed);
  s.semantic_cache_misses = semantic_misses_.load(std::memory_order_relaxed);
  s.fallback_answers = fallbacks_.load(std::memory_order_relaxed);
  s.degraded_answers = degraded_.load(std::memory_order_relaxed);
  return s;
}

void MetricsRegistry::reset() {
  for (auto& h : stages_) h.reset();
  for (auto* c : {&asks_, &errors_, &result_hits_, &result_misses_, &semantic_hits_, &semantic_misses_, &fallbacks_,
                  &degraded_}) {
    c->store(0, std::memory_order_relaxed);
  }
}

}  // namespace metrics
}  // namespace rapidqa

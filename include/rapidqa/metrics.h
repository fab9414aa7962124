// Metrics snapshot: per-stage latency percentiles, request counts and cache
// hit ratios, as returned by QAEngine::metrics(). Percentiles come from
// log-spaced histogram buckets (about 4% resolution), so they are estimates.
//
// Thread safety: value types; thread-compatible.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <string>

#include "rapidqa/answer.h"
#include "rapidqa/export.h"

namespace rapidqa {

struct LatencySummary {
  std::uint64_t count = 0;            // measurements recorded
  std::chrono::nanoseconds mean{0};
  std::chrono::nanoseconds p50{0};
  std::chrono::nanoseconds p95{0};
  std::chrono::nanoseconds p99{0};
  std::chrono::nanoseconds max{0};    // upper bound of the highest bucket seen
};

struct RAPIDQA_EXPORT MetricsSnapshot {
  std::array<LatencySummary, kStageCount> stages{};  // indexed by Stage
  std::uint64_t asks = 0;             // ask calls that returned an Answer
  std::uint64_t errors = 0;           // ask calls that returned an error
  std::uint64_t result_cache_hits = 0;
  std::uint64_t result_cache_misses = 0;
  std::uint64_t semantic_cache_hits = 0;
  std::uint64_t semantic_cache_misses = 0;
  std::uint64_t fallback_answers = 0; // nothing matched well enough
  std::uint64_t degraded_answers = 0;
  std::uint64_t rebuilds_completed = 0;  // hot questions re-answered in the background
  std::uint64_t rebuilds_dropped = 0;    // rebuilds refused because the queue was full
  // Sharing changes through Redis (all zero without EngineOptions::redis;
  // counted since create, reset_metrics leaves them).
  bool redis_connected = false;          // subscribed and able to publish now
  std::uint64_t redis_outages = 0;       // times Redis was lost, or unreachable at start
  std::uint64_t changes_published = 0;   // this instance's changes Redis accepted
  std::uint64_t changes_received = 0;    // peers' changes applied as they happened
  std::uint64_t changes_replayed = 0;    // peers' changes applied from the change log after a reconnect
  std::uint64_t changes_queued = 0;      // this instance's changes waiting for Redis now
  std::uint64_t changes_dropped = 0;     // this instance's changes lost (queue full, or refused by Redis)
  std::uint64_t changes_malformed = 0;   // messages from Redis skipped because they could not be read
  std::uint64_t redis_gaps = 0;          // times every cached answer was dropped because changes may have been missed

  const LatencySummary& stage(Stage s) const { return stages[static_cast<std::size_t>(s)]; }
  // hits / (hits + misses), 0 when there were no lookups.
  double result_cache_hit_ratio() const;
  double semantic_cache_hit_ratio() const;
  // A fixed-width table of every stage's count and p50/p95/p99 in µs.
  std::string format_table() const;
};

}  // namespace rapidqa

// Metrics snapshot: per-stage latency percentiles, request counts and cache
// hit ratios, as returned by QAEngine::metrics(), with each component's
// counters in a struct of its own (snapshot.result_cache.hits,
// snapshot.batcher.batches, snapshot.relay.connected, ...). Percentiles come from
// log-spaced histogram buckets (about 4% resolution), so they are estimates.
//
// Thread safety: value types; thread-compatible.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "rapidqa/answer.h"
#include "rapidqa/export.h"
#include "rapidqa/load_sample.h"

namespace rapidqa {

// Upper bounds of the cumulative buckets exported to Prometheus, in seconds.
inline constexpr std::array<double, 18> kLatencyBucketSeconds = {
    10e-6, 25e-6, 50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3,
    10e-3, 25e-3, 50e-3, 100e-3, 250e-3, 500e-3, 1.0,    2.5,    5.0};

struct LatencySummary {
  std::uint64_t count = 0;            // measurements recorded
  std::chrono::nanoseconds mean{0};
  std::chrono::nanoseconds p50{0};
  std::chrono::nanoseconds p95{0};
  std::chrono::nanoseconds p99{0};
  std::chrono::nanoseconds max{0};    // upper bound of the highest bucket seen
  std::chrono::nanoseconds sum{0};    // of every measurement
  // at_most[i]: measurements at or under kLatencyBucketSeconds[i] (cumulative).
  std::array<std::uint64_t, kLatencyBucketSeconds.size()> at_most{};
};

// When the anomaly flag rises (see LatencyAnomaly); windows are closed by
// QAEngine::tuning().recent_load() (the AutoTuner's sampler).
struct LatencyAnomalyOptions {
  double factor = 3.0;                 // flag when a window's p99 exceeds factor x the baseline
  std::uint64_t min_requests = 50;     // windows with fewer requests neither flag nor move the baseline
  std::size_t warmup_windows = 3;      // windows that form the baseline before anything is flagged
  double baseline_weight = 0.1;        // share of each new window in the moving baseline
};

// Whether latency jumped: the p99 of the latest window against a moving
// baseline of earlier windows' p99.
struct LatencyAnomaly {
  bool active = false;                    // latest p99 above factor x baseline
  std::chrono::nanoseconds recent_p99{0}; // the latest window's
  std::chrono::nanoseconds baseline_p99{0};
  std::uint64_t windows_flagged = 0;      // windows that raised the flag so far
};

// One cache tier's lookups as the engine counted them (a request that
// skips the tier, or a tier that is disabled, counts nothing).
struct RAPIDQA_EXPORT TierLookupMetrics {
  std::uint64_t hits = 0;
  std::uint64_t misses = 0;
  // hits / (hits + misses), 0 when there were no lookups.
  double hit_ratio() const;
};

// The three tiers together (result, knowledge, semantic).
struct CacheTierTotals {
  std::uint64_t evictions = 0;     // answers dropped to stay within the entry or byte bounds
  std::uint64_t expirations = 0;   // answers dropped because their TTL passed
  std::uint64_t invalidations = 0; // answers dropped because their knowledge changed
  std::uint64_t displacements = 0; // answers dropped because an added or changed entry answers better
  // The semantic tier's error-bound mode (SemanticCacheOptions::
  // target_error_rate): cached answers checked against full retrieval, how
  // many named another entry, and would-be hits answered by retrieval to
  // check them.
  std::uint64_t semantic_outcomes = 0;
  std::uint64_t semantic_wrong_outcomes = 0;
  std::uint64_t semantic_verifications = 0;
  std::size_t entries = 0;         // answers held now
  std::size_t bytes = 0;           // estimated bytes held now
};

// The model encoder's batcher (all zero when the encoder is called inline).
struct EncoderBatcherMetrics {
  std::size_t queue_depth = 0;             // requests waiting now
  std::uint64_t batches = 0;               // forward passes run
  std::uint64_t rejected = 0;              // requests refused by the full queue
  std::uint64_t timed_out = 0;             // requests whose deadline passed in the queue
  std::vector<std::uint64_t> batch_sizes;  // [n]: batches of n requests
  std::size_t max_batch_size = 0;          // current limit (the AutoTuner may move it)
  std::uint64_t tuner_moves = 0;           // AutoTuner adjustments of the limits
};

// Sharing changes through Redis (all zero without EngineOptions::redis;
// counted since create, reset_metrics leaves them).
struct ChangeRelayMetrics {
  bool connected = false;       // subscribed and able to publish now
  std::uint64_t outages = 0;    // times Redis was lost, or unreachable at start
  std::uint64_t published = 0;  // this instance's changes Redis accepted
  std::uint64_t received = 0;   // peers' changes applied as they happened
  std::uint64_t replayed = 0;   // peers' changes applied from the change log after a reconnect
  std::uint64_t queued = 0;     // this instance's changes waiting for Redis now
  std::uint64_t dropped = 0;    // this instance's changes lost (queue full, or refused by Redis)
  std::uint64_t malformed = 0;  // messages from Redis skipped because they could not be read
  std::uint64_t gaps = 0;       // times every cached answer was dropped because changes may have been missed
};

// Hot questions re-answered in the background after a change.
struct RebuildMetrics {
  std::uint64_t completed = 0;  // re-answered
  std::uint64_t dropped = 0;    // refused because the queue was full
};

// One endpoint of a remote model engine, as the encoder that calls it
// counted since it was made.
struct RemoteEndpointMetrics {
  std::string url;
  std::uint64_t requests = 0;   // HTTP requests sent to it, retries and hedges included
  std::uint64_t failures = 0;   // of those: refused, timed out, an error status, an unreadable answer
  std::uint64_t retries = 0;    // requests sent to it as a retry
  std::uint64_t hedges = 0;     // requests sent to it as a hedge
  std::size_t in_flight = 0;    // requests waiting for it now
  bool ejected = false;         // left out now after consecutive failures
  std::uint64_t ejections = 0;  // times it was left out
  LatencySummary latency;       // of its successful requests
};

enum class BreakerState { kClosed, kOpen, kHalfOpen };

// A remote model engine (its endpoints together) and the circuit breaker
// in front of it.
struct RemoteEngineMetrics {
  std::string name;                        // the encoder's name()
  BreakerState breaker = BreakerState::kClosed;
  std::uint64_t breaker_opens = 0;         // times the breaker opened
  std::uint64_t refused_by_breaker = 0;    // calls failed at once because it was open
  std::uint64_t retry_budget_spent = 0;    // retries or hedges not sent because the budget was spent
  std::vector<RemoteEndpointMetrics> endpoints;
};

// Generated answers (EngineOptions::generator), as the generator counted.
struct GenerationMetrics {
  std::uint64_t generations = 0;        // completed
  std::uint64_t failures = 0;           // failed or given up (the engine then fell back or failed the ask)
  std::uint64_t prompt_tokens = 0;      // as the engine reported them
  std::uint64_t completion_tokens = 0;
  LatencySummary time_to_first_token;   // of the generations that produced text
};

struct RAPIDQA_EXPORT MetricsSnapshot {
  std::array<LatencySummary, kStageCount> stages{};  // indexed by Stage
  std::uint64_t asks = 0;             // ask calls that returned an Answer
  std::uint64_t errors = 0;           // ask calls that returned an error
  std::uint64_t fallback_answers = 0; // nothing matched well enough
  std::uint64_t degraded_answers = 0;
  TierLookupMetrics result_cache;
  TierLookupMetrics knowledge_cache;
  TierLookupMetrics semantic_cache;
  CacheTierTotals caches;
  EncoderBatcherMetrics batcher;
  LatencyAnomaly anomaly;
  ChangeRelayMetrics relay;
  RebuildMetrics rebuilds;
  std::vector<RemoteEngineMetrics> remote_engines;  // remote model engines the encoder and generator call
  GenerationMetrics generation;

  const LatencySummary& stage(Stage s) const { return stages[static_cast<std::size_t>(s)]; }
  [[deprecated("use result_cache.hit_ratio()")]] double result_cache_hit_ratio() const { return result_cache.hit_ratio(); }
  [[deprecated("use semantic_cache.hit_ratio()")]] double semantic_cache_hit_ratio() const {
    return semantic_cache.hit_ratio();
  }
  [[deprecated("use knowledge_cache.hit_ratio()")]] double knowledge_cache_hit_ratio() const {
    return knowledge_cache.hit_ratio();
  }
  // A fixed-width table of every stage's count and p50/p95/p99 in µs.
  std::string format_table() const;
  // Every metric in the Prometheus text exposition format (version 0.0.4):
  // per-stage latency histograms and quantiles, counters, gauges, the
  // encoder's batch-size distribution; names start with rapidqa_.
  std::string format_prometheus() const;
};

}  // namespace rapidqa

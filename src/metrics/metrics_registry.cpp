#include "metrics/metrics_registry.h"

#include <cmath>
#include <tuple>

#include <fmt/format.h>

namespace rapidqa {

namespace {
double ratio(std::uint64_t hits, std::uint64_t misses) {
  const auto total = hits + misses;
  return total == 0 ? 0.0 : static_cast<double>(hits) / static_cast<double>(total);
}
}  // namespace

double TierLookupMetrics::hit_ratio() const { return ratio(hits, misses); }

std::string MetricsSnapshot::format_table() const {
  auto us = [](std::chrono::nanoseconds ns) { return static_cast<double>(ns.count()) / 1000.0; };
  std::string out = fmt::format("{:<16}{:>10}{:>12}{:>12}{:>12}{:>12}\n", "stage", "count", "p50 us", "p95 us",
                                "p99 us", "mean us");
  for (std::size_t i = 0; i < kStageCount; ++i) {
    const auto& s = stages[i];
    out += fmt::format("{:<16}{:>10}{:>12.1f}{:>12.1f}{:>12.1f}{:>12.1f}\n", stage_name(static_cast<Stage>(i)),
                       s.count, us(s.p50), us(s.p95), us(s.p99), us(s.mean));
  }
  out += fmt::format("asks {}  errors {}  hit ratios: result {:.3f}  knowledge {:.3f}  semantic {:.3f}  "
                     "fallback {}  degraded {}  rebuilds {} (dropped {})\n",
                     asks, errors, result_cache.hit_ratio(), knowledge_cache.hit_ratio(), semantic_cache.hit_ratio(),
                     fallback_answers, degraded_answers, rebuilds.completed, rebuilds.dropped);
  out += fmt::format("caches: {} answers, {} bytes; evicted {}  expired {}  invalidated {}  displaced {}\n",
                     caches.entries, caches.bytes, caches.evictions, caches.expirations, caches.invalidations,
                     caches.displacements);
  // A relay has either connected or counted an outage; without one the line stays out.
  if (relay.connected || relay.outages > 0) {
    out += fmt::format("redis {}  outages {}  changes published {} received {} replayed {} queued {} dropped {}  "
                       "malformed {}  gaps {}\n",
                       relay.connected ? "connected" : "down", relay.outages, relay.published, relay.received,
                       relay.replayed, relay.queued, relay.dropped, relay.malformed, relay.gaps);
  }
  for (const auto& e : remote_engines) {
    static constexpr const char* kBreaker[] = {"closed", "open", "half-open"};
    out += fmt::format("remote {}: breaker {} (opened {}, refused {})\n", e.name,
                       kBreaker[static_cast<int>(e.breaker)], e.breaker_opens, e.refused_by_breaker);
    for (const auto& p : e.endpoints) {
      out += fmt::format("  {}: {} requests, {} failed, {} retries, {} hedges{}  p50 {} us  p99 {} us\n", p.url,
                         p.requests, p.failures, p.retries, p.hedges, p.ejected ? ", ejected" : "",
                         p.latency.p50.count() / 1000, p.latency.p99.count() / 1000);
    }
  }
  return out;
}

namespace {

double seconds(std::chrono::nanoseconds ns) { return static_cast<double>(ns.count()) / 1e9; }

// Writes one metric family: the HELP and TYPE lines, then its samples.
class PrometheusWriter {
 public:
  void family(const char* name, const char* type, const char* help) {
    out_ += fmt::format("# HELP rapidqa_{} {}\n# TYPE rapidqa_{} {}\n", name, help, name, type);
  }
  void sample(const std::string& name, const std::string& labels, double value) {
    out_ += labels.empty() ? fmt::format("rapidqa_{} {}\n", name, format_value(value))
                           : fmt::format("rapidqa_{}{{{}}} {}\n", name, labels, format_value(value));
  }
  void single(const char* name, const char* type, const char* help, double value) {
    family(name, type, help);
    sample(name, "", value);
  }
  std::string take() { return std::move(out_); }

 private:
  static std::string format_value(double v) {
    if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
    return fmt::format("{}", v);
  }
  std::string out_;
};

}  // namespace

std::string MetricsSnapshot::format_prometheus() const {
  PrometheusWriter w;
  w.family("stage_latency_seconds", "histogram", "Time spent in each pipeline stage, per request that ran it.");
  for (std::size_t i = 0; i < kStageCount; ++i) {
    const auto& st = stages[i];
    const std::string stage = stage_name(static_cast<Stage>(i));
    for (std::size_t b = 0; b < kLatencyBucketSeconds.size(); ++b) {
      w.sample("stage_latency_seconds_bucket", fmt::format("stage=\"{}\",le=\"{}\"", stage, kLatencyBucketSeconds[b]),
               static_cast<double>(st.at_most[b]));
    }
    w.sample("stage_latency_seconds_bucket", fmt::format("stage=\"{}\",le=\"+Inf\"", stage), static_cast<double>(st.count));
    w.sample("stage_latency_seconds_sum", fmt::format("stage=\"{}\"", stage), seconds(st.sum));
    w.sample("stage_latency_seconds_count", fmt::format("stage=\"{}\"", stage), static_cast<double>(st.count));
  }
  w.family("stage_latency_quantile_seconds", "gauge", "Per-stage latency percentiles since start (4% resolution).");
  for (std::size_t i = 0; i < kStageCount; ++i) {
    const std::string stage = stage_name(static_cast<Stage>(i));
    for (const auto& [q, v] : {std::make_pair("0.5", stages[i].p50), std::make_pair("0.95", stages[i].p95),
                               std::make_pair("0.99", stages[i].p99)}) {
      w.sample("stage_latency_quantile_seconds", fmt::format("stage=\"{}\",quantile=\"{}\"", stage, q), seconds(v));
    }
  }
  w.single("asks_total", "counter", "Asks that returned an answer.", static_cast<double>(asks));
  w.single("errors_total", "counter", "Asks refused for bad input.", static_cast<double>(errors));
  w.family("cache_lookups_total", "counter", "Cache lookups by tier and outcome.");
  for (const auto& [tier, hits, misses] :
       {std::make_tuple("result", result_cache.hits, result_cache.misses),
        std::make_tuple("knowledge", knowledge_cache.hits, knowledge_cache.misses),
        std::make_tuple("semantic", semantic_cache.hits, semantic_cache.misses)}) {
    w.sample("cache_lookups_total", fmt::format("tier=\"{}\",outcome=\"hit\"", tier), static_cast<double>(hits));
    w.sample("cache_lookups_total", fmt::format("tier=\"{}\",outcome=\"miss\"", tier), static_cast<double>(misses));
  }
  w.family("cache_hit_ratio", "gauge", "Hits over lookups since start, by tier.");
  w.sample("cache_hit_ratio", "tier=\"result\"", result_cache.hit_ratio());
  w.sample("cache_hit_ratio", "tier=\"knowledge\"", knowledge_cache.hit_ratio());
  w.sample("cache_hit_ratio", "tier=\"semantic\"", semantic_cache.hit_ratio());
  w.family("cache_removals_total", "counter", "Cached answers dropped, by reason (all tiers).");
  for (const auto& [reason, n] : {std::make_pair("evicted", caches.evictions), std::make_pair("expired", caches.expirations),
                                  std::make_pair("invalidated", caches.invalidations),
                                  std::make_pair("displaced", caches.displacements)}) {
    w.sample("cache_removals_total", fmt::format("reason=\"{}\"", reason), static_cast<double>(n));
  }
  w.family("semantic_outcomes_total", "counter",
           "Semantic-cache answers checked against full retrieval (error-bound mode), by verdict.");
  w.sample("semantic_outcomes_total", "verdict=\"same_entry\"",
           static_cast<double>(caches.semantic_outcomes - caches.semantic_wrong_outcomes));
  w.sample("semantic_outcomes_total", "verdict=\"other_entry\"", static_cast<double>(caches.semantic_wrong_outcomes));
  w.single("semantic_verifications_total", "counter",
           "Would-be semantic hits answered by retrieval to check them (error-bound mode).",
           static_cast<double>(caches.semantic_verifications));
  w.single("cache_entries", "gauge", "Cached answers held (all tiers).", static_cast<double>(caches.entries));
  w.single("cache_bytes", "gauge", "Estimated bytes held by the caches.", static_cast<double>(caches.bytes));
  w.single("fallback_answers_total", "counter", "Questions nothing matched well enough.", static_cast<double>(fallback_answers));
  w.single("degraded_answers_total", "counter", "Answers given by a cheaper path to meet a deadline or load.",
           static_cast<double>(degraded_answers));
  w.family("rebuilds_total", "counter", "Hot questions re-answered in the background after a change.");
  w.sample("rebuilds_total", "outcome=\"completed\"", static_cast<double>(rebuilds.completed));
  w.sample("rebuilds_total", "outcome=\"dropped\"", static_cast<double>(rebuilds.dropped));
  w.single("encoder_queue_depth", "gauge", "Requests waiting for the model encoder.", static_cast<double>(batcher.queue_depth));
  w.single("encoder_max_batch_size", "gauge", "The encoder batcher's current batch-size limit.",
           static_cast<double>(batcher.max_batch_size));
  w.family("encoder_requests_refused_total", "counter", "Model requests that did not run, by reason.");
  w.sample("encoder_requests_refused_total", "reason=\"rejected\"", static_cast<double>(batcher.rejected));
  w.sample("encoder_requests_refused_total", "reason=\"timed_out\"", static_cast<double>(batcher.timed_out));
  w.family("encoder_batch_size", "histogram", "Requests per model forward pass.");
  {
    std::uint64_t cumulative = 0, batches = 0, requests = 0;
    for (std::size_t n = 0; n < batcher.batch_sizes.size(); ++n) {
      batches += batcher.batch_sizes[n];
      requests += n * batcher.batch_sizes[n];
    }
    std::size_t n = 0;
    for (std::size_t bound = 1; bound <= 256; bound *= 2) {
      for (; n < batcher.batch_sizes.size() && n <= bound; ++n) cumulative += batcher.batch_sizes[n];
      w.sample("encoder_batch_size_bucket", fmt::format("le=\"{}\"", bound), static_cast<double>(cumulative));
    }
    w.sample("encoder_batch_size_bucket", "le=\"+Inf\"", static_cast<double>(batches));
    w.sample("encoder_batch_size_sum", "", static_cast<double>(requests));
    w.sample("encoder_batch_size_count", "", static_cast<double>(batches));
  }
  w.single("autotuner_moves_total", "counter", "AutoTuner adjustments of the encoder batcher.", static_cast<double>(batcher.tuner_moves));
  w.single("latency_anomaly", "gauge", "1 while the latest window's p99 is above its threshold times the baseline.",
           anomaly.active ? 1.0 : 0.0);
  w.single("latency_anomaly_windows_total", "counter", "Windows that raised the latency anomaly flag.",
           static_cast<double>(anomaly.windows_flagged));
  w.single("redis_connected", "gauge", "1 while this instance is subscribed to Redis and can publish.",
           relay.connected ? 1.0 : 0.0);
  w.single("redis_outages_total", "counter", "Times Redis was lost or unreachable.", static_cast<double>(relay.outages));
  w.family("redis_changes_total", "counter", "Knowledge changes shared through Redis, by what happened to them.");
  for (const auto& [what, n] : {std::make_pair("published", relay.published), std::make_pair("received", relay.received),
                                std::make_pair("replayed", relay.replayed), std::make_pair("dropped", relay.dropped),
                                std::make_pair("malformed", relay.malformed)}) {
    w.sample("redis_changes_total", fmt::format("outcome=\"{}\"", what), static_cast<double>(n));
  }
  w.single("redis_changes_queued", "gauge", "This instance's changes waiting for Redis.", static_cast<double>(relay.queued));
  w.single("redis_gaps_total", "counter", "Times every cached answer was dropped because changes may have been missed.",
           static_cast<double>(relay.gaps));
  if (generation.generations + generation.failures > 0) {
    w.family("generations_total", "counter", "Generated answers, by outcome.");
    w.sample("generations_total", "outcome=\"ok\"", static_cast<double>(generation.generations));
    w.sample("generations_total", "outcome=\"failed\"", static_cast<double>(generation.failures));
    w.family("generation_tokens_total", "counter", "Tokens the generator's engine reported, by kind.");
    w.sample("generation_tokens_total", "kind=\"prompt\"", static_cast<double>(generation.prompt_tokens));
    w.sample("generation_tokens_total", "kind=\"completion\"", static_cast<double>(generation.completion_tokens));
    w.family("generation_time_to_first_token_seconds", "summary", "From the request to the first generated text.");
    const LatencySummary& t = generation.time_to_first_token;
    w.sample("generation_time_to_first_token_seconds", "quantile=\"0.5\"", seconds(t.p50));
    w.sample("generation_time_to_first_token_seconds", "quantile=\"0.99\"", seconds(t.p99));
    w.sample("generation_time_to_first_token_seconds_sum", "", seconds(t.sum));
    w.sample("generation_time_to_first_token_seconds_count", "", static_cast<double>(t.count));
  }
  if (!remote_engines.empty()) {
    w.family("remote_breaker_state", "gauge", "A remote model engine's circuit breaker: 0 closed, 1 open, 2 half-open.");
    for (const auto& e : remote_engines) {
      w.sample("remote_breaker_state", fmt::format("engine=\"{}\"", e.name), static_cast<double>(e.breaker));
    }
    w.family("remote_breaker_opens_total", "counter", "Times a remote engine's circuit breaker opened.");
    for (const auto& e : remote_engines) {
      w.sample("remote_breaker_opens_total", fmt::format("engine=\"{}\"", e.name), static_cast<double>(e.breaker_opens));
    }
    w.family("remote_calls_refused_total", "counter", "Calls to a remote engine not made, by reason.");
    for (const auto& e : remote_engines) {
      w.sample("remote_calls_refused_total", fmt::format("engine=\"{}\",reason=\"breaker_open\"", e.name),
               static_cast<double>(e.refused_by_breaker));
      w.sample("remote_calls_refused_total", fmt::format("engine=\"{}\",reason=\"retry_budget\"", e.name),
               static_cast<double>(e.retry_budget_spent));
    }
    // Each family's samples stay together, as the exposition format asks.
    const auto per_endpoint = [&](const char* name, const char* type, const char* help, const auto& add) {
      w.family(name, type, help);
      for (const auto& e : remote_engines) {
        for (const auto& p : e.endpoints) add(fmt::format("engine=\"{}\",endpoint=\"{}\"", e.name, p.url), p);
      }
    };
    per_endpoint("remote_requests_total", "counter", "HTTP requests to a remote endpoint, by outcome.",
                 [&](const std::string& labels, const RemoteEndpointMetrics& p) {
                   w.sample("remote_requests_total", labels + ",outcome=\"ok\"",
                            static_cast<double>(p.requests - p.failures));
                   w.sample("remote_requests_total", labels + ",outcome=\"failed\"", static_cast<double>(p.failures));
                 });
    per_endpoint("remote_extra_requests_total", "counter", "Requests sent as a retry or a hedge, by kind.",
                 [&](const std::string& labels, const RemoteEndpointMetrics& p) {
                   w.sample("remote_extra_requests_total", labels + ",kind=\"retry\"", static_cast<double>(p.retries));
                   w.sample("remote_extra_requests_total", labels + ",kind=\"hedge\"", static_cast<double>(p.hedges));
                 });
    per_endpoint("remote_in_flight", "gauge", "Requests waiting for a remote endpoint now.",
                 [&](const std::string& labels, const RemoteEndpointMetrics& p) {
                   w.sample("remote_in_flight", labels, static_cast<double>(p.in_flight));
                 });
    per_endpoint("remote_ejected", "gauge", "1 while a remote endpoint is left out after consecutive failures.",
                 [&](const std::string& labels, const RemoteEndpointMetrics& p) {
                   w.sample("remote_ejected", labels, p.ejected ? 1.0 : 0.0);
                 });
    per_endpoint("remote_ejections_total", "counter", "Times a remote endpoint was left out.",
                 [&](const std::string& labels, const RemoteEndpointMetrics& p) {
                   w.sample("remote_ejections_total", labels, static_cast<double>(p.ejections));
                 });
    per_endpoint("remote_latency_seconds", "summary", "Latency of a remote endpoint's successful requests.",
                 [&](const std::string& labels, const RemoteEndpointMetrics& p) {
                   w.sample("remote_latency_seconds", labels + ",quantile=\"0.5\"", seconds(p.latency.p50));
                   w.sample("remote_latency_seconds", labels + ",quantile=\"0.99\"", seconds(p.latency.p99));
                   w.sample("remote_latency_seconds_sum", labels, seconds(p.latency.sum));
                   w.sample("remote_latency_seconds_count", labels, static_cast<double>(p.latency.count));
                 });
  }
  w.single("recent_p99_seconds", "gauge", "p99 of total latency in the latest closed window.", seconds(anomaly.recent_p99));
  w.single("baseline_p99_seconds", "gauge", "Moving baseline of the windows' p99.", seconds(anomaly.baseline_p99));
  return w.take();
}

namespace metrics {

void MetricsRegistry::record_answer(const Answer& answer, bool looked_up_result_cache,
                                    bool looked_up_knowledge_cache, bool looked_up_semantic_cache) {
  asks_.fetch_add(1, std::memory_order_relaxed);
  for (std::size_t i = 0; i < kStageCount; ++i) {
    const auto stage = static_cast<Stage>(i);
    // Stages that did not run are not recorded, so their percentiles
    // describe only the requests that paid for them.
    if (answer.timings[stage].count() > 0 || stage == Stage::kTotal) stages_[i].record(answer.timings[stage]);
  }
  const std::size_t window = current_window_.load(std::memory_order_relaxed);
  windows_[window].record(answer.timings[Stage::kTotal]);
  if (answer.degraded) window_degraded_[window].fetch_add(1, std::memory_order_relaxed);
  if (looked_up_result_cache) {
    (answer.tier == AnswerTier::kResultCache ? result_hits_ : result_misses_).fetch_add(1, std::memory_order_relaxed);
  }
  if (looked_up_knowledge_cache) {
    (answer.tier == AnswerTier::kKnowledgeCache ? knowledge_hits_ : knowledge_misses_)
        .fetch_add(1, std::memory_order_relaxed);
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
  s.result_cache.hits = result_hits_.load(std::memory_order_relaxed);
  s.result_cache.misses = result_misses_.load(std::memory_order_relaxed);
  s.semantic_cache.hits = semantic_hits_.load(std::memory_order_relaxed);
  s.semantic_cache.misses = semantic_misses_.load(std::memory_order_relaxed);
  s.knowledge_cache.hits = knowledge_hits_.load(std::memory_order_relaxed);
  s.knowledge_cache.misses = knowledge_misses_.load(std::memory_order_relaxed);
  s.fallback_answers = fallbacks_.load(std::memory_order_relaxed);
  s.degraded_answers = degraded_.load(std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(window_mu_);
  s.anomaly = anomaly_;
  return s;
}

LoadSample MetricsRegistry::roll_window() {
  std::lock_guard<std::mutex> lock(window_mu_);
  const auto now = clock_->now();
  const std::size_t closing = current_window_.load(std::memory_order_relaxed);
  current_window_.store(1 - closing, std::memory_order_relaxed);
  const LatencySummary window = windows_[closing].summary();
  windows_[closing].reset();
  const std::uint64_t degraded = window_degraded_[closing].exchange(0, std::memory_order_relaxed);
  const double seconds = std::chrono::duration<double>(now - window_started_).count();
  window_started_ = now;
  LoadSample sample;
  sample.requests = window.count;
  sample.p99 = std::chrono::duration_cast<std::chrono::microseconds>(window.p99);
  sample.qps = seconds > 0 ? static_cast<double>(window.count) / seconds : 0.0;
  if (window.count > 0) sample.degraded_fraction = static_cast<double>(degraded) / static_cast<double>(window.count);
  if (window.count < rule_.min_requests) {
    anomaly_.active = false;  // too little traffic to judge: the flag says "latest window", so it drops
    return sample;
  }
  const double p99 = static_cast<double>(window.p99.count());
  anomaly_.recent_p99 = window.p99;
  anomaly_.active = baseline_windows_ >= rule_.warmup_windows && p99 > rule_.factor * baseline_p99_ns_;
  if (anomaly_.active) ++anomaly_.windows_flagged;
  // The baseline moves slowly, so a lasting change becomes the new normal
  // after a while rather than being flagged forever.
  baseline_p99_ns_ = baseline_windows_ == 0 ? p99 : (1 - rule_.baseline_weight) * baseline_p99_ns_ + rule_.baseline_weight * p99;
  ++baseline_windows_;
  anomaly_.baseline_p99 = std::chrono::nanoseconds(static_cast<std::int64_t>(baseline_p99_ns_));
  return sample;
}

void MetricsRegistry::reset() {
  for (auto& h : stages_) h.reset();
  for (auto* c : {&asks_, &errors_, &result_hits_, &result_misses_, &semantic_hits_, &semantic_misses_, &knowledge_hits_,
                  &knowledge_misses_, &fallbacks_, &degraded_}) {
    c->store(0, std::memory_order_relaxed);
  }
}

}  // namespace metrics
}  // namespace rapidqa

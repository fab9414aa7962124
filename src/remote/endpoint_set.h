// EndpointSet: the engines that serve one model, which of them a request
// goes to, and what each has done: requests in flight, consecutive
// failures and outlier ejection, latency, and the recent latencies that
// set the hedging delay.
//
// Time is given to every call that depends on it, so tests drive ejection
// without a clock.
//
// Thread safety: thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "metrics/latency_histogram.h"
#include "rapidqa/metrics.h"
#include "rapidqa/remote_encoder.h"

namespace rapidqa::remote {

struct EndpointSetOptions {
  EndpointChoice choice = EndpointChoice::kLeastLoaded;
  std::size_t eject_after_failures = 3;  // 0: never
  std::chrono::nanoseconds ejection_time = std::chrono::seconds(1);
  std::chrono::nanoseconds max_ejection_time = std::chrono::seconds(30);
  std::size_t recent_latencies = 128;    // kept for the hedging percentile
};

enum class RequestKind { kFirst, kRetry, kHedge };

class EndpointSet {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  EndpointSet(std::vector<std::string> urls, EndpointSetOptions options);

  std::size_t size() const { return endpoints_.size(); }
  const std::string& url(std::size_t i) const { return endpoints_[i]->url; }

  // The endpoint for the next request, skipping those in `avoid` when
  // another is available and every ejected one; nullopt when all are
  // ejected. Counts the request in flight there.
  std::optional<std::size_t> pick(const std::vector<std::size_t>& avoid, RequestKind kind, TimePoint now);
  // A picked request's end. failed: the endpoint's fault (no answer, 5xx,
  // 429, an unreadable answer); abandoned requests are neither.
  void finished(std::size_t i, bool failed, bool abandoned, std::chrono::nanoseconds elapsed, TimePoint now,
                std::optional<std::chrono::nanoseconds> cool_down = std::nullopt);
  bool all_ejected(TimePoint now) const;

  // The percentile (0..1) of recent successful latencies; nullopt until
  // there are enough of them to say.
  std::optional<std::chrono::nanoseconds> recent_latency(double percentile) const;

  std::vector<RemoteEndpointMetrics> metrics(TimePoint now) const;

 private:
  struct Endpoint {
    std::string url;
    std::atomic<std::size_t> in_flight{0};
    std::atomic<std::uint64_t> requests{0}, failures{0}, retries{0}, hedges{0};
    metrics::LatencyHistogram latency;
    // Guarded by the set's mu_:
    std::size_t consecutive_failures = 0;
    std::uint64_t ejections = 0;
    TimePoint ejected_until{};
    double recent_ns = 0;  // moving average of successful latencies (ties in least-loaded)
  };
  bool ejected_locked(const Endpoint& e, TimePoint now) const { return now < e.ejected_until; }

  const EndpointSetOptions options_;
  std::vector<std::unique_ptr<Endpoint>> endpoints_;
  mutable std::mutex mu_;
  std::size_t next_ = 0;                   // round robin; guarded by mu_
  std::vector<std::int64_t> recent_;       // ring of recent successful latencies (ns); guarded by mu_
  std::size_t recent_next_ = 0;            // guarded by mu_
};

}  // namespace rapidqa::remote

// CircuitBreaker: whether calls to a remote engine should be made at all.
// Closed, it counts the outcomes of the last `window` calls and opens when
// at least min_calls of them were made and failure_ratio of them failed
// (or when told to: no endpoint is left). Open, it refuses every call for
// open_time, so callers take their degradation path at once instead of
// waiting on an engine that is down. Then it is half-open: one trial call
// at a time goes through; a success closes it, a failure opens it again.
//
// Time is given to every call, so tests drive it without a clock.
//
// Thread safety: thread-safe.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>

#include "rapidqa/metrics.h"

namespace rapidqa::remote {

struct CircuitBreakerOptions {
  std::size_t window = 20;
  std::size_t min_calls = 5;
  double failure_ratio = 0.5;
  std::chrono::nanoseconds open_time = std::chrono::seconds(2);
};

enum class Admission {
  kAllowed,   // closed: a call like any other
  kTrial,     // half-open: this call decides; report it with trial = true
  kRefused,   // open, or half-open with a trial already out
};

class CircuitBreaker {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  explicit CircuitBreaker(CircuitBreakerOptions options) : options_(options) {}

  Admission admit(TimePoint now);
  // The outcome of an admitted call.
  void record(bool success, bool trial, TimePoint now);
  // Opens now, whatever the counts say.
  void trip(TimePoint now);

  BreakerState state(TimePoint now) const;
  std::uint64_t opens() const;
  std::uint64_t refused() const;

 private:
  void open_locked(TimePoint now);

  const CircuitBreakerOptions options_;
  mutable std::mutex mu_;
  BreakerState state_ = BreakerState::kClosed;  // guarded by mu_, as is everything below
  TimePoint opened_at_{};
  bool trial_out_ = false;
  std::deque<bool> outcomes_;  // the last `window` calls: true = failed
  std::size_t failures_ = 0;   // in outcomes_
  std::uint64_t opens_ = 0;
  std::uint64_t refused_ = 0;
};

// RetryBudget: retries and hedges stay within `ratio` of the calls made,
// with `floor` extra in reserve, so an engine that fails every request gets
// at most 1 + ratio times its load, not 1 + max_retries times.
//
// Thread safety: thread-safe.
class RetryBudget {
 public:
  RetryBudget(double ratio, double floor) : ratio_(ratio), cap_(floor), balance_(floor) {}
  // A first request was made.
  void deposit();
  // Whether one retry or hedge may go; takes it from the budget when so.
  bool try_spend();
  std::uint64_t refusals() const;

 private:
  const double ratio_;
  const double cap_;
  mutable std::mutex mu_;
  double balance_;              // guarded by mu_
  std::uint64_t refusals_ = 0;  // guarded by mu_
};

}  // namespace rapidqa::remote

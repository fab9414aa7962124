// Clock: the one source of time for expiry (cache TTLs) and deadlines, so
// tests and simulations can move time by hand instead of sleeping.
// Latency measurements (stage timings) always use the real steady clock.
//
// Thread safety: implementations are thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>

#include "rapidqa/export.h"

namespace rapidqa {

class RAPIDQA_EXPORT Clock {
 public:
  using time_point = std::chrono::steady_clock::time_point;
  using duration = std::chrono::steady_clock::duration;

  virtual ~Clock() = default;
  virtual time_point now() const = 0;

  // Blocks on cv (lock held by the caller, released while waiting) until it
  // is notified or this clock reaches deadline. May return early
  // (spuriously): callers re-check their condition and the time in a loop.
  // The default waits on the steady clock for the same distance.
  virtual void wait_until(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                          time_point deadline) const;
};

// The process's steady clock. system_clock() returns a shared instance.
class RAPIDQA_EXPORT SteadyClock final : public Clock {
 public:
  time_point now() const override { return std::chrono::steady_clock::now(); }
};

RAPIDQA_EXPORT std::shared_ptr<Clock> steady_clock_instance();

// A clock that only moves when told to; starts at an arbitrary fixed point.
class RAPIDQA_EXPORT ManualClock final : public Clock {
 public:
  time_point now() const override {
    return time_point(duration(ticks_.load(std::memory_order_acquire)));
  }
  void advance(duration by) { ticks_.fetch_add(by.count(), std::memory_order_acq_rel); }
  // Returns after at most a millisecond of real time (or when notified):
  // the manual time only moves when a test says so, and waiters re-read it.
  void wait_until(std::condition_variable& cv, std::unique_lock<std::mutex>& lock, time_point deadline) const override;

 private:
  std::atomic<duration::rep> ticks_{std::chrono::duration_cast<duration>(std::chrono::hours(1)).count()};
};

}  // namespace rapidqa

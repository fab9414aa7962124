// AutoTuner: a closed loop that moves a batcher's max batch size and queue
// delay to keep p99 latency under a target while serving as much as
// possible. Every interval it reads p99 and QPS (from a sampler, typically
// the engine's recent-latency window) and applies the rule of the practice
// it comes from, with every threshold configurable:
//   p99 over p99_high at load of at least high_load_qps -> batch size and
//     delay shrink by shrink_factor (default -20%);
//   p99 under p99_low at load of at most spare_load_qps -> they grow by
//     grow_factor (default +15%).
// The practice's rule assumes a bigger batch costs latency. When the queue
// itself is the latency (p99 over p99_high with a backlog: the queue grew
// over the interval, more than a batch is waiting, or requests are being
// shed to the degraded path), a bigger batch serves the backlog faster, so with
// grow_when_backlogged the tuner grows instead of shrinking, as long as the
// sampler's latency model says a bigger batch costs each request at least
// min_backlog_saving less; past that a bigger batch only adds latency (the
// fixed cost of a batch is already spread thin) and the tuner holds.
// A move needs `hysteresis` consecutive intervals that agree, every step is
// bounded (at least one request, at most max_step requests, within
// [min_batch_size, max_batch_size]), a move that made the next interval
// worse is undone (revert_worse_moves), and each move is kept in a history
// that can be read back.
//
// Thread safety: thread-safe. start() runs the loop on an owned thread that
// stop() (or the destructor) ends; tune_once() runs one decision on the
// caller's thread (tests drive it with a manual clock).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "rapidqa/clock.h"
#include "rapidqa/export.h"
#include "rapidqa/load_sample.h"
#include "rapidqa/status.h"

namespace rapidqa {

struct AutoTunerOptions {
  std::chrono::milliseconds interval{1000};       // between decisions, > 0
  std::chrono::microseconds p99_high{300000};     // p99 above this (300 ms) at high load: shrink
  double high_load_qps = 500;                     // requests per second that count as high load
  double shrink_factor = 0.8;                     // size and delay multiplier when shrinking, in (0, 1)
  std::chrono::microseconds p99_low{200000};      // p99 below this (200 ms) with spare capacity: grow
  double spare_load_qps = 300;                    // requests per second at or under which capacity is spare
  double grow_factor = 1.15;                      // size and delay multiplier when growing, > 1
  std::size_t min_batch_size = 1;                 // >= 1
  std::size_t max_batch_size = 128;               // >= min_batch_size
  std::size_t max_step = 16;                      // most requests added or removed per move, >= 1
  std::chrono::microseconds min_queue_delay{100};
  std::chrono::microseconds max_queue_delay{50000};  // >= min_queue_delay
  std::size_t hysteresis = 2;                     // agreeing intervals needed before a move, >= 1
  bool grow_when_backlogged = true;               // over p99_high with a growing queue: grow, not shrink
  // ... only while the move cuts each request's predicted cost by at least
  // this fraction: batch_fixed_share x (1 - old size / new size). Samples
  // without a share (below 0) grow regardless. In [0, 1]; 0 = regardless.
  double min_backlog_saving = 0.02;
  // Grow for spare capacity only while the limit binds: at least this share
  // of the interval's batches were full (a limit no batch reaches buys
  // nothing). 0 = grow regardless.
  double grow_min_full_fraction = 0.5;
  // A move is judged by the interval after it: when p99 rose by more than
  // worse_margin and the answers served within the degraded share did not
  // rise by as much, the move is undone and its direction held off for
  // hold_after_revert intervals. A tuner must never leave the batcher worse
  // than it found it.
  bool revert_worse_moves = true;
  double worse_margin = 0.2;                      // in [0, 10]
  std::size_t hold_after_revert = 10;
  std::size_t history_limit = 1000;               // moves kept (oldest dropped)
  std::shared_ptr<Clock> clock;                   // time source; null = steady clock
};

struct TunerMove {
  Clock::time_point at;
  LoadSample observed;
  std::size_t old_batch_size = 0, new_batch_size = 0;
  std::chrono::microseconds old_queue_delay{0}, new_queue_delay{0};
  std::string reason;  // "p99 512000us > 300000us at 812 qps: shrink"
};

// What the tuner steers: read and set (max batch size, queue delay).
struct BatchControl {
  std::function<std::pair<std::size_t, std::chrono::microseconds>()> limits;
  std::function<void(std::size_t, std::chrono::microseconds)> set_limits;
};

// The control of a DynamicBatcher (or anything with limits() and
// set_limits() of that shape); the batcher must outlive the tuner.
template <typename Batcher>
BatchControl control_of(Batcher& batcher) {
  return {[&batcher] {
            const auto l = batcher.limits();
            return std::make_pair(l.max_batch_size, l.max_queue_delay);
          },
          [&batcher](std::size_t size, std::chrono::microseconds delay) { batcher.set_limits(size, delay); }};
}

class RAPIDQA_EXPORT AutoTuner {
 public:
  using Sampler = std::function<LoadSample()>;

  // The sampler is called once per decision, on the tuner's thread (or the
  // caller of tune_once). kInvalidArgument naming the field for options
  // out of range (see AutoTunerOptions), or an empty sampler or control;
  // nothing is quietly fixed.
  static Result<std::unique_ptr<AutoTuner>> create(AutoTunerOptions options, Sampler sampler, BatchControl control);
  ~AutoTuner();
  AutoTuner(const AutoTuner&) = delete;
  AutoTuner& operator=(const AutoTuner&) = delete;

  void start();  // idempotent
  void stop();   // idempotent; joins the loop

  // One decision now; returns the move made, if any.
  std::optional<TunerMove> tune_once();

  // Every move so far, oldest first (at most history_limit).
  std::vector<TunerMove> history() const;
  std::uint64_t moves() const;

 private:
  AutoTuner(AutoTunerOptions options, Sampler sampler, BatchControl control);
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The check create() makes, for callers that validate options up front.
RAPIDQA_EXPORT Status validate_auto_tuner_options(const AutoTunerOptions& options);

}  // namespace rapidqa

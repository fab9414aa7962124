// LoadSample: one metrics window's load, as the engine measures it when a
// window closes (QAEngine::tuning().recent_load()) and as an AutoTuner's
// sampler reports it.
//
// Thread safety: a value type; thread-compatible.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>

namespace rapidqa {

struct LoadSample {
  std::chrono::microseconds p99{0};  // over the interval
  double qps = 0;                    // requests completed per second over the interval
  std::uint64_t requests = 0;        // in the interval; 0 means no signal (nothing moves)
  std::size_t queue_depth = 0;       // requests waiting for the batcher at the end of the interval
  double full_batch_fraction = 1.0;  // share of the interval's batches that were full (1 when unknown)
  double degraded_fraction = 0.0;    // share of the interval's answers that took a degraded path
  // Share of a batch's predicted time, at the current size limit, that does
  // not grow with its size (the batch's fixed cost), from the batcher's
  // latency model: a bigger batch saves at most this share of each
  // request's cost. Below 0 when unknown.
  double batch_fixed_share = -1.0;
};

}  // namespace rapidqa

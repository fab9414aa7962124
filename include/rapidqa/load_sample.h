// LoadSample: one interval's load as the engine's metrics measure it. The
// AutoTuner steers the batcher from a stream of them; monitoring can read
// the same numbers (QAEngine's tuning accessor returns the latest).
//
// A plain value type; copies are independent.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>

namespace rapidqa {

// One interval's load, as the sampler reports it.
struct LoadSample {
  std::chrono::microseconds p99{0};  // over the interval
  double qps = 0;                    // requests completed per second over the interval
  std::uint64_t requests = 0;        // in the interval; 0 means no signal (nothing moves)
  std::size_t queue_depth = 0;       // requests waiting for the batcher at the end of the interval
  double full_batch_fraction = 1.0;  // share of the interval's batches that were full (1 when unknown)
  double degraded_fraction = 0.0;    // share of the interval's answers that took a degraded path
};

}  // namespace rapidqa

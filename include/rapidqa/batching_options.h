// The options and small value types of request batching: what EngineOptions
// and AskOptions need to say about the model's batcher, without the
// batcher itself (a header-only template, see dynamic_batcher.h).
//
// Thread safety: value types; thread-compatible.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>

#include "rapidqa/clock.h"

namespace rapidqa {

enum class BatchPriority : std::size_t { kHigh = 0, kNormal = 1, kLow = 2 };
inline constexpr std::size_t kBatchPriorityCount = 3;

// Why a batch was dispatched (DynamicBatcherStats::dispatch_reasons is
// indexed by it).
enum class BatchDispatchReason : std::size_t {
  kFull = 0,       // max_batch_size requests, or the token budget, reached
  kDelay = 1,      // the oldest request waited max_queue_delay
  kPredicted = 2,  // waiting longer would miss target_latency or a deadline
  kDrain = 3,      // shutting down with drain_on_shutdown
};
inline constexpr std::size_t kBatchDispatchReasonCount = 4;

struct DynamicBatcherOptions {
  std::size_t max_batch_size = 16;                 // requests per batch, at least 1
  std::size_t max_batch_tokens = 0;                // tokens per batch (a bigger request runs alone); 0 = no budget
  std::chrono::microseconds max_queue_delay{5000}; // longest the oldest request waits for company, >= 0
  std::chrono::microseconds target_latency{0};     // queue wait + run time to keep under; 0 = no prediction rule
  std::size_t queue_capacity = 1024;               // requests waiting (all priorities); more are rejected; >= 1
  std::size_t workers = 1;                         // threads calling the batch function (model replicas), >= 1
  bool drain_on_shutdown = true;                   // at shutdown run what is queued (true) or fail it (false)
  double latency_forgetting = 0.98;                // the latency model's fade per measurement, in [0.5, 1]
  std::shared_ptr<Clock> clock;                    // time for delays, deadlines and measurements; null = steady
};

struct BatchRequestOptions {
  BatchPriority priority = BatchPriority::kNormal;
  std::optional<Clock::time_point> deadline;       // on the batcher's clock; kTimedOut if still queued then
  std::size_t tokens = 1;                          // the request's cost, for the token budget and the model
};

// A batcher's current limits (the AutoTuner moves the first and third).
struct BatchLimits {
  std::size_t max_batch_size = 16;
  std::size_t max_batch_tokens = 0;
  std::chrono::microseconds max_queue_delay{5000};
  std::chrono::microseconds target_latency{0};
};

}  // namespace rapidqa

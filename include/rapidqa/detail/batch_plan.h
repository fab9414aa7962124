// The batcher's dispatch decision as a pure function of the queue head,
// the limits, the latency model and the time: DynamicBatcher calls it
// under its lock, and tests call it with a manual clock. Not part of the
// stable API: it may change with the batcher.
//
// Thread safety: pure functions; thread-safe.
#pragma once

#include <algorithm>
#include <cstddef>
#include <optional>
#include <vector>

#include "rapidqa/batch_latency_model.h"
#include "rapidqa/batching_options.h"
#include "rapidqa/clock.h"

namespace rapidqa::detail {

// What to do now: dispatch the first `take` candidates, or wait until
// wake_at and decide again.
struct BatchPlan {
  using Reason = BatchDispatchReason;
  std::size_t take = 0;                            // 0: wait
  Reason reason = Reason::kFull;
  Clock::time_point wake_at = Clock::time_point::max();  // when waiting: decide again then
};

// A queued request as the decision sees it.
struct BatchCandidate {
  Clock::time_point enqueued;
  std::optional<Clock::time_point> deadline;
  std::size_t tokens = 1;
};

// candidates: the queue head in dispatch order (at most max_batch_size + 1
// of them: one more tells whether the batch is full by tokens).
inline BatchPlan plan_batch(const std::vector<BatchCandidate>& candidates, const BatchLimits& limits,
                            const BatchLatencyModel& model, Clock::time_point now, bool draining) {
  BatchPlan plan;
  if (candidates.empty()) return plan;
  const std::size_t max_size = std::max<std::size_t>(1, limits.max_batch_size);
  std::size_t take = 0, tokens = 0;
  bool full_by_tokens = false;
  for (const auto& c : candidates) {
    if (take == max_size) break;
    if (limits.max_batch_tokens != 0 && take > 0 && tokens + c.tokens > limits.max_batch_tokens) {
      full_by_tokens = true;
      break;
    }
    ++take;
    tokens += c.tokens;
  }
  auto dispatch = [&](BatchPlan::Reason reason) {
    plan.take = take;
    plan.reason = reason;
    return plan;
  };
  if (take == max_size || full_by_tokens) return dispatch(BatchPlan::Reason::kFull);
  if (draining) return dispatch(BatchPlan::Reason::kDrain);

  Clock::time_point oldest = Clock::time_point::max();
  for (std::size_t i = 0; i < take; ++i) oldest = std::min(oldest, candidates[i].enqueued);
  Clock::time_point latest_start = oldest + limits.max_queue_delay;
  BatchPlan::Reason reason = BatchPlan::Reason::kDelay;
  if (model.ready()) {
    // Waiting is worth it only while one more request could still join
    // and the batch would finish in time for its oldest request and for
    // every deadline in it.
    const std::size_t next_tokens = tokens + std::max<std::size_t>(1, tokens / take);
    const auto bigger = model.predict(take + 1, next_tokens);
    auto predicted_start = Clock::time_point::max();
    if (limits.target_latency.count() > 0) predicted_start = oldest + limits.target_latency - bigger;
    for (std::size_t i = 0; i < take; ++i) {
      if (candidates[i].deadline) predicted_start = std::min(predicted_start, *candidates[i].deadline - bigger);
    }
    if (predicted_start < latest_start) {
      latest_start = predicted_start;
      reason = BatchPlan::Reason::kPredicted;
    }
  }
  if (now >= latest_start) return dispatch(reason);
  plan.wake_at = latest_start;
  return plan;
}

}  // namespace rapidqa::detail

// EncoderBatching: a model encoder's calls shared between concurrent asks
// through a DynamicBatcher, the AutoTuner that may steer it, and the
// metrics windows the tuner reads. encode() is the pipeline's way to the
// model: it gives up (returning why) rather than miss the request's
// deadline, so the request can degrade instead of waiting.
//
// Every wait is on the engine's clock: with a manual clock, a request
// waits for the model until the test moves time past its budget, however
// long that takes in real time.
//
// Thread safety: thread-safe. The tuner runs on its own thread, which the
// destructor stops before the batcher.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "metrics/metrics_registry.h"
#include "rapidqa/auto_tuner.h"
#include "rapidqa/dynamic_batcher.h"
#include "rapidqa/encoder.h"
#include "rapidqa/metrics.h"
#include "rapidqa/qa_engine.h"

namespace rapidqa::engine {

struct EncoderBatchingOptions {
  DynamicBatcherOptions batching;            // clock: `clock` when null
  bool auto_tune = false;
  AutoTunerOptions tuner;                    // clock: `clock` when null
  DegradationOptions degradation;            // when to give up on the model
  std::shared_ptr<Clock> clock;              // the engine's
};

class EncoderBatching {
 public:
  // metrics must outlive the object (the tuner reads its windows).
  static Result<std::unique_ptr<EncoderBatching>> create(std::shared_ptr<Encoder> model, EncoderBatchingOptions options,
                                                         metrics::MetricsRegistry& metrics);
  ~EncoderBatching();
  EncoderBatching(const EncoderBatching&) = delete;
  EncoderBatching& operator=(const EncoderBatching&) = delete;

  // Encodes text through the batcher into out and returns "", or returns
  // why the model cannot answer in time (saturated queue, a predicted or
  // actual miss of the deadline, a failed batch).
  std::string encode(const std::string& text, BatchPriority priority, const std::optional<Clock::time_point>& deadline,
                     std::vector<float>& out);

  // Closes a metrics window and adds the batcher's share of it (queue
  // depth, full batches). One caller at a time gets consistent deltas.
  LoadSample recent_load();
  // The batcher's limits, for a tuner of the caller's own.
  BatchControl control();
  std::vector<TunerMove> tuner_history() const;
  // The batcher's and the tuner's counters into snapshot.batcher.
  void add_stats(MetricsSnapshot& snapshot) const;

 private:
  // A text and when its request stops waiting: a batch's model call gets
  // the earliest of its requests' budgets (a remote encoder passes it on).
  struct EncodeRequest {
    std::string text;
    std::optional<Clock::time_point> give_up;
  };
  using Batcher = DynamicBatcher<EncodeRequest, std::vector<float>>;
  EncoderBatching(EncoderBatchingOptions options, metrics::MetricsRegistry& metrics);
  // Why the request should not be queued at all, or "".
  std::string refusal(std::size_t tokens, const std::optional<Clock::time_point>& deadline) const;

  EncoderBatchingOptions options_;
  metrics::MetricsRegistry& metrics_;
  std::unique_ptr<Batcher> batcher_;
  // The batcher's dispatch counts at the previous window, for the tuner's
  // per-window shares.
  std::mutex window_mu_;
  std::uint64_t window_batches_ = 0, window_full_batches_ = 0;  // guarded by window_mu_
  // Declared after everything recent_load() uses, so it stops first.
  std::unique_ptr<AutoTuner> tuner_;
};

}  // namespace rapidqa::engine

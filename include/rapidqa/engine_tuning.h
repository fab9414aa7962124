// EngineTuning: the hooks for steering a QAEngine's model batcher from
// outside, with an AutoTuner of the caller's own or any other controller.
// Obtained from QAEngine::tuning(); valid while the engine lives.
//
// Thread safety: thread-safe, with one caveat: recent_load() closes a
// metrics window, so one caller at a time gets meaningful deltas (the
// engine's own tuner is that caller when EngineOptions::auto_tune is set).
#pragma once

#include <vector>

#include "rapidqa/auto_tuner.h"
#include "rapidqa/export.h"
#include "rapidqa/load_sample.h"

namespace rapidqa {

class QAEngine;

class RAPIDQA_EXPORT EngineTuning {
 public:
  EngineTuning(const EngineTuning&) = delete;
  EngineTuning& operator=(const EngineTuning&) = delete;

  // Closes the current metrics window: p99 and QPS since the previous call,
  // the batcher's queue depth and share of full batches, and the anomaly
  // check. The AutoTuner's sampler; with auto_tune the engine's own tuner
  // calls it, so do not call it as well.
  LoadSample recent_load();
  // The encoder batcher's limits, for an AutoTuner of the caller's own
  // (empty functions when the encoder is called inline). Valid while the
  // engine lives.
  BatchControl encoder_batch_control();
  // The engine's AutoTuner moves so far (empty without auto_tune).
  std::vector<TunerMove> tuner_history() const;

 private:
  friend class QAEngine;
  explicit EngineTuning(QAEngine& engine) : engine_(engine) {}
  QAEngine& engine_;
};

}  // namespace rapidqa

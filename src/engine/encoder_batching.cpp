#include "engine/encoder_batching.h"

#include <algorithm>
#include <condition_variable>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

namespace rapidqa::engine {
namespace {

// Where the batcher's callback leaves the result for the waiting ask. The
// callback may run after the ask gave up, so both share it.
struct PendingEncode {
  std::mutex mu;
  std::condition_variable done;
  std::optional<BatchResult<std::vector<float>>> result;  // guarded by mu
};

}  // namespace

EncoderBatching::EncoderBatching(EncoderBatchingOptions options, metrics::MetricsRegistry& metrics)
    : options_(std::move(options)), metrics_(metrics) {}

EncoderBatching::~EncoderBatching() {
  tuner_.reset();  // its thread samples the batcher
  batcher_.reset();
}

Result<std::unique_ptr<EncoderBatching>> EncoderBatching::create(std::shared_ptr<Encoder> model,
                                                                 EncoderBatchingOptions options,
                                                                 metrics::MetricsRegistry& metrics) {
  if (!options.clock) options.clock = steady_clock_instance();
  if (!options.batching.clock) options.batching.clock = options.clock;
  std::unique_ptr<EncoderBatching> batching(new EncoderBatching(options, metrics));
  std::shared_ptr<Clock> clock = options.clock;
  auto batcher = Batcher::create(options.batching, [model, clock](std::vector<EncodeRequest>& requests, std::size_t) {
    std::vector<std::string> texts;
    texts.reserve(requests.size());
    std::optional<Clock::time_point> earliest;
    for (auto& r : requests) {
      texts.push_back(std::move(r.text));
      if (r.give_up && (!earliest || *r.give_up < *earliest)) earliest = r.give_up;
    }
    std::vector<float> flat;
    Status s = earliest ? model->encode_within(texts, flat, *earliest - clock->now()) : model->encode(texts, flat);
    if (!s.is_ok()) throw std::runtime_error(s.message());
    const std::size_t d = model->dimension();
    std::vector<std::vector<float>> rows(texts.size());
    for (std::size_t i = 0; i < texts.size(); ++i) rows[i].assign(flat.begin() + i * d, flat.begin() + (i + 1) * d);
    return rows;
  });
  if (!batcher) return Status(batcher.status().code(), "encoder_batching." + batcher.status().message());
  batching->batcher_ = std::move(batcher).value();
  if (options.auto_tune) {
    AutoTunerOptions tuning = options.tuner;
    if (!tuning.clock) tuning.clock = options.clock;
    EncoderBatching* self = batching.get();
    auto tuner = AutoTuner::create(tuning, [self] { return self->recent_load(); }, control_of(*batching->batcher_));
    if (!tuner) return Status(tuner.status().code(), "tuner." + tuner.status().message());
    batching->tuner_ = std::move(tuner).value();
    batching->tuner_->start();
  }
  return batching;
}

std::string EncoderBatching::refusal(std::size_t tokens, const std::optional<Clock::time_point>& deadline) const {
  const DegradationOptions& degradation = options_.degradation;
  if (!degradation.enabled) return "";
  if (batcher_->saturated(degradation.queue_saturation)) return "the model's queue is saturated";
  if (!deadline) return "";
  const auto now = options_.clock->now();
  const auto predicted = batcher_->predict_completion(tokens);
  if (now + predicted <= *deadline) return "";
  return fmt::format("{:.1f} ms left, the model needs about {:.1f} ms",
                     std::chrono::duration<double, std::milli>(*deadline - now).count(),
                     std::chrono::duration<double, std::milli>(predicted).count());
}

std::string EncoderBatching::encode(const std::string& text, BatchPriority priority,
                                    const std::optional<Clock::time_point>& deadline, std::vector<float>& out) {
  // The batcher's token budget and latency model count tokens; four bytes
  // a token is close enough for WordPiece on both scripts.
  const std::size_t tokens = std::max<std::size_t>(1, text.size() / 4 + 2);
  if (std::string why = refusal(tokens, deadline); !why.empty()) return why;
  // The model gets the budget less the lexical path's reserve: the queue
  // monitor completes a queued request then, and one already running is
  // not waited for past it.
  std::optional<Clock::time_point> give_up;
  if (deadline) {
    const DegradationOptions& degradation = options_.degradation;
    give_up = *deadline - (degradation.enabled ? degradation.lexical_reserve : Clock::duration::zero());
  }
  BatchRequestOptions request;
  request.priority = priority;
  request.deadline = give_up;
  request.tokens = tokens;
  auto pending = std::make_shared<PendingEncode>();
  batcher_->submit(EncodeRequest{text, give_up}, request, [pending](BatchResult<std::vector<float>> result) {
    {
      std::lock_guard<std::mutex> lock(pending->mu);
      pending->result = std::move(result);
    }
    pending->done.notify_all();
  });
  std::unique_lock<std::mutex> lock(pending->mu);
  while (!pending->result) {
    if (!give_up) {
      pending->done.wait(lock);
    } else if (options_.clock->now() >= *give_up) {
      return "the model did not answer within the budget";
    } else {
      options_.clock->wait_until(pending->done, lock, *give_up);
    }
  }
  BatchResult<std::vector<float>>& result = *pending->result;
  if (!result.ok()) return fmt::format("model request {}: {}", batch_status_name(result.status), result.message);
  out = std::move(*result.response);
  return "";
}

LoadSample EncoderBatching::recent_load() {
  // One caller at a time: the counts are deltas since the previous call.
  std::lock_guard<std::mutex> lock(window_mu_);
  LoadSample sample = metrics_.roll_window();
  const DynamicBatcherStats b = batcher_->stats();
  sample.queue_depth = b.queue_depth;
  // Dispatches, not completions: a batch still running counts as formed.
  std::uint64_t dispatched = 0;
  for (auto n : b.dispatch_reasons) dispatched += n;
  const std::uint64_t full = b.dispatch_reasons[static_cast<std::size_t>(BatchDispatchReason::kFull)];
  const std::uint64_t batches = dispatched - window_batches_;
  // No batch in the window: nothing says the limit binds.
  sample.full_batch_fraction =
      batches == 0 ? 0.0 : std::min(1.0, static_cast<double>(full - window_full_batches_) / static_cast<double>(batches));
  window_batches_ = dispatched;
  window_full_batches_ = full;
  // The fixed share of a batch at the limit, for requests of the mean
  // length so far (the model predicts nothing before it is ready).
  if (b.completed > 0) {
    const std::size_t tokens = b.max_batch_size * b.completed_tokens / b.completed;
    const double batch_us = static_cast<double>(batcher_->predict_latency(b.max_batch_size, tokens).count()) / 1000.0;
    if (batch_us > 0) sample.batch_fixed_share = std::clamp(b.latency.intercept_us / batch_us, 0.0, 1.0);
  }
  return sample;
}

BatchControl EncoderBatching::control() { return control_of(*batcher_); }

std::vector<TunerMove> EncoderBatching::tuner_history() const {
  return tuner_ ? tuner_->history() : std::vector<TunerMove>{};
}

void EncoderBatching::add_stats(MetricsSnapshot& snapshot) const {
  const DynamicBatcherStats b = batcher_->stats();
  snapshot.batcher.queue_depth = b.queue_depth;
  snapshot.batcher.batches = b.batches;
  snapshot.batcher.rejected = b.rejected;
  snapshot.batcher.timed_out = b.timed_out;
  snapshot.batcher.batch_sizes = b.batch_sizes;
  snapshot.batcher.max_batch_size = b.max_batch_size;
  if (tuner_) snapshot.batcher.tuner_moves = tuner_->moves();
}

}  // namespace rapidqa::engine

#include "rapidqa/auto_tuner.h"

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>

#include <fmt/format.h>

namespace rapidqa {

struct AutoTuner::Impl {
  AutoTunerOptions options;
  Sampler sampler;
  BatchControl control;
  // Decisions are serialised by tune_mu, which is held while the control
  // is read and set; mu guards what readers see and is never held then.
  std::mutex tune_mu;
  int direction = 0;              // guarded by tune_mu: -1 shrink, +1 grow, 0 hold
  std::size_t last_queue_depth = 0;  // guarded by tune_mu: at the previous decision
  std::size_t agreeing = 0;       // guarded by tune_mu: intervals in a row that wanted `direction`
  std::optional<TunerMove> judged;  // guarded by tune_mu: the last move, until the interval after it is seen
  int held_direction = 0;         // guarded by tune_mu: the direction of a reverted move ...
  std::size_t held_for = 0;       // ... refused for this many more intervals
  mutable std::mutex mu;
  std::condition_variable cv;
  std::deque<TunerMove> history;  // guarded by mu
  std::uint64_t moves = 0;        // guarded by mu
  bool running = false;           // guarded by mu
  std::thread loop;

  // The batch size after a move, bounded in both senses and always a change
  // of at least one request when not at the bound.
  std::size_t resized(std::size_t size, int dir) const {
    const double factor = dir < 0 ? options.shrink_factor : options.grow_factor;
    auto target = static_cast<std::size_t>(std::lround(static_cast<double>(size) * factor));
    if (dir > 0) target = std::clamp(target, size + 1, size + options.max_step);
    if (dir < 0) target = std::clamp(target, size > options.max_step ? size - options.max_step : 1, size > 1 ? size - 1 : 1);
    return std::clamp(target, options.min_batch_size, options.max_batch_size);
  }

  std::chrono::microseconds redelayed(std::chrono::microseconds delay, int dir) const {
    const double factor = dir < 0 ? options.shrink_factor : options.grow_factor;
    const auto scaled = std::chrono::microseconds(std::llround(static_cast<double>(std::max<std::int64_t>(delay.count(), 1)) * factor));
    return std::clamp(scaled, options.min_queue_delay, options.max_queue_delay);
  }

  // Applies a move to the batcher and keeps it in the history.
  TunerMove record(TunerMove move) {
    control.set_limits(move.new_batch_size, move.new_queue_delay);
    std::lock_guard<std::mutex> lock(mu);
    history.push_back(move);
    while (history.size() > options.history_limit) history.pop_front();
    ++moves;
    return move;
  }
};

Status validate_auto_tuner_options(const AutoTunerOptions& o) {
  if (o.interval.count() <= 0) return Status::invalid_argument(fmt::format("interval {} ms must be positive", o.interval.count()));
  if (o.min_batch_size == 0) return Status::invalid_argument("min_batch_size must be at least 1");
  if (o.max_batch_size < o.min_batch_size) {
    return Status::invalid_argument(
        fmt::format("max_batch_size {} is below min_batch_size {}", o.max_batch_size, o.min_batch_size));
  }
  if (o.max_step == 0) return Status::invalid_argument("max_step must be at least 1");
  if (o.hysteresis == 0) return Status::invalid_argument("hysteresis must be at least 1");
  if (!(o.shrink_factor > 0 && o.shrink_factor < 1)) {  // false for NaN too
    return Status::invalid_argument(fmt::format("shrink_factor {} is outside (0, 1)", o.shrink_factor));
  }
  if (!(o.grow_factor > 1 && std::isfinite(o.grow_factor))) {
    return Status::invalid_argument(fmt::format("grow_factor {} must be finite and above 1", o.grow_factor));
  }
  if (o.max_queue_delay < o.min_queue_delay) {
    return Status::invalid_argument(fmt::format("max_queue_delay {} us is below min_queue_delay {} us",
                                                o.max_queue_delay.count(), o.min_queue_delay.count()));
  }
  if (!(o.min_backlog_saving >= 0 && o.min_backlog_saving <= 1)) {
    return Status::invalid_argument(fmt::format("min_backlog_saving {} is outside [0, 1]", o.min_backlog_saving));
  }
  if (!(o.worse_margin >= 0 && o.worse_margin <= 10)) {
    return Status::invalid_argument(fmt::format("worse_margin {} is outside [0, 10]", o.worse_margin));
  }
  return Status::ok();
}

Result<std::unique_ptr<AutoTuner>> AutoTuner::create(AutoTunerOptions options, Sampler sampler, BatchControl control) {
  if (Status valid = validate_auto_tuner_options(options); !valid.is_ok()) return valid;
  if (!sampler) return Status::invalid_argument("the sampler is empty");
  if (!control.limits || !control.set_limits) return Status::invalid_argument("the batch control is empty");
  if (!options.clock) options.clock = steady_clock_instance();
  return std::unique_ptr<AutoTuner>(new AutoTuner(std::move(options), std::move(sampler), std::move(control)));
}

AutoTuner::AutoTuner(AutoTunerOptions options, Sampler sampler, BatchControl control)
    : impl_(std::make_unique<Impl>()) {
  impl_->options = std::move(options);
  impl_->sampler = std::move(sampler);
  impl_->control = std::move(control);
}

AutoTuner::~AutoTuner() { stop(); }

void AutoTuner::start() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (impl_->running) return;
  impl_->running = true;
  // The first decision is one interval after start(), not after the thread
  // happens to be scheduled.
  const auto first = impl_->options.clock->now() + impl_->options.interval;
  impl_->loop = std::thread([this, first] {
    std::unique_lock<std::mutex> lock(impl_->mu);
    auto next = first;
    while (impl_->running) {
      if (impl_->options.clock->now() < next) {
        impl_->options.clock->wait_until(impl_->cv, lock, next);
        continue;
      }
      // After a stall, skip the missed intervals rather than deciding on a
      // burst of near-empty windows.
      next = std::max(next + impl_->options.interval, impl_->options.clock->now() + impl_->options.interval);
      lock.unlock();
      (void)tune_once();
      lock.lock();
    }
  });
}

void AutoTuner::stop() {
  std::thread loop;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->running = false;
    loop = std::move(impl_->loop);
  }
  impl_->cv.notify_all();
  if (loop.joinable()) loop.join();
}

namespace {

// Answers served per second outside the degraded path.
double served_well(const LoadSample& s) { return s.qps * (1.0 - s.degraded_fraction); }

}  // namespace

namespace {

// The move that undoes `last` when the interval after it was worse: p99 up
// by more than the margin without more answers served well.
std::optional<TunerMove> undo_if_worse(const TunerMove& last, const LoadSample& sample, const AutoTunerOptions& o) {
  const LoadSample& before = last.observed;
  const bool slower =
      static_cast<double>(sample.p99.count()) > static_cast<double>(before.p99.count()) * (1.0 + o.worse_margin);
  const bool not_more = served_well(sample) < served_well(before) * (1.0 + o.worse_margin);
  if (!o.revert_worse_moves || !slower || !not_more) return std::nullopt;
  TunerMove undo;
  undo.at = o.clock->now();
  undo.observed = sample;
  undo.old_batch_size = last.new_batch_size;
  undo.old_queue_delay = last.new_queue_delay;
  undo.new_batch_size = last.old_batch_size;
  undo.new_queue_delay = last.old_queue_delay;
  undo.reason = fmt::format("p99 {}us after the move to {} (was {}us), {:.0f} answers/s (was {:.0f}): worse, reverted",
                            sample.p99.count(), last.new_batch_size, before.p99.count(), served_well(sample),
                            served_well(before));
  return undo;
}

// What growing from `size` to `grown` saves of each request's predicted
// cost: the fixed share of a batch spread over more requests.
double growth_saving(const LoadSample& sample, std::size_t size, std::size_t grown) {
  if (sample.batch_fixed_share < 0 || size == 0 || grown <= size) return 1.0;
  return std::min(sample.batch_fixed_share, 1.0) * (1.0 - static_cast<double>(size) / static_cast<double>(grown));
}

// +1 (grow), -1 (shrink) or 0 for one interval's sample, with the reason.
// size and grown: the batch size limit now and after a grow move.
int wanted_direction(const LoadSample& sample, bool backlog_grew, std::size_t size, std::size_t grown,
                     const AutoTunerOptions& o, std::string& why) {
  if (sample.requests == 0) return 0;
  if (sample.p99 > o.p99_high && o.grow_when_backlogged && backlog_grew) {
    // A bigger batch serves a backlog faster only by spreading the batch's
    // fixed cost; where that is already thin it only makes each batch, and
    // so each answer, slower. Shrinking would cost throughput the backlog
    // needs, so the tuner holds.
    if (const double saving = growth_saving(sample, size, grown); saving < o.min_backlog_saving) return 0;
    why = fmt::format("p99 {}us > {}us with a backlog (queue {}, {:.1f}% degraded): grow to serve it",
                      sample.p99.count(), o.p99_high.count(), sample.queue_depth, 100.0 * sample.degraded_fraction);
    return +1;
  }
  if (sample.p99 > o.p99_high && sample.qps >= o.high_load_qps) {
    why = fmt::format("p99 {}us > {}us at {:.0f} qps: shrink", sample.p99.count(), o.p99_high.count(), sample.qps);
    return -1;
  }
  if (sample.p99 < o.p99_low && sample.qps <= o.spare_load_qps &&
      sample.full_batch_fraction >= o.grow_min_full_fraction) {
    why = fmt::format("p99 {}us < {}us at {:.0f} qps: grow", sample.p99.count(), o.p99_low.count(), sample.qps);
    return +1;
  }
  return 0;
}

}  // namespace

std::optional<TunerMove> AutoTuner::tune_once() {
  std::lock_guard<std::mutex> decision(impl_->tune_mu);
  const LoadSample sample = impl_->sampler ? impl_->sampler() : LoadSample{};
  const AutoTunerOptions& o = impl_->options;
  if (impl_->held_for > 0 && --impl_->held_for == 0) impl_->held_direction = 0;
  // Judge the last move by the interval that followed it.
  if (impl_->judged && sample.requests > 0) {
    const TunerMove last = *impl_->judged;
    impl_->judged.reset();
    if (auto undo = undo_if_worse(last, sample, o); undo && impl_->control.set_limits) {
      impl_->held_direction = last.new_batch_size > last.old_batch_size ? +1 : -1;
      impl_->held_for = o.hold_after_revert;
      impl_->direction = 0;
      impl_->agreeing = 0;
      return impl_->record(std::move(*undo));
    }
  }
  // A backlog: the queue grew, or more than a batch is waiting, or requests
  // are being shed to the degraded path (a backlog the queue bound hides).
  const std::size_t limit = impl_->control.limits ? impl_->control.limits().first : 0;
  const bool backlog_grew = sample.queue_depth > impl_->last_queue_depth ||
                            (limit > 0 && sample.queue_depth >= limit) || sample.degraded_fraction > 0.01;
  impl_->last_queue_depth = sample.queue_depth;
  std::string why;
  int want = wanted_direction(sample, backlog_grew, limit, impl_->resized(limit, +1), o, why);
  if (want != 0 && want == impl_->held_direction) want = 0;  // recently reverted: not again yet
  if (want == 0 || want != impl_->direction) {
    impl_->direction = want;
    impl_->agreeing = want == 0 ? 0 : 1;
  } else {
    ++impl_->agreeing;
  }
  if (want == 0 || impl_->agreeing < o.hysteresis || !impl_->control.limits || !impl_->control.set_limits) {
    return std::nullopt;
  }
  const auto [size, delay] = impl_->control.limits();
  TunerMove move;
  move.at = o.clock->now();
  move.observed = sample;
  move.old_batch_size = size;
  move.old_queue_delay = delay;
  move.new_batch_size = impl_->resized(size, want);
  move.new_queue_delay = impl_->redelayed(delay, want);
  move.reason = std::move(why);
  impl_->agreeing = 0;  // the next move needs fresh evidence of its own
  if (move.new_batch_size == size && move.new_queue_delay == delay) return std::nullopt;  // at the bound
  impl_->judged = move;
  return impl_->record(std::move(move));
}

std::vector<TunerMove> AutoTuner::history() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return {impl_->history.begin(), impl_->history.end()};
}

std::uint64_t AutoTuner::moves() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->moves;
}

}  // namespace rapidqa

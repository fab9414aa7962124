// DynamicBatcher<Request, Response>: groups requests that arrive one at a
// time into batches for a function that is cheaper per request in bulk (a
// model's forward pass), under a latency target.
//
// A request enqueues and gets a future or a callback. A worker dispatches a
// batch when it is full (max_batch_size requests or max_batch_tokens
// tokens), when its oldest request has waited max_queue_delay, or when the
// latency model (learned from the batches it ran) predicts that waiting for
// one more request would carry the oldest request past target_latency, or a
// request past its deadline. Requests are taken highest priority first,
// oldest first within a priority. The queue is bounded: a request that does
// not fit is rejected at once (a high-priority one takes the place of the
// newest low-priority request, which is rejected instead). A request whose
// deadline passes while it is queued completes with kTimedOut at that
// deadline, from the queue monitor thread, however busy the workers are.
// Every request completes exactly once: shutdown() runs (or fails) what is
// queued and waits for the running batches.
//
// Typical use:
//   auto batcher = DynamicBatcher<std::string, std::vector<float>>::create(options,
//       [&](std::vector<std::string>& texts, std::size_t worker) { return encode_all(texts); });
//   if (!batcher) { /* batcher.status().message() names the bad option */ }
//   auto result = (*batcher)->submit("how do i reset my password").get();
//   if (result.ok()) use(*result.response);
//
// Thread safety: thread-safe. submit() and set_limits() may be called from
// any thread; the batch function runs on the batcher's worker threads
// (several at once with workers > 1, each with its own worker index) and
// callbacks run on worker or monitor threads, never under the batcher's
// lock; a callback must not call shutdown() (it would join its own thread),
// and what it throws is swallowed so the other requests still complete.
// Header-only and generic: nothing in it knows the engine.
#pragma once

#include <algorithm>
#include <array>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <future>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "rapidqa/batch_latency_model.h"
#include "rapidqa/batching_options.h"
#include "rapidqa/clock.h"
#include "rapidqa/detail/batch_plan.h"
#include "rapidqa/status.h"

namespace rapidqa {

enum class BatchStatus {
  kOk,        // the batch ran; response is set
  kRejected,  // the queue was full, or a higher-priority request took the place
  kTimedOut,  // the deadline passed while the request was queued
  kShutDown,  // submitted after shutdown, or failed at a shutdown that does not drain
  kFailed,    // the batch function threw, or returned the wrong number of responses
};

inline const char* batch_status_name(BatchStatus status) noexcept {
  switch (status) {
    case BatchStatus::kOk: return "ok";
    case BatchStatus::kRejected: return "rejected";
    case BatchStatus::kTimedOut: return "timed_out";
    case BatchStatus::kShutDown: return "shut_down";
    case BatchStatus::kFailed: return "failed";
  }
  return "unknown";
}

template <typename Response>
struct BatchResult {
  BatchStatus status = BatchStatus::kFailed;
  std::optional<Response> response;      // set when status is kOk
  std::string message;                   // why, when not kOk
  std::chrono::nanoseconds queued{0};    // from submit to dispatch (or to the failure)
  std::chrono::nanoseconds ran{0};       // the batch function's time for the whole batch
  std::size_t batch_size = 0;            // requests in the batch it ran in

  bool ok() const { return status == BatchStatus::kOk; }
};

struct DynamicBatcherStats {
  std::size_t queue_depth = 0;                     // waiting now
  std::size_t running = 0;                         // requests in batches running now
  std::uint64_t submitted = 0, completed = 0, rejected = 0, timed_out = 0, failed = 0, shut_down = 0;
  std::uint64_t batches = 0;
  std::uint64_t completed_tokens = 0;              // tokens of the completed requests, as submitted
  std::vector<std::uint64_t> batch_sizes;          // [n]: batches of n requests
  std::array<std::uint64_t, kBatchDispatchReasonCount> dispatch_reasons{}; // by BatchDispatchReason
  std::size_t max_batch_size = 0;                  // current limits (the AutoTuner moves them)
  std::chrono::microseconds max_queue_delay{0};
  BatchLatencyModel::Fit latency;                  // what the latency model learned
};

template <typename Request, typename Response>
class DynamicBatcher {
 public:
  // One response per request, in the order given; worker is the index of
  // the calling worker (0 .. workers-1), for per-replica state. An exception
  // fails the batch's requests with its message.
  using BatchFunction = std::function<std::vector<Response>(std::vector<Request>& requests, std::size_t worker)>;
  using Callback = std::function<void(BatchResult<Response>)>;

  // Refuses options out of range with kInvalidArgument naming the field
  // (see DynamicBatcherOptions for the ranges) rather than quietly fixing
  // them; starts the workers and the queue monitor.
  static Result<std::unique_ptr<DynamicBatcher>> create(DynamicBatcherOptions options, BatchFunction run) {
    if (Status valid = validate(options); !valid.is_ok()) return valid;
    if (!run) return Status::invalid_argument("the batch function is empty");
    if (!options.clock) options.clock = steady_clock_instance();
    return std::unique_ptr<DynamicBatcher>(new DynamicBatcher(std::move(options), std::move(run)));
  }

  ~DynamicBatcher() { shutdown(); }
  DynamicBatcher(const DynamicBatcher&) = delete;
  DynamicBatcher& operator=(const DynamicBatcher&) = delete;

  // Enqueues a request; the future is always fulfilled (ok, rejected,
  // timed out, shut down or failed), never abandoned.
  std::future<BatchResult<Response>> submit(Request request, const BatchRequestOptions& options = {}) {
    auto promise = std::make_shared<std::promise<BatchResult<Response>>>();
    auto future = promise->get_future();
    submit(std::move(request), options, [promise](BatchResult<Response> result) { promise->set_value(std::move(result)); });
    return future;
  }

  // The same with a callback, called exactly once (possibly before submit
  // returns, for a rejection). It must not block for long: it runs on a
  // batcher thread.
  void submit(Request request, const BatchRequestOptions& options, Callback done) {
    std::vector<Finished> finished;
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.submitted;
      const auto now = options_.clock->now();
      Pending pending{std::move(request), options, now, std::move(done)};
      if (stopping_) {
        finished.push_back(fail(std::move(pending), BatchStatus::kShutDown, "the batcher is shut down", now));
      } else if (queued_ >= options_.queue_capacity && !make_room_for(options.priority, now, finished)) {
        finished.push_back(fail(std::move(pending), BatchStatus::kRejected,
                                "the queue is full (" + std::to_string(queued_) + " requests waiting)", now));
      } else {
        queue_[index_of(options.priority)].push_back(std::move(pending));
        ++queued_;
        wake_a_worker_if_needed(now);
        // The monitor sleeps until the earliest deadline it knows: only an
        // earlier one needs to wake it.
        if (options.deadline && *options.deadline < monitor_wake_) {
          monitor_wake_ = *options.deadline;
          monitor_cv_.notify_one();
        }
      }
    }
    complete(finished);
  }

  // Moves the batch limits (the AutoTuner's handle); takes effect at the
  // next dispatch decision. A size of 0 is taken as 1.
  void set_limits(std::size_t max_batch_size, std::chrono::microseconds max_queue_delay) {
    std::lock_guard<std::mutex> lock(mu_);
    limits_.max_batch_size = std::max<std::size_t>(1, max_batch_size);
    limits_.max_queue_delay = std::max(std::chrono::microseconds(0), max_queue_delay);
    work_cv_.notify_all();
  }

  BatchLimits limits() const {
    std::lock_guard<std::mutex> lock(mu_);
    return limits_;
  }

  // The batch latency the model predicts for a batch of this size and cost.
  std::chrono::nanoseconds predict_latency(std::size_t batch_size, std::size_t tokens) const {
    std::lock_guard<std::mutex> lock(mu_);
    return model_.predict(batch_size, tokens);
  }

  // How long a request of this cost submitted now would take to complete:
  // the batches queued ahead of it (shared among the workers), a wait for
  // company when its batch would not be full, and its own batch's run.
  // Zero while the latency model has not learned yet.
  std::chrono::nanoseconds predict_completion(std::size_t tokens) const {
    std::lock_guard<std::mutex> lock(mu_);
    if (!model_.ready()) return std::chrono::nanoseconds(0);
    const std::size_t size = limits_.max_batch_size;
    const std::size_t ahead = queued_ / size;
    const std::size_t own = queued_ % size + 1;
    auto total = model_.predict(own, own * tokens);
    total += (ahead + running_ / size) * model_.predict(size, size * tokens) / options_.workers;
    if (own < size) total += std::chrono::duration_cast<std::chrono::nanoseconds>(limits_.max_queue_delay);
    return total;
  }

  // Whether the queue holds at least this fraction of its capacity.
  bool saturated(double fraction) const {
    std::lock_guard<std::mutex> lock(mu_);
    return static_cast<double>(queued_) >= fraction * static_cast<double>(options_.queue_capacity);
  }

  DynamicBatcherStats stats() const {
    std::lock_guard<std::mutex> lock(mu_);
    DynamicBatcherStats s = stats_;
    s.queue_depth = queued_;
    s.running = running_;
    s.max_batch_size = limits_.max_batch_size;
    s.max_queue_delay = limits_.max_queue_delay;
    s.latency = model_.fit();
    return s;
  }

  // Whether shutdown() has begun: every later submit completes kShutDown.
  bool shutting_down() const {
    std::lock_guard<std::mutex> lock(mu_);
    return stopping_;
  }

  // Stops taking requests, runs (drain_on_shutdown) or fails what is
  // queued, and joins the threads. Idempotent; the destructor calls it.
  void shutdown() {
    // Concurrent shutdowns (an explicit one racing the destructor) join once.
    std::lock_guard<std::mutex> once(shutdown_mu_);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_ && workers_.empty()) return;
      stopping_ = true;
    }
    work_cv_.notify_all();
    monitor_cv_.notify_all();
    for (auto& w : workers_) {
      if (w.joinable()) w.join();
    }
    if (monitor_.joinable()) monitor_.join();
    std::vector<Finished> finished;
    {
      std::lock_guard<std::mutex> lock(mu_);
      workers_.clear();
      const auto now = options_.clock->now();
      for (auto& queue : queue_) {
        for (auto& p : queue) finished.push_back(fail(std::move(p), BatchStatus::kShutDown, "the batcher shut down", now));
        queue.clear();
      }
      queued_ = 0;
    }
    complete(finished);
  }

 private:
  struct Pending {
    Request request;
    BatchRequestOptions options;
    Clock::time_point enqueued;
    Callback done;
  };
  struct Finished {
    Callback done;
    BatchResult<Response> result;
  };

  DynamicBatcher(DynamicBatcherOptions options, BatchFunction run)
      : options_(std::move(options)), run_(std::move(run)), model_(options_.latency_forgetting) {
    limits_.max_batch_size = options_.max_batch_size;
    limits_.max_batch_tokens = options_.max_batch_tokens;
    limits_.max_queue_delay = options_.max_queue_delay;
    limits_.target_latency = options_.target_latency;
    planned_wake_.assign(options_.workers, Clock::time_point::max());
    for (std::size_t w = 0; w < options_.workers; ++w) workers_.emplace_back([this, w] { work(w); });
    monitor_ = std::thread([this] { monitor(); });
  }

  static Status validate(const DynamicBatcherOptions& o) {
    if (o.max_batch_size == 0) return Status::invalid_argument("max_batch_size must be at least 1");
    if (o.workers == 0) return Status::invalid_argument("workers must be at least 1");
    if (o.queue_capacity == 0) return Status::invalid_argument("queue_capacity must be at least 1");
    if (o.max_queue_delay.count() < 0) {
      return Status::invalid_argument("max_queue_delay " + std::to_string(o.max_queue_delay.count()) + " us is negative");
    }
    if (o.target_latency.count() < 0) {
      return Status::invalid_argument("target_latency " + std::to_string(o.target_latency.count()) + " us is negative");
    }
    if (!(o.latency_forgetting >= 0.5 && o.latency_forgetting <= 1.0)) {  // false for NaN too
      return Status::invalid_argument("latency_forgetting " + std::to_string(o.latency_forgetting) +
                                      " is outside [0.5, 1]");
    }
    return Status::ok();
  }

  static std::size_t index_of(BatchPriority p) { return std::min(static_cast<std::size_t>(p), kBatchPriorityCount - 1); }

  Finished fail(Pending&& p, BatchStatus status, std::string message, Clock::time_point now) {  // mu_ held
    switch (status) {
      case BatchStatus::kRejected: ++stats_.rejected; break;
      case BatchStatus::kTimedOut: ++stats_.timed_out; break;
      case BatchStatus::kShutDown: ++stats_.shut_down; break;
      default: ++stats_.failed; break;
    }
    BatchResult<Response> r;
    r.status = status;
    r.message = std::move(message);
    r.queued = std::chrono::duration_cast<std::chrono::nanoseconds>(now - p.enqueued);
    return {std::move(p.done), std::move(r)};
  }

  // A full queue lets a request in only by rejecting the newest request of
  // a lower priority. mu_ held.
  bool make_room_for(BatchPriority priority, Clock::time_point now, std::vector<Finished>& finished) {
    for (std::size_t q = kBatchPriorityCount; q-- > index_of(priority) + 1;) {
      if (queue_[q].empty()) continue;
      finished.push_back(fail(std::move(queue_[q].back()), BatchStatus::kRejected,
                              "the queue is full: a higher-priority request took the place", now));
      queue_[q].pop_back();
      --queued_;
      return true;
    }
    return false;
  }

  void complete(std::vector<Finished>& finished) {  // mu_ not held
    for (auto& f : finished) {
      if (!f.done) continue;
      try {
        f.done(std::move(f.result));
      } catch (...) {
        // A throwing callback is the caller's bug; the rest still complete.
      }
    }
    finished.clear();
  }

  // The queue head as the dispatch decision sees it, in a buffer kept
  // between calls (the decision runs on every submit while a worker waits).
  const std::vector<detail::BatchCandidate>& candidates() {  // mu_ held
    std::vector<detail::BatchCandidate>& out = candidates_;
    out.clear();
    const std::size_t want = limits_.max_batch_size + 1;
    for (const auto& queue : queue_) {
      for (const auto& p : queue) {
        if (out.size() == want) return out;
        out.push_back({p.enqueued, p.options.deadline, p.options.tokens});
      }
    }
    return out;
  }

  // After a request joined the queue: wakes a worker only when one must
  // decide again. A worker waiting for company until its planned time
  // needs waking only when the new request fills the batch or brings that
  // time forward (its deadline, the latency model); waking one for every
  // request cost a context switch per request under load. mu_ held.
  void wake_a_worker_if_needed(Clock::time_point now) {
    const auto planned = *std::min_element(planned_wake_.begin(), planned_wake_.end());
    if (planned == Clock::time_point::max()) {
      // No worker is waiting for company: an idle one must look at the
      // queue; busy ones look when their batch is done.
      if (idle_workers_ > 0) work_cv_.notify_one();
      return;
    }
    const detail::BatchPlan plan = detail::plan_batch(candidates(), limits_, model_, now, false);
    if (plan.take > 0 || plan.wake_at < planned) work_cv_.notify_one();
  }

  std::vector<Pending> pop(std::size_t count) {  // mu_ held
    std::vector<Pending> batch;
    batch.reserve(count);
    for (auto& queue : queue_) {
      while (batch.size() < count && !queue.empty()) {
        batch.push_back(std::move(queue.front()));
        queue.pop_front();
      }
    }
    queued_ -= batch.size();
    return batch;
  }

  void work(std::size_t worker) {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      if (queued_ == 0) {
        if (stopping_) return;
        ++idle_workers_;
        work_cv_.wait(lock);
        --idle_workers_;
        continue;
      }
      const bool draining = stopping_ && options_.drain_on_shutdown;
      if (stopping_ && !draining) return;  // shutdown() fails what is left
      const auto now = options_.clock->now();
      const detail::BatchPlan plan = detail::plan_batch(candidates(), limits_, model_, now, draining);
      if (plan.take == 0) {
        planned_wake_[worker] = plan.wake_at;
        options_.clock->wait_until(work_cv_, lock, plan.wake_at);
        planned_wake_[worker] = Clock::time_point::max();
        continue;
      }
      ++stats_.dispatch_reasons[static_cast<std::size_t>(plan.reason)];
      std::vector<Pending> batch = pop(plan.take);
      running_ += batch.size();
      if (queued_ > 0) work_cv_.notify_one();  // another worker may take the rest
      lock.unlock();
      run_batch(batch, worker, now);
      lock.lock();
      running_ -= batch.size();
    }
  }

  void run_batch(std::vector<Pending>& batch, std::size_t worker, Clock::time_point dispatched) {  // mu_ not held
    std::vector<Request> requests;
    requests.reserve(batch.size());
    std::size_t tokens = 0;
    for (auto& p : batch) {
      requests.push_back(std::move(p.request));
      tokens += p.options.tokens;
    }
    std::vector<Response> responses;
    std::string error;
    const auto started = options_.clock->now();
    try {
      responses = run_(requests, worker);
      if (responses.size() != batch.size()) {
        error = "the batch function returned " + std::to_string(responses.size()) + " responses for " +
                std::to_string(batch.size()) + " requests";
      }
    } catch (const std::exception& e) {
      error = std::string("the batch function failed: ") + e.what();
    } catch (...) {
      error = "the batch function failed with an unknown exception";
    }
    const auto ran = std::chrono::duration_cast<std::chrono::nanoseconds>(options_.clock->now() - started);
    std::vector<Finished> finished;
    finished.reserve(batch.size());
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.batches;
      if (stats_.batch_sizes.size() <= batch.size()) stats_.batch_sizes.resize(batch.size() + 1, 0);
      ++stats_.batch_sizes[batch.size()];
      if (error.empty()) {
        model_.observe(batch.size(), tokens, ran);
        stats_.completed += batch.size();
        stats_.completed_tokens += tokens;
      } else {
        stats_.failed += batch.size();
      }
    }
    for (std::size_t i = 0; i < batch.size(); ++i) {
      BatchResult<Response> r;
      r.status = error.empty() ? BatchStatus::kOk : BatchStatus::kFailed;
      if (error.empty()) r.response = std::move(responses[i]);
      r.message = error;
      r.queued = std::chrono::duration_cast<std::chrono::nanoseconds>(dispatched - batch[i].enqueued);
      r.ran = ran;
      r.batch_size = batch.size();
      finished.push_back({std::move(batch[i].done), std::move(r)});
    }
    complete(finished);
  }

  // The queue monitor: completes requests at their deadline with kTimedOut,
  // so a caller never waits past it, however long the running batches take.
  void monitor() {
    std::unique_lock<std::mutex> lock(mu_);
    std::vector<Finished> finished;
    for (;;) {
      const auto now = options_.clock->now();
      auto earliest = Clock::time_point::max();
      for (auto& queue : queue_) {
        for (auto it = queue.begin(); it != queue.end();) {
          if (it->options.deadline && *it->options.deadline <= now) {
            finished.push_back(fail(std::move(*it), BatchStatus::kTimedOut, "the deadline passed in the queue", now));
            it = queue.erase(it);
            --queued_;
          } else {
            if (it->options.deadline) earliest = std::min(earliest, *it->options.deadline);
            ++it;
          }
        }
      }
      if (!finished.empty()) {
        lock.unlock();
        complete(finished);
        lock.lock();
        continue;
      }
      // At shutdown the workers drain (or shutdown() fails) the rest.
      if (stopping_) return;
      monitor_wake_ = earliest;
      if (earliest == Clock::time_point::max()) {
        monitor_cv_.wait(lock);
      } else {
        options_.clock->wait_until(monitor_cv_, lock, earliest);
      }
    }
  }

  const DynamicBatcherOptions options_;
  const BatchFunction run_;
  mutable std::mutex mu_;
  std::condition_variable work_cv_;     // new requests, limits, shutdown
  std::condition_variable monitor_cv_;  // new deadlines, shutdown
  std::array<std::deque<Pending>, kBatchPriorityCount> queue_;  // guarded by mu_
  std::size_t queued_ = 0;              // guarded by mu_
  Clock::time_point monitor_wake_ = Clock::time_point::max();  // guarded by mu_: the monitor's next wake
  std::size_t running_ = 0;             // guarded by mu_
  std::size_t idle_workers_ = 0;        // guarded by mu_: waiting for an empty queue to fill
  // guarded by mu_: per worker, when its wait for company ends (max: not waiting)
  std::vector<Clock::time_point> planned_wake_;
  std::vector<detail::BatchCandidate> candidates_;  // guarded by mu_: candidates()'s buffer
  bool stopping_ = false;               // guarded by mu_
  BatchLimits limits_;                  // guarded by mu_
  BatchLatencyModel model_;             // guarded by mu_
  DynamicBatcherStats stats_;           // guarded by mu_
  std::mutex shutdown_mu_;              // serialises shutdown()
  std::vector<std::thread> workers_;
  std::thread monitor_;
};

}  // namespace rapidqa

// DynamicBatcher and its latency model: batch formation (size, tokens,
// delay, prediction, deadlines), timeouts in the queue, rejection,
// priorities, failures, several workers and shutdown. Time is a ManualClock
// wherever a rule depends on it.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "rapidqa/detail/batch_plan.h"
#include "rapidqa/dynamic_batcher.h"
#include "rapidqa/qa_engine.h"

using namespace std::chrono_literals;
using rapidqa::detail::BatchCandidate;
using rapidqa::BatchLatencyModel;
using rapidqa::BatchLimits;
using rapidqa::detail::BatchPlan;
using rapidqa::BatchPriority;
using rapidqa::BatchRequestOptions;
using rapidqa::BatchStatus;
using rapidqa::DynamicBatcherOptions;
using rapidqa::ManualClock;

namespace {

using Batcher = rapidqa::DynamicBatcher<int, int>;

std::unique_ptr<Batcher> make_batcher(const DynamicBatcherOptions& options, Batcher::BatchFunction run) {
  auto made = Batcher::create(options, std::move(run));
  REQUIRE(made.is_ok());
  return std::move(made).value();
}

// A gate the batch function waits at until the test opens it, so the test
// knows exactly what is running and what is queued.
class Gate {
 public:
  void wait() {
    std::unique_lock<std::mutex> lock(mu_);
    ++waiting_;
    cv_.notify_all();
    cv_.wait(lock, [&] { return open_; });
  }
  void open() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = true;
    cv_.notify_all();
  }
  // Blocks until n callers are waiting at the gate (a bounded wait).
  bool await_waiting(int n) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, 10s, [&] { return waiting_ >= n; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int waiting_ = 0;
  bool open_ = false;
};

template <typename T>
bool ready_within(std::future<T>& f, std::chrono::milliseconds real_time) {
  return f.wait_for(real_time) == std::future_status::ready;
}

// Manual time does not move by itself: a batch that may only form once time
// has passed cannot form, however long the real wait.
template <typename T>
bool still_pending(std::future<T>& f) {
  return f.wait_for(30ms) == std::future_status::timeout;
}

BatchLimits limits(std::size_t size, std::chrono::microseconds delay, std::chrono::microseconds target = 0us,
                   std::size_t tokens = 0) {
  BatchLimits l;
  l.max_batch_size = size;
  l.max_queue_delay = delay;
  l.target_latency = target;
  l.max_batch_tokens = tokens;
  return l;
}

std::vector<int> doubled(const std::vector<int>& in) {
  std::vector<int> out;
  for (int x : in) out.push_back(2 * x);
  return out;
}

}  // namespace

TEST_CASE("Batch plan: full by count or tokens, else wait for the delay", "[batch][plan]") {
  const BatchLatencyModel untrained;
  const ManualClock clock;
  const auto t0 = clock.now();
  std::vector<BatchCandidate> four(4, BatchCandidate{t0, std::nullopt, 10});
  auto plan = rapidqa::detail::plan_batch(four, limits(4, 5000us), untrained, t0, false);
  CHECK(plan.take == 4);
  CHECK(plan.reason == BatchPlan::Reason::kFull);

  plan = rapidqa::detail::plan_batch(four, limits(8, 5000us, 0us, 25), untrained, t0, false);
  CHECK(plan.take == 2);  // a third would pass the 25-token budget
  CHECK(plan.reason == BatchPlan::Reason::kFull);

  std::vector<BatchCandidate> one{{t0, std::nullopt, 100}};
  plan = rapidqa::detail::plan_batch(one, limits(8, 5000us, 0us, 25), untrained, t0, false);
  CHECK(plan.take == 0);  // one request over the budget still runs, alone, but only when due
  plan = rapidqa::detail::plan_batch(one, limits(8, 5000us, 0us, 25), untrained, t0 + 5ms, false);
  CHECK(plan.take == 1);

  std::vector<BatchCandidate> two(2, BatchCandidate{t0, std::nullopt, 1});
  plan = rapidqa::detail::plan_batch(two, limits(8, 5000us), untrained, t0 + 4999us, false);
  CHECK(plan.take == 0);
  CHECK(plan.wake_at == t0 + 5ms);
  plan = rapidqa::detail::plan_batch(two, limits(8, 5000us), untrained, t0 + 5ms, false);
  CHECK(plan.take == 2);
  CHECK(plan.reason == BatchPlan::Reason::kDelay);
  plan = rapidqa::detail::plan_batch(two, limits(8, 5000us), untrained, t0, true);
  CHECK(plan.take == 2);
  CHECK(plan.reason == BatchPlan::Reason::kDrain);
}

TEST_CASE("Batch plan: the latency model dispatches early to meet the target and deadlines", "[batch][plan]") {
  BatchLatencyModel model(1.0);
  for (std::size_t n : {1, 2, 4, 8, 1, 4}) model.observe(n, n, std::chrono::microseconds(2000 + 1000 * n));
  REQUIRE(model.ready());
  const ManualClock clock;
  const auto t0 = clock.now();
  std::vector<BatchCandidate> one{{t0, std::nullopt, 1}};
  // One more request would make a batch of 2: ~4 ms. With a 10 ms target the
  // oldest request can wait until 6 ms, well before the 1 s delay.
  auto plan = rapidqa::detail::plan_batch(one, limits(64, 1000000us, 10000us), model, t0 + 5ms, false);
  CHECK(plan.take == 0);
  CHECK(plan.wake_at > t0 + 5900us);
  CHECK(plan.wake_at < t0 + 6100us);
  plan = rapidqa::detail::plan_batch(one, limits(64, 1000000us, 10000us), model, t0 + 6100us, false);
  CHECK(plan.take == 1);
  CHECK(plan.reason == BatchPlan::Reason::kPredicted);

  std::vector<BatchCandidate> due{{t0, t0 + 5ms, 1}};  // no target, but a deadline
  plan = rapidqa::detail::plan_batch(due, limits(64, 1000000us), model, t0 + 1100us, false);
  CHECK(plan.take == 1);
  CHECK(plan.reason == BatchPlan::Reason::kPredicted);
}

TEST_CASE("The latency model learns batch cost from size and tokens", "[batch][model]") {
  BatchLatencyModel model(1.0);
  CHECK_FALSE(model.ready());
  CHECK(model.predict(4, 40).count() == 0);
  for (std::size_t n = 1; n <= 16; ++n) {
    for (std::size_t tokens_each : {8, 32}) {
      model.observe(n, n * tokens_each, std::chrono::microseconds(500 + 40 * n + 3 * n * tokens_each));
    }
  }
  const auto fit = model.fit();
  CHECK(fit.samples == 32);
  CHECK(fit.intercept_us == Approx(500).margin(1));
  CHECK(fit.per_request_us == Approx(40).margin(0.5));
  CHECK(fit.per_token_us == Approx(3).margin(0.05));
  CHECK(std::chrono::duration_cast<std::chrono::microseconds>(model.predict(10, 200)).count() ==
        Approx(500 + 400 + 600).margin(2));
}

TEST_CASE("A full batch runs at once, a partial one after the queue delay", "[batch]") {
  auto clock = std::make_shared<ManualClock>();
  DynamicBatcherOptions options;
  options.max_batch_size = 4;
  options.max_queue_delay = 5ms;
  options.clock = clock;
  auto batcher = make_batcher(options, [](std::vector<int>& in, std::size_t) { return doubled(in); });

  std::vector<std::future<rapidqa::BatchResult<int>>> full;
  for (int i = 0; i < 4; ++i) full.push_back(batcher->submit(i));
  for (int i = 0; i < 4; ++i) {
    REQUIRE(ready_within(full[i], 10s));
    const auto r = full[i].get();
    CHECK(r.ok());
    CHECK(*r.response == 2 * i);
    CHECK(r.batch_size == 4);
  }

  auto a = batcher->submit(10), b = batcher->submit(11);
  CHECK(still_pending(a));
  clock->advance(5ms);
  REQUIRE(ready_within(a, 10s));
  REQUIRE(ready_within(b, 10s));
  CHECK(a.get().batch_size == 2);
  CHECK(*b.get().response == 22);
  const auto stats = batcher->stats();
  CHECK(stats.batches == 2);
  CHECK(stats.batch_sizes[4] == 1);
  CHECK(stats.batch_sizes[2] == 1);
  CHECK(stats.dispatch_reasons[static_cast<std::size_t>(BatchPlan::Reason::kFull)] == 1);
  CHECK(stats.dispatch_reasons[static_cast<std::size_t>(BatchPlan::Reason::kDelay)] == 1);
}

TEST_CASE("A learned latency model dispatches before the delay to hold the target", "[batch]") {
  auto clock = std::make_shared<ManualClock>();
  DynamicBatcherOptions options;
  options.max_batch_size = 64;
  options.max_queue_delay = 1s;
  options.target_latency = 10ms;
  options.latency_forgetting = 1.0;
  options.clock = clock;
  // Each batch "takes" 2 ms + 1 ms per request of manual time.
  auto batcher = make_batcher(options, [&](std::vector<int>& in, std::size_t) {
    clock->advance(std::chrono::microseconds(2000 + 1000 * in.size()));
    return doubled(in);
  });
  // Teach the model with batches that run at once (full batches of one).
  batcher->set_limits(1, 1s);
  for (int i = 0; i < 4; ++i) REQUIRE(batcher->submit(i).get().ok());
  batcher->set_limits(2, 1s);
  for (int round = 0; round < 2; ++round) {
    auto x = batcher->submit(1), y = batcher->submit(2);
    REQUIRE(x.get().ok());
    REQUIRE(y.get().ok());
  }
  batcher->set_limits(64, 1s);
  REQUIRE(batcher->stats().latency.samples == 6);

  auto lone = batcher->submit(7);
  CHECK(still_pending(lone));
  clock->advance(5ms);  // a batch of 2 would take ~4 ms: 5 + 4 < 10, it may still wait
  CHECK(still_pending(lone));
  clock->advance(1500us);
  REQUIRE(ready_within(lone, 10s));
  const auto r = lone.get();
  CHECK(r.ok());
  CHECK(r.batch_size == 1);
  CHECK(batcher->stats().dispatch_reasons[static_cast<std::size_t>(BatchPlan::Reason::kPredicted)] == 1);
}

// On the steady clock: a worker waiting for company until its planned
// time is not woken for every request, so the one that fills the batch or
// brings the dispatch forward must wake it (with an hour's delay, nothing
// else would).
TEST_CASE("A waiting worker is woken by the request that fills its batch or moves its dispatch forward", "[batch]") {
  DynamicBatcherOptions options;
  options.max_batch_size = 4;
  options.max_queue_delay = std::chrono::hours(1);
  options.latency_forgetting = 1.0;
  // Each batch takes 50 ms + 25 ms per request of real time.
  auto batcher = make_batcher(options, [](std::vector<int>& in, std::size_t) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50 + 25 * in.size()));
    return doubled(in);
  });

  std::vector<std::future<rapidqa::BatchResult<int>>> filling;
  for (int i = 0; i < 3; ++i) filling.push_back(batcher->submit(i));
  CHECK(still_pending(filling[0]));
  filling.push_back(batcher->submit(3));
  for (auto& f : filling) {
    REQUIRE(ready_within(f, 10s));
    CHECK(f.get().batch_size == 4);
  }

  // Teach the latency model (batches of one and of two), then wait for
  // company again with room for 64.
  batcher->set_limits(1, std::chrono::hours(1));
  for (int i = 0; i < 2; ++i) REQUIRE(batcher->submit(i).get().ok());
  batcher->set_limits(2, std::chrono::hours(1));
  auto x = batcher->submit(1), y = batcher->submit(2);
  REQUIRE(x.get().ok());
  REQUIRE(y.get().ok());
  batcher->set_limits(64, std::chrono::hours(1));
  REQUIRE(batcher->stats().latency.samples == 4);

  auto patient = batcher->submit(7);
  CHECK(still_pending(patient));
  // A batch of three would take about 125 ms: the worker must start this
  // one by then to make the deadline, an hour before its planned time.
  BatchRequestOptions due;
  due.deadline = rapidqa::steady_clock_instance()->now() + 1s;
  auto urgent = batcher->submit(8, due);
  REQUIRE(ready_within(urgent, 10s));
  const auto u = urgent.get();
  CHECK(u.ok());
  CHECK(u.batch_size == 2);
  REQUIRE(ready_within(patient, 10s));
  CHECK(patient.get().ok());
  CHECK(batcher->stats().dispatch_reasons[static_cast<std::size_t>(BatchPlan::Reason::kPredicted)] == 1);
}

TEST_CASE("A request whose deadline passes in the queue times out then, while the worker is busy", "[batch]") {
  auto clock = std::make_shared<ManualClock>();
  DynamicBatcherOptions options;
  options.max_batch_size = 1;
  options.clock = clock;
  Gate gate;
  auto batcher = make_batcher(options, [&](std::vector<int>& in, std::size_t) {
    gate.wait();
    return doubled(in);
  });
  auto running = batcher->submit(1);
  REQUIRE(gate.await_waiting(1));
  BatchRequestOptions due;
  due.deadline = clock->now() + 3ms;
  auto late = batcher->submit(2, due);
  CHECK(still_pending(late));
  clock->advance(3ms);
  REQUIRE(ready_within(late, 10s));
  const auto r = late.get();
  CHECK(r.status == BatchStatus::kTimedOut);
  CHECK(r.message.find("deadline") != std::string::npos);
  CHECK(r.queued == 3ms);
  gate.open();
  CHECK(running.get().ok());
  CHECK(batcher->stats().timed_out == 1);
}

TEST_CASE("A full queue rejects at once, and a high-priority request takes a low one's place", "[batch]") {
  DynamicBatcherOptions options;
  options.max_batch_size = 1;
  options.max_queue_delay = 0us;
  options.queue_capacity = 2;
  Gate gate;
  std::mutex order_mu;
  std::vector<int> order;
  auto batcher = make_batcher(options, [&](std::vector<int>& in, std::size_t) {
    gate.wait();
    std::lock_guard<std::mutex> lock(order_mu);
    order.insert(order.end(), in.begin(), in.end());
    return doubled(in);
  });
  auto running = batcher->submit(0);
  REQUIRE(gate.await_waiting(1));
  BatchRequestOptions low, high;
  low.priority = BatchPriority::kLow;
  high.priority = BatchPriority::kHigh;
  auto low1 = batcher->submit(1, low);
  auto normal = batcher->submit(2);
  auto rejected = batcher->submit(3, low);
  REQUIRE(ready_within(rejected, 1s));
  const auto r = rejected.get();
  CHECK(r.status == BatchStatus::kRejected);
  CHECK(r.message.find("queue is full") != std::string::npos);
  auto urgent = batcher->submit(4, high);  // takes the low request's place
  REQUIRE(ready_within(low1, 1s));
  CHECK(low1.get().status == BatchStatus::kRejected);
  gate.open();
  CHECK(running.get().ok());
  CHECK(urgent.get().ok());
  CHECK(normal.get().ok());
  CHECK(order == std::vector<int>{0, 4, 2});  // highest priority first
  CHECK(batcher->stats().rejected == 2);
}

TEST_CASE("A failing batch function fails its requests with the reason", "[batch]") {
  DynamicBatcherOptions options;
  options.max_batch_size = 2;
  options.max_queue_delay = 0us;
  auto throws = make_batcher(options, [](std::vector<int>&, std::size_t) -> std::vector<int> { throw std::runtime_error("model on fire"); });
  auto r = throws->submit(1).get();
  CHECK(r.status == BatchStatus::kFailed);
  CHECK(r.message.find("model on fire") != std::string::npos);
  auto short_answer = make_batcher(options, [](std::vector<int>&, std::size_t) { return std::vector<int>{}; });
  r = short_answer->submit(1).get();
  CHECK(r.status == BatchStatus::kFailed);
  CHECK(r.message.find("0 responses for 1") != std::string::npos);
}

TEST_CASE("Several workers run batches side by side", "[batch]") {
  DynamicBatcherOptions options;
  options.max_batch_size = 1;
  options.max_queue_delay = 0us;
  options.workers = 2;
  Gate gate;
  std::mutex mu;
  std::set<std::size_t> workers_seen;
  auto batcher = make_batcher(options, [&](std::vector<int>& in, std::size_t worker) {
    {
      std::lock_guard<std::mutex> lock(mu);
      workers_seen.insert(worker);
    }
    gate.wait();
    return doubled(in);
  });
  auto a = batcher->submit(1), b = batcher->submit(2);
  REQUIRE(gate.await_waiting(2));  // both at once: two replicas
  gate.open();
  CHECK(a.get().ok());
  CHECK(b.get().ok());
  CHECK(workers_seen == std::set<std::size_t>{0, 1});
}

// The settings for a remote encoder: nothing waits for company, and the
// requests that arrive while every worker is out form the next batch.
TEST_CASE("With the remote encoder's settings a lone request leaves at once and a busy spell forms a batch", "[batch]") {
  DynamicBatcherOptions options = rapidqa::remote_encoder_batching();
  REQUIRE(options.workers == 4);
  REQUIRE(options.max_queue_delay == 0us);
  auto clock = std::make_shared<ManualClock>();  // never moved: no dispatch may wait for time
  options.clock = clock;
  Gate gate;
  auto batcher = make_batcher(options, [&](std::vector<int>& in, std::size_t) {
    gate.wait();
    return doubled(in);
  });
  std::vector<std::future<rapidqa::BatchResult<int>>> first;
  for (int i = 0; i < 4; ++i) {
    first.push_back(batcher->submit(i));
    REQUIRE(gate.await_waiting(i + 1));  // each leaves alone, on a free worker
  }
  std::vector<std::future<rapidqa::BatchResult<int>>> next;
  for (int i = 4; i < 10; ++i) next.push_back(batcher->submit(i));
  CHECK(batcher->stats().queue_depth == 6);
  gate.open();
  for (auto& f : first) CHECK(f.get().batch_size == 1);
  std::size_t largest = 0;
  for (auto& f : next) {
    REQUIRE(ready_within(f, 10s));
    const auto r = f.get();
    CHECK(r.ok());
    largest = std::max(largest, r.batch_size);
  }
  // The first worker back takes all six waiting; none is left for the rest.
  CHECK(largest == 6);
}

TEST_CASE("Shutdown drains or fails every pending request - none is left hanging", "[batch]") {
  for (const bool drain : {true, false}) {
    DynamicBatcherOptions options;
    options.max_batch_size = 1;
    options.max_queue_delay = 0us;
    options.drain_on_shutdown = drain;
    Gate gate;
    auto batcher = make_batcher(options, [&](std::vector<int>& in, std::size_t) {
      gate.wait();
      return doubled(in);
    });
    auto running = batcher->submit(0);
    REQUIRE(gate.await_waiting(1));
    std::vector<std::future<rapidqa::BatchResult<int>>> queued;
    for (int i = 1; i <= 3; ++i) queued.push_back(batcher->submit(i));
    auto stopping = std::async(std::launch::async, [&] { batcher->shutdown(); });
    while (!batcher->shutting_down()) std::this_thread::yield();
    auto after = batcher->submit(9);
    CHECK(after.get().status == BatchStatus::kShutDown);
    gate.open();
    stopping.get();
    CHECK(running.get().ok());
    for (auto& f : queued) {
      REQUIRE(ready_within(f, 1s));
      CHECK(f.get().status == (drain ? BatchStatus::kOk : BatchStatus::kShutDown));
    }
    const auto s = batcher->stats();
    CHECK(s.completed + s.shut_down == 5);
  }
}

TEST_CASE("Eight threads submitting: every request completes once, with its own response", "[batch][concurrency]") {
  DynamicBatcherOptions options;
  options.max_batch_size = 16;
  options.max_queue_delay = 200us;
  options.queue_capacity = 100000;
  options.workers = 2;
  auto batcher = make_batcher(options, [](std::vector<int>& in, std::size_t) { return doubled(in); });
  constexpr int kThreads = 8, kEach = 2000;
  std::atomic<int> wrong{0}, done{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        const int x = t * kEach + i;
        batcher->submit(x, {}, [&, x](rapidqa::BatchResult<int> r) {
          if (!r.ok() || *r.response != 2 * x) ++wrong;
          ++done;
        });
      }
    });
  }
  for (auto& t : threads) t.join();
  batcher->shutdown();
  CHECK(done.load() == kThreads * kEach);
  CHECK(wrong.load() == 0);
  const auto s = batcher->stats();
  CHECK(s.completed == static_cast<std::uint64_t>(kThreads * kEach));
  CHECK(s.batches < static_cast<std::uint64_t>(kThreads * kEach));  // requests were batched
}

TEST_CASE("Batcher options out of range are refused with the field's name, not quietly fixed", "[batch]") {
  auto refusal = [](auto change) {
    DynamicBatcherOptions options;
    change(options);
    auto batcher = Batcher::create(options, [](std::vector<int>& in, std::size_t) { return in; });
    REQUIRE_FALSE(batcher.is_ok());
    CHECK(batcher.status().code() == rapidqa::StatusCode::kInvalidArgument);
    return batcher.status().message();
  };
  CHECK_THAT(refusal([](auto& o) { o.max_batch_size = 0; }), Catch::Contains("max_batch_size"));
  CHECK_THAT(refusal([](auto& o) { o.workers = 0; }), Catch::Contains("workers"));
  CHECK_THAT(refusal([](auto& o) { o.queue_capacity = 0; }), Catch::Contains("queue_capacity"));
  CHECK_THAT(refusal([](auto& o) { o.max_queue_delay = -1us; }), Catch::Contains("max_queue_delay"));
  CHECK_THAT(refusal([](auto& o) { o.target_latency = -1us; }), Catch::Contains("target_latency"));
  CHECK_THAT(refusal([](auto& o) { o.latency_forgetting = 0.2; }), Catch::Contains("latency_forgetting"));
  auto empty = Batcher::create({}, nullptr);
  CHECK_FALSE(empty.is_ok());
  CHECK(Batcher::create({}, [](std::vector<int>& in, std::size_t) { return in; }).is_ok());
}

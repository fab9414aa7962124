// AutoTuner: the practice's rule (shrink 20% over 300 ms at high load, grow
// 15% under 200 ms with spare capacity), hysteresis, bounded steps, the
// history, and the owned loop on a manual clock.
#include <catch2/catch.hpp>

#include <chrono>
#include <memory>
#include <thread>

#include "rapidqa/auto_tuner.h"
#include "rapidqa/dynamic_batcher.h"

using namespace std::chrono_literals;
using rapidqa::AutoTuner;
using rapidqa::AutoTunerOptions;
using rapidqa::BatchControl;
using rapidqa::LoadSample;

namespace {

std::unique_ptr<AutoTuner> make_tuner(const AutoTunerOptions& options, AutoTuner::Sampler sampler, BatchControl control) {
  auto made = AutoTuner::create(options, std::move(sampler), std::move(control));
  REQUIRE(made.is_ok());
  return std::move(made).value();
}

// A batcher stand-in that only holds limits.
struct Limits {
  std::size_t size = 20;
  std::chrono::microseconds delay{10000};
  BatchControl control() {
    return {[this] { return std::make_pair(size, delay); },
            [this](std::size_t s, std::chrono::microseconds d) {
              size = s;
              delay = d;
            }};
  }
};

LoadSample sample(std::chrono::milliseconds p99, double qps) {
  return {std::chrono::duration_cast<std::chrono::microseconds>(p99), qps, 100};
}

}  // namespace

TEST_CASE("The tuner shrinks 20% when p99 is over 300 ms at high load, after two agreeing intervals", "[tuner]") {
  Limits limits;
  LoadSample now = sample(350ms, 800);
  auto tuner = make_tuner({}, [&] { return now; }, limits.control());
  CHECK_FALSE(tuner->tune_once());  // hysteresis: one interval is not enough
  const auto move = tuner->tune_once();
  REQUIRE(move);
  CHECK(limits.size == 16);
  CHECK(limits.delay == 8000us);
  CHECK(move->old_batch_size == 20);
  CHECK(move->reason.find("shrink") != std::string::npos);
  // High p99 at low load is not the batcher's doing: hold.
  now = sample(350ms, 100);
  CHECK_FALSE(tuner->tune_once());
  CHECK_FALSE(tuner->tune_once());
  CHECK(limits.size == 16);
}

TEST_CASE("The tuner grows 15% with spare capacity, in bounded steps, and never past its bounds", "[tuner]") {
  Limits limits;
  AutoTunerOptions options;
  options.hysteresis = 1;
  options.max_batch_size = 24;
  options.max_step = 2;
  LoadSample now = sample(50ms, 100);
  auto tuner = make_tuner(options, [&] { return now; }, limits.control());
  REQUIRE(tuner->tune_once());
  CHECK(limits.size == 22);  // 15% of 20 is 3, but a step is at most 2
  CHECK(limits.delay == 11500us);
  REQUIRE(tuner->tune_once());
  CHECK(limits.size == 24);
  tuner->tune_once();
  CHECK(limits.size == 24);  // the bound holds
  // Between the thresholds nothing moves, and no signal moves nothing.
  now = sample(250ms, 400);
  CHECK_FALSE(tuner->tune_once());
  now = LoadSample{};
  CHECK_FALSE(tuner->tune_once());
  const auto history = tuner->history();
  REQUIRE(history.size() >= 2);
  CHECK(history.front().new_batch_size == 22);
  CHECK(history.front().observed.qps == 100);
}

TEST_CASE("Spare capacity grows the limit only while batches reach it", "[tuner]") {
  Limits limits;
  AutoTunerOptions options;
  options.hysteresis = 1;
  LoadSample now = sample(20ms, 50);
  now.full_batch_fraction = 0.1;  // most batches leave with room to spare
  auto tuner = make_tuner(options, [&] { return now; }, limits.control());
  CHECK_FALSE(tuner->tune_once());
  now.full_batch_fraction = 0.8;
  CHECK(tuner->tune_once());
  CHECK(limits.size == 23);
}

TEST_CASE("A disagreeing interval restarts the hysteresis count", "[tuner]") {
  Limits limits;
  AutoTunerOptions options;
  options.hysteresis = 3;
  LoadSample now = sample(400ms, 900);
  auto tuner = make_tuner(options, [&] { return now; }, limits.control());
  CHECK_FALSE(tuner->tune_once());
  CHECK_FALSE(tuner->tune_once());
  now = sample(250ms, 900);  // in between
  CHECK_FALSE(tuner->tune_once());
  now = sample(400ms, 900);
  CHECK_FALSE(tuner->tune_once());
  CHECK_FALSE(tuner->tune_once());
  CHECK(tuner->tune_once());
  CHECK(tuner->moves() == 1);
}

TEST_CASE("The tuner's own loop decides once per interval of its clock and steers a real batcher", "[tuner]") {
  auto clock = std::make_shared<rapidqa::ManualClock>();
  rapidqa::DynamicBatcherOptions batch_options;
  batch_options.max_batch_size = 8;
  batch_options.max_queue_delay = 2ms;
  auto made = rapidqa::DynamicBatcher<int, int>::create(batch_options, [](std::vector<int>& in, std::size_t) { return in; });
  REQUIRE(made.is_ok());
  auto batcher = std::move(made).value();
  AutoTunerOptions options;
  options.hysteresis = 1;
  options.interval = 1s;
  options.clock = clock;
  std::atomic<int> samples{0};
  auto tuner = make_tuner(options, [&] {
    ++samples;
    return sample(10ms, 10);
  }, rapidqa::control_of(*batcher));
  tuner->start();
  // Bounded waits for the loop thread; the decisions follow manual time only.
  auto wait_for_samples = [&](int n, int real_ms = 10000) {
    for (int i = 0; i < real_ms && samples.load() < n; ++i) std::this_thread::sleep_for(1ms);
    return samples.load();
  };
  CHECK(wait_for_samples(1, 50) == 0);  // manual time has not moved: no decision yet
  clock->advance(1s);
  CHECK(wait_for_samples(1) == 1);
  clock->advance(1s);
  CHECK(wait_for_samples(2) == 2);
  tuner->stop();
  CHECK(batcher->limits().max_batch_size == 10);  // 8 -> 9 -> 10
  CHECK(tuner->history().size() == 2);
}

TEST_CASE("Over the target with a growing backlog the tuner grows to serve it, not shrinks", "[tuner]") {
  Limits limits;
  AutoTunerOptions options;
  options.hysteresis = 1;
  LoadSample now = sample(400ms, 900);
  auto tuner = make_tuner(options, [&] { return now; }, limits.control());
  now.queue_depth = 50;
  REQUIRE(tuner->tune_once());
  CHECK(limits.size == 23);
  CHECK(tuner->history().back().reason.find("backlog") != std::string::npos);
  now.queue_depth = 30;  // shrinking, but more than a batch (23) still waits: still a backlog
  REQUIRE(tuner->tune_once());
  CHECK(limits.size == 26);
  now.queue_depth = 5;  // under a batch: the latency is the batch's own, the practice's rule again
  REQUIRE(tuner->tune_once());
  CHECK(limits.size == 21);
  now.degraded_fraction = 0.2;  // the queue holds steady because requests are shed: still a backlog
  REQUIRE(tuner->tune_once());
  CHECK(limits.size == 24);
  options.grow_when_backlogged = false;
  Limits plain;
  auto practice = make_tuner(options, [&] { return now; }, plain.control());
  now.queue_depth = 500;
  REQUIRE(practice->tune_once());
  CHECK(plain.size == 16);
}

TEST_CASE("A backlog is grown into only while a bigger batch is predicted to cost each request less", "[tuner]") {
  Limits limits;
  AutoTunerOptions options;
  options.hysteresis = 1;
  LoadSample now = sample(400ms, 900);
  now.queue_depth = 50;
  auto tuner = make_tuner(options, [&] { return now; }, limits.control());
  // Half of a batch is fixed cost: 20 -> 23 saves 0.5 x 3/23 = 6.5% a request.
  now.batch_fixed_share = 0.5;
  REQUIRE(tuner->tune_once());
  CHECK(limits.size == 23);
  // A batch that is nearly all per-request work: 23 -> 26 would save
  // 0.1 x 3/26 = 1.2%, under the 2% a move must save. Hold: neither grow
  // nor shrink, however long the backlog lasts.
  now.batch_fixed_share = 0.1;
  for (int i = 0; i < 5; ++i) {
    now.queue_depth += 10;
    CHECK_FALSE(tuner->tune_once());
  }
  CHECK(limits.size == 23);
  // No batch at all is fixed cost: the same.
  now.batch_fixed_share = 0.0;
  now.queue_depth += 10;
  CHECK_FALSE(tuner->tune_once());
  // The practice's shrink still applies once the backlog is gone.
  now.queue_depth = 0;
  REQUIRE(tuner->tune_once());
  CHECK(limits.size == 18);
  // min_backlog_saving 0 grows regardless, as does a sample without a share.
  const auto first_move = [&](double min_saving, double share) {
    options.min_backlog_saving = min_saving;
    Limits fresh;
    LoadSample backlogged = now;
    backlogged.queue_depth = 50;
    backlogged.batch_fixed_share = share;
    auto tuner_of_its_own = make_tuner(options, [&] { return backlogged; }, fresh.control());
    return tuner_of_its_own->tune_once() ? fresh.size : 0;
  };
  CHECK(first_move(0.0, 0.0) == 23);
  CHECK(first_move(0.02, -1.0) == 23);
  CHECK(first_move(0.02, 0.0) == 0);
}

TEST_CASE("A move that makes the next interval worse is undone and not tried again for a while", "[tuner]") {
  Limits limits;
  AutoTunerOptions options;
  options.hysteresis = 1;
  options.hold_after_revert = 3;
  LoadSample now = sample(50ms, 100);  // spare capacity: grow
  auto tuner = make_tuner(options, [&] { return now; }, limits.control());
  REQUIRE(tuner->tune_once());
  CHECK(limits.size == 23);
  now = sample(90ms, 100);  // p99 up 80%, nothing more served: the grow was worse
  const auto undo = tuner->tune_once();
  REQUIRE(undo);
  CHECK(limits.size == 20);
  CHECK(limits.delay == 10000us);
  CHECK(undo->reason.find("reverted") != std::string::npos);
  // The grow is held off for three intervals even though p99 invites it.
  now = sample(50ms, 100);
  CHECK_FALSE(tuner->tune_once());
  CHECK_FALSE(tuner->tune_once());
  CHECK(limits.size == 20);
  REQUIRE(tuner->tune_once());  // the hold is over
  CHECK(limits.size == 23);
  // A move followed by more answers served is kept even though p99 rose
  // (250 ms: between the thresholds, so nothing else moves either).
  now = sample(250ms, 200);
  CHECK_FALSE(tuner->tune_once());
  CHECK(limits.size == 23);
}

TEST_CASE("Reverting can be switched off", "[tuner]") {
  Limits limits;
  AutoTunerOptions options;
  options.hysteresis = 1;
  options.revert_worse_moves = false;
  LoadSample now = sample(50ms, 100);
  auto tuner = make_tuner(options, [&] { return now; }, limits.control());
  REQUIRE(tuner->tune_once());
  now = sample(250ms, 100);
  CHECK_FALSE(tuner->tune_once());
  CHECK(limits.size == 23);
}

TEST_CASE("Tuner options out of range are refused with the field's name, not quietly fixed", "[tuner]") {
  Limits limits;
  auto refusal = [&](auto change) {
    AutoTunerOptions options;
    change(options);
    auto tuner = AutoTuner::create(options, [] { return LoadSample{}; }, limits.control());
    REQUIRE_FALSE(tuner.is_ok());
    CHECK(tuner.status().code() == rapidqa::StatusCode::kInvalidArgument);
    return tuner.status().message();
  };
  CHECK_THAT(refusal([](auto& o) { o.hysteresis = 0; }), Catch::Contains("hysteresis"));
  CHECK_THAT(refusal([](auto& o) { o.min_batch_size = 0; }), Catch::Contains("min_batch_size"));
  CHECK_THAT(refusal([](auto& o) { o.max_batch_size = 0; }), Catch::Contains("max_batch_size"));
  CHECK_THAT(refusal([](auto& o) { o.max_step = 0; }), Catch::Contains("max_step"));
  CHECK_THAT(refusal([](auto& o) { o.shrink_factor = 1.5; }), Catch::Contains("shrink_factor"));
  CHECK_THAT(refusal([](auto& o) { o.grow_factor = 0.9; }), Catch::Contains("grow_factor"));
  CHECK_THAT(refusal([](auto& o) { o.interval = std::chrono::milliseconds(0); }), Catch::Contains("interval"));
  CHECK_THAT(refusal([](auto& o) { o.max_queue_delay = 10us; }), Catch::Contains("max_queue_delay"));
  CHECK_THAT(refusal([](auto& o) { o.worse_margin = -1; }), Catch::Contains("worse_margin"));
  CHECK_THAT(refusal([](auto& o) { o.min_backlog_saving = 1.5; }), Catch::Contains("min_backlog_saving"));
  CHECK_FALSE(AutoTuner::create({}, nullptr, limits.control()).is_ok());
  CHECK(AutoTuner::create({}, [] { return LoadSample{}; }, limits.control()).is_ok());
}

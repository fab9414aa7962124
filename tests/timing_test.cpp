// The timing helper (src/common/timing.h) on a ManualClock: each "work"
// advances the clock by a scripted amount, so every median is exact and
// nothing depends on how fast this host is.
#include <catch2/catch.hpp>

#include <chrono>
#include <string>
#include <vector>

#include "common/timing.h"
#include "rapidqa/clock.h"

using namespace std::chrono_literals;
using rapidqa::ManualClock;
namespace timing = rapidqa::timing;

namespace {

double microseconds(timing::Seconds t) { return t.count() * 1e6; }

}  // namespace

TEST_CASE("median of an odd count, an even count and nothing", "[timing]") {
  CHECK(timing::median({5, 1, 3}) == 3);
  CHECK(timing::median({4, 1, 3, 2}) == 2.5);
  CHECK(timing::median({7}) == 7);
  CHECK(timing::median({}) == 0);
}

TEST_CASE("The median time per call ignores warm-up calls and outlying samples", "[timing]") {
  ManualClock clock;
  // The first call (the warm-up) is slow; then one sample is an outlier.
  const std::vector<std::chrono::microseconds> costs = {1000us, 10us, 30us, 20us, 5000us, 40us};
  std::size_t call = 0;
  timing::TimingOptions options;
  options.warmup_calls = 1;
  options.samples = 5;
  const auto median = timing::median_time_per_call([&] { clock.advance(costs.at(call++)); }, options, clock);
  CHECK(call == costs.size());
  CHECK(microseconds(median) == Approx(30).epsilon(1e-9));
}

TEST_CASE("A sample repeats a short work until its minimum time, up to its call limit", "[timing]") {
  ManualClock clock;
  int calls = 0;
  timing::TimingOptions options;
  options.warmup_calls = 0;
  options.samples = 3;

  SECTION("until the minimum time: 300 ns calls, 1 us samples are 4 calls each") {
    options.min_sample_time = 1us;
    const auto median = timing::median_time_per_call([&] { clock.advance(300ns); ++calls; }, options, clock);
    CHECK(calls == 3 * 4);
    CHECK(microseconds(median) == Approx(0.3).epsilon(1e-9));
  }
  SECTION("up to the call limit: a work that takes no time stops at 7 calls a sample") {
    options.min_sample_time = 1ms;
    options.max_calls_per_sample = 7;
    const auto median = timing::median_time_per_call([&] { ++calls; }, options, clock);
    CHECK(calls == 3 * 7);
    CHECK(median.count() == 0);
  }
  SECTION("at least one call a sample, whatever the options say") {
    options.max_calls_per_sample = 0;
    (void)timing::median_time_per_call([&] { clock.advance(1us); ++calls; }, options, clock);
    CHECK(calls == 3);
  }
}

TEST_CASE("Two candidates are timed interleaved, in alternating order", "[timing]") {
  ManualClock clock;
  std::string order;
  timing::TimingOptions options;
  options.warmup_calls = 1;
  options.samples = 4;
  const auto times = timing::interleaved_median_times([&] { order += 'a'; clock.advance(10us); },
                                                      [&] { order += 'b'; clock.advance(5us); }, options, clock);
  // Warm-up, then A B, B A, A B, B A: neither always goes first.
  CHECK(order == "ab" "ab" "ba" "ab" "ba");
  CHECK(microseconds(times.first) == Approx(10).epsilon(1e-9));
  CHECK(microseconds(times.second) == Approx(5).epsilon(1e-9));
  CHECK(times.speedup_of_second() == Approx(2.0).epsilon(1e-9));
  CHECK(times.paired_ratio == Approx(0.5).epsilon(1e-9));
}

TEST_CASE("A slow phase of the host during one round moves neither median", "[timing]") {
  ManualClock clock;
  int round_calls = 0;  // calls so far, both candidates; 2 per round, no warm-up
  auto slowdown = [&] { return round_calls / 2 == 1 ? 50 : 1; };  // the second round runs 50x slower
  timing::TimingOptions options;
  options.warmup_calls = 0;
  options.samples = 5;
  const auto times = timing::interleaved_median_times(
      [&] { clock.advance(20us * slowdown()); ++round_calls; },
      [&] { clock.advance(10us * slowdown()); ++round_calls; }, options, clock);
  CHECK(microseconds(times.first) == Approx(20).epsilon(1e-9));
  CHECK(microseconds(times.second) == Approx(10).epsilon(1e-9));
  CHECK(times.speedup_of_second() == Approx(2.0).epsilon(1e-9));
  CHECK(times.paired_ratio == Approx(0.5).epsilon(1e-9));
}

TEST_CASE("The paired ratio compares within rounds, where the ratio of medians can mislead", "[timing]") {
  // The host is slow (3x) in rounds 1, 2 and 4 but B's sample in round 4
  // came after the slow phase ended: B's median is a fast sample, A's a
  // slow one. Within every other round B takes 0.8x A's time.
  ManualClock clock;
  const std::vector<std::chrono::microseconds> a_costs = {100us, 300us, 300us, 100us, 300us};
  const std::vector<std::chrono::microseconds> b_costs = {80us, 240us, 240us, 80us, 90us};
  std::size_t a_calls = 0, b_calls = 0;
  timing::TimingOptions options;
  options.warmup_calls = 0;
  options.samples = 5;
  const auto times = timing::interleaved_median_times([&] { clock.advance(a_costs.at(a_calls++)); },
                                                      [&] { clock.advance(b_costs.at(b_calls++)); }, options, clock);
  CHECK(microseconds(times.second) / microseconds(times.first) == Approx(0.3).epsilon(1e-9));
  CHECK(times.paired_ratio == Approx(0.8).epsilon(1e-9));
}

TEST_CASE("A candidate that takes no measurable time has no speed-up ratio", "[timing]") {
  timing::PairedTimes times{timing::Seconds(1e-3), timing::Seconds(0)};
  CHECK(times.speedup_of_second() == 0);
}

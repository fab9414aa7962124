#include <catch2/catch.hpp>

#include <cmath>
#include <sstream>

#include "metrics/latency_histogram.h"
#include "metrics/metrics_registry.h"

using namespace std::chrono_literals;
using rapidqa::metrics::LatencyHistogram;

TEST_CASE("Histogram percentiles fall within one bucket of the truth", "[metrics]") {
  LatencyHistogram h;
  for (int i = 1; i <= 1000; ++i) h.record(std::chrono::microseconds(i));
  const auto s = h.summary();
  CHECK(s.count == 1000);
  auto near = [](std::chrono::nanoseconds got, double want_us) {
    const double us = static_cast<double>(got.count()) / 1000.0;
    return us >= want_us && us <= want_us * 1.05;
  };
  CHECK(near(s.p50, 500));
  CHECK(near(s.p95, 950));
  CHECK(near(s.p99, 990));
  CHECK(near(s.max, 1000));
  CHECK(s.mean == std::chrono::nanoseconds(500500));
}

TEST_CASE("Empty and reset histograms report zero", "[metrics]") {
  LatencyHistogram h;
  CHECK(h.summary().count == 0);
  h.record(5ms);
  h.reset();
  CHECK(h.summary().count == 0);
  CHECK(h.summary().p99.count() == 0);
}

TEST_CASE("Extreme durations land in the first and last buckets", "[metrics]") {
  CHECK(LatencyHistogram::bucket_of(0ns) == 0);
  CHECK(LatencyHistogram::bucket_of(std::chrono::hours(10)) == LatencyHistogram::kBuckets - 1);
  LatencyHistogram h;
  h.record(-5ns);
  CHECK(h.summary().count == 1);
}

namespace {

rapidqa::Answer answered_in(std::chrono::nanoseconds total) {
  rapidqa::Answer a;
  a.tier = rapidqa::AnswerTier::kKnowledge;
  a.timings[rapidqa::Stage::kTotal] = total;
  a.timings[rapidqa::Stage::kRetrieve] = total / 2;
  return a;
}

}  // namespace

TEST_CASE("Cumulative buckets count every measurement at or under each bound", "[metrics]") {
  LatencyHistogram h;
  for (int i = 0; i < 10; ++i) h.record(40us);  // under 50 us
  for (int i = 0; i < 5; ++i) h.record(3ms);    // under 5 ms
  h.record(10s);                                // over every bound
  const auto s = h.summary();
  const auto& bounds = rapidqa::kLatencyBucketSeconds;
  for (std::size_t b = 0; b < bounds.size(); ++b) {
    const std::uint64_t want = bounds[b] < 40e-6 ? 0 : bounds[b] < 3e-3 ? 10 : 15;
    CHECK(s.at_most[b] == want);
  }
  CHECK(s.sum == 10 * 40us + 5 * 3ms + 10s);
}

TEST_CASE("Prometheus text: well-formed families, monotonic buckets, +Inf equals count", "[metrics][prometheus]") {
  rapidqa::metrics::MetricsRegistry registry;
  for (int i = 0; i < 100; ++i) registry.record_answer(answered_in(std::chrono::microseconds(100 + i)), true, true, true);
  rapidqa::MetricsSnapshot snapshot = registry.snapshot();
  snapshot.batcher.batch_sizes = {0, 3, 0, 2, 1};  // batches of 1, 3 (twice) and 4
  const std::string text = snapshot.format_prometheus();
  std::istringstream lines(text);
  std::string line, last_bucket_series;
  double last_bucket = -1;
  int samples = 0;
  while (std::getline(lines, line)) {
    if (line.rfind("# HELP rapidqa_", 0) == 0 || line.rfind("# TYPE rapidqa_", 0) == 0) continue;
    INFO(line);
    REQUIRE(line.rfind("rapidqa_", 0) == 0);
    const auto space = line.rfind(' ');
    REQUIRE(space != std::string::npos);
    const std::string value = line.substr(space + 1);
    CHECK((value == "+Inf" || std::isfinite(std::stod(value))));
    ++samples;
    // Buckets of one series only grow.
    if (line.find("_bucket{") != std::string::npos) {
      const std::string series = line.substr(0, line.find("le="));
      const double v = std::stod(value);
      if (series == last_bucket_series) CHECK(v >= last_bucket);
      last_bucket_series = series;
      last_bucket = v;
    }
  }
  CHECK(samples > 100);
  CHECK(text.find("rapidqa_stage_latency_seconds_bucket{stage=\"total\",le=\"+Inf\"} 100\n") != std::string::npos);
  CHECK(text.find("rapidqa_stage_latency_seconds_count{stage=\"retrieve\"} 100\n") != std::string::npos);
  CHECK(text.find("rapidqa_cache_lookups_total{tier=\"result\",outcome=\"miss\"} 100\n") != std::string::npos);
  CHECK(text.find("rapidqa_encoder_batch_size_bucket{le=\"2\"} 3\n") != std::string::npos);
  CHECK(text.find("rapidqa_encoder_batch_size_bucket{le=\"4\"} 6\n") != std::string::npos);
  CHECK(text.find("rapidqa_encoder_batch_size_sum 13\n") != std::string::npos);
  CHECK(text.find("rapidqa_latency_anomaly 0\n") != std::string::npos);
}

TEST_CASE("The anomaly flag rises when a window's p99 jumps past N times the baseline", "[metrics][anomaly]") {
  auto clock = std::make_shared<rapidqa::ManualClock>();
  rapidqa::metrics::MetricsRegistry registry;
  rapidqa::LatencyAnomalyOptions rule;
  rule.factor = 3.0;
  rule.min_requests = 50;
  rule.warmup_windows = 3;
  registry.configure(clock, rule);
  auto window = [&](std::chrono::microseconds latency, int requests) {
    for (int i = 0; i < requests; ++i) registry.record_answer(answered_in(latency), false, false, false);
    clock->advance(1s);
    return registry.roll_window();
  };
  for (int w = 0; w < 3; ++w) {
    const auto load = window(1000us, 100);
    CHECK(load.requests == 100);
    CHECK(load.qps == Approx(100));
    CHECK(load.p99 >= 1000us);
    CHECK_FALSE(registry.snapshot().anomaly.active);
  }
  window(2000us, 100);  // twice the baseline: not yet an anomaly
  CHECK_FALSE(registry.snapshot().anomaly.active);
  window(10000us, 10);  // too few requests to judge
  CHECK_FALSE(registry.snapshot().anomaly.active);
  window(10000us, 100);
  const auto flagged = registry.snapshot().anomaly;
  CHECK(flagged.active);
  CHECK(flagged.windows_flagged == 1);
  CHECK(flagged.recent_p99 >= 10000us);
  CHECK(flagged.baseline_p99 < 3000us);
  window(1000us, 100);
  CHECK_FALSE(registry.snapshot().anomaly.active);
}

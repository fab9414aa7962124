#include <catch2/catch.hpp>

#include "metrics/latency_histogram.h"

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

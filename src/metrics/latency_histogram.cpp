#include "metrics/latency_histogram.h"

#include <algorithm>
#include <cmath>

namespace rapidqa::metrics {
namespace {
constexpr double kFirstUpperNs = 50.0;
constexpr double kGrowth = 1.04;
const double kLogGrowth = std::log(kGrowth);
}  // namespace

double LatencyHistogram::bucket_upper_ns(std::size_t i) { return kFirstUpperNs * std::pow(kGrowth, static_cast<double>(i)); }

std::size_t LatencyHistogram::bucket_of(std::chrono::nanoseconds elapsed) {
  const double ns = static_cast<double>(elapsed.count());
  if (ns <= kFirstUpperNs) return 0;
  const auto i = static_cast<std::size_t>(std::ceil(std::log(ns / kFirstUpperNs) / kLogGrowth));
  return std::min(i, kBuckets - 1);
}

void LatencyHistogram::record(std::chrono::nanoseconds elapsed) {
  if (elapsed.count() < 0) elapsed = std::chrono::nanoseconds(0);
  counts_[bucket_of(elapsed)].fetch_add(1, std::memory_order_relaxed);
  total_count_.fetch_add(1, std::memory_order_relaxed);
  total_ns_.fetch_add(static_cast<std::uint64_t>(elapsed.count()), std::memory_order_relaxed);
}

LatencySummary LatencyHistogram::summary() const {
  std::array<std::uint64_t, kBuckets> counts{};
  std::uint64_t n = 0;
  for (std::size_t i = 0; i < kBuckets; ++i) {
    counts[i] = counts_[i].load(std::memory_order_relaxed);
    n += counts[i];
  }
  LatencySummary s;
  s.count = n;
  if (n == 0) return s;
  s.mean = std::chrono::nanoseconds(total_ns_.load(std::memory_order_relaxed) /
                                    std::max<std::uint64_t>(1, total_count_.load(std::memory_order_relaxed)));
  auto percentile = [&](double q) {
    // The smallest bucket whose cumulative count reaches rank ceil(q * n).
    const auto rank = static_cast<std::uint64_t>(std::ceil(q * static_cast<double>(n)));
    std::uint64_t seen = 0;
    for (std::size_t i = 0; i < kBuckets; ++i) {
      seen += counts[i];
      if (seen >= std::max<std::uint64_t>(rank, 1)) {
        return std::chrono::nanoseconds(static_cast<std::int64_t>(bucket_upper_ns(i)));
      }
    }
    return std::chrono::nanoseconds(static_cast<std::int64_t>(bucket_upper_ns(kBuckets - 1)));
  };
  s.sum = std::chrono::nanoseconds(total_ns_.load(std::memory_order_relaxed));
  std::uint64_t cumulative = 0;
  std::size_t bound = 0;
  for (std::size_t i = 0; i < kBuckets && bound < kLatencyBucketSeconds.size(); ++i) {
    // A log bucket counts under the first exported bound that holds its
    // upper edge (the exported counts are within the 4% bucket width).
    while (bound < kLatencyBucketSeconds.size() && bucket_upper_ns(i) > kLatencyBucketSeconds[bound] * 1e9) {
      s.at_most[bound++] = cumulative;
    }
    cumulative += counts[i];
  }
  while (bound < kLatencyBucketSeconds.size()) s.at_most[bound++] = cumulative;
  s.p50 = percentile(0.50);
  s.p95 = percentile(0.95);
  s.p99 = percentile(0.99);
  s.max = percentile(1.0);
  return s;
}

void LatencyHistogram::reset() {
  for (auto& c : counts_) c.store(0, std::memory_order_relaxed);
  total_count_.store(0, std::memory_order_relaxed);
  total_ns_.store(0, std::memory_order_relaxed);
}

}  // namespace rapidqa::metrics

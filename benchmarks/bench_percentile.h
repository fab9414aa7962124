// Percentiles of per-call latencies, for the benchmarks that time every
// call on its own and report p50/p99 as counters (Google Benchmark's own
// statistics are over repetitions, not calls).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

namespace rapidqa::bench {

// Nearest-rank percentile: the smallest value with at least p of the
// samples at or below it. Reorders samples; they must not be empty.
inline double percentile(std::vector<double>& samples, double p) {
  const auto rank = static_cast<std::size_t>(std::ceil(p * static_cast<double>(samples.size())));
  const auto nth = samples.begin() + static_cast<std::ptrdiff_t>(std::max<std::size_t>(rank, 1) - 1);
  std::nth_element(samples.begin(), nth, samples.end());
  return *nth;
}

}  // namespace rapidqa::bench

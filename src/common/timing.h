// Timing: the one way rapidqa times a piece of work when it chooses between
// implementations by speed (the quantizer's auto precision, the FP32
// backend) or reports a speed-up (the pruner).
//
// Untimed warm-up calls first (first touch of buffers, kernel caches), then
// several timed samples, and the median of them: a single fast or slow
// sample on a busy host moves a median little, where a minimum or a mean
// follows it. Two candidates are timed interleaved, sample for sample, in
// alternating order (A B, B A, A B ...), so a slow phase of the host (another
// process, frequency scaling) falls on both and cannot pass for a difference
// between them.
//
// The clock is injected (rapidqa::Clock): tests time a work that advances a
// ManualClock and get exact answers.
//
// Thread safety: the functions share nothing; the work runs on the calling
// thread.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <vector>

#include "rapidqa/clock.h"

namespace rapidqa::timing {

using Seconds = std::chrono::duration<double>;

struct TimingOptions {
  int warmup_calls = 1;  // untimed calls per candidate before the first sample
  int samples = 5;       // timed samples per candidate (at least one); the median is the result
  // One sample repeats the work until this much time has passed (so a
  // microsecond kernel is not timed at the clock's resolution), or ...
  std::chrono::nanoseconds min_sample_time{0};
  int max_calls_per_sample = 1000;  // ... this many calls; at least one call
};

// The median of values (the mean of the middle two for an even count); 0
// for none.
inline double median(std::vector<double> values) {
  if (values.empty()) return 0;
  const std::size_t mid = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(mid), values.end());
  const double upper = values[mid];
  if (values.size() % 2 == 1) return upper;
  const double lower = *std::max_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(mid));
  return (lower + upper) / 2;
}

// One sample: the time per call of work(), repeated as options say.
template <typename Work>
Seconds time_per_call(Work& work, const TimingOptions& options, const Clock& clock) {
  const auto start = clock.now();
  int calls = 0;
  Clock::duration elapsed{0};
  do {
    work();
    ++calls;
    elapsed = clock.now() - start;
  } while (elapsed < options.min_sample_time && calls < options.max_calls_per_sample);
  return std::chrono::duration_cast<Seconds>(elapsed) / calls;
}

// The median time per call of work() over options.samples samples.
template <typename Work>
Seconds median_time_per_call(Work&& work, const TimingOptions& options = {},
                             const Clock& clock = *steady_clock_instance()) {
  for (int i = 0; i < options.warmup_calls; ++i) work();
  std::vector<double> samples;
  for (int s = 0; s < std::max(1, options.samples); ++s) samples.push_back(time_per_call(work, options, clock).count());
  return Seconds(median(samples));
}

// Median times per call of two candidates timed side by side.
struct PairedTimes {
  Seconds first{0}, second{0};
  // The median over rounds of second / first within a round (0 when first
  // took no measurable time). A slow phase that spans a round slows both
  // of its samples and leaves their ratio: a decision from this is steadier
  // on a busy host than one from the ratio of the two medians.
  double paired_ratio = 0;

  // How many times faster the second is than the first (2.0: twice as
  // fast); 0 when the second took no measurable time.
  double speedup_of_second() const { return second.count() > 0 ? first.count() / second.count() : 0.0; }
};

// first() and second() warmed up, then timed options.samples times each,
// interleaved in alternating order; the medians of each.
template <typename First, typename Second>
PairedTimes interleaved_median_times(First&& first, Second&& second, const TimingOptions& options = {},
                                     const Clock& clock = *steady_clock_instance()) {
  for (int i = 0; i < options.warmup_calls; ++i) {
    first();
    second();
  }
  std::vector<double> first_samples, second_samples, ratios;
  for (int s = 0; s < std::max(1, options.samples); ++s) {
    if (s % 2 == 0) {
      first_samples.push_back(time_per_call(first, options, clock).count());
      second_samples.push_back(time_per_call(second, options, clock).count());
    } else {
      second_samples.push_back(time_per_call(second, options, clock).count());
      first_samples.push_back(time_per_call(first, options, clock).count());
    }
    ratios.push_back(first_samples.back() > 0 ? second_samples.back() / first_samples.back() : 0.0);
  }
  return {Seconds(median(first_samples)), Seconds(median(second_samples)), median(ratios)};
}

}  // namespace rapidqa::timing

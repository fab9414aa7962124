#include "compress/observers.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

namespace rapidqa::compress {
namespace {

std::pair<float, float> min_max(const at::Tensor& x) {
  const auto [lo, hi] = at::aminmax(x.to(at::kFloat));
  return {lo.item<float>(), hi.item<float>()};
}

// The smallest and largest values over every batch seen.
struct RunningRange {
  bool seen = false;
  float min = 0.0f, max = 0.0f;
  void add(float lo, float hi) {
    min = seen ? std::min(min, lo) : lo;
    max = seen ? std::max(max, hi) : hi;
    seen = true;
  }
};

class MaxAbsObserver final : public RangeObserver {
 public:
  void observe(const at::Tensor& x) override {
    if (x.numel() == 0) return;
    const auto [lo, hi] = min_max(x);
    max_abs_ = std::max({max_abs_, std::fabs(lo), std::fabs(hi)});
  }
  std::pair<float, float> range() const override { return {-max_abs_, max_abs_}; }
  ObserverKind kind() const override { return ObserverKind::kMaxAbs; }

 private:
  float max_abs_ = 0.0f;
};

class MinMaxObserver final : public RangeObserver {
 public:
  void observe(const at::Tensor& x) override {
    if (x.numel() == 0) return;
    const auto [lo, hi] = min_max(x);
    seen_.add(lo, hi);
  }
  std::pair<float, float> range() const override { return {seen_.min, seen_.max}; }
  ObserverKind kind() const override { return ObserverKind::kMinMax; }

 private:
  RunningRange seen_;
};

class MovingAverageObserver final : public RangeObserver {
 public:
  explicit MovingAverageObserver(double c) : c_(static_cast<float>(c)) {}
  void observe(const at::Tensor& x) override {
    if (x.numel() == 0) return;
    const auto [lo, hi] = min_max(x);
    if (!seen_) {
      min_ = lo;
      max_ = hi;
      seen_ = true;
    } else {
      // float32 arithmetic in PyTorch's order: min + c * (batch_min - min).
      min_ = min_ + c_ * (lo - min_);
      max_ = max_ + c_ * (hi - max_);
    }
  }
  std::pair<float, float> range() const override { return {min_, max_}; }
  ObserverKind kind() const override { return ObserverKind::kMovingAverage; }

 private:
  float c_;
  bool seen_ = false;
  float min_ = 0.0f, max_ = 0.0f;
};

class PercentileObserver final : public RangeObserver {
 public:
  PercentileObserver(double percentile, std::size_t max_samples)
      : percentile_(percentile), max_samples_(max_samples) {}
  void observe(const at::Tensor& x) override {
    if (x.numel() == 0 || samples_.size() >= max_samples_) return;
    const at::Tensor flat = x.to(at::kFloat).contiguous().view({-1});
    // At most 1/16 of the budget from one call, evenly strided, so many
    // batches contribute.
    const std::size_t want = std::max<std::size_t>(1, max_samples_ / 16);
    const auto n = static_cast<std::size_t>(flat.numel());
    const std::size_t stride = std::max<std::size_t>(1, n / want);
    const float* p = flat.data_ptr<float>();
    for (std::size_t i = 0; i < n && samples_.size() < max_samples_; i += stride) samples_.push_back(p[i]);
  }
  std::pair<float, float> range() const override {
    if (samples_.empty()) return {0.0f, 0.0f};
    std::vector<float> v = samples_;
    auto at_fraction = [&](double f) {
      const auto k = static_cast<std::size_t>(std::llround(f * static_cast<double>(v.size() - 1)));
      std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
      return v[k];
    };
    const double upper = std::clamp(percentile_ / 100.0, 0.5, 1.0);
    return {at_fraction(1.0 - upper), at_fraction(upper)};
  }
  ObserverKind kind() const override { return ObserverKind::kPercentile; }

 private:
  double percentile_;
  std::size_t max_samples_;
  std::vector<float> samples_;
};

class EntropyObserver final : public RangeObserver {
 public:
  EntropyObserver(std::size_t bins, std::size_t levels) : counts_(bins, 0.0), levels_(levels) {}

  void observe(const at::Tensor& x) override {
    if (x.numel() == 0) return;
    const auto [lo, hi] = min_max(x);
    seen_.add(lo, hi);
    const float batch_abs = std::max(std::fabs(lo), std::fabs(hi));
    if (batch_abs > edge_) grow(batch_abs);
    if (edge_ <= 0.0f) return;
    const at::Tensor index =
        (x.to(at::kFloat).abs() * (static_cast<float>(counts_.size()) / edge_)).floor_().clamp_(0.0, static_cast<double>(counts_.size() - 1));
    const at::Tensor hist = at::bincount(index.to(at::kLong).view({-1}), {}, static_cast<std::int64_t>(counts_.size()));
    const std::int64_t* h = hist.data_ptr<std::int64_t>();
    for (std::size_t i = 0; i < counts_.size(); ++i) counts_[i] += static_cast<double>(h[i]);
  }

  std::pair<float, float> range() const override {
    if (!seen_.seen || edge_ <= 0.0f) return {0.0f, 0.0f};
    const float threshold = best_threshold();
    const float hi = std::min(seen_.max, threshold);
    // Inputs all beyond the threshold would give min > max; the loader
    // refuses an inverted range, and [hi, hi] quantizes the same way.
    return {std::min(std::max(seen_.min, -threshold), hi), hi};
  }
  ObserverKind kind() const override { return ObserverKind::kEntropy; }

 private:
  // Widens the histogram to cover |x| up to `needed`: the edge doubles
  // until it does, and old bins merge pairwise, so no count moves to a bin
  // it did not belong to.
  void grow(float needed) {
    if (edge_ <= 0.0f) {
      edge_ = needed;
      return;
    }
    while (edge_ < needed) {
      std::vector<double> merged(counts_.size(), 0.0);
      for (std::size_t i = 0; i < counts_.size(); ++i) merged[i / 2] += counts_[i];
      counts_ = std::move(merged);
      edge_ *= 2.0f;
    }
  }

  // KL(P || Q) for the first `bins` bins with the tail folded into the
  // last one, Q being P squeezed into levels_ levels and spread back.
  double divergence(std::size_t bins) const {
    std::vector<double> p(counts_.begin(), counts_.begin() + static_cast<std::ptrdiff_t>(bins));
    for (std::size_t i = bins; i < counts_.size(); ++i) p[bins - 1] += counts_[i];
    std::vector<double> q(bins, 0.0);
    const double per_level = static_cast<double>(bins) / static_cast<double>(levels_);
    for (std::size_t level = 0; level < levels_; ++level) {
      const auto begin = static_cast<std::size_t>(std::floor(level * per_level));
      const auto end = std::min(bins, static_cast<std::size_t>(std::floor((level + 1) * per_level)));
      double total = 0;
      std::size_t nonzero = 0;
      for (std::size_t i = begin; i < end; ++i) {
        total += counts_[i];  // Q is built from the counts inside the threshold only
        if (counts_[i] > 0) ++nonzero;
      }
      for (std::size_t i = begin; i < end; ++i) {
        if (counts_[i] > 0) q[i] = total / static_cast<double>(nonzero);
      }
    }
    double p_sum = 0, q_sum = 0;
    for (std::size_t i = 0; i < bins; ++i) {
      p_sum += p[i];
      q_sum += q[i];
    }
    if (p_sum <= 0 || q_sum <= 0) return std::numeric_limits<double>::infinity();
    double kl = 0;
    for (std::size_t i = 0; i < bins; ++i) {
      if (p[i] <= 0) continue;
      const double pi = p[i] / p_sum;
      const double qi = q[i] / q_sum;
      if (qi <= 0) return std::numeric_limits<double>::infinity();
      kl += pi * std::log(pi / qi);
    }
    return kl;
  }

  float best_threshold() const {
    const std::size_t n = counts_.size();
    std::size_t best = n;
    double best_kl = std::numeric_limits<double>::infinity();
    for (std::size_t bins = levels_; bins <= n; ++bins) {
      const double kl = divergence(bins);
      if (kl < best_kl) {
        best_kl = kl;
        best = bins;
      }
    }
    return edge_ * static_cast<float>(best) / static_cast<float>(n);
  }

  std::vector<double> counts_;
  std::size_t levels_;
  float edge_ = 0.0f;  // the histogram covers |x| in [0, edge_)
  RunningRange seen_;
};

}  // namespace

const char* observer_name(ObserverKind kind) {
  switch (kind) {
    case ObserverKind::kMaxAbs: return "max-abs";
    case ObserverKind::kMinMax: return "min-max";
    case ObserverKind::kMovingAverage: return "moving-average";
    case ObserverKind::kPercentile: return "percentile";
    case ObserverKind::kEntropy: return "entropy";
  }
  return "?";
}

Result<ObserverKind> parse_observer(const std::string& name) {
  for (ObserverKind k : {ObserverKind::kMaxAbs, ObserverKind::kMinMax, ObserverKind::kMovingAverage,
                         ObserverKind::kPercentile, ObserverKind::kEntropy}) {
    if (name == observer_name(k)) return k;
  }
  if (name == "histogram") return ObserverKind::kEntropy;
  return Status::invalid_argument(fmt::format(
      "unknown observer '{}'; expected max-abs, min-max, moving-average, percentile or entropy", name));
}

std::unique_ptr<RangeObserver> make_observer(ObserverKind kind, const ObserverOptions& options) {
  switch (kind) {
    case ObserverKind::kMaxAbs: return std::make_unique<MaxAbsObserver>();
    case ObserverKind::kMinMax: return std::make_unique<MinMaxObserver>();
    case ObserverKind::kMovingAverage: return std::make_unique<MovingAverageObserver>(options.averaging_constant);
    case ObserverKind::kPercentile:
      return std::make_unique<PercentileObserver>(options.percentile, options.max_samples);
    case ObserverKind::kEntropy:
      return std::make_unique<EntropyObserver>(options.histogram_bins, options.quantized_levels);
  }
  return nullptr;
}

}  // namespace rapidqa::compress

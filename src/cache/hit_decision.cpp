#include "cache/hit_decision.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

namespace rapidqa::cache {
namespace {

constexpr double kOneSidedZ95 = 1.6448536;
// How far above a wrong outcome's similarity a cached question's threshold
// moves.
constexpr float kAboveWrong = 0.005f;
// Gradient steps per fit, from the last fit's weights (the window moves by
// kRelearnEvery outcomes between fits, so few are needed), and the first.
constexpr int kSteps = 60;
constexpr int kFirstSteps = 400;
constexpr double kLearningRate = 1.0;
constexpr double kL2 = 1e-3;

// The one-sided 95% Wilson upper bound of a proportion p over n trials.
double wilson_upper(double p, double n) {
  const double z2 = kOneSidedZ95 * kOneSidedZ95;
  const double centre = p + z2 / (2 * n);
  const double half = kOneSidedZ95 * std::sqrt(std::max(0.0, p * (1 - p) / n + z2 / (4 * n * n)));
  return (centre + half) / (1 + z2 / n);
}

}  // namespace

ErrorBoundLearner::ErrorBoundLearner(float target_error_rate, float starting_threshold)
    : target_(target_error_rate), starting_threshold_(starting_threshold) {}

void ErrorBoundLearner::record(std::int64_t cached, float similarity, float lead, bool right, double weight) {
  if (!std::isfinite(similarity) || !std::isfinite(lead) || !(weight > 0) || !std::isfinite(weight)) return;
  window_.push_back({similarity, lead, right, weight});
  if (window_.size() > kWindow) window_.pop_front();
  ++recorded_;
  if (!right) {
    const auto [it, first] = wrong_above_.try_emplace(cached, similarity);
    if (!first) it->second = std::max(it->second, similarity);
  }
  if (window_.size() >= kWarmUpOutcomes && recorded_ % kRelearnEvery == 0) relearn();
}

void ErrorBoundLearner::relearn() {
  const std::size_t n = window_.size();
  double total = 0, squares = 0;
  std::array<double, 2> sum{}, sum_squares{};
  for (const Outcome& o : window_) {
    total += o.weight;
    squares += o.weight * o.weight;
    const std::array<double, 2> x{o.similarity, o.lead};
    for (std::size_t i = 0; i < 2; ++i) {
      sum[i] += x[i];
      sum_squares[i] += x[i] * x[i];
    }
  }
  for (std::size_t i = 0; i < 2; ++i) {
    mean_[i] = sum[i] / static_cast<double>(n);
    const double variance = sum_squares[i] / static_cast<double>(n) - mean_[i] * mean_[i];
    scale_[i] = variance > 1e-12 ? std::sqrt(variance) : 1.0;
  }
  // Weighted logistic regression, each outcome weighing its share of all.
  std::vector<std::array<double, 2>> x(n);
  std::vector<double> z(n);
  for (std::size_t k = 0; k < n; ++k) {
    x[k] = {(window_[k].similarity - mean_[0]) / scale_[0], (window_[k].lead - mean_[1]) / scale_[1]};
  }
  const int steps = learned_ ? kSteps : kFirstSteps;
  for (int step = 0; step < steps; ++step) {
    std::array<double, 2> gradient{};
    double gradient_bias = 0;
    for (std::size_t k = 0; k < n; ++k) {
      const double p = 1.0 / (1.0 + std::exp(-(bias_ + weights_[0] * x[k][0] + weights_[1] * x[k][1])));
      const double error = (p - (window_[k].right ? 1.0 : 0.0)) * window_[k].weight / total;
      gradient[0] += error * x[k][0];
      gradient[1] += error * x[k][1];
      gradient_bias += error;
    }
    for (std::size_t i = 0; i < 2; ++i) weights_[i] -= kLearningRate * (gradient[i] + kL2 * weights_[i]);
    bias_ -= kLearningRate * gradient_bias;
  }
  // The cut-off: admit outcomes best-scored first while the bound on the
  // wrong ones, over everything in the window, holds.
  for (std::size_t k = 0; k < n; ++k) z[k] = bias_ + weights_[0] * x[k][0] + weights_[1] * x[k][1];
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::sort(order.begin(), order.end(), [&z](std::size_t a, std::size_t b) { return z[a] > z[b]; });
  const double effective = total * total / squares;  // Kish's effective count: the bound's trials
  double wrong = 0;
  cut_ = std::numeric_limits<double>::infinity();
  for (const std::size_t k : order) {
    const double wrong_next = wrong + (window_[k].right ? 0.0 : window_[k].weight);
    if (wilson_upper(wrong_next / total, effective) > target_) break;
    wrong = wrong_next;
    cut_ = z[k];
  }
  learned_ = true;
}

float ErrorBoundLearner::threshold_for(std::int64_t cached, float lead, std::string* why) const {
  float threshold = starting_threshold_;
  const char* reason = "the starting threshold, while outcomes are gathered";
  if (learned_) {
    // bias + w0 (s - m0) / s0 + w1 (lead - m1) / s1 >= cut, solved for s.
    const double needed = cut_ - bias_ - weights_[1] * (lead - mean_[1]) / scale_[1];
    if (!std::isfinite(cut_) || weights_[0] <= 0) {
      threshold = kNoHit;
      reason = "no similarity has kept wrong hits under the target yet";
    } else {
      threshold = static_cast<float>(std::clamp(mean_[0] + scale_[0] * needed / weights_[0], 0.0, double{kNoHit}));
      reason = "learned to the error bound at this lead over the next cached question";
    }
  }
  const auto wrong = wrong_above_.find(cached);
  if (wrong != wrong_above_.end() && wrong->second + kAboveWrong > threshold) {
    threshold = std::min(kNoHit, wrong->second + kAboveWrong);
    reason = "raised above a wrong outcome seen on this cached question";
  }
  if (why) *why = reason;
  return threshold;
}

}  // namespace rapidqa::cache

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

bool ErrorBoundLearner::record(std::int64_t cached, float similarity, float lead, bool right, double weight) {
  if (!std::isfinite(similarity) || !std::isfinite(lead) || !(weight > 0) || !std::isfinite(weight)) return false;
  window_.push_back({similarity, lead, right, weight});
  if (window_.size() > kWindow) window_.pop_front();
  ++recorded_;
  if (!right) {
    const auto [it, first] = wrong_above_.try_emplace(cached, similarity);
    if (!first) it->second = std::max(it->second, similarity);
  }
  return window_.size() >= kWarmUpOutcomes && recorded_ % kRelearnEvery == 0;
}

void ErrorBoundLearner::install(const Model& model) {
  model_ = model;
  learned_ = true;
}

ErrorBoundLearner::Model ErrorBoundLearner::fit(const std::vector<Outcome>& window, double target, const Model& from,
                                                bool first) {
  Model m = from;
  const std::size_t n = window.size();
  if (n == 0) return m;
  double total = 0, squares = 0;
  std::array<double, 2> sum{}, sum_squares{};
  for (const Outcome& o : window) {
    total += o.weight;
    squares += o.weight * o.weight;
    const std::array<double, 2> x{o.similarity, o.lead};
    for (std::size_t i = 0; i < 2; ++i) {
      sum[i] += x[i];
      sum_squares[i] += x[i] * x[i];
    }
  }
  for (std::size_t i = 0; i < 2; ++i) {
    m.mean[i] = sum[i] / static_cast<double>(n);
    const double variance = sum_squares[i] / static_cast<double>(n) - m.mean[i] * m.mean[i];
    m.scale[i] = variance > 1e-12 ? std::sqrt(variance) : 1.0;
  }
  // Weighted logistic regression, each outcome weighing its share of all.
  std::vector<std::array<double, 2>> x(n);
  std::vector<double> z(n);
  for (std::size_t k = 0; k < n; ++k) {
    x[k] = {(window[k].similarity - m.mean[0]) / m.scale[0], (window[k].lead - m.mean[1]) / m.scale[1]};
  }
  const int steps = first ? kFirstSteps : kSteps;
  for (int step = 0; step < steps; ++step) {
    std::array<double, 2> gradient{};
    double gradient_bias = 0;
    for (std::size_t k = 0; k < n; ++k) {
      const double p = 1.0 / (1.0 + std::exp(-(m.bias + m.weights[0] * x[k][0] + m.weights[1] * x[k][1])));
      const double error = (p - (window[k].right ? 1.0 : 0.0)) * window[k].weight / total;
      gradient[0] += error * x[k][0];
      gradient[1] += error * x[k][1];
      gradient_bias += error;
    }
    for (std::size_t i = 0; i < 2; ++i) m.weights[i] -= kLearningRate * (gradient[i] + kL2 * m.weights[i]);
    m.bias -= kLearningRate * gradient_bias;
  }
  // The cut-off: admit outcomes best-scored first while the bound on the
  // wrong ones, over everything in the window, holds.
  for (std::size_t k = 0; k < n; ++k) z[k] = m.bias + m.weights[0] * x[k][0] + m.weights[1] * x[k][1];
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::sort(order.begin(), order.end(), [&z](std::size_t a, std::size_t b) { return z[a] > z[b]; });
  const double effective = total * total / squares;  // Kish's effective count: the bound's trials
  double wrong = 0;
  m.cut = std::numeric_limits<double>::infinity();
  for (const std::size_t k : order) {
    const double wrong_next = wrong + (window[k].right ? 0.0 : window[k].weight);
    if (wilson_upper(wrong_next / total, effective) > target) break;
    wrong = wrong_next;
    m.cut = z[k];
  }
  return m;
}

float ErrorBoundLearner::threshold_for(std::int64_t cached, float lead, std::string* why) const {
  float threshold = starting_threshold_;
  const char* reason = "the starting threshold, while outcomes are gathered";
  if (learned_) {
    // bias + w0 (s - m0) / s0 + w1 (lead - m1) / s1 >= cut, solved for s.
    const double needed = model_.cut - model_.bias - model_.weights[1] * (lead - model_.mean[1]) / model_.scale[1];
    if (!std::isfinite(model_.cut) || model_.weights[0] <= 0) {
      threshold = kNoHit;
      reason = "no similarity has kept wrong hits under the target yet";
    } else {
      threshold = static_cast<float>(std::clamp(model_.mean[0] + model_.scale[0] * needed / model_.weights[0], 0.0, double{kNoHit}));
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

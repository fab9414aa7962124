#include "retrieval/answer_calibration.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace rapidqa::retrieval {
namespace {

// Standardised features are clipped here, so a question far outside what
// the examples covered cannot push the probability past what they showed.
constexpr float kFeatureClip = 6.0f;
// Gradient descent on the mean log loss, with a light L2 pull to zero: the
// loss is convex and the features standardised, so a fixed rate converges.
constexpr int kSteps = 400;
constexpr double kLearningRate = 0.5;
constexpr double kL2 = 1e-3;

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

}  // namespace

std::array<float, AnswerCalibration::kFeatures> AnswerCalibration::features(const RetrievalEvidence& e) const {
  const std::array<float, kFeatures> raw{e.similarity, e.rank_score, std::min(e.lead, lead_cap_)};
  std::array<float, kFeatures> out{};
  for (std::size_t i = 0; i < kFeatures; ++i) {
    out[i] = std::clamp((raw[i] - mean_[i]) / scale_[i], -kFeatureClip, kFeatureClip);
  }
  return out;
}

AnswerCalibration AnswerCalibration::fit(const std::vector<CalibrationExample>& examples) {
  AnswerCalibration c;
  std::vector<const CalibrationExample*> used;
  std::vector<float> leads;
  for (const CalibrationExample& x : examples) {
    // A repeated phrasing is answered with certainty and says nothing about
    // the rest; a non-finite score (a broken encoder) says nothing at all.
    if (x.evidence.repeats_phrasing || !std::isfinite(x.evidence.similarity) ||
        !std::isfinite(x.evidence.rank_score) || !std::isfinite(x.evidence.lead)) {
      continue;
    }
    used.push_back(&x);
    leads.push_back(x.evidence.lead);
    (x.right ? c.right_ : c.wrong_) += 1;
  }
  if (c.right_ < kMinExamplesPerOutcome || c.wrong_ < kMinExamplesPerOutcome) return c;

  std::sort(leads.begin(), leads.end());
  c.lead_cap_ = leads[std::min(leads.size() - 1, leads.size() * 99 / 100)];
  c.scale_.fill(1.0f);
  std::array<double, kFeatures> sum{}, squares{};
  for (const CalibrationExample* x : used) {
    const std::array<float, kFeatures> raw{x->evidence.similarity, x->evidence.rank_score,
                                           std::min(x->evidence.lead, c.lead_cap_)};
    for (std::size_t i = 0; i < kFeatures; ++i) {
      sum[i] += raw[i];
      squares[i] += static_cast<double>(raw[i]) * raw[i];
    }
  }
  const double n = static_cast<double>(used.size());
  for (std::size_t i = 0; i < kFeatures; ++i) {
    const double mean = sum[i] / n;
    const double variance = std::max(0.0, squares[i] / n - mean * mean);
    c.mean_[i] = static_cast<float>(mean);
    c.scale_[i] = variance > 1e-12 ? static_cast<float>(std::sqrt(variance)) : 1.0f;
  }

  std::vector<std::array<float, kFeatures>> x;
  std::vector<double> weight;
  for (const CalibrationExample* e : used) {
    x.push_back(c.features(e->evidence));
    // Each outcome weighs half in all, so the prior is even whatever share
    // of the examples turned out right.
    weight.push_back(0.5 / static_cast<double>(e->right ? c.right_ : c.wrong_));
  }
  std::array<double, kFeatures> w{};
  double b = 0;
  for (int step = 0; step < kSteps; ++step) {
    std::array<double, kFeatures> gradient{};
    double gradient_b = 0;
    for (std::size_t k = 0; k < x.size(); ++k) {
      double z = b;
      for (std::size_t i = 0; i < kFeatures; ++i) z += w[i] * x[k][i];
      const double error = (sigmoid(z) - (used[k]->right ? 1.0 : 0.0)) * weight[k];
      for (std::size_t i = 0; i < kFeatures; ++i) gradient[i] += error * x[k][i];
      gradient_b += error;
    }
    for (std::size_t i = 0; i < kFeatures; ++i) w[i] -= kLearningRate * (gradient[i] + kL2 * w[i]);
    b -= kLearningRate * gradient_b;
  }
  for (std::size_t i = 0; i < kFeatures; ++i) c.weights_[i] = static_cast<float>(w[i]);
  c.bias_ = static_cast<float>(b);
  c.fitted_ = true;
  return c;
}

float AnswerCalibration::confidence(const RetrievalEvidence& evidence) const {
  if (evidence.repeats_phrasing) return 1.0f;
  if (!fitted_ || !std::isfinite(evidence.similarity) || !std::isfinite(evidence.rank_score) ||
      !std::isfinite(evidence.lead)) {
    return -1.0f;
  }
  const auto x = features(evidence);
  double z = bias_;
  for (std::size_t i = 0; i < kFeatures; ++i) z += static_cast<double>(weights_[i]) * x[i];
  return static_cast<float>(sigmoid(z));
}

std::string AnswerCalibration::summary() const {
  if (!fitted_) {
    return fmt::format("confidence not calibrated: {} right and {} wrong examples, {} of each needed "
                       "(entries need a second phrasing)",
                       right_, wrong_, kMinExamplesPerOutcome);
  }
  return fmt::format("confidence calibrated on {} right and {} wrong examples", right_, wrong_);
}

}  // namespace rapidqa::retrieval

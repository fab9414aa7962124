#include "retrieval/answer_calibration.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace rapidqa::retrieval {

AnswerCalibration AnswerCalibration::fit(std::vector<float> unanswerable) {
  AnswerCalibration c;
  c.offered_ = unanswerable.size();
  unanswerable.erase(std::remove_if(unanswerable.begin(), unanswerable.end(), [](float s) { return !std::isfinite(s); }),
                     unanswerable.end());
  if (unanswerable.size() < kMinReferenceScores) return c;
  std::sort(unanswerable.begin(), unanswerable.end());
  c.reference_ = std::move(unanswerable);
  return c;
}

float AnswerCalibration::confidence(const RetrievalEvidence& evidence) const {
  if (evidence.repeats_phrasing) return 1.0f;
  if (reference_.empty() || !std::isfinite(evidence.similarity)) return -1.0f;
  const auto below = std::lower_bound(reference_.begin(), reference_.end(), evidence.similarity);
  return static_cast<float>(below - reference_.begin()) / static_cast<float>(reference_.size());
}

std::string AnswerCalibration::summary() const {
  if (reference_.empty()) {
    return fmt::format("confidence not calibrated: {} reference scores of {} needed (a base of one entry has none)",
                       offered_, kMinReferenceScores);
  }
  return fmt::format("confidence calibrated on {} phrasings asked with their entry left out", reference_.size());
}

}  // namespace rapidqa::retrieval

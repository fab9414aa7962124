// AnswerCalibration: turns what retrieval saw about its best entry (the
// cosine, the ranker's score, the lead over the runner-up) into a
// probability that the entry answers the question, learned from the
// knowledge base alone, so one confidence threshold means the same thing
// for every knowledge base, encoder and fusion.
//
// The examples come from the knowledge base's own phrasings
// (KnowledgeBase::calibrate): each sampled phrasing is asked with itself
// left out, and is right when its entry still ranks first; and it is asked
// with its whole entry left out, which is always wrong (the knowledge base
// has no answer for it, yet something ranks first). A logistic regression
// over the standardised evidence, with both outcomes weighted equally, is
// the calibration: a confidence of 0.5 means "as likely answered here as
// not", for a question as close to the knowledge base as its own phrasings.
//
// Thread safety: value type; const methods may run concurrently.
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <vector>

namespace rapidqa::retrieval {

// What a search knew about its best entry.
struct RetrievalEvidence {
  float similarity = 0;     // the entry's best cosine
  float rank_score = 0;     // the ranker's score for it (the cosine under dense ranking)
  float lead = 0;           // its rank score less the runner-up's (0 when there is none)
  bool repeats_phrasing = false;  // the question is one of the entry's phrasings, word for word
};

struct CalibrationExample {
  RetrievalEvidence evidence;
  bool right = false;
};

class AnswerCalibration {
 public:
  static constexpr std::size_t kFeatures = 3;
  // Fewer examples of either outcome than this and nothing is fitted.
  static constexpr std::size_t kMinExamplesPerOutcome = 10;

  // Not fitted: confidence() is -1 for everything but a repeated phrasing.
  AnswerCalibration() = default;
  static AnswerCalibration fit(const std::vector<CalibrationExample>& examples);

  bool fitted() const { return fitted_; }
  // The probability in [0, 1] that the best entry answers; 1 for a repeated
  // phrasing; -1 when not fitted.
  float confidence(const RetrievalEvidence& evidence) const;

  std::size_t right_examples() const { return right_; }
  std::size_t wrong_examples() const { return wrong_; }
  // "calibrated on N right and M wrong examples" or why not.
  std::string summary() const;

 private:
  std::array<float, kFeatures> features(const RetrievalEvidence& e) const;

  bool fitted_ = false;
  std::size_t right_ = 0, wrong_ = 0;
  std::array<float, kFeatures> mean_{}, scale_{};
  std::array<float, kFeatures> weights_{};
  float bias_ = 0;
  float lead_cap_ = 0;  // leads are clipped here (a repeated phrasing's bonus would swamp the fit)
};

}  // namespace rapidqa::retrieval

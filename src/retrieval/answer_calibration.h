// AnswerCalibration: turns the cosine of retrieval's best entry into a
// confidence that means the same for every knowledge base and encoder,
// learned from the knowledge base alone.
//
// The reference is how the base scores questions it cannot answer: each
// sampled phrasing is asked with its whole entry left out
// (KnowledgeBase::calibrate), and the best remaining entry's cosine is a
// score that answers nothing. The confidence of a new question's best
// entry is the share of those scores below its cosine: at 0.9, nine in ten
// of the base's own unanswerable questions would have scored lower. So a
// threshold on the confidence refuses the same share of unanswerable
// questions in every base, where a cosine threshold refuses a share that
// depends on how alike the base's entries are and on the encoder.
//
// Thread safety: value type; const methods may run concurrently.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace rapidqa::retrieval {

// What a search knew about its best entry.
struct RetrievalEvidence {
  float similarity = 0;           // the entry's best cosine
  bool repeats_phrasing = false;  // the question is one of the entry's phrasings, word for word
};

class AnswerCalibration {
 public:
  // Fewer reference scores than this and nothing is calibrated.
  static constexpr std::size_t kMinReferenceScores = 20;

  // Not fitted: confidence() is -1 for everything but a repeated phrasing.
  AnswerCalibration() = default;
  // `unanswerable`: the best entry's cosine for each phrasing asked with its
  // own entry left out. Non-finite scores are ignored.
  static AnswerCalibration fit(std::vector<float> unanswerable);

  bool fitted() const { return !reference_.empty(); }
  // The share of reference scores below the best entry's cosine, in [0, 1];
  // 1 for a repeated phrasing; -1 when not fitted or not finite.
  float confidence(const RetrievalEvidence& evidence) const;
  std::size_t reference_scores() const { return reference_.size(); }
  // "calibrated on N ..." or why not.
  std::string summary() const;

 private:
  std::vector<float> reference_;  // sorted
  std::size_t offered_ = 0;       // scores given to fit, usable or not
};

}  // namespace rapidqa::retrieval

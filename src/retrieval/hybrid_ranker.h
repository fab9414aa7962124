// HybridRanker: ranks a knowledge base's phrasings for a question from the
// BM25 index and the dense index together (see rapidqa/retrieval_options.h).
//
// Candidates are the BM25 index's best phrasings and the dense index's
// nearest ones; a phrasing the question repeats word for word ranks first. Under kFitted each candidate's score is a linear function of
// its evidence (LexicalEvidence, its BM25 rank, the cosine), with weights
// fitted by softmax regression on the knowledge base's own phrasings: each
// phrasing of an entry with more than one asks as a question, with itself
// left out, and its entry's other phrasings are the right answers. Fitting
// is pulled toward a prior (BM25 order, then the cosine) with a strength
// chosen by cross-validation over those phrasings, and the fitted weights
// are kept only where, held out, they rank better than both the prior and
// the cosine alone (whichever of those is better ranks otherwise).
//
// Thread safety: thread-compatible; rank() may run concurrently.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "index/vector_index.h"
#include "rapidqa/retrieval_options.h"
#include "retrieval/lexical_index.h"

namespace rapidqa::retrieval {

constexpr std::size_t kRankerFeatures = 20;
using RankerWeights = std::array<float, kRankerFeatures>;

struct RankedPhrasing {
  std::int64_t label;
  float score;   // the fusion's score (larger is better; comparable within one question)
  float cosine;  // the question vector's inner product with the phrasing's
  bool repeated = false;  // the question is this phrasing, word for word (it ranks first)
};

// What ranks after a fit: the fitted weights, the cosine alone, or the
// prior (BM25 order, cosine as tie-breaker).
enum class RankerChoice { kPrior, kCosine, kFitted };

struct RankerFit {
  std::size_t questions = 0;    // phrasings asked (0: the prior weights stand)
  double loss_before = 0;       // mean cross-entropy under the prior weights
  double loss_after = 0;        // and under the weights fitted on every question
  double pull = 0;              // the prior's strength cross-validation chose
  // Two-fold cross-validation over the questions (by entry): how many found
  // a right entry first under each choice, each fold judged by weights
  // fitted on the other.
  std::size_t held_out_questions = 0;
  std::size_t held_out_right_prior = 0, held_out_right_cosine = 0, held_out_right_fitted = 0;
  RankerChoice choice = RankerChoice::kPrior;  // the best of the three held out (the prior on a tie)
};

class HybridRanker {
 public:
  // `words` may be null (no word features).
  HybridRanker(RetrievalOptions options, std::shared_ptr<const WordDictionary> words);

  LexicalIndex& lexical() { return lexical_; }
  const LexicalIndex& lexical() const { return lexical_; }
  const RetrievalOptions& options() const { return options_; }
  const RankerWeights& weights() const { return weights_; }

  // Fits the weights (kFitted only; otherwise nothing to fit). `entries`
  // holds each entry's phrasing labels, every one present in both indexes.
  RankerFit fit(const std::vector<std::vector<std::int64_t>>& entries, const index::VectorIndex& dense);

  // The best phrasings for a question, best first, at most `k` (fewer when
  // fewer phrasings share a term or are near). `vector` is the question's
  // encoding, of the dense index's dimension.
  std::vector<RankedPhrasing> rank(std::string_view normalized_question, const float* vector,
                                   const index::VectorIndex& dense, std::size_t k) const;

 private:
  struct Candidate {
    std::int64_t label;
    std::array<float, kRankerFeatures> features;
    float cosine;
    std::size_t lexical_rank, dense_rank;
    std::uint64_t entry;  // the phrasing's entry key (LexicalIndex::entry_of)
  };
  std::vector<Candidate> candidates(const AnalyzedText& question, const float* vector, const index::VectorIndex& dense,
                                    std::int64_t skip) const;
  float score(const Candidate& c) const;
  float fused_score(const Candidate& c) const;

  RetrievalOptions options_;
  std::shared_ptr<const WordDictionary> words_;
  LexicalIndex lexical_;
  RankerWeights weights_;
};

}  // namespace rapidqa::retrieval

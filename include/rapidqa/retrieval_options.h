// RetrievalOptions: how the knowledge tier ranks entries for a question.
//
// Dense retrieval alone (the encoder's cosine) is what a model encoder is
// best at; without a model, the HashingEncoder's cosine trails classical
// lexical ranking. The hybrid ranker scores a question's candidates from a
// BM25 inverted index (CJK characters, words, and adjacent pairs of them)
// and from the dense index with one linear model over lexical and dense
// features (coverage both ways, longest common subsequence, word overlap,
// the cosine). That model is fitted on the knowledge base's own phrasings:
// each alternate phrasing asks for its entry with itself left out, so no
// labelled question is needed. Answer::matches keep the cosine as their
// score (an entry's best among its candidate phrasings), so
// min_answer_score keeps its meaning; the order is the ranker's. A phrasing
// the question repeats word for word always ranks first.
//
// Plain data; copied into the engine at construction.
#pragma once

#include <cstddef>
#include <string>

#include "rapidqa/export.h"
#include "rapidqa/status.h"

namespace rapidqa {

enum class RetrievalFusion {
  kDense,          // the encoder's cosine only (the nearest phrasing wins)
  kReciprocalRank, // BM25 and cosine ranks fused by 1 / (60 + rank), no fitting
  kFitted,         // the linear ranker fitted on the knowledge base's phrasings
};
// "dense", "rrf", "fitted": the names the tools, the server and the C ABI take.
RAPIDQA_EXPORT const char* retrieval_fusion_name(RetrievalFusion fusion) noexcept;
// The fusion a name gives; kInvalidArgument naming the three for any other.
RAPIDQA_EXPORT Result<RetrievalFusion> retrieval_fusion_from_name(const std::string& name);

struct RetrievalOptions {
  // The fitted ranker by default: it leads the cosine on every question set
  // measured (docs/answer-quality.md), and where a base's own phrasings say
  // otherwise it ranks by the cosine or BM25 instead (RankerFit).
  RetrievalFusion fusion = RetrievalFusion::kFitted;
  // A word list in the "word count [tag]" line format (Debian's
  // python3-jieba ships one at /usr/lib/python3/dist-packages/jieba/dict.txt):
  // CJK text is then segmented into words, by the most probable path
  // through the list, for the word-overlap features. Empty: no words (the
  // ranker then uses characters and character pairs only). A file that
  // cannot be read or parsed is an engine construction error.
  std::string word_dictionary;
  std::size_t lexical_candidates = 20;  // phrasings the BM25 index proposes per question
  std::size_t dense_candidates = 8;     // phrasings the dense index adds to them
  // Phrasings asked as questions when the ranker is fitted (at load and
  // reindex): more fit better and take longer (about 0.1 ms each).
  std::size_t max_fit_questions = 4000;
};

}  // namespace rapidqa

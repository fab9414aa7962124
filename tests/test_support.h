// Shared helpers for the Catch2 tests.
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "rapidqa/answer.h"

namespace rapidqa::testing {

inline std::string source_path(const std::string& relative) { return std::string(RAPIDQA_SOURCE_DIR) + "/" + relative; }
inline std::string bundled_faq() { return source_path("examples/data/faq.jsonl"); }
inline std::string bundled_paraphrases() { return source_path("examples/data/faq_paraphrases.jsonl"); }

// A cached answer built from one entry (version 1) at the given score.
inline Answer answer_for(const std::string& entry, const std::string& text, float score = 0.9f) {
  Answer a;
  a.text = text;
  a.score = score;
  a.matches.push_back({entry, score, 1});
  a.tier = AnswerTier::kKnowledge;
  return a;
}

// v scaled to unit length, as the caches expect.
inline std::vector<float> unit(std::vector<float> v) {
  float n = 0;
  for (float x : v) n += x * x;
  for (float& x : v) x /= std::sqrt(n);
  return v;
}

}  // namespace rapidqa::testing

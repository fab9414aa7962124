// Answer: what QAEngine::ask returns for one question, with where it came
// from and what each pipeline stage cost.
//
// Thread safety: value type; thread-compatible.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "rapidqa/export.h"

namespace rapidqa {

// Which part of the pipeline produced the answer.
enum class AnswerTier {
  kResultCache,    // exact normalised question seen recently
  kSemanticCache,  // a similar enough question was answered recently
  kKnowledge,      // retrieved from the knowledge base
  kFallback,       // nothing matched well enough: the fallback text
  kKnowledgeCache, // this exact question's retrieval (and reading) seen within the knowledge tier's TTL,
                   // every entry it came from unchanged since
};
RAPIDQA_EXPORT const char* answer_tier_name(AnswerTier tier) noexcept;

// The measured stages of one ask, in pipeline order.
enum class Stage : std::size_t {
  kNormalize = 0,
  kResultCache,
  kEncode,
  kSemanticCache,
  kRetrieve,
  kInfer,
  kPostprocess,
  kTotal,
};
inline constexpr std::size_t kStageCount = 8;
// "normalize", "result_cache", ... "total".
RAPIDQA_EXPORT const char* stage_name(Stage stage) noexcept;

// Time spent in each stage; a stage that did not run stays zero.
struct StageTimings {
  std::array<std::chrono::nanoseconds, kStageCount> elapsed{};

  std::chrono::nanoseconds& operator[](Stage s) { return elapsed[static_cast<std::size_t>(s)]; }
  std::chrono::nanoseconds operator[](Stage s) const { return elapsed[static_cast<std::size_t>(s)]; }
};

// One knowledge entry that matched, best first.
struct EntryMatch {
  std::string entry_id;
  float score = 0.0f;         // cosine similarity in [-1, 1]
  std::uint64_t version = 0;  // the entry's version when this answer was built
};

// The span an extractive reader cut out of an entry's context passage.
struct ExtractedSpan {
  std::string entry_id;     // whose context held the span
  std::size_t begin = 0;    // byte offsets of the span in that context
  std::size_t end = 0;
  float score = 0;          // reader's start + end logit
  float probability = 0;    // reader's confidence among its candidates
};

struct Answer {
  std::string text;                // the answer; the fallback text for kFallback
  float score = 0.0f;              // similarity of the best match (0 for fallback with no match)
  // The best match's cosine calibrated for this knowledge base: the share
  // of the base's own unanswerable questions (each phrasing asked with its
  // entry left out) that score lower, so one threshold refuses the same
  // share of unanswerable questions whatever the base and encoder (see
  // EngineOptions::min_answer_confidence). 1 when the question repeats a
  // stored phrasing; -1 when not known (no calibration, a cached answer
  // from an older version, the degraded lexical path).
  float confidence = -1.0f;
  // Why the fallback was given (tier kFallback): too little to match, no
  // entry close enough, confidence too low. Empty otherwise.
  std::string fallback_reason;
  std::vector<EntryMatch> matches; // the entries that matched, best first (may be empty)
  AnswerTier tier = AnswerTier::kFallback;
  bool degraded = false;           // true when a cheaper path was taken to meet a limit
  std::string degraded_reason;     // why, when degraded; empty otherwise
  StageTimings timings;            // this request's per-stage latency
  std::optional<ExtractedSpan> extracted;  // set when a reader produced the text
  bool generated = false;          // the text was written by the generator from the matched entries
  // Cosine of the nearest question in the semantic cache when it was looked
  // up (-1: not looked up, or nothing cached), to watch and tune the
  // threshold; and why a close question was refused as a near miss.
  float nearest_cached_similarity = -1;
  std::string near_miss_reason;
  // The similarity that nearest cached question needed (-1: not looked up),
  // and the semantic tier's decision in words: hit or miss, the similarity
  // against that threshold, and where the threshold came from (fixed, or
  // learned to an error bound; see SemanticCacheOptions::target_error_rate).
  float cache_threshold = -1;
  std::string cache_decision;

  // The best entry's id, or "" when nothing matched.
  const std::string& entry_id() const {
    static const std::string kNone;
    return matches.empty() ? kNone : matches.front().entry_id;
  }
};

}  // namespace rapidqa

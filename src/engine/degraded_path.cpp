#include "engine/degraded_path.h"

#include <algorithm>
#include <utility>

#include <fmt/format.h>

namespace rapidqa::engine {

DegradedPath::DegradedPath(DegradedPathOptions options) : options_(std::move(options)) {
  if (!options_.clock) options_.clock = steady_clock_instance();
  if (options_.lexical_index) {
    // The engine validated these options, so create() does not refuse them;
    // if it ever did, the degraded path would answer without a lexical index.
    auto hashing = HashingEncoder::create(options_.hashing);
    if (hashing) {
      lexical_encoder_ = std::move(hashing).value();
      lexical_ = std::make_unique<KnowledgeBase>(lexical_encoder_, options_.knowledge);
    } else {
      warn("no lexical index for degraded answers: " + hashing.status().message());
    }
  }
}

void DegradedPath::warn(const std::string& message) const {
  if (options_.log) options_.log(LogLevel::kWarning, message);
}

void DegradedPath::mirror_all(std::vector<KnowledgeEntry> entries) {
  if (!lexical_) return;
  Status s = lexical_->replace_all(std::move(entries));
  if (!s.is_ok()) warn("lexical index: " + s.message());
}

void DegradedPath::mirror_entry(const std::string& id, const KnowledgeEntry* current) {
  if (!lexical_) return;
  Status s = Status::ok();
  if (current) {
    auto stored = lexical_->store_if_newer(*current);
    if (!stored) s = stored.status();
  } else if (lexical_->find(id)) {
    s = lexical_->remove(id);
  }
  if (!s.is_ok()) warn(fmt::format("lexical index of entry '{}': {}", id, s.message()));
}

void DegradedPath::reindex() {
  if (!lexical_) return;
  Status s = lexical_->reindex();
  if (!s.is_ok()) warn("lexical index: " + s.message());
}

std::optional<Answer> DegradedPath::lexical_answer(const std::string& question, std::size_t top_k) const {
  std::vector<float> v(lexical_encoder_->dimension());
  if (!lexical_encoder_->encode_one(question, v.data()).is_ok()) return std::nullopt;
  Answer a = answer_from_matches(lexical_->search(v.data(), std::max<std::size_t>(top_k, 1)),
                                 options_.lexical_min_score, options_.fallback_answer);
  if (a.matches.size() > top_k) a.matches.resize(top_k);
  if (a.tier != AnswerTier::kKnowledge) return std::nullopt;
  return a;
}

Answer DegradedPath::answer(std::string reason, const CacheKey& key, const std::optional<Clock::time_point>& deadline,
                            std::size_t top_k, bool use_cache, const CacheTiers& tiers,
                            const KnowledgeBase& knowledge) const {
  if (lexical_ && (!deadline || options_.clock->now() < *deadline)) {
    if (auto a = lexical_answer(key.question, top_k)) {
      a->degraded = true;
      a->degraded_reason = reason + ": answered by lexical retrieval";
      return std::move(*a);
    }
    reason += "; lexical retrieval found no answer";
  } else if (lexical_) {
    reason += "; the deadline passed";
  }
  if (use_cache && options_.max_staleness.count() > 0) {
    if (auto stale = tiers.lookup_stale(key, options_.max_staleness, knowledge)) {
      stale->answer.degraded = true;
      stale->answer.degraded_reason = fmt::format("{}: cached answer served {:.1f} s past its TTL", reason,
                                                  std::chrono::duration<double>(stale->age).count());
      return std::move(stale->answer);
    }
  }
  Answer a;
  a.text = options_.fallback_answer;
  a.tier = AnswerTier::kFallback;
  a.degraded = true;
  a.degraded_reason = reason + ": no answer in time";
  return a;
}

}  // namespace rapidqa::engine

// CacheTiers: the engine's three cache tiers as one: the result tier
// (finished answers by exact question), the knowledge tier (what retrieval
// and the reader found, served only while its entries keep their versions)
// and the semantic tier (similar questions). It looks them up in the
// engine's order, fills them, answers the change bus (invalidation and
// displacement, returning what went), applies corrections and reports
// their stats. Any tier may be disabled; its calls then do nothing.
//
// Thread safety: thread-safe (each tier is). The engine's knowledge lock
// orders changes against fills: apply_change() runs with it held
// exclusively, lookups and fills with it held shared, so no ask refills a
// tier from a version a change has just dropped.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <vector>

#include "cache/knowledge_change.h"
#include "engine/knowledge_base.h"
#include "rapidqa/answer.h"
#include "rapidqa/cache_key.h"
#include "rapidqa/metrics.h"
#include "rapidqa/qa_engine.h"
#include "rapidqa/result_cache.h"
#include "rapidqa/semantic_cache.h"

namespace rapidqa::engine {

// The tiers one request may use: all of them unless it opted out or set
// retrieval settings of its own (its answer is not what others would get).
struct TierUse {
  bool any = false;  // the request may use the caches at all (even an expired answer, when degraded)
  bool result = false;
  bool knowledge = false;
  bool semantic = false;
};

// A cached answer served past its TTL, for a degraded request.
struct StaleAnswer {
  Answer answer;                   // its tier set to the tier it came from
  std::chrono::milliseconds age;   // how long ago it expired
};

class CacheTiers {
 public:
  // The tiers EngineOptions enables, on the engine's clock. keep_stale:
  // the exact tiers keep expired answers for degradation.max_staleness, so
  // a degraded request may still serve them. dimension: the encoder's.
  static Result<std::unique_ptr<CacheTiers>> create(const EngineOptions& options, std::size_t dimension,
                                                    bool keep_stale);

  // The tiers a request with these options uses.
  TierUse use_for(const AskOptions& ask) const;

  std::optional<Answer> lookup_result(const CacheKey& key);
  // The same without counting a miss (a first look before the full ask).
  std::optional<Answer> lookup_result_if_cached(const CacheKey& key);
  // A hit whose entries have moved on since is dropped, not served: even a
  // change that reached this instance late (through Redis) never lets an
  // old answer out.
  std::optional<Answer> lookup_knowledge(const CacheKey& key, const KnowledgeBase& knowledge);
  SemanticLookup lookup_semantic(const float* vector, const CacheKey& key, std::optional<float> threshold);
  // The result or knowledge tier's answer, expired at most max_age ago and
  // still built from the current versions.
  std::optional<StaleAnswer> lookup_stale(const CacheKey& key, std::chrono::milliseconds max_age,
                                          const KnowledgeBase& knowledge) const;

  // Stores an answer in the result tier (an answer another tier served).
  void fill_result(const CacheKey& key, const Answer& answer, std::chrono::milliseconds ttl);
  // Stores an answer in the tiers `use` names; ttl 0 = each tier's own.
  // vector: the question's, for the semantic tier.
  void fill(const TierUse& use, const CacheKey& key, const float* vector, const Answer& answer,
            std::chrono::milliseconds ttl);

  // The change bus's subscriber: drops the answers built from the changed
  // entry (all of them on a reload) and, for an added or changed entry,
  // the answers it now beats. Returns how many went and which of the result
  // tier's were hot (hit at least min_hits times).
  cache::ChangeEffect apply_change(const cache::KnowledgeChange& change, const KnowledgeBase& knowledge);

  // Replaces the answer cached for a question with a corrected text, keeping
  // the provenance of what was cached (so knowledge updates still reach
  // it). vector: the question's, when the semantic tier is enabled.
  void correct(const CacheKey& key, std::string text, const float* vector);
  // Removes a question's answers from every tier; returns how many.
  std::size_t erase(const CacheKey& key);
  void clear();

  // The semantic tier, for snapshots, intents and thresholds; null when
  // disabled.
  SemanticCache* semantic() const { return semantic_.get(); }

  // The tiers' totals into snapshot.caches.
  void add_stats(MetricsSnapshot& snapshot) const;

 private:
  CacheTiers() = default;
  // Drops, from every tier, the cached questions an upserted entry now
  // answers better than the answer they hold; returns how many.
  std::size_t displace_beaten_answers(const std::string& entry_id, const KnowledgeBase& knowledge);

  std::unique_ptr<ResultCache> result_;      // null when disabled
  std::unique_ptr<ResultCache> knowledge_;   // null when disabled
  std::unique_ptr<SemanticCache> semantic_;  // null when disabled
  std::size_t dimension_ = 0;
  float min_answer_score_ = 0;               // what the semantic tier's cached answers scored at least
  std::uint64_t rebuild_min_hits_ = 1;
};

}  // namespace rapidqa::engine

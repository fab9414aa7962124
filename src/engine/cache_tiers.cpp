#include "engine/cache_tiers.h"

#include <algorithm>
#include <utility>

namespace rapidqa::engine {

Result<std::unique_ptr<CacheTiers>> CacheTiers::create(const EngineOptions& options, std::size_t dimension,
                                                       bool keep_stale) {
  std::unique_ptr<CacheTiers> tiers(new CacheTiers());
  tiers->dimension_ = dimension;
  tiers->min_answer_score_ = options.min_answer_score;
  tiers->rebuild_min_hits_ = options.rebuild_min_hits;
  auto exact_tier = [&](ResultCacheOptions o) {
    if (!o.clock) o.clock = options.clock;
    if (keep_stale) o.stale_grace = std::max(o.stale_grace, options.degradation.max_staleness);
    return ResultCache::create(std::move(o));
  };
  if (options.enable_result_cache) {
    auto cache = exact_tier(options.result_cache);
    if (!cache) return cache.status();
    tiers->result_ = std::move(cache).value();
  }
  if (options.enable_knowledge_cache) {
    auto cache = exact_tier(options.knowledge_cache);
    if (!cache) return cache.status();
    tiers->knowledge_ = std::move(cache).value();
  }
  if (options.enable_semantic_cache) {
    SemanticCacheOptions sc = options.semantic_cache;
    sc.dimension = dimension;
    if (!sc.clock) sc.clock = options.clock;
    auto cache = SemanticCache::create(sc);
    if (!cache) return cache.status();
    tiers->semantic_ = std::move(cache).value();
  }
  return tiers;
}

TierUse CacheTiers::use_for(const AskOptions& ask) const {
  const bool use_cache = ask.use_cache && !ask.top_k && !ask.min_answer_score && !ask.min_answer_confidence;
  TierUse use;
  use.any = use_cache;
  use.result = use_cache && result_;
  use.knowledge = use_cache && knowledge_;
  use.semantic = use_cache && semantic_;
  return use;
}

std::optional<Answer> CacheTiers::lookup_result(const CacheKey& key) {
  auto hit = result_->lookup(key);
  if (hit) hit->tier = AnswerTier::kResultCache;
  return hit;
}

std::optional<Answer> CacheTiers::lookup_result_if_cached(const CacheKey& key) {
  auto hit = result_->lookup_if_present(key);
  if (hit) hit->tier = AnswerTier::kResultCache;
  return hit;
}

std::optional<Answer> CacheTiers::lookup_knowledge(const CacheKey& key, const KnowledgeBase& knowledge) {
  auto hit = knowledge_->lookup(key);
  if (!hit) return hit;
  if (!knowledge.built_from_current_versions(*hit)) {
    knowledge_->erase(key);
    return std::nullopt;
  }
  hit->tier = AnswerTier::kKnowledgeCache;
  return hit;
}

SemanticLookup CacheTiers::lookup_semantic(const float* vector, const CacheKey& key,
                                           std::optional<float> threshold) {
  SemanticQuery query;
  query.tenant = key.tenant;
  query.similarity_threshold = threshold;
  SemanticLookup found = semantic_->lookup(vector, key.question, query);
  if (found.answer) found.answer->tier = AnswerTier::kSemanticCache;  // with the lookup's explanation
  return found;
}

std::optional<StaleAnswer> CacheTiers::lookup_stale(const CacheKey& key, std::chrono::milliseconds max_age,
                                                    const KnowledgeBase& knowledge) const {
  for (const auto& [tier, name] : {std::make_pair(result_.get(), AnswerTier::kResultCache),
                                   std::make_pair(knowledge_.get(), AnswerTier::kKnowledgeCache)}) {
    if (!tier) continue;
    std::chrono::milliseconds age{0};
    auto stale = tier->lookup_stale(key, max_age, &age);
    if (!stale || !knowledge.built_from_current_versions(*stale)) continue;
    stale->tier = name;
    return StaleAnswer{std::move(*stale), age};
  }
  return std::nullopt;
}

void CacheTiers::fill_result(const CacheKey& key, const Answer& answer, std::chrono::milliseconds ttl) {
  result_->insert(key, answer, ttl);
}

void CacheTiers::fill(const TierUse& use, const CacheKey& key, const float* vector, const Answer& answer,
                      std::chrono::milliseconds ttl) {
  if (use.result) result_->insert(key, answer, ttl);
  if (use.knowledge) knowledge_->insert(key, answer, ttl);
  if (use.semantic) semantic_->insert(vector, key.question, answer, key.tenant, ttl);
}

cache::ChangeEffect CacheTiers::apply_change(const cache::KnowledgeChange& change, const KnowledgeBase& knowledge) {
  cache::ChangeEffect effect;
  if (change.kind == cache::KnowledgeChange::Kind::kReload) {
    clear();
    return effect;
  }
  if (result_) effect.removed += result_->invalidate_entry(change.entry_id, &effect.hot_questions, rebuild_min_hits_);
  if (knowledge_) effect.removed += knowledge_->invalidate_entry(change.entry_id);
  if (semantic_) effect.removed += semantic_->invalidate_entry(change.entry_id);
  if (change.kind == cache::KnowledgeChange::Kind::kUpsert) {
    effect.removed += displace_beaten_answers(change.entry_id, knowledge);
  }
  return effect;
}

// A new or changed entry may answer some cached questions better than the
// answer they hold: retrieval would now pick it. The semantic tier holds
// the cached questions' vectors, so it finds them; the exact tiers drop
// the same questions.
std::size_t CacheTiers::displace_beaten_answers(const std::string& entry_id, const KnowledgeBase& knowledge) {
  if (!semantic_) return 0;
  const std::vector<float> vectors = knowledge.phrasing_vectors(entry_id);
  const std::size_t count = vectors.size() / dimension_;
  if (count == 0) return 0;
  std::size_t removed = 0;
  for (const CacheKey& beaten : semantic_->displace(vectors.data(), count, min_answer_score_)) {
    for (ResultCache* exact : {result_.get(), knowledge_.get()}) {
      if (exact) exact->erase(beaten);
    }
    ++removed;
  }
  return removed;
}

void CacheTiers::correct(const CacheKey& key, std::string text, const float* vector) {
  Answer corrected;
  for (ResultCache* exact : {result_.get(), knowledge_.get()}) {
    if (!exact) continue;
    if (auto old = exact->lookup(key)) {
      corrected = std::move(*old);
      break;
    }
  }
  corrected.text = std::move(text);
  corrected.extracted.reset();
  corrected.tier = AnswerTier::kKnowledge;
  if (result_) result_->insert(key, corrected);
  // The knowledge tier would serve what retrieval found once the result
  // tier's copy expires: the correction replaces it everywhere.
  if (knowledge_) knowledge_->erase(key);
  if (semantic_ && vector) {
    semantic_->erase_question(key.question, key.tenant);
    semantic_->insert(vector, key.question, corrected, key.tenant);
  }
}

std::size_t CacheTiers::erase(const CacheKey& key) {
  std::size_t removed = 0;
  for (ResultCache* exact : {result_.get(), knowledge_.get()}) {
    if (exact && exact->erase(key)) ++removed;
  }
  if (semantic_) removed += semantic_->erase_question(key.question, key.tenant);
  return removed;
}

void CacheTiers::clear() {
  for (ResultCache* exact : {result_.get(), knowledge_.get()}) {
    if (exact) exact->clear();
  }
  if (semantic_) semantic_->clear();
}

void CacheTiers::add_stats(MetricsSnapshot& snapshot) const {
  // The tiers' stats share these field names; the totals cover all three.
  auto add_tier = [&snapshot](const auto& s) {
    snapshot.caches.evictions += s.evictions;
    snapshot.caches.expirations += s.expirations;
    snapshot.caches.invalidations += s.invalidations;
    snapshot.caches.entries += s.size;
    snapshot.caches.bytes += s.bytes;
  };
  for (const ResultCache* exact : {result_.get(), knowledge_.get()}) {
    if (exact) add_tier(exact->stats());
  }
  if (semantic_) {
    const SemanticCacheStats s = semantic_->stats();
    add_tier(s);
    snapshot.caches.displacements = s.displacements;
    snapshot.caches.semantic_outcomes = s.outcomes;
    snapshot.caches.semantic_wrong_outcomes = s.wrong_outcomes;
    snapshot.caches.semantic_verifications = s.verifications;
  }
}

}  // namespace rapidqa::engine

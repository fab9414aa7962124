// DegradedPath: how a request the model cannot serve in time is still
// answered: lexical retrieval over a mirror of the knowledge indexed by
// the HashingEncoder while time is left, else a recently expired cached
// answer built from the current versions, else the fallback; always
// marked degraded with the reason.
//
// The mirror holds the same entries, at the same versions, as the
// knowledge base. Its one writer is EngineKnowledge, which applies every
// knowledge change to both, so no caller keeps them in step by hand.
//
// Thread safety: thread-compatible, under the engine's knowledge lock:
// the mirror_* calls and reindex() with it held exclusively, answer() with
// it held shared (concurrent answers are fine).
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/cache_tiers.h"
#include "engine/knowledge_base.h"
#include "rapidqa/answer.h"
#include "rapidqa/cache_key.h"
#include "rapidqa/clock.h"
#include "rapidqa/hashing_encoder.h"
#include "rapidqa/log.h"

namespace rapidqa::engine {

struct DegradedPathOptions {
  bool lexical_index = false;               // mirror the knowledge for lexical retrieval
  HashingEncoderOptions hashing;            // the mirror's encoder
  KnowledgeBaseOptions knowledge;           // the mirror's index settings
  float lexical_min_score = 0.35f;          // the lexical path's min_answer_score
  std::chrono::milliseconds max_staleness{0};  // oldest expired cached answer served; 0 = none
  std::string fallback_answer;
  std::shared_ptr<Clock> clock;             // deadlines are on it
  LogSink log;                              // mirror failures; null = silent
};

class DegradedPath {
 public:
  explicit DegradedPath(DegradedPathOptions options);

  // The mirror. A failure here leaves the lexical path a step behind
  // (logged), never the knowledge itself.
  void mirror_all(std::vector<KnowledgeEntry> entries);
  // current: the entry as the knowledge base now holds it, null when removed.
  void mirror_entry(const std::string& id, const KnowledgeEntry* current);
  void reindex();

  // The mirror kept between runs, beside the engine's own index snapshot:
  // PATH (the lexical index, KnowledgeBase::save_snapshot) and PATH.state
  // (its encoder's learned statistics). Without them a restart of an
  // engine with a model encoder would rebuild the lexical index: as long
  // as the first start of a HashingEncoder engine.
  Status save_mirror(const std::string& path) const;
  // Mirrors `entries` from what save_mirror wrote: false when there is no
  // usable snapshot (logged unless there is none at all), and then the
  // entries are as they were; on success they are moved from.
  bool restore_mirror(const std::string& path, std::vector<KnowledgeEntry>& entries);

  // The degraded answer for a request (reason: why the model could not
  // serve it). The lexical path runs only before the deadline; expired
  // answers are looked up only when the request may use the caches.
  Answer answer(std::string reason, const CacheKey& key, const std::optional<Clock::time_point>& deadline,
                std::size_t top_k, bool use_cache, const CacheTiers& tiers, const KnowledgeBase& knowledge) const;

 private:
  // The lexical path's answer, when it finds one good enough.
  std::optional<Answer> lexical_answer(const std::string& question, std::size_t top_k) const;
  void warn(const std::string& message) const;

  DegradedPathOptions options_;
  std::shared_ptr<HashingEncoder> lexical_encoder_;  // null without a lexical index
  std::unique_ptr<KnowledgeBase> lexical_;           // null without a lexical index
};

}  // namespace rapidqa::engine

// QAEngine: answers questions from a knowledge base through the pipeline
// normalise -> result cache -> encode -> semantic cache -> retrieve ->
// infer (an optional extractive reader) -> postprocess, measuring every
// stage.
//
// Typical use:
//   auto engine = rapidqa::QAEngine::create({});
//   if (!engine) { /* engine.status().message() */ }
//   auto loaded = (*engine)->load_knowledge("faq.jsonl");
//   auto answer = (*engine)->ask("How do I reset my password?");
//
// Thread safety: thread-safe. ask() and ask_batch() may be called from any
// number of threads while other threads add, update or remove entries; an
// update is visible to every ask that starts after it returns, and no cache
// serves an answer built from the entry's previous version after that.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rapidqa/answer.h"
#include "rapidqa/clock.h"
#include "rapidqa/compute_runtime.h"
#include "rapidqa/encoder.h"
#include "rapidqa/export.h"
#include "rapidqa/hashing_encoder.h"
#include "rapidqa/knowledge_entry.h"
#include "rapidqa/knowledge_file.h"
#include "rapidqa/log.h"
#include "rapidqa/metrics.h"
#include "rapidqa/reader.h"
#include "rapidqa/redis_sync.h"
#include "rapidqa/result_cache.h"
#include "rapidqa/semantic_cache.h"
#include "rapidqa/status.h"
#include "rapidqa/text_normalizer.h"

namespace rapidqa {

struct EngineOptions {
  // The encoder used for retrieval and the semantic cache. Null: a
  // HashingEncoder built from `hashing` below. Shared, not copied.
  std::shared_ptr<Encoder> encoder;
  HashingEncoderOptions hashing;           // used when encoder is null
  // An extractive reader: when set and the best entry has a `context`
  // passage, the answer is the best span the reader finds in the passages of
  // the best entries. A best entry without context, or a reader that finds
  // nothing, gives the FAQ answer. Null: FAQ answers only.
  std::shared_ptr<Reader> reader;
  std::size_t reader_passages = 3;         // best entries whose contexts the reader reads

  NormalizeOptions normalize;              // question normalisation and size limit
  ResultCacheOptions result_cache;         // exact tier (TTL 5 min by default)
  SemanticCacheOptions semantic_cache;     // similar-question tier (TTL 1 h); dimension is taken from the encoder
  bool enable_result_cache = true;
  bool enable_semantic_cache = true;

  std::size_t knowledge_exact_limit = 2048;  // above this many phrasings, retrieval uses HNSW instead of exact search
  int knowledge_search_breadth = 128;        // HNSW candidate list size (efSearch); larger = better recall, slower

  float min_answer_score = 0.35f;          // best-match cosine below this gives the fallback answer
  std::string fallback_answer = "Sorry, I don't have an answer to that question yet.";
  std::size_t top_k = 3;                   // matches reported in Answer::matches

  // Hot-question rebuild: after an update or removal, questions whose cached
  // answer had been hit at least rebuild_min_hits times are re-answered in
  // the background, so the next asker gets a fresh answer without the miss.
  std::size_t rebuild_workers = 1;         // background threads; 0 disables rebuilds
  std::size_t rebuild_queue_capacity = 256;// pending rebuilds; more are dropped (counted), not queued
  std::uint64_t rebuild_min_hits = 1;      // result-cache hits that make a question hot

  ComputeThreads threads;                  // applied process-wide at create()
  LogSink log = stderr_log_sink();         // background events (Redis outages, ...); null = silent
  std::shared_ptr<Clock> clock;            // time source for TTLs; null = steady clock
  // Sharing knowledge changes with the other instances of this knowledge
  // base through Redis (see redis_sync.h); no host = this instance alone.
  RedisSyncOptions redis;
};

struct AskOptions {
  std::string tenant;                      // cache namespace; answers are never shared between tenants
  bool use_cache = true;                   // false: skip both cache tiers (no lookup, no fill)
  std::optional<float> semantic_threshold; // override SemanticCacheOptions::similarity_threshold
  std::optional<std::size_t> top_k;        // override EngineOptions::top_k
  std::optional<float> min_answer_score;   // override EngineOptions::min_answer_score
};

struct KnowledgeLoadReport {
  std::size_t entries = 0;                 // entries now in the engine
  std::size_t phrasings = 0;               // questions + alternates indexed
  std::vector<KnowledgeLineError> skipped; // bad lines left out (skip_invalid_lines only)
};

class RAPIDQA_EXPORT QAEngine {
 public:
  // Fails with kInvalidArgument when an option is out of range. Redis being
  // unreachable is not a failure: the engine starts, logs it and retries.
  static Result<std::unique_ptr<QAEngine>> create(EngineOptions options = {});
  ~QAEngine();
  QAEngine(const QAEngine&) = delete;
  QAEngine& operator=(const QAEngine&) = delete;

  // Replaces the whole knowledge base with the file's entries (see
  // knowledge_file.h for the format and what happens to bad lines). On error
  // the engine keeps the knowledge it had. Clears both caches.
  Result<KnowledgeLoadReport> load_knowledge(const std::string& path,
                                             const KnowledgeFileOptions& file_options = {});
  // The same from entries in memory. kAlreadyExists on duplicate ids.
  Result<KnowledgeLoadReport> load_entries(std::vector<KnowledgeEntry> entries);

  // Run-time changes. add: kAlreadyExists when the id exists. update:
  // kNotFound when it does not; replaces every field and bumps the version.
  // remove: kNotFound when it does not. All: kInvalidArgument for a bad
  // entry. Cached answers built from the entry are dropped before the call
  // returns.
  Status add_entry(KnowledgeEntry entry);
  Status update_entry(KnowledgeEntry entry);
  Status remove_entry(const std::string& id);
  // A copy of the entry as stored (with its version), or kNotFound.
  Result<KnowledgeEntry> entry(const std::string& id) const;
  std::size_t entry_count() const;

  // Re-learns the encoder's corpus statistics (IDF) from the current
  // knowledge and re-encodes it; load_knowledge does this itself, later
  // adds and updates reuse the statistics of the last load.
  Status reindex();

  // Answers one question. Errors (kInvalidArgument for empty or invalid
  // UTF-8 text, kOutOfRange for oversize text) are for bad input only; a
  // question nothing matches gets the fallback Answer, not an error.
  Result<Answer> ask(std::string_view question, const AskOptions& options = {});
  // One result per question, in order.
  std::vector<Result<Answer>> ask_batch(const std::vector<std::string>& questions,
                                        const AskOptions& options = {});

  // Fixing a wrong cached answer. correct_cached_answer replaces the answer
  // cached for this exact question (in the options' tenant, both tiers)
  // with `text`; it keeps the entries the old answer was built from, so a
  // later knowledge update still invalidates it, and it lasts until the
  // tiers' TTLs. kInvalidArgument for a bad question or empty text.
  // delete_cached_answer removes it; the next ask is answered afresh.
  Status correct_cached_answer(std::string_view question, std::string text, const AskOptions& options = {});
  Result<std::size_t> delete_cached_answer(std::string_view question, const AskOptions& options = {});
  // Drops every cached answer built from an entry without changing the
  // entry; returns how many. kNotFound for an unknown id.
  Result<std::size_t> invalidate_entry(const std::string& id);

  // Persists the semantic tier (see SemanticCache::save_snapshot), and loads
  // it back at start to preload hot questions. Loading drops answers built
  // from entries the knowledge no longer has; a bad snapshot is refused with
  // the reason and the semantic tier starts cold. Returns the entries loaded.
  Status save_cache_snapshot(const std::string& path) const;
  Result<std::size_t> load_cache_snapshot(const std::string& path);

  // The most asked groups of similar questions in a tenant's semantic
  // cache (FAISS k-means over the cached question vectors); empty when the
  // semantic cache is disabled or empty.
  std::vector<CachedIntent> top_intents(std::size_t intents, const std::string& tenant = "") const;

  // Blocks until every queued hot-question rebuild has run.
  void wait_for_rebuilds();

  MetricsSnapshot metrics() const;
  void reset_metrics();
  // Drops every cached answer of both tiers.
  void clear_caches();

  const Encoder& encoder() const;

 private:
  QAEngine();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace rapidqa

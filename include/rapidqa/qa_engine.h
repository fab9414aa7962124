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
// Durability: with EngineOptions::knowledge_store the knowledge lives in a
// KnowledgeStore (knowledge_store.h) and survives restarts. Every change is
// committed there first; then the cached answers built from the entry are
// dropped in every tier (and the peers told, through Redis); then hot
// questions are re-answered in the background. A change whose commit fails
// returns the reason and changes nothing in memory or in the caches.
// Without a store the knowledge lives in memory only.
//
// Thread safety: thread-safe. ask() and ask_batch() may be called from any
// number of threads while other threads add, update or remove entries; an
// update is visible to every ask that starts after it returns, and no cache
// serves an answer built from the entry's previous version after that.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rapidqa/answer.h"
#include "rapidqa/auto_tuner.h"
#include "rapidqa/batching_options.h"
#include "rapidqa/clock.h"
#include "rapidqa/compute_runtime.h"
#include "rapidqa/encoder.h"
#include "rapidqa/engine_tuning.h"
#include "rapidqa/export.h"
#include "rapidqa/generator.h"
#include "rapidqa/hashing_encoder.h"
#include "rapidqa/knowledge_entry.h"
#include "rapidqa/knowledge_file.h"
#include "rapidqa/knowledge_store.h"
#include "rapidqa/log.h"
#include "rapidqa/metrics.h"
#include "rapidqa/reader.h"
#include "rapidqa/redis_sync.h"
#include "rapidqa/result_cache.h"
#include "rapidqa/retrieval_options.h"
#include "rapidqa/semantic_cache.h"
#include "rapidqa/status.h"
#include "rapidqa/text_normalizer.h"

namespace rapidqa {

// Graceful degradation, for engines with a model encoder: a request that
// cannot get the model in time is still answered, by a cheaper path, and
// the Answer says so (degraded, degraded_reason).
struct DegradationOptions {
  bool enabled = true;
  // The queue fill (fraction of encoder_batching.queue_capacity) at which
  // the model counts as saturated: new asks take the lexical path at once.
  double queue_saturation = 0.9;
  // The last resort once the deadline has passed or the lexical path found
  // nothing: a cached answer (result or knowledge tier) that expired at most
  // this long ago. 0 = never serve an expired answer.
  std::chrono::milliseconds max_staleness{10 * 60 * 1000};
  std::chrono::milliseconds default_timeout{0};  // AskOptions::timeout when a request sets none; 0 = no deadline
  float lexical_min_score = 0.35f;  // the lexical path's min_answer_score (its cosines are not the model's)
  // Kept back from a request's deadline for the lexical path (a fraction of
  // a millisecond at 10k entries): the model is given up on this much
  // before the deadline, so the degraded answer still arrives in time.
  std::chrono::microseconds lexical_reserve{1000};
};

// Encoder batches: concurrent asks share the model's forward passes. Only
// for model encoders (a lightweight encoder is called inline). Two batches
// may be in their forward passes at once: when the model is busy the next
// batch starts as soon as it has formed, and the two run on a core each
// instead of taking turns on both (see docs/performance.md, the load study).
inline DynamicBatcherOptions default_encoder_batching() {
  DynamicBatcherOptions o;
  o.workers = 2;
  o.max_batch_size = 32;
  o.max_queue_delay = std::chrono::microseconds(2000);
  o.queue_capacity = 1024;
  return o;
}

// Encoder batches for a model another engine serves (RemoteEncoder): four
// batches may be out at once (the work is the other engine's), and a batch
// leaves as soon as a worker is free, what arrives meanwhile forming the
// next one. The default above waits up to 2 ms for company, which suits a
// forward pass in this process but adds those 2 ms to every lone ask here.
// See docs/remote.md for the measurements behind the numbers.
inline DynamicBatcherOptions remote_encoder_batching() {
  DynamicBatcherOptions o = default_encoder_batching();
  o.workers = 4;
  o.max_queue_delay = std::chrono::microseconds(0);
  return o;
}

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
  // A generator (RemoteGenerator: an LLM behind the OpenAI chat API): when
  // set, answers that retrieval finds are generated from the best
  // entries, and the caches hold them like any answer (see generator.h).
  std::shared_ptr<Generator> generator;
  std::size_t generator_sources = 3;       // best entries (above min_answer_score) given to it

  NormalizeOptions normalize;              // question normalisation and size limit
  // The three cache tiers, looked up in this order. Each has its own TTL
  // (absolute or sliding), entry and byte bounds and eviction policy; an
  // entry's cache_ttl shortens every tier's TTL for answers built from it.
  ResultCacheOptions result_cache;         // finished answers by exact question (TTL 5 min)
  // What retrieval and the reader found for an exact question: the entries
  // (with versions) and the span; served only while each entry is at that
  // version, so it can live long (TTL 24 h).
  ResultCacheOptions knowledge_cache = knowledge_cache_defaults();
  SemanticCacheOptions semantic_cache;     // similar-question tier (TTL 1 h); dimension is taken from the encoder
  bool enable_result_cache = true;
  bool enable_knowledge_cache = true;
  bool enable_semantic_cache = true;

  std::size_t knowledge_exact_limit = 2048;  // above this many phrasings, retrieval uses HNSW instead of exact search
  int knowledge_search_breadth = 128;        // HNSW candidate list size (efSearch); larger = better recall, slower

  // How the knowledge tier ranks entries: the encoder's cosine, or a BM25
  // index fused with it by a ranker fitted on the knowledge base's own
  // phrasings (see retrieval_options.h).
  RetrievalOptions retrieval;
  float min_answer_score = 0.35f;          // best-match cosine below this gives the fallback answer
  // Best-match calibrated confidence (Answer::confidence) below this gives
  // the fallback answer, in [0, 1]; 0 turns the check off. 0.9 refuses
  // about nine in ten of the questions the knowledge base cannot answer,
  // whatever the base and encoder. Where no calibration could be fitted (a
  // base of one entry) only min_answer_score applies.
  float min_answer_confidence = 0.0f;
  // A question with fewer letters and digits than this (any script; one
  // CJK character is one letter) has too little to match: it gets the
  // fallback answer with a reason, without retrieval. At least 1.
  std::size_t min_question_characters = 2;
  std::string fallback_answer = "Sorry, I don't have an answer to that question yet.";
  std::size_t top_k = 3;                   // matches reported in Answer::matches

  // Hot-question rebuild: after an update or removal, questions whose cached
  // answer had been hit at least rebuild_min_hits times are re-answered in
  // the background, so the next asker gets a fresh answer without the miss.
  std::size_t rebuild_workers = 1;         // background threads; 0 disables rebuilds
  std::size_t rebuild_queue_capacity = 256;// pending rebuilds; more are dropped (counted), not queued
  std::uint64_t rebuild_min_hits = 1;      // result-cache hits that make a question hot

  bool batch_encoder = true;               // batch a model encoder's calls (see encoder_batching)
  DynamicBatcherOptions encoder_batching = default_encoder_batching();  // clock: the engine's when null
  DegradationOptions degradation;
  // Let an AutoTuner steer the encoder batcher from the engine's own p99
  // and QPS (a model encoder only); it closes a metrics window per interval.
  bool auto_tune = false;
  AutoTunerOptions tuner;                  // clock: the engine's when null
  LatencyAnomalyOptions anomaly;           // the p99-jump flag in metrics()

  ComputeThreads threads;                  // applied process-wide at create()
  LogSink log = stderr_log_sink();         // background events (Redis outages, ...); null = silent
  std::shared_ptr<Clock> clock;            // time source for TTLs; null = steady clock
  // Sharing knowledge changes with the other instances of this knowledge
  // base through Redis (see redis_sync.h); no host = this instance alone.
  RedisSyncOptions redis;
  // The durable knowledge: a store URI ("sqlite:/var/lib/rapidqa/faq.db",
  // see knowledge_store.h and docs/store.md). create() opens it (creating
  // the file when missing) and loads its current entries; every change is
  // committed there before it is applied. "" = knowledge in memory only.
  // The engine writes the store, so a second engine (or process) on the
  // same file is refused at create() with kFailedPrecondition.
  std::string knowledge_store;
  KnowledgeStoreOptions knowledge_store_options;  // read_only is refused: the engine writes
  // Where the engine keeps its retrieval index between runs, so a restart
  // reads the index instead of building it (docs/store.md, fast restarts).
  // "" = beside a SQLite store's file (PATH.index and PATH.index.labels);
  // an engine on a PostgreSQL store keeps none unless one is named here (a
  // local path: each instance keeps its own). Unused without a store.
  std::string index_snapshot;
};

struct AskOptions {
  std::string tenant;                      // cache namespace; answers are never shared between tenants
  bool use_cache = true;                   // false: skip every cache tier (no lookup, no fill)
  std::optional<float> semantic_threshold; // override SemanticCacheOptions::similarity_threshold
  // Retrieval settings of the request's own; such a request bypasses the
  // cache tiers (its answer is not what other askers would get).
  std::optional<std::size_t> top_k;        // override EngineOptions::top_k
  std::optional<float> min_answer_score;   // override EngineOptions::min_answer_score
  std::optional<float> min_answer_confidence;  // override EngineOptions::min_answer_confidence
  // The request's time budget from the call; 0 = the engine's
  // degradation.default_timeout. Near it the engine degrades rather than
  // waits: the ask returns by then (give or take the lexical path's
  // fraction of a millisecond).
  std::chrono::milliseconds timeout{0};
  BatchPriority priority = BatchPriority::kNormal;  // in the model's queue
  // The answer's text as it is written: with a generator, each piece as it
  // arrives; otherwise (a cached or FAQ answer) the whole text in one call
  // before ask returns. Return false to stop a generation. Called on the
  // asking thread.
  TokenCallback on_token;
};

struct KnowledgeLoadReport {
  std::size_t entries = 0;                 // entries now in the engine
  std::size_t phrasings = 0;               // questions + alternates indexed
  std::vector<KnowledgeLineError> skipped; // bad lines left out (skip_invalid_lines only)
  // How retrieval ranks after this load, and for the fitted ranker what its
  // cross-validation over the knowledge base's own phrasings found.
  std::string ranking;
};

struct PreloadReport {
  std::size_t questions = 0;                // questions asked
  std::size_t cached = 0;                   // answered, and now held by the cache tiers
  std::size_t fallbacks = 0;                // nothing matched: not cached
  std::size_t degraded = 0;                 // answered by a degraded path (the model was busy): not cached
  std::vector<KnowledgeLineError> rejected; // bad questions (empty, oversize, invalid UTF-8) by line
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
  // the engine keeps the knowledge it had. Clears both caches. With a store
  // this is an import, in one transaction: new ids are added, changed
  // entries get a new version, unchanged ones keep theirs, missing ones are
  // removed (their history stays).
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

  // The store's side (kFailedPrecondition without a knowledge store).
  // entry_history: every version of an entry, oldest first (kNotFound when
  // the id was never stored). rollback_entry: makes a new version equal to
  // an old one and returns the entry as now stored (kNotFound for an
  // unknown version); rolling back to a removal removes the entry and
  // returns only its id. It is a
  // change like update_entry: committed first, then the caches.
  // export_knowledge: the current entries as a JSONL file (written beside
  // and renamed into place); returns how many. store_stats: sizes.
  Result<std::vector<EntryVersion>> entry_history(const std::string& id) const;
  Result<KnowledgeEntry> rollback_entry(const std::string& id, std::uint64_t version);
  Result<std::size_t> export_knowledge(const std::string& path) const;
  Result<KnowledgeStoreStats> store_stats() const;

  // Sets (or with nullopt removes) a tenant's own semantic-cache threshold,
  // between the global default and a request's own; kInvalidArgument
  // outside (0, 1], kFailedPrecondition when the semantic cache is disabled.
  Status set_tenant_semantic_threshold(const std::string& tenant, std::optional<float> threshold);

  // Re-learns the encoder's corpus statistics (IDF) from the current
  // knowledge and re-encodes it; load_knowledge does this itself, later
  // adds and updates reuse the statistics of the last load.
  Status reindex();

  // Answers one question. Errors (kInvalidArgument for empty or invalid
  // UTF-8 text, kOutOfRange for oversize text) are for bad input only; a
  // question nothing matches gets the fallback Answer, not an error.
  Result<Answer> ask(std::string_view question, const AskOptions& options = {});
  // The answer when the result cache holds this exact question (for the
  // options' tenant), else nullopt; then call ask(). It never encodes, never
  // waits on the model or on a knowledge update, so an event loop may call
  // it: the cost is normalising the question and one hash lookup. Options
  // that bypass the caches, invalid options or text give nullopt too (ask()
  // then reports the error). A hit counts in metrics() as any ask does.
  std::optional<Answer> ask_cached(std::string_view question, const AskOptions& options = {});
  // One result per question, in order.
  std::vector<Result<Answer>> ask_batch(const std::vector<std::string>& questions,
                                        const AskOptions& options = {});

  // Fixing a wrong cached answer. correct_cached_answer replaces the answer
  // cached for this exact question (in the options' tenant, both tiers)
  // with `text`; it keeps the entries the old answer was built from, so a
  // later knowledge update still invalidates it, and it lasts until the
  // tiers' TTLs. A correction for a question nothing was cached for has no
  // entries to keep: it goes to the exact tier only (the semantic tier holds
  // only answers a knowledge change can invalidate). kInvalidArgument for a
  // bad question or tenant, or empty or invalid UTF-8 text.
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

  // Warms every cache tier with hot questions at start, by asking each in
  // the options' tenant. A bad question is reported with its (1-based)
  // line and the rest still run; progress(done, total), when given, is
  // called after every 1,000 questions and at the end. The file form reads
  // one question per line (blank lines and lines starting with '#'
  // skipped); kNotFound when it cannot be opened.
  PreloadReport preload_questions(const std::vector<std::string>& questions, const AskOptions& options = {},
                                  const std::function<void(std::size_t, std::size_t)>& progress = nullptr);
  Result<PreloadReport> preload_questions_file(const std::string& path, const AskOptions& options = {},
                                               const std::function<void(std::size_t, std::size_t)>& progress = nullptr);

  // The most asked groups of similar questions in a tenant's semantic
  // cache (FAISS k-means over the cached question vectors); empty when the
  // semantic cache is disabled or empty.
  std::vector<CachedIntent> top_intents(std::size_t intents, const std::string& tenant = "") const;

  // Blocks until every queued hot-question rebuild has run.
  void wait_for_rebuilds();

  MetricsSnapshot metrics() const;
  // The hooks for steering the model batcher from outside (metrics
  // windows, the batcher's limits, the engine's tuner's moves); valid while
  // the engine lives.
  EngineTuning& tuning();
  const EngineTuning& tuning() const;
  [[deprecated("use tuning().recent_load()")]] LoadSample recent_load() { return tuning().recent_load(); }
  [[deprecated("use tuning().encoder_batch_control()")]] BatchControl encoder_batch_control() {
    return tuning().encoder_batch_control();
  }
  [[deprecated("use tuning().tuner_history()")]] std::vector<TunerMove> tuner_history() const {
    return tuning().tuner_history();
  }
  void reset_metrics();
  // Drops every cached answer of every tier.
  void clear_caches();

  const Encoder& encoder() const;

  // The engine's vectors for texts, as its knowledge was encoded: each text
  // normalised when the encoder wants it, then encoded, row-major into out.
  // Safe beside knowledge changes (an encoder that learns from the
  // knowledge, like the hashing encoder, refits under the engine's lock,
  // and this waits for it); for serving the engine's model to others
  // (rapidqa-server's OpenAI embeddings and KServe v2 routes). Errors:
  // kInvalidArgument for text that cannot be normalised, or the encoder's.
  Status embed(const std::vector<std::string>& texts, std::vector<float>& out) const;

 private:
  friend class EngineTuning;
  QAEngine();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace rapidqa

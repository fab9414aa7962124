#include "rapidqa/qa_engine.h"

#include <mutex>
#include <shared_mutex>

#include <fmt/format.h>

#include "cache/knowledge_change.h"
#include "common/bounded_json.h"
#include "common/guard.h"
#include "common/random_id.h"
#include "engine/ask_pipeline.h"
#include "engine/cache_tiers.h"
#include "engine/change_replication.h"
#include "engine/degraded_path.h"
#include "engine/encoder_batching.h"
#include "engine/engine_knowledge.h"
#include "engine/options_validation.h"
#include "engine/rebuild_pool.h"
#include "engine/store_following.h"
#include "metrics/metrics_registry.h"
#include "retrieval/word_dictionary.h"
#include "text/utf8.h"

namespace rapidqa {

// The engine composes its parts; each part's header says what it does.
// Declaration order is destruction order reversed: every part is declared
// after what it uses, so the threads that call back into the engine (the
// tuner inside batching, the rebuild pool, the Redis relay) stop first.
struct QAEngine::Impl {
  EngineOptions options;  // clock set
  std::shared_ptr<Encoder> encoder;
  metrics::MetricsRegistry metrics;
  std::unique_ptr<engine::CacheTiers> tiers;
  std::unique_ptr<engine::DegradedPath> degraded;      // the knowledge mirrors into its lexical index
  std::unique_ptr<engine::EngineKnowledge> knowledge;
  std::unique_ptr<engine::EncoderBatching> batching;   // a model encoder's calls; null when inline
  std::unique_ptr<engine::AskPipeline> pipeline;
  std::unique_ptr<EngineTuning> tuning;
  std::unique_ptr<engine::RebuildPool> rebuilds;       // its threads call pipeline->ask
  // Every knowledge change reaches the tiers (and the Redis relay) through
  // this bus; see cache/knowledge_change.h.
  cache::ChangeBus changes;
  // Names this engine on the change bus and in Redis, so an instance can
  // tell its own changes from its peers'.
  const std::string instance_id = detail::random_hex_id();
  // Its thread calls apply_peer_change, which uses everything above.
  std::unique_ptr<engine::ChangeReplication> replication;  // null without a Redis host
  // Its thread calls follow_store. Null without a store.
  std::unique_ptr<engine::StoreFollowing> following;

  Status build(EngineOptions engine_options);
  Status build_model_parts(const engine::KnowledgeBaseOptions& kb);

  // Publishes a change to every tier and subscriber; knowledge lock held
  // exclusively (the knowledge is updated first, then the caches, and no
  // ask can refill a cache from the old version in between).
  cache::ChangeEffect publish(cache::KnowledgeChange change) {
    if (change.origin.empty()) change.origin = instance_id;
    return changes.publish(change);
  }

  // Makes a change to the knowledge and publishes it, under one hold of
  // the lock. Returns what the caches dropped.
  template <typename MakeChange>
  Result<cache::ChangeEffect> commit(MakeChange&& make_change) {
    auto lock = knowledge->write();
    Result<cache::KnowledgeChange> change = make_change(*knowledge);
    if (!change) return change.status();
    return publish(std::move(change).value());
  }

  // Applies a change another instance made (delivered by the Redis relay):
  // the knowledge first, when the change is newer than the local copy, then
  // the caches, whatever the versions (dropping a cached answer is always
  // safe). Hot questions are re-answered here as after a local update.
  void apply_peer_change(const cache::KnowledgeChange& change) {
    std::vector<CacheKey> hot;
    {
      auto lock = knowledge->write();
      knowledge->apply_remote(change, options.log);
      hot = publish(change).hot_questions;
    }
    schedule_rebuilds(hot);
  }

  // Brings the knowledge and the caches level with other writers' commits
  // to a shared store (the entries named, or all). Their events go on the
  // bus marked as the store's, so the Redis relay does not echo them: every
  // instance on the store hears of them from the store itself.
  Status follow_store(const std::vector<std::string>* entry_ids) {
    std::vector<CacheKey> hot;
    {
      auto lock = knowledge->write();
      auto events = knowledge->follow_store(entry_ids, options.log);
      if (!events) return events.status();
      for (cache::KnowledgeChange& event : *events) {
        event.origin = "knowledge-store";
        auto dropped = publish(std::move(event)).hot_questions;
        hot.insert(hot.end(), dropped.begin(), dropped.end());
      }
    }
    schedule_rebuilds(hot);
    return Status::ok();
  }

  // Re-answers invalidated hot questions in the background (the knowledge
  // lock must not be held: each rebuild is an ask that takes it).
  void schedule_rebuilds(const std::vector<CacheKey>& questions) {
    if (!rebuilds) return;
    for (const CacheKey& key : questions) {
      AskOptions ask_options;
      ask_options.tenant = key.tenant;
      rebuilds->submit([this, ask_options, question = key.question] { (void)pipeline->ask(question, ask_options); });
    }
  }

  LoadSample recent_load() { return batching ? batching->recent_load() : metrics.roll_window(); }

  // A question's cache key in a tenant.
  Result<CacheKey> cache_key(std::string_view question, const std::string& tenant) const {
    if (Status valid = engine::validate_tenant(tenant); !valid.is_ok()) return valid;
    auto normalized = normalize_text(question, options.normalize);
    if (!normalized) return normalized.status();
    return CacheKey(tenant, std::move(normalized).value());
  }
};

Status QAEngine::Impl::build(EngineOptions engine_options) {
  if (!engine_options.clock) engine_options.clock = steady_clock_instance();
  options = std::move(engine_options);
  if (options.encoder) {
    encoder = options.encoder;
  } else {
    auto hashing = HashingEncoder::create(options.hashing);  // options validated: cannot fail on them
    if (!hashing) return hashing.status();
    encoder = std::move(hashing).value();
  }
  // A model encoder's degraded requests may fall back on recently expired
  // answers: the exact tiers keep them that long.
  const bool keep_stale = !encoder->is_lightweight() && options.degradation.enabled;
  auto made_tiers = engine::CacheTiers::create(options, encoder->dimension(), keep_stale);
  if (!made_tiers) return made_tiers.status();
  tiers = std::move(made_tiers).value();
  metrics.configure(options.clock, options.anomaly);
  engine::KnowledgeBaseOptions kb;
  kb.exact_limit = options.knowledge_exact_limit;
  kb.search_breadth = options.knowledge_search_breadth;
  kb.normalize = options.normalize;
  kb.retrieval = options.retrieval;
  if (options.retrieval.fusion != RetrievalFusion::kDense && !options.retrieval.word_dictionary.empty()) {
    auto words = retrieval::WordDictionary::load(options.retrieval.word_dictionary);
    if (!words) return Status(words.status().code(), "retrieval.word_dictionary: " + words.status().message());
    kb.words = std::make_shared<const retrieval::WordDictionary>(std::move(words).value());
  }
  if (Status s = build_model_parts(kb); !s.is_ok()) return s;
  std::unique_ptr<KnowledgeStore> store;
  if (!options.knowledge_store.empty()) {
    auto opened = KnowledgeStore::open(options.knowledge_store, options.knowledge_store_options);
    if (!opened) return opened.status();
    store = std::move(opened).value();
  }
  // A SQLite store keeps the index snapshot beside its file by default.
  std::string index_snapshot = options.index_snapshot;
  if (index_snapshot.empty() && options.knowledge_store.rfind("sqlite:", 0) == 0) {
    index_snapshot = options.knowledge_store.substr(7) + ".index";
  }
  knowledge = std::make_unique<engine::EngineKnowledge>(encoder, kb, degraded.get(), std::move(store), options.log,
                                                        std::move(index_snapshot));
  if (knowledge->store()) {
    // Watching starts before the load, so no other writer's commit falls
    // between the two; what it reports is followed once the engine is built.
    auto started = engine::StoreFollowing::start(
        *knowledge->store(), [this](const std::vector<std::string>* ids) { return follow_store(ids); }, options.log);
    if (!started) return started.status();
    following = std::move(started).value();
    // No cache holds anything yet and no peer listens yet: the event is
    // not published.
    auto lock = knowledge->write();
    auto loaded = knowledge->load_from_store();
    if (!loaded) return loaded.status();
  }
  pipeline = std::make_unique<engine::AskPipeline>(engine::AskPipeline::Parts{
      &options, encoder, tiers.get(), knowledge.get(), degraded.get(), batching.get(), &metrics});
  changes.subscribe([this](const cache::KnowledgeChange& change) {
    return tiers->apply_change(change, knowledge->base());
  });
  if (options.rebuild_workers > 0) {
    rebuilds = std::make_unique<engine::RebuildPool>(options.rebuild_workers, options.rebuild_queue_capacity);
  }
  if (following) following->ready();
  if (options.redis.host.empty()) return Status::ok();
  // The relay's thread may deliver a peer's change before start returns:
  // everything it uses is in place by now.
  engine::ChangeReplication::Callbacks callbacks;
  callbacks.apply_peer_change = [this](const cache::KnowledgeChange& change) { apply_peer_change(change); };
  callbacks.drop_cached_answers = [this] { tiers->clear(); };
  callbacks.log = options.log;
  auto started = engine::ChangeReplication::start(options.redis, instance_id, changes, std::move(callbacks));
  if (!started) return started.status();
  replication = std::move(started).value();
  return Status::ok();
}

// A model encoder gets the degraded path (with a lexical mirror of the
// knowledge when degradation is on) and, unless told otherwise, a batcher.
Status QAEngine::Impl::build_model_parts(const engine::KnowledgeBaseOptions& kb) {
  if (encoder->is_lightweight()) return Status::ok();
  engine::DegradedPathOptions d;
  d.lexical_index = options.degradation.enabled;
  d.hashing = options.hashing;
  d.knowledge = kb;
  d.lexical_min_score = options.degradation.lexical_min_score;
  d.max_staleness = options.degradation.max_staleness;
  d.fallback_answer = options.fallback_answer;
  d.clock = options.clock;
  d.log = options.log;
  degraded = std::make_unique<engine::DegradedPath>(std::move(d));
  if (!options.batch_encoder) return Status::ok();
  engine::EncoderBatchingOptions b;
  b.batching = options.encoder_batching;
  b.auto_tune = options.auto_tune;
  b.tuner = options.tuner;
  b.degradation = options.degradation;
  b.clock = options.clock;
  auto made = engine::EncoderBatching::create(encoder, std::move(b), metrics);
  if (!made) return made.status();
  batching = std::move(made).value();
  return Status::ok();
}

QAEngine::QAEngine() : impl_(std::make_unique<Impl>()) { impl_->tuning.reset(new EngineTuning(*this)); }
QAEngine::~QAEngine() = default;

Result<std::unique_ptr<QAEngine>> QAEngine::create(EngineOptions options) {
  Status valid = engine::validate_engine_options(options);
  if (!valid.is_ok()) return valid;
  return detail::guarded("creating the engine", [&]() -> Result<std::unique_ptr<QAEngine>> {
    Status threads = configure_compute_threads(options.threads);
    if (!threads.is_ok()) return threads;
    std::unique_ptr<QAEngine> engine(new QAEngine());
    Status built = engine->impl_->build(std::move(options));
    if (!built.is_ok()) return built;
    return engine;
  });
}

Result<KnowledgeLoadReport> QAEngine::load_knowledge(const std::string& path,
                                                     const KnowledgeFileOptions& file_options) {
  auto file = read_knowledge_file(path, file_options);
  if (!file) return file.status();
  auto skipped = std::move(file->skipped);
  auto report = load_entries(std::move(file->entries));
  if (!report) {
    return Status(report.status().code(), fmt::format("{}: {}", path, report.status().message()));
  }
  report->skipped = std::move(skipped);
  return report;
}

Result<KnowledgeLoadReport> QAEngine::load_entries(std::vector<KnowledgeEntry> entries) {
  return detail::guarded("loading knowledge", [&]() -> Result<KnowledgeLoadReport> {
    for (const auto& e : entries) {
      Status valid = validate_entry(e);
      if (!valid.is_ok()) return Status::invalid_argument(fmt::format("entry '{}': {}", e.id, valid.message()));
    }
    auto lock = impl_->knowledge->write();
    auto reload = impl_->knowledge->replace_all(std::move(entries));
    if (!reload) return reload.status();
    impl_->publish(std::move(reload).value());
    KnowledgeLoadReport report;
    report.entries = impl_->knowledge->base().size();
    report.phrasings = impl_->knowledge->base().phrasing_count();
    report.ranking = impl_->knowledge->base().ranking_summary();
    return report;
  });
}

Status QAEngine::add_entry(KnowledgeEntry entry) {
  return detail::guarded("adding an entry", [&]() -> Status {
    Status valid = validate_entry(entry);
    if (!valid.is_ok()) return valid;
    return impl_->commit([&](engine::EngineKnowledge& k) { return k.add(std::move(entry)); }).status();
  });
}

Status QAEngine::update_entry(KnowledgeEntry entry) {
  return detail::guarded("updating an entry", [&]() -> Status {
    Status valid = validate_entry(entry);
    if (!valid.is_ok()) return valid;
    auto effect = impl_->commit([&](engine::EngineKnowledge& k) { return k.update(std::move(entry)); });
    if (!effect) return effect.status();
    impl_->schedule_rebuilds(effect->hot_questions);
    return Status::ok();
  });
}

Status QAEngine::remove_entry(const std::string& id) {
  return detail::guarded("removing an entry", [&]() -> Status {
    auto effect = impl_->commit([&](engine::EngineKnowledge& k) { return k.remove(id); });
    if (!effect) return effect.status();
    // A removed entry's hot questions now get the next best answer.
    impl_->schedule_rebuilds(effect->hot_questions);
    return Status::ok();
  });
}

Result<KnowledgeEntry> QAEngine::entry(const std::string& id) const {
  auto lock = impl_->knowledge->read();
  const KnowledgeEntry* e = impl_->knowledge->base().find(id);
  if (!e) return Status::not_found(fmt::format("no entry with id '{}'", detail::clip_for_message(id)));
  return *e;
}

namespace {

Status no_store() {
  return Status::failed_precondition("the engine has no knowledge store (EngineOptions::knowledge_store)");
}

}  // namespace

Result<std::vector<EntryVersion>> QAEngine::entry_history(const std::string& id) const {
  KnowledgeStore* store = impl_->knowledge->store();
  if (!store) return no_store();
  return detail::guarded("reading an entry's history", [&] { return store->history(id); });
}

Result<KnowledgeEntry> QAEngine::rollback_entry(const std::string& id, std::uint64_t version) {
  return detail::guarded("rolling back an entry", [&]() -> Result<KnowledgeEntry> {
    auto effect = impl_->commit([&](engine::EngineKnowledge& k) { return k.rollback(id, version); });
    if (!effect) return effect.status();
    impl_->schedule_rebuilds(effect->hot_questions);
    auto lock = impl_->knowledge->read();
    if (const KnowledgeEntry* now = impl_->knowledge->base().find(id)) return *now;
    KnowledgeEntry removed;  // rolled back to a removal
    removed.id = id;
    return removed;
  });
}

Result<std::size_t> QAEngine::export_knowledge(const std::string& path) const {
  KnowledgeStore* store = impl_->knowledge->store();
  if (!store) return no_store();
  return export_knowledge_file(*store, path);
}

Result<KnowledgeStoreStats> QAEngine::store_stats() const {
  KnowledgeStore* store = impl_->knowledge->store();
  if (!store) return no_store();
  return detail::guarded("reading the store's statistics", [&] { return store->stats(); });
}

std::size_t QAEngine::entry_count() const {
  auto lock = impl_->knowledge->read();
  return impl_->knowledge->base().size();
}

Status QAEngine::reindex() {
  return detail::guarded("reindexing", [&]() -> Status {
    auto lock = impl_->knowledge->write();
    Status s = impl_->knowledge->reindex();
    if (!s.is_ok()) return s;
    // Vectors changed meaning and retrieval may rank entries differently:
    // no cached answer or question vector is trusted any more.
    impl_->tiers->clear();
    return s;
  });
}

Result<Answer> QAEngine::ask(std::string_view question, const AskOptions& options) {
  return detail::guarded("answering", [&]() -> Result<Answer> { return impl_->pipeline->ask(question, options); });
}

std::optional<Answer> QAEngine::ask_cached(std::string_view question, const AskOptions& options) {
  try {
    return impl_->pipeline->ask_cached(question, options);
  } catch (...) {
    return std::nullopt;  // ask() reports what went wrong
  }
}

std::vector<Result<Answer>> QAEngine::ask_batch(const std::vector<std::string>& questions,
                                                const AskOptions& options) {
  std::vector<Result<Answer>> answers;
  answers.reserve(questions.size());
  for (const auto& q : questions) answers.push_back(ask(q, options));
  return answers;
}

Status QAEngine::correct_cached_answer(std::string_view question, std::string text, const AskOptions& options) {
  return detail::guarded("correcting a cached answer", [&]() -> Status {
    if (text.find_first_not_of(" \t\r\n") == std::string::npos) {
      return Status::invalid_argument("the corrected answer text is empty");
    }
    if (const auto bad = text::find_invalid_utf8(text); bad != std::string::npos) {
      return Status::invalid_argument(fmt::format("the corrected answer text is not valid UTF-8 (byte {})", bad));
    }
    auto key = impl_->cache_key(question, options.tenant);
    if (!key) return key.status();
    // The semantic tier files the correction under the question's vector.
    std::vector<float> vector;
    if (impl_->tiers->semantic()) {
      const Encoder& enc = *impl_->encoder;
      Status s = enc.encode({enc.wants_normalized_text() ? key->question : std::string(question)}, vector);
      if (!s.is_ok()) return s;
    }
    auto lock = impl_->knowledge->write();
    impl_->tiers->correct(*key, std::move(text), vector.empty() ? nullptr : vector.data());
    return Status::ok();
  });
}

Result<std::size_t> QAEngine::delete_cached_answer(std::string_view question, const AskOptions& options) {
  return detail::guarded("deleting a cached answer", [&]() -> Result<std::size_t> {
    auto key = impl_->cache_key(question, options.tenant);
    if (!key) return key.status();
    return impl_->tiers->erase(*key);
  });
}

Result<std::size_t> QAEngine::invalidate_entry(const std::string& id) {
  return detail::guarded("invalidating an entry", [&]() -> Result<std::size_t> {
    auto lock = impl_->knowledge->write();
    const KnowledgeEntry* stored = impl_->knowledge->base().find(id);
    if (!stored) return Status::not_found(fmt::format("no entry with id '{}'", detail::clip_for_message(id)));
    cache::KnowledgeChange change;
    change.kind = cache::KnowledgeChange::Kind::kInvalidate;
    change.entry_id = id;
    change.version = stored->version;
    return impl_->publish(std::move(change)).removed;
  });
}

Status QAEngine::save_cache_snapshot(const std::string& path) const {
  SemanticCache* semantic = impl_->tiers->semantic();
  if (!semantic) return Status::failed_precondition("the semantic cache is disabled");
  return semantic->save_snapshot(path);
}

Result<std::size_t> QAEngine::load_cache_snapshot(const std::string& path) {
  SemanticCache* semantic = impl_->tiers->semantic();
  if (!semantic) return Status::failed_precondition("the semantic cache is disabled");
  auto lock = impl_->knowledge->read();
  const engine::KnowledgeBase& knowledge = impl_->knowledge->base();
  // Only answers built from the entries' current versions come back.
  return semantic->load_snapshot(path, [&](const Answer& a) { return knowledge.built_from_current_versions(a); });
}

std::vector<CachedIntent> QAEngine::top_intents(std::size_t intents, const std::string& tenant) const {
  SemanticCache* semantic = impl_->tiers->semantic();
  if (!semantic) return {};
  try {
    return semantic->top_intents(intents, tenant);
  } catch (const std::exception&) {
    return {};  // clustering is a report: a FAISS failure leaves it empty rather than failing the caller
  }
}

void QAEngine::wait_for_rebuilds() {
  if (impl_->rebuilds) impl_->rebuilds->drain();
}

MetricsSnapshot QAEngine::metrics() const {
  MetricsSnapshot snapshot = impl_->metrics.snapshot();
  if (impl_->rebuilds) {
    snapshot.rebuilds.completed = impl_->rebuilds->completed();
    snapshot.rebuilds.dropped = impl_->rebuilds->dropped();
  }
  impl_->tiers->add_stats(snapshot);
  if (impl_->batching) impl_->batching->add_stats(snapshot);
  impl_->encoder->add_metrics(snapshot);
  if (impl_->options.generator) impl_->options.generator->add_metrics(snapshot);
  if (impl_->replication) impl_->replication->add_stats(snapshot);
  return snapshot;
}

void QAEngine::reset_metrics() { impl_->metrics.reset(); }

EngineTuning& QAEngine::tuning() { return *impl_->tuning; }
const EngineTuning& QAEngine::tuning() const { return *impl_->tuning; }

LoadSample EngineTuning::recent_load() { return engine_.impl_->recent_load(); }

BatchControl EngineTuning::encoder_batch_control() {
  const auto& batching = engine_.impl_->batching;
  return batching ? batching->control() : BatchControl{};
}

std::vector<TunerMove> EngineTuning::tuner_history() const {
  const auto& batching = engine_.impl_->batching;
  return batching ? batching->tuner_history() : std::vector<TunerMove>{};
}

void QAEngine::clear_caches() { impl_->tiers->clear(); }

Status QAEngine::set_tenant_semantic_threshold(const std::string& tenant, std::optional<float> threshold) {
  SemanticCache* semantic = impl_->tiers->semantic();
  if (!semantic) return Status::failed_precondition("the semantic cache is disabled");
  if (Status valid = engine::validate_tenant(tenant); !valid.is_ok()) return valid;
  return semantic->set_tenant_threshold(tenant, threshold);
}

const Encoder& QAEngine::encoder() const { return *impl_->encoder; }

Status QAEngine::embed(const std::vector<std::string>& texts, std::vector<float>& out) const {
  const Encoder& encoder = *impl_->encoder;
  std::vector<std::string> inputs;
  inputs.reserve(texts.size());
  for (const auto& text : texts) {
    if (!encoder.wants_normalized_text()) {
      inputs.push_back(text);
      continue;
    }
    auto normalized = normalize_text(text, impl_->options.normalize);
    if (!normalized) return normalized.status();
    inputs.push_back(std::move(normalized).value());
  }
  // A lightweight encoder may learn from the knowledge (adapt), which
  // happens under the knowledge lock; a model encoder learns nothing and
  // is not held behind knowledge updates, as in the ask pipeline.
  std::shared_lock<std::shared_mutex> lock;
  if (encoder.is_lightweight()) lock = impl_->knowledge->read();
  return encoder.encode(inputs, out);
}

}  // namespace rapidqa

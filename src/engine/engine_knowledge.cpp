#include "engine/engine_knowledge.h"

#include <future>
#include <unordered_set>
#include <utility>

#include <fmt/format.h>

#include "common/bounded_json.h"

namespace rapidqa::engine {

namespace {

// The rare case where the store took a change the memory then refused (the
// encoder failed on text that passed check_phrasings): the caller learns
// that the change is durable even though this engine does not serve it yet.
Status committed_but_not_applied(const std::string& what, const Status& cause) {
  return Status(cause.code(), fmt::format("{} was committed to the store but could not be applied in memory ({}); "
                                          "the engine serves it once reopened on the store",
                                          what, cause.message()));
}

}  // namespace

EngineKnowledge::EngineKnowledge(std::shared_ptr<Encoder> encoder, KnowledgeBaseOptions options, DegradedPath* mirror,
                                 std::unique_ptr<KnowledgeStore> store, LogSink log, std::string index_snapshot)
    : base_(encoder, std::move(options)),
      mirror_(mirror),
      store_(std::move(store)),
      encoder_(std::move(encoder)),
      log_(std::move(log)),
      index_snapshot_(store_ ? std::move(index_snapshot) : std::string()) {
  // Taken before the encoder learns from this knowledge (a transformer's
  // fingerprint hashes its files: only worth it with a store).
  if (store_) untrained_fingerprint_ = encoder_->fingerprint();
}

EngineKnowledge::~EngineKnowledge() {
  if (!store_) return;
  (void)save_unsaved_vectors();
  save_index_snapshot();
}

void EngineKnowledge::save_index_snapshot() {
  if (index_snapshot_.empty() || !snapshot_stale_) return;
  Status saved = base_.save_snapshot(index_snapshot_, encoder_->fingerprint());
  if (saved.is_ok() && mirror_) saved = mirror_->save_mirror(lexical_snapshot());
  if (saved.is_ok()) {
    snapshot_stale_ = false;
  } else if (log_) {
    log_(LogLevel::kWarning, fmt::format("saving the retrieval index to '{}' failed ({}); the next start builds it",
                                         index_snapshot_, saved.message()));
  }
}

bool EngineKnowledge::restore_index_snapshot(std::vector<KnowledgeEntry>& entries, const std::string& fingerprint,
                                             Result<index::VectorIndex>& index) {
  std::vector<KnowledgeEntry> mirror_copy;  // the restore moves the entries away
  if (mirror_) mirror_copy = entries;
  const std::size_t total = entries.size();
  auto restored = base_.restore_snapshot(index_snapshot_, fingerprint, entries, &index);
  if (!restored) {
    if (restored.status().code() != StatusCode::kNotFound && log_) {
      log_(LogLevel::kWarning, fmt::format("the retrieval index snapshot is not used ({}); building the index",
                                           restored.status().message()));
    }
    return false;
  }
  const bool mirror_restored = !mirror_ || mirror_->restore_mirror(lexical_snapshot(), mirror_copy);
  if (!mirror_restored) mirror_->mirror_all(std::move(mirror_copy));
  std::vector<std::string>& encoded = restored->encoded_ids;
  for (std::string& id : encoded) unsaved_vectors_.insert(std::move(id));
  snapshot_stale_ = !encoded.empty() || restored->outdated_format || !mirror_restored;
  if (log_) {
    log_(LogLevel::kInfo, fmt::format("read the retrieval index of {} entries from '{}'; encoded {} (new or changed "
                                      "since it was saved)",
                                      total, index_snapshot_, encoded.size()));
  }
  (void)save_unsaved_vectors();
  return true;
}

KnowledgeBase::EncodeProgress EngineKnowledge::progress_log(const std::string& what) const {
  if (!log_) return nullptr;
  auto last_tenth = std::make_shared<std::size_t>(0);
  return [this, what, last_tenth](std::size_t done, std::size_t total) {
    if (total <= 1000) return;  // one encoder call: nothing to wait for
    const std::size_t tenth = total ? done * 10 / total : 10;
    if (tenth == *last_tenth && done != total) return;
    *last_tenth = tenth;
    log_(LogLevel::kInfo, fmt::format("{}: {}/{} entries encoded", what, done, total));
  };
}

void EngineKnowledge::vectors_changed(const std::string& id) {
  if (!store_) return;
  unsaved_vectors_.insert(id);
  // Batched: one transaction per few hundred changes, not one per change
  // (which would halve write throughput for a cache's sake).
  if (unsaved_vectors_.size() >= 256) (void)save_unsaved_vectors();
}

Status EngineKnowledge::save_unsaved_vectors() {
  if (!store_ || unsaved_vectors_.empty()) return Status::ok();
  std::vector<StoredVectors> vectors;
  for (const std::string& id : unsaved_vectors_) {
    const KnowledgeEntry* entry = base_.find(id);
    if (!entry) continue;  // removed since
    StoredVectors v;
    v.entry_id = id;
    v.version = entry->version;
    v.dimension = encoder_->dimension();
    v.values = base_.phrasing_vectors(id);
    vectors.push_back(std::move(v));
  }
  Status saved = store_->save_vectors(encoder_->fingerprint(), vectors);
  if (saved.is_ok()) {
    unsaved_vectors_.clear();
  } else if (log_) {
    log_(LogLevel::kWarning, fmt::format("saving the vectors of {} changed entries failed ({}); the next start "
                                         "encodes them again",
                                         vectors.size(), saved.message()));
  }
  return saved;
}

void EngineKnowledge::save_everything_encoded() {
  const std::string state = encoder_->learned_state();
  Status saved = state.empty() ? Status::ok() : store_->save_encoder_state(untrained_fingerprint_, state);
  if (saved.is_ok()) {
    for (std::string& id : base_.ids()) unsaved_vectors_.insert(std::move(id));
    saved = save_unsaved_vectors();
  }
  // An encoder that learns made every vector of its earlier states useless.
  if (saved.is_ok() && !state.empty()) saved = store_->drop_vectors_except(encoder_->fingerprint());
  if (!saved.is_ok() && log_) {
    log_(LogLevel::kWarning, fmt::format("saving the encoder's state and vectors failed ({}); the next start "
                                         "encodes everything again",
                                         saved.message()));
  }
}

void EngineKnowledge::mirror(const std::string& id) {
  snapshot_stale_ = true;  // every change of an entry passes here
  if (mirror_) mirror_->mirror_entry(id, base_.find(id));
}

cache::KnowledgeChange EngineKnowledge::upsert_change(const std::string& id) const {
  cache::KnowledgeChange change;
  change.kind = cache::KnowledgeChange::Kind::kUpsert;
  change.entry_id = id;
  if (const KnowledgeEntry* stored = base_.find(id)) {
    change.version = stored->version;
    change.entry = *stored;
  }
  return change;
}

cache::KnowledgeChange EngineKnowledge::removal_change(const std::string& id) const {
  cache::KnowledgeChange removal;
  removal.kind = cache::KnowledgeChange::Kind::kRemove;
  removal.entry_id = id;
  return removal;
}

Result<cache::KnowledgeChange> EngineKnowledge::load_from_store() {
  // The index snapshot is read on another thread while the entries are
  // read and parsed: at a million entries each is seconds of work, and
  // neither needs the other.
  std::future<Result<index::VectorIndex>> index_read;
  if (!index_snapshot_.empty()) {
    index_read = std::async(std::launch::async, [this] { return base_.load_snapshot_index(index_snapshot_); });
  }
  auto entries = store_->load_current();
  if (!entries) return entries.status();
  const std::size_t total = entries->size();
  auto state = store_->load_encoder_state(untrained_fingerprint_);
  if (!state) return state.status();
  if (!state->empty()) {
    if (Status restored = encoder_->restore_learned_state(*state); !restored.is_ok() && log_) {
      log_(LogLevel::kWarning, fmt::format("the encoder's saved state is not usable ({}); learning it again",
                                           restored.message()));
    }
  }
  const std::string fingerprint = encoder_->fingerprint();
  if (index_read.valid()) {
    Result<index::VectorIndex> index = index_read.get();
    if (restore_index_snapshot(*entries, fingerprint, index)) {
      cache::KnowledgeChange reload;
      reload.kind = cache::KnowledgeChange::Kind::kReload;
      return reload;
    }
  }
  auto vectors = store_->load_vectors(fingerprint);
  if (!vectors && vectors.status().code() == StatusCode::kDataLoss) {
    // Vectors are a cache of what the entries say: damaged ones are made
    // again, not a reason to refuse the knowledge.
    if (log_) {
      log_(LogLevel::kWarning, fmt::format("the stored vectors are damaged ({}); encoding the entries again",
                                           vectors.status().message()));
    }
    vectors = std::vector<StoredVectors>();
  }
  if (!vectors) return vectors.status();
  if (vectors->empty()) {
    if (log_ && total > 0) {
      log_(LogLevel::kInfo, fmt::format("encoding all {} entries: the store keeps no vectors made by this encoder "
                                        "({}; first start, or the encoder or its options changed)",
                                        total, fingerprint));
    }
    auto loaded = replace_in_memory(std::move(entries).value());
    if (loaded && total > 0) save_everything_encoded();
    // Saved now, not only at close: a restart after a crash reads it too.
    if (loaded) save_index_snapshot();
    return loaded;
  }
  KnowledgeBase::KnownVectors known;
  known.reserve(vectors->size());
  for (const StoredVectors& v : *vectors) known.emplace(v.entry_id, &v);
  const std::size_t before = unsaved_vectors_.size();
  auto loaded = replace_in_memory(std::move(entries).value(), &known);
  if (!loaded) return loaded;
  const std::size_t encoded = unsaved_vectors_.size() - before;
  if (log_) {
    log_(LogLevel::kInfo, fmt::format("read the vectors of {} of {} entries from the store; encoded {} (new or "
                                      "changed since their vectors were saved)",
                                      total - encoded, total, encoded));
  }
  (void)save_unsaved_vectors();
  save_index_snapshot();
  return loaded;
}

Result<cache::KnowledgeChange> EngineKnowledge::replace_in_memory(std::vector<KnowledgeEntry> entries,
                                                                  const KnowledgeBase::KnownVectors* known) {
  std::vector<KnowledgeEntry> mirror_copy;
  if (mirror_) mirror_copy = entries;
  if (known) {
    auto encoded = base_.replace_all_reusing(std::move(entries), *known, progress_log("loading"));
    if (!encoded) return encoded.status();
    // What had no reusable vectors was encoded: its vectors are to be saved.
    if (store_) {
      for (std::string& id : *encoded) unsaved_vectors_.insert(std::move(id));
    }
  } else {
    Status s = base_.replace_all(std::move(entries), progress_log("encoding"));
    if (!s.is_ok()) return s;
  }
  if (mirror_) mirror_->mirror_all(std::move(mirror_copy));
  snapshot_stale_ = true;
  cache::KnowledgeChange reload;
  reload.kind = cache::KnowledgeChange::Kind::kReload;
  return reload;
}

Result<cache::KnowledgeChange> EngineKnowledge::commit_then_apply(StoreChange change) {
  const std::string id = change.id();
  if (change.kind != StoreChange::Kind::kRemove) {
    if (Status s = base_.check_phrasings(change.entry); !s.is_ok()) return s;
  }
  auto committed = store_->commit({change});
  if (!committed) return committed.status();
  const CommittedVersion& version = committed->front();
  if (version.removed) {
    if (base_.find(id)) {
      Status s = base_.remove(id);
      if (!s.is_ok()) return committed_but_not_applied(fmt::format("removing entry '{}'", id), s);
    }
    mirror(id);
    return removal_change(id);
  }
  Status s = base_.put(std::move(change.entry), version.version);
  if (!s.is_ok()) return committed_but_not_applied(fmt::format("version {} of entry '{}'", version.version, id), s);
  mirror(id);
  vectors_changed(id);
  return upsert_change(id);
}

Result<cache::KnowledgeChange> EngineKnowledge::replace_all(std::vector<KnowledgeEntry> entries) {
  if (store_) {
    // Refused phrasings before the commit, so a bad file changes nothing.
    for (const auto& e : entries) {
      if (Status s = base_.check_phrasings(e); !s.is_ok()) return s;
    }
    auto replaced = replace_store_entries(*store_, std::move(entries));
    if (!replaced) return replaced.status();
    // New knowledge, as without a store: the encoder learns from all of it
    // again, and its state and every vector are saved for the next start.
    auto current = store_->load_current();
    if (!current) return committed_but_not_applied("the new knowledge", current.status());
    auto reload = replace_in_memory(std::move(current).value());
    if (!reload) return committed_but_not_applied("the new knowledge", reload.status());
    save_everything_encoded();
    return reload;
  }
  return replace_in_memory(std::move(entries));
}

Result<cache::KnowledgeChange> EngineKnowledge::add(KnowledgeEntry entry) {
  if (store_) return commit_then_apply(StoreChange::add(std::move(entry)));
  const std::string id = entry.id;
  Status s = base_.add(std::move(entry));
  if (!s.is_ok()) return s;
  mirror(id);
  return upsert_change(id);
}

Result<cache::KnowledgeChange> EngineKnowledge::update(KnowledgeEntry entry) {
  if (store_) return commit_then_apply(StoreChange::update(std::move(entry)));
  const std::string id = entry.id;
  Status s = base_.update(std::move(entry));
  if (!s.is_ok()) return s;
  mirror(id);
  return upsert_change(id);
}

Result<cache::KnowledgeChange> EngineKnowledge::remove(const std::string& id) {
  if (store_) return commit_then_apply(StoreChange::remove(id));
  Status s = base_.remove(id);
  if (!s.is_ok()) return s;
  mirror(id);
  return removal_change(id);
}

Result<cache::KnowledgeChange> EngineKnowledge::rollback(const std::string& id, std::uint64_t version) {
  if (!store_) return Status::failed_precondition("rolling back needs a knowledge store (EngineOptions::knowledge_store)");
  auto change = rollback_change(*store_, id, version);
  if (!change) return change.status();
  return commit_then_apply(std::move(change).value());
}

void EngineKnowledge::apply_remote(const cache::KnowledgeChange& change, const LogSink& log) {
  using Kind = cache::KnowledgeChange::Kind;
  if (change.kind == Kind::kUpsert && change.entry) {
    KnowledgeEntry entry = *change.entry;
    entry.version = change.version;
    auto applied = base_.store_if_newer(std::move(entry));
    if (!applied && log) {
      log(LogLevel::kWarning, fmt::format("change to entry '{}' from instance {} not applied: {}",
                                          detail::clip_for_message(change.entry_id),
                                          detail::clip_for_message(change.origin), applied.status().message()));
    }
  } else if (change.kind == Kind::kRemove && base_.find(change.entry_id)) {
    (void)base_.remove(change.entry_id);
  }
  mirror(change.entry_id);
}

Result<std::vector<cache::KnowledgeChange>> EngineKnowledge::follow_store(const std::vector<std::string>* entry_ids,
                                                                          const LogSink& log) {
  auto stored = entry_ids ? store_->load_current(*entry_ids) : store_->load_current();
  if (!stored) return stored.status();
  std::vector<cache::KnowledgeChange> events;
  std::unordered_set<std::string> current;
  for (KnowledgeEntry& entry : *stored) {
    const std::string id = entry.id;
    current.insert(id);
    const KnowledgeEntry* local = base_.find(id);
    if (local && local->version == entry.version) continue;
    const std::uint64_t version = entry.version;
    if (Status s = base_.put(std::move(entry), version); !s.is_ok()) {
      if (log) {
        log(LogLevel::kWarning, fmt::format("version {} of entry '{}' from the store not applied: {}", version,
                                            detail::clip_for_message(id), s.message()));
      }
      continue;
    }
    mirror(id);
    vectors_changed(id);
    events.push_back(upsert_change(id));
  }
  for (const std::string& id : entry_ids ? *entry_ids : base_.ids()) {
    if (current.count(id) || !base_.find(id)) continue;
    (void)base_.remove(id);
    mirror(id);
    events.push_back(removal_change(id));
  }
  if (events.size() > 1000) {
    events.clear();
    cache::KnowledgeChange reload;
    reload.kind = cache::KnowledgeChange::Kind::kReload;
    events.push_back(std::move(reload));
  }
  return events;
}

Status EngineKnowledge::reindex() {
  Status s = base_.reindex();
  if (!s.is_ok()) return s;
  if (mirror_) mirror_->reindex();
  // The encoder learned anew: its state and every vector change.
  if (store_) save_everything_encoded();
  return s;
}

}  // namespace rapidqa::engine

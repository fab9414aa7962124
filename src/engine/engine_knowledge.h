// EngineKnowledge: the knowledge an engine answers from, the lock over it,
// and the one place every change to it is made, so the degraded path's
// lexical mirror follows each change without any caller doing it by hand.
// Each change returns the KnowledgeChange event to publish on the change
// bus (the caches are the bus's business, not this class's).
//
// With a KnowledgeStore, every change is committed there first, and applied
// in memory only after the commit returned, under the version the store
// assigned: a failed commit leaves memory (and so the caches) as it was, and
// a change that returned is on disk. Without one the knowledge lives in
// memory only and versions are counted here, as before stores existed.
//
// Thread safety: thread-compatible under its own lock: take write() around
// a change and the publication of its event, read() around anything that
// reads base(). The lock is exposed rather than taken inside because the
// engine must hold it across a change *and* the cache invalidation that
// follows, and an ask across retrieval *and* the cache fill.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_set>
#include <vector>

#include "cache/knowledge_change.h"
#include "engine/degraded_path.h"
#include "engine/knowledge_base.h"
#include "rapidqa/encoder.h"
#include "rapidqa/knowledge_entry.h"
#include "rapidqa/knowledge_store.h"
#include "rapidqa/log.h"
#include "rapidqa/status.h"

namespace rapidqa::engine {

class EngineKnowledge {
 public:
  // mirror: the degraded path whose lexical index follows every change;
  // null when there is none. It must outlive this object.
  // store: where changes are committed first; null = memory only.
  // log: where loading from the store says what it read and what it
  // encoded, and where a failure to save vectors is reported.
  // index_snapshot: where the retrieval index is kept between runs ("" =
  // none).
  EngineKnowledge(std::shared_ptr<Encoder> encoder, KnowledgeBaseOptions options, DegradedPath* mirror,
                  std::unique_ptr<KnowledgeStore> store, LogSink log, std::string index_snapshot = {});
  // Saves the vectors not saved yet (see save_unsaved_vectors).
  ~EngineKnowledge();

  std::unique_lock<std::shared_mutex> write() const { return std::unique_lock<std::shared_mutex>(mu_); }
  std::shared_lock<std::shared_mutex> read() const { return std::shared_lock<std::shared_mutex>(mu_); }

  // Reads, under read() or write().
  const KnowledgeBase& base() const { return base_; }
  // Null without a store. The store is thread-safe: its history and
  // statistics may be read without this object's lock.
  KnowledgeStore* store() const { return store_.get(); }

  // Loads the store's current entries into memory (at engine start), under
  // write(); the event to publish, as for replace_all. Fast restarts: the
  // encoder's learned state and the vectors the store keeps for this
  // encoder's fingerprint are read instead of encoding again; entries
  // without vectors (new or changed since they were saved, or all of them
  // when the encoder changed) are encoded, with progress in the log, and
  // their vectors saved for the next start.
  Result<cache::KnowledgeChange> load_from_store();
  // Saves the vectors of entries changed since they were last saved (the
  // engine saves them in batches, and when it closes; vectors lost in a
  // crash are encoded again at the next start). Under write().
  Status save_unsaved_vectors();

  // Changes, under write(). On error nothing changes and there is nothing
  // to publish.
  Result<cache::KnowledgeChange> replace_all(std::vector<KnowledgeEntry> entries);
  Result<cache::KnowledgeChange> add(KnowledgeEntry entry);
  Result<cache::KnowledgeChange> update(KnowledgeEntry entry);
  Result<cache::KnowledgeChange> remove(const std::string& id);
  // A new version equal to an old one (kFailedPrecondition without a
  // store, kNotFound for an unknown id or version). Rolling back to a
  // removal removes the entry.
  Result<cache::KnowledgeChange> rollback(const std::string& id, std::uint64_t version);
  // A peer's change (delivered by the Redis relay), applied when it is
  // newer than the local copy; a refusal is logged through `log`. The
  // caches drop what it names whatever happened here (dropping a cached
  // answer is always safe), so there is no failure to return.
  void apply_remote(const cache::KnowledgeChange& change, const LogSink& log);
  // Brings memory level with the store after other writers committed
  // (a shared store's watch reported them): the named entries, or every
  // entry when `entry_ids` is null. Entries whose stored version differs
  // from memory's are put, those no longer current are removed; the events
  // to publish, one per entry changed here (a single kReload when more
  // than a thousand did). An entry that cannot be applied (its encoding
  // failed) is logged and skipped.
  Result<std::vector<cache::KnowledgeChange>> follow_store(const std::vector<std::string>* entry_ids,
                                                          const LogSink& log);
  Status reindex();

 private:
  cache::KnowledgeChange upsert_change(const std::string& id) const;
  cache::KnowledgeChange removal_change(const std::string& id) const;
  void mirror(const std::string& id);
  // Commits one change to the store, then stores it in memory under the
  // committed version; the event to publish.
  Result<cache::KnowledgeChange> commit_then_apply(StoreChange change);
  // Every entry replaced in memory (and in the lexical mirror); kReload.
  // `known`: vectors to reuse instead of encoding (without refitting the
  // encoder); null refits the encoder and encodes everything.
  Result<cache::KnowledgeChange> replace_in_memory(std::vector<KnowledgeEntry> entries,
                                                   const KnowledgeBase::KnownVectors* known = nullptr);
  // Logs encoding progress about every tenth of the way.
  KnowledgeBase::EncodeProgress progress_log(const std::string& what) const;
  // The entry's vectors are to be saved (in a batch, or when closing), and
  // the index snapshot is out of date.
  void vectors_changed(const std::string& id);
  // Restores the index from the snapshot, when there is a usable one;
  // false when the index must be built (the reason logged). `index`: the
  // snapshot's index as KnowledgeBase::load_snapshot_index read it.
  bool restore_index_snapshot(std::vector<KnowledgeEntry>& entries, const std::string& fingerprint,
                              Result<index::VectorIndex>& index);
  // Saves the index snapshot when it is out of date; failures are logged.
  // Where the degraded path's lexical mirror is kept, beside the index.
  std::string lexical_snapshot() const { return index_snapshot_ + ".lexical"; }
  void save_index_snapshot();
  // After a full encode: the encoder's learned state and every vector.
  void save_everything_encoded();

  mutable std::shared_mutex mu_;
  KnowledgeBase base_;   // guarded by mu_
  DegradedPath* mirror_; // its mirror guarded by mu_ too
  // Changes are committed under mu_ held exclusively, so the store's
  // current entries and base_ never differ once a change has returned.
  std::unique_ptr<KnowledgeStore> store_;
  std::shared_ptr<Encoder> encoder_;  // the base's, for its fingerprint and learned state
  LogSink log_;
  // The encoder's fingerprint before it learned anything: the key of its
  // learned state in the store ("" without a store).
  std::string untrained_fingerprint_;
  std::unordered_set<std::string> unsaved_vectors_;  // entry ids; guarded by mu_
  const std::string index_snapshot_;
  bool snapshot_stale_ = false;  // the index changed since it was saved; guarded by mu_
};

}  // namespace rapidqa::engine

// KnowledgeStore: the durable source of truth for a knowledge base. An
// engine opened on a store commits every change here first and applies it
// in memory only once the commit has returned, so a change the caller saw
// succeed survives a crash, and a change whose commit failed left nothing
// behind. Versions come from the store: each entry's version is one more
// than the highest version it ever had (a removed and re-added entry keeps
// counting), and every version stays in the entry's history.
//
// Stores are opened by URI (see docs/store.md):
// - "sqlite:PATH" is a SQLite database file, the embedded choice (WAL,
//   synchronous commits, an integrity check at open). One process writes a
//   file at a time: a second writer is refused with kFailedPrecondition
//   naming the holder's process id. Readers (KnowledgeStoreOptions::
//   read_only) may open it alongside the writer.
// - "postgresql://..." (or "postgres://...", any libpq connection URI) is a
//   PostgreSQL database shared by several instances: commits from every
//   writer are serialized by the server, and watch() tells each instance
//   about the others' commits (LISTEN/NOTIFY). A lost connection fails the
//   call in progress with kUnavailable and is re-established by the next.
//
// Thread safety: thread-safe. Every call runs under the store's own lock;
// a commit is one transaction, so a reader never sees half of one.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "rapidqa/export.h"
#include "rapidqa/knowledge_entry.h"
#include "rapidqa/knowledge_file.h"
#include "rapidqa/status.h"

namespace rapidqa {

struct KnowledgeStoreOptions {
  // Open for reading only: no writer lock is taken (another process may be
  // writing), and commit() fails with kFailedPrecondition.
  bool read_only = false;
  // How long a commit waits for another connection's lock (SQLite: a
  // reader checkpointing the log; PostgreSQL: another writer's commit)
  // before it fails with kUnavailable.
  std::chrono::milliseconds busy_timeout{5000};
  // SQLite: run the integrity check at open; a damaged file is refused
  // with kDataLoss. Off only to open a file known good in a hurry. (A
  // PostgreSQL server checks its own pages.)
  bool check_integrity = true;
};

// One change of a commit.
struct StoreChange {
  enum class Kind {
    kAdd,     // a new entry: kAlreadyExists when the id is current
    kUpdate,  // a new version of a current entry: kNotFound when it is not
    kPut,     // add or update, whichever applies (imports, rollbacks)
    kRemove,  // the entry is no longer current: kNotFound when it is not
  };
  Kind kind = Kind::kPut;
  KnowledgeEntry entry;  // every kind but kRemove: the entry (its version is ignored)
  std::string entry_id;  // kRemove: the id (the others use entry.id)

  static StoreChange add(KnowledgeEntry e) { return {Kind::kAdd, std::move(e), {}}; }
  static StoreChange update(KnowledgeEntry e) { return {Kind::kUpdate, std::move(e), {}}; }
  static StoreChange put(KnowledgeEntry e) { return {Kind::kPut, std::move(e), {}}; }
  static StoreChange remove(std::string id) { return {Kind::kRemove, {}, std::move(id)}; }
  const std::string& id() const { return kind == Kind::kRemove ? entry_id : entry.id; }
};

// What a committed change made of its entry.
struct CommittedVersion {
  std::string entry_id;
  std::uint64_t version = 0;  // the version the change created (a removal has one too)
  bool removed = false;
};

// One version of an entry, as kept in its history.
struct EntryVersion {
  std::uint64_t version = 0;
  bool removed = false;        // this version is the entry's removal: `entry` holds only its id
  KnowledgeEntry entry;        // the entry as it was at this version (version field set)
  std::int64_t committed_at_ms = 0;  // Unix time of the commit, milliseconds
};

// The vectors of one entry version's phrasings (its question, then each
// alternate, as the engine encodes them), made by one encoder.
struct StoredVectors {
  std::string entry_id;
  std::uint64_t version = 0;
  std::size_t dimension = 0;
  std::vector<float> values;  // phrasings x dimension, row-major
};

struct KnowledgeStoreStats {
  std::string uri;                 // the store as opened
  std::size_t current_entries = 0; // entries a load returns
  std::size_t versions = 0;        // versions kept over every entry's history
  std::int64_t schema_version = 0; // the store's layout version
  std::uint64_t bytes = 0;         // size of the store's files on disk (0 when not a file)
  std::size_t stored_vectors = 0;  // entry versions with vectors kept (any encoder)
};

// Called during long operations with (done, total) changes; total is known
// up front.
using StoreProgress = std::function<void(std::size_t done, std::size_t total)>;

// What a store tells its watcher about commits made by other writers
// (other processes or other connections; never the watching store's own).
// Both callbacks run on the watch's own thread, one at a time.
struct StoreWatcher {
  // These entries changed (added, updated, removed or rolled back): read
  // their current versions with load_current(ids). Ids are deduplicated.
  std::function<void(const std::vector<std::string>& entry_ids)> changed;
  // Commits may have been missed (the connection to the server dropped and
  // came back, or a commit touched too many entries to name them): compare
  // every entry with load_current(). `reason` says which.
  std::function<void(const std::string& reason)> resync;
};

// A running watch; destroying it stops its thread (waiting for a callback
// in progress to return).
class RAPIDQA_EXPORT StoreWatch {
 public:
  virtual ~StoreWatch() = default;
  // Whether the watch is connected now (a store without peers: always).
  virtual bool connected() const = 0;
};

class RAPIDQA_EXPORT KnowledgeStore {
 public:
  // Opens (creating when missing) the store a URI names: "sqlite:PATH" or
  // "postgresql://...". kInvalidArgument for an unknown scheme;
  // kFailedPrecondition when another process writes the file (the message
  // names it); kDataLoss when the file is damaged or not a database;
  // kIoError when it cannot be opened or written (a read-only file, a
  // missing folder); kUnavailable when the server cannot be reached.
  static Result<std::unique_ptr<KnowledgeStore>> open(const std::string& uri,
                                                      const KnowledgeStoreOptions& options = {});
  virtual ~KnowledgeStore() = default;

  // Every current entry with its version, ordered by id.
  virtual Result<std::vector<KnowledgeEntry>> load_current() = 0;
  // The current versions of these entries, ordered by id; an id that is
  // not current (removed, or never stored) is absent from the result.
  virtual Result<std::vector<KnowledgeEntry>> load_current(const std::vector<std::string>& entry_ids) = 0;

  // Commits the changes in one transaction, all or nothing, in order (a
  // later change of a batch sees the earlier ones). Returns each change's
  // new version, in order, once the transaction is durable. On error
  // nothing is committed: the message names the change that was refused
  // (kAlreadyExists, kNotFound) or the reason the file refused the write
  // (kIoError, kResourceExhausted for a full disk, kUnavailable when
  // locked). progress, when given, is called every 1,000 changes and at the
  // end.
  virtual Result<std::vector<CommittedVersion>> commit(const std::vector<StoreChange>& changes,
                                                       const StoreProgress& progress = nullptr) = 0;

  // Every version of an entry, oldest first; kNotFound when the id never
  // existed.
  virtual Result<std::vector<EntryVersion>> history(const std::string& id) = 0;
  // One version of an entry; kNotFound when the id or version does not exist.
  virtual Result<EntryVersion> version_of(const std::string& id, std::uint64_t version) = 0;

  virtual Result<KnowledgeStoreStats> stats() = 0;

  // Vectors, kept so a restart reads them instead of encoding again. They
  // are kept per entry version and per encoder fingerprint
  // (Encoder::fingerprint()), so a vector is only ever used for the exact
  // content and encoder that made it; saving an entry version's vectors
  // drops that encoder's vectors of the entry's older versions. They are
  // saved after the change they belong to has been committed, in a
  // transaction of their own: a crash in between loses only vectors, which
  // the next start encodes again.
  //
  // save_vectors: in one transaction; vectors of a version that is not
  // current are dropped rather than kept. kFailedPrecondition when open
  // read-only.
  virtual Status save_vectors(const std::string& fingerprint, const std::vector<StoredVectors>& vectors) = 0;
  // The vectors kept under `fingerprint` for the current version of every
  // entry that has them, ordered by entry id.
  virtual Result<std::vector<StoredVectors>> load_vectors(const std::string& fingerprint) = 0;
  // Drops the vectors of every fingerprint but `keep` (an encoder that
  // learned anew has made its older vectors useless). kFailedPrecondition
  // when open read-only.
  virtual Status drop_vectors_except(const std::string& keep) = 0;
  // An encoder's learned state (Encoder::learned_state()), kept under the
  // fingerprint the encoder has before it learns anything, so a restart
  // restores it instead of learning again from different knowledge.
  // load_encoder_state returns "" when none was saved.
  virtual Status save_encoder_state(const std::string& untrained_fingerprint, const std::string& state) = 0;
  virtual Result<std::string> load_encoder_state(const std::string& untrained_fingerprint) = 0;

  // Starts watching for other writers' commits. A SQLite file has one
  // writer, so its watch never calls back; a PostgreSQL store listens on a
  // connection of its own, and after that connection drops and comes back
  // it calls watcher.resync. Returns once the watch is listening: a commit
  // made after this returns is reported.
  virtual Result<std::unique_ptr<StoreWatch>> watch(StoreWatcher watcher);

 protected:
  KnowledgeStore() = default;
};

struct StoreImportReport {
  std::size_t added = 0;      // ids new to the store
  std::size_t updated = 0;    // ids whose content changed: a new version each
  std::size_t unchanged = 0;  // ids whose content is the same: their version stays
  std::size_t removed = 0;    // current ids the imported knowledge lacks
  std::vector<KnowledgeLineError> skipped;  // bad lines left out (skip_invalid_lines only)
};

// Makes the store's current entries equal to `entries` in one transaction:
// new ids added, changed ones updated, missing ones removed (each keeps its
// history), unchanged ones left at their version. kAlreadyExists for
// duplicate ids, kInvalidArgument for a bad entry; nothing changes then.
RAPIDQA_EXPORT Result<StoreImportReport> replace_store_entries(KnowledgeStore& store,
                                                               std::vector<KnowledgeEntry> entries,
                                                               const StoreProgress& progress = nullptr);
// The same from a JSONL knowledge file (see knowledge_file.h): a file with
// a bad line is refused whole, naming every bad line, and the store is
// untouched.
RAPIDQA_EXPORT Result<StoreImportReport> import_knowledge_file(KnowledgeStore& store, const std::string& path,
                                                               const KnowledgeFileOptions& file_options = {},
                                                               const StoreProgress& progress = nullptr);
// Writes the store's current entries to a JSONL file, ordered by id (the
// file is written beside and renamed into place, so a failed export leaves
// any earlier file whole). Returns the number of entries written.
RAPIDQA_EXPORT Result<std::size_t> export_knowledge_file(KnowledgeStore& store, const std::string& path);

// The change that rolls an entry back to an old version: a put of that
// version's content (committing it makes a new version equal to the old
// one), or a removal when the old version was one. kNotFound for an unknown
// id or version; kFailedPrecondition when rolling back to a removal of an
// entry that is not current.
RAPIDQA_EXPORT Result<StoreChange> rollback_change(KnowledgeStore& store, const std::string& id,
                                                   std::uint64_t version);

// Whether two entries say the same thing (every field but the version).
RAPIDQA_EXPORT bool same_entry_content(const KnowledgeEntry& a, const KnowledgeEntry& b);

}  // namespace rapidqa

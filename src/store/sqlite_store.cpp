#include "store/sqlite_store.h"

#include <sqlite3.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "common/bounded_json.h"
#include "store/change_rules.h"
#include "store/sqlite_support.h"
#include "store/writer_lock.h"

namespace rapidqa::store {
namespace {


std::int64_t unix_now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::uint64_t file_size(const std::string& path) {
  struct stat info {};
  return ::stat(path.c_str(), &info) == 0 ? static_cast<std::uint64_t>(info.st_size) : 0;
}

class SqliteKnowledgeStore final : public KnowledgeStore {
 public:
  SqliteKnowledgeStore(std::string path, std::string name, bool read_only)
      : path_(std::move(path)), name_(std::move(name)), read_only_(read_only) {}
  ~SqliteKnowledgeStore() override {
    statements_.reset();  // every statement before the connection
    sqlite3_close_v2(db_);
  }

  Status open(const KnowledgeStoreOptions& options);

  Result<std::vector<KnowledgeEntry>> load_current() override;
  Result<std::vector<KnowledgeEntry>> load_current(const std::vector<std::string>& entry_ids) override;
  Result<std::vector<CommittedVersion>> commit(const std::vector<StoreChange>& changes,
                                               const StoreProgress& progress) override;
  Result<std::vector<EntryVersion>> history(const std::string& id) override;
  Result<EntryVersion> version_of(const std::string& id, std::uint64_t version) override;
  Result<KnowledgeStoreStats> stats() override;
  Status save_vectors(const std::string& fingerprint, const std::vector<StoredVectors>& vectors) override;
  Result<std::vector<StoredVectors>> load_vectors(const std::string& fingerprint) override;
  Status drop_vectors_except(const std::string& keep) override;
  Status save_encoder_state(const std::string& untrained_fingerprint, const std::string& state) override;
  Result<std::string> load_encoder_state(const std::string& untrained_fingerprint) override;

 private:
  struct Statements {
    Statement current_version;  // (id) -> version
    Statement last_version;     // (id) -> highest version ever
    Statement insert_version;   // (id, version, removed, body, at)
    Statement upsert_current;   // (id, version, body)
    Statement delete_current;   // (id)
    Statement load_current;
    Statement load_one;         // (id) -> version, body
    Statement history;          // (id)
    Statement version_of;       // (id, version)
  };

  Status fail(int code, const std::string& what) const { return sqlite_status(db_, code, name_, what); }
  // Runs SQL that returns no rows the caller needs.
  Status exec(const char* sql, const std::string& what) {
    const int rc = sqlite3_exec(db_, sql, nullptr, nullptr, nullptr);
    return rc == SQLITE_OK ? Status::ok() : fail(rc, what);
  }
  Status check_integrity();
  // Under mu_, inside a transaction: the id of a fingerprint, added when new.
  Result<std::int64_t> fingerprint_id(const std::string& fingerprint);
  // Runs `body` in one IMMEDIATE transaction, rolled back when it fails.
  template <typename Body>
  Status in_transaction(const std::string& what, Body&& body);
  Status create_or_check_schema();
  Status prepare_statements();
  // One change inside the open transaction.
  Result<CommittedVersion> apply(const StoreChange& change, std::int64_t committed_at_ms);
  Result<std::int64_t> single_integer(Statement& statement, const std::string& id, bool& found);
  Result<EntryVersion> version_from_row(sqlite3_stmt* row, const std::string& id);
  // (entry_id, version, body) as an entry.
  Result<KnowledgeEntry> entry_from_row(sqlite3_stmt* row);

  const std::string path_;
  const std::string name_;
  const bool read_only_;
  std::unique_ptr<WriterLock> writer_lock_;  // null for read-only opens
  std::mutex mu_;                            // over everything below
  sqlite3* db_ = nullptr;
  std::unique_ptr<Statements> statements_;
  std::int64_t schema_version_ = 0;  // the file's layout (a read-only open may find an older one)
};

Status SqliteKnowledgeStore::open(const KnowledgeStoreOptions& options) {
  if (!read_only_) {
    auto lock = WriterLock::acquire(path_ + ".lock", name_);
    if (!lock) return lock.status();
    writer_lock_ = std::move(lock).value();
  }
  const int flags = (read_only_ ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE) |
                    SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE;
  int rc = sqlite3_open_v2(path_.c_str(), &db_, flags, nullptr);
  if (rc != SQLITE_OK) return fail(rc, "cannot open the database file");
  // SQLite quietly opens a file it may not write for reading only; a writer
  // that could not commit must be refused now, not at its first change.
  if (!read_only_ && sqlite3_db_readonly(db_, "main") == 1) {
    return Status::io_error(fmt::format("{}: the database file is read-only (check its permissions and those of "
                                        "its folder, which holds the write-ahead log)",
                                        name_));
  }
  sqlite3_busy_timeout(db_, static_cast<int>(options.busy_timeout.count()));
  sqlite3_extended_result_codes(db_, 1);
  // The first read of the file: a file that is not a database fails here.
  if (Status s = exec("SELECT count(*) FROM sqlite_schema", "reading the database header"); !s.is_ok()) {
    return Status(s.code(), s.message() + ": not a knowledge store, or damaged");
  }
  if (!read_only_) {
    // WAL: readers never block the writer, and a commit appends to the log
    // (one fsync) instead of rewriting pages. FULL syncs the log at every
    // commit: a returned commit survives power loss, not only a crash.
    if (Status s = exec("PRAGMA journal_mode=WAL", "switching to write-ahead logging"); !s.is_ok()) return s;
    if (Status s = exec("PRAGMA synchronous=FULL", "setting synchronous commits"); !s.is_ok()) return s;
  }
  if (options.check_integrity) {
    if (Status s = check_integrity(); !s.is_ok()) return s;
  }
  if (Status s = create_or_check_schema(); !s.is_ok()) return s;
  return prepare_statements();
}

Status SqliteKnowledgeStore::check_integrity() {
  // quick_check reads pages and checks their structure (what a torn or
  // overwritten file breaks) without the index cross-checks that make
  // integrity_check slow on a large file. The stored vectors are most of a
  // large store's pages (ten times the entries) and only a cache: reading
  // them all would dominate a cold restart, and a damaged vector row is
  // refused as it is read (the entry is encoded again). So once they
  // exist, every other table is checked, and they are not.
  std::vector<std::string> checks;
  {
    Statement tables;
    int rc = tables.prepare(db_, "SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name");
    if (rc != SQLITE_OK) return fail(rc, "checking the database's integrity");
    bool has_vectors = false;
    std::vector<std::string> names;
    while ((rc = sqlite3_step(tables.get())) == SQLITE_ROW) {
      const std::string name = column_text(tables.get(), 0);
      if (name == "phrasing_vectors") {
        has_vectors = true;
      } else {
        names.push_back(name);
      }
    }
    if (rc != SQLITE_DONE) return Status::data_loss(fail(rc, "checking the database's integrity").message());
    if (!has_vectors) {
      checks.push_back("PRAGMA quick_check(5)");
    } else {
      for (const auto& name : names) checks.push_back(fmt::format("PRAGMA quick_check(\"{}\")", name));
    }
  }
  std::string problems;
  for (const std::string& sql : checks) {
    Statement check;
    int rc = check.prepare(db_, sql.c_str());
    if (rc != SQLITE_OK) return Status::data_loss(fail(rc, "checking the database's integrity").message());
    while ((rc = sqlite3_step(check.get())) == SQLITE_ROW) {
      const std::string line = column_text(check.get(), 0);
      if (line == "ok") continue;
      if (!problems.empty()) problems += "; ";
      problems += line;
    }
    if (rc != SQLITE_DONE) return Status::data_loss(fail(rc, "checking the database's integrity").message());
  }
  if (!problems.empty()) {
    return Status::data_loss(fmt::format("{}: the database file is damaged ({}); restore it from a backup",
                                         name_, detail::clip_for_message(problems)));
  }
  return Status::ok();
}

Status SqliteKnowledgeStore::create_or_check_schema() {
  auto version = create_or_migrate_sqlite_schema(db_, name_, read_only_);
  if (!version) return version.status();
  schema_version_ = *version;
  return Status::ok();
}

Status SqliteKnowledgeStore::prepare_statements() {
  statements_ = std::make_unique<Statements>();
  Statements& s = *statements_;
  const std::pair<Statement*, const char*> all[] = {
      {&s.current_version, "SELECT version FROM current_entries WHERE entry_id = ?1"},
      {&s.last_version, "SELECT max(version) FROM entry_versions WHERE entry_id = ?1"},
      {&s.insert_version,
       "INSERT INTO entry_versions(entry_id, version, removed, body, committed_at_ms) VALUES (?1, ?2, ?3, ?4, ?5)"},
      {&s.upsert_current, "INSERT OR REPLACE INTO current_entries(entry_id, version, body) VALUES (?1, ?2, ?3)"},
      {&s.delete_current, "DELETE FROM current_entries WHERE entry_id = ?1"},
      {&s.load_current, "SELECT entry_id, version, body FROM current_entries ORDER BY entry_id"},
      {&s.load_one, "SELECT entry_id, version, body FROM current_entries WHERE entry_id = ?1"},
      {&s.history,
       "SELECT version, removed, body, committed_at_ms FROM entry_versions WHERE entry_id = ?1 ORDER BY version"},
      {&s.version_of,
       "SELECT version, removed, body, committed_at_ms FROM entry_versions WHERE entry_id = ?1 AND version = ?2"},
  };
  for (const auto& [statement, sql] : all) {
    const int rc = statement->prepare(db_, sql);
    if (rc != SQLITE_OK) return fail(rc, "preparing statements");
  }
  return Status::ok();
}

Result<KnowledgeEntry> SqliteKnowledgeStore::entry_from_row(sqlite3_stmt* row) {
  return entry_from_body(column_text(row, 0), static_cast<std::uint64_t>(sqlite3_column_int64(row, 1)),
                         column_text(row, 2), name_);
}

Result<std::vector<KnowledgeEntry>> SqliteKnowledgeStore::load_current() {
  std::lock_guard<std::mutex> lock(mu_);
  sqlite3_stmt* row = statements_->load_current.fresh();
  // The rows first (a statement steps on one thread), parsed after. Their
  // text goes into blocks of a few megabytes, not two strings per row (a
  // million allocations) nor one growing buffer (copied at each doubling).
  struct Row {
    std::uint64_t version;
    std::string_view id, body;
  };
  std::vector<Row> rows;
  std::vector<std::unique_ptr<char[]>> blocks;
  constexpr std::size_t kBlockBytes = std::size_t{4} << 20;
  char* free_at = nullptr;
  std::size_t free_bytes = 0;
  const auto keep = [&](int column) -> std::string_view {
    const auto* data = reinterpret_cast<const char*>(sqlite3_column_text(row, column));
    const auto bytes = data ? static_cast<std::size_t>(sqlite3_column_bytes(row, column)) : 0;
    if (bytes > free_bytes) {
      free_bytes = std::max(kBlockBytes, bytes);
      blocks.emplace_back(new char[free_bytes]);
      free_at = blocks.back().get();
    }
    if (bytes > 0) std::memcpy(free_at, data, bytes);
    const std::string_view kept(free_at, bytes);
    free_at += bytes, free_bytes -= bytes;
    return kept;
  };
  int rc;
  while ((rc = sqlite3_step(row)) == SQLITE_ROW) {
    Row r{static_cast<std::uint64_t>(sqlite3_column_int64(row, 1)), {}, {}};
    r.id = keep(0);
    r.body = keep(2);
    rows.push_back(r);
  }
  sqlite3_reset(row);
  if (rc != SQLITE_DONE) return fail(rc, "loading the current entries");
  return entries_in_parallel(rows.size(), [&](std::size_t i) {
    return entry_from_body(rows[i].id, rows[i].version, rows[i].body, name_);
  });
}

Result<std::vector<KnowledgeEntry>> SqliteKnowledgeStore::load_current(const std::vector<std::string>& entry_ids) {
  std::vector<std::string> ids = entry_ids;
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<KnowledgeEntry> entries;
  for (const auto& id : ids) {
    sqlite3_stmt* row = statements_->load_one.fresh();
    bind_text(row, 1, id);
    const int rc = sqlite3_step(row);
    if (rc == SQLITE_ROW) {
      auto entry = entry_from_row(row);
      sqlite3_reset(row);
      if (!entry) return entry.status();
      entries.push_back(std::move(entry).value());
      continue;
    }
    sqlite3_reset(row);
    if (rc != SQLITE_DONE) return fail(rc, "loading an entry");
  }
  return entries;
}

Result<std::int64_t> SqliteKnowledgeStore::single_integer(Statement& statement, const std::string& id, bool& found) {
  sqlite3_stmt* row = statement.fresh();
  bind_text(row, 1, id);
  const int rc = sqlite3_step(row);
  found = rc == SQLITE_ROW && sqlite3_column_type(row, 0) != SQLITE_NULL;
  const std::int64_t value = found ? sqlite3_column_int64(row, 0) : 0;
  sqlite3_reset(row);
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) return fail(rc, "reading an entry's version");
  return value;
}

Result<CommittedVersion> SqliteKnowledgeStore::apply(const StoreChange& change, std::int64_t committed_at_ms) {
  const std::string& id = change.id();
  bool is_current = false;
  auto current = single_integer(statements_->current_version, id, is_current);
  if (!current) return current.status();
  if (Status refused = check_change(change, is_current); !refused.is_ok()) return refused;
  bool ever = false;
  auto last = single_integer(statements_->last_version, id, ever);
  if (!last) return last.status();
  CommittedVersion committed;
  committed.entry_id = id;
  committed.version = static_cast<std::uint64_t>(*last) + 1;
  committed.removed = change.kind == StoreChange::Kind::kRemove;
  const std::string body = committed.removed ? std::string() : knowledge_entry_to_json(change.entry);

  sqlite3_stmt* insert = statements_->insert_version.fresh();
  bind_text(insert, 1, id);
  sqlite3_bind_int64(insert, 2, static_cast<std::int64_t>(committed.version));
  sqlite3_bind_int(insert, 3, committed.removed ? 1 : 0);
  bind_text(insert, 4, body);
  sqlite3_bind_int64(insert, 5, committed_at_ms);
  int rc = sqlite3_step(insert);
  sqlite3_reset(insert);
  if (rc != SQLITE_DONE) return fail(rc, fmt::format("recording version {} of entry '{}'", committed.version, id));

  sqlite3_stmt* current_row;
  if (committed.removed) {
    current_row = statements_->delete_current.fresh();
    bind_text(current_row, 1, id);
  } else {
    current_row = statements_->upsert_current.fresh();
    bind_text(current_row, 1, id);
    sqlite3_bind_int64(current_row, 2, static_cast<std::int64_t>(committed.version));
    bind_text(current_row, 3, body);
  }
  rc = sqlite3_step(current_row);
  sqlite3_reset(current_row);
  if (rc != SQLITE_DONE) return fail(rc, fmt::format("making version {} of entry '{}' current", committed.version, id));
  return committed;
}

Result<std::vector<CommittedVersion>> SqliteKnowledgeStore::commit(const std::vector<StoreChange>& changes,
                                                                   const StoreProgress& progress) {
  if (read_only_) return Status::failed_precondition(fmt::format("{} is open read-only", name_));
  std::lock_guard<std::mutex> lock(mu_);
  // IMMEDIATE takes the write lock now, so a busy file fails here, before
  // any work, rather than at COMMIT.
  if (Status s = exec("BEGIN IMMEDIATE", "starting a transaction"); !s.is_ok()) return s;
  const std::int64_t now = unix_now_ms();
  std::vector<CommittedVersion> committed;
  committed.reserve(changes.size());
  Status failure;
  for (std::size_t i = 0; i < changes.size(); ++i) {
    auto one = apply(changes[i], now);
    if (!one) {
      failure = in_batch(one.status(), i, changes.size());
      break;
    }
    committed.push_back(std::move(one).value());
    if (progress && ((i + 1) % 1000 == 0 || i + 1 == changes.size())) progress(i + 1, changes.size());
  }
  if (failure.is_ok()) {
    const int rc = sqlite3_exec(db_, "COMMIT", nullptr, nullptr, nullptr);
    if (rc == SQLITE_OK) return committed;
    failure = fail(rc, "committing");
  }
  // A failed COMMIT may already have rolled back (SQLITE_FULL, I/O errors);
  // then ROLLBACK has nothing to do and its error says so, harmlessly.
  if (!sqlite3_get_autocommit(db_)) (void)sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  return failure;
}

Result<EntryVersion> SqliteKnowledgeStore::version_from_row(sqlite3_stmt* row, const std::string& id) {
  return entry_version_from(id, static_cast<std::uint64_t>(sqlite3_column_int64(row, 0)),
                            sqlite3_column_int(row, 1) != 0, sqlite3_column_int64(row, 3), column_text(row, 2), name_);
}

Result<std::vector<EntryVersion>> SqliteKnowledgeStore::history(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  sqlite3_stmt* row = statements_->history.fresh();
  bind_text(row, 1, id);
  std::vector<EntryVersion> versions;
  int rc;
  while ((rc = sqlite3_step(row)) == SQLITE_ROW) {
    auto v = version_from_row(row, id);
    if (!v) {
      sqlite3_reset(row);
      return v.status();
    }
    versions.push_back(std::move(v).value());
  }
  sqlite3_reset(row);
  if (rc != SQLITE_DONE) return fail(rc, "reading an entry's history");
  if (versions.empty()) return Status::not_found(fmt::format("no entry with id '{}' was ever stored", detail::clip_for_message(id)));
  return versions;
}

Result<EntryVersion> SqliteKnowledgeStore::version_of(const std::string& id, std::uint64_t version) {
  std::lock_guard<std::mutex> lock(mu_);
  sqlite3_stmt* row = statements_->version_of.fresh();
  bind_text(row, 1, id);
  sqlite3_bind_int64(row, 2, static_cast<std::int64_t>(version));
  const int rc = sqlite3_step(row);
  if (rc == SQLITE_ROW) {
    auto v = version_from_row(row, id);
    sqlite3_reset(row);
    return v;
  }
  sqlite3_reset(row);
  if (rc != SQLITE_DONE) return fail(rc, "reading an entry version");
  return Status::not_found(fmt::format("entry '{}' has no version {}", detail::clip_for_message(id), version));
}

Result<KnowledgeStoreStats> SqliteKnowledgeStore::stats() {
  std::lock_guard<std::mutex> lock(mu_);
  KnowledgeStoreStats stats;
  stats.uri = name_;
  stats.schema_version = schema_version_;
  std::vector<std::pair<std::size_t*, const char*>> counts = {
      {&stats.current_entries, "SELECT count(*) FROM current_entries"},
      {&stats.versions, "SELECT count(*) FROM entry_versions"},
  };
  if (schema_version_ >= 2) counts.emplace_back(&stats.stored_vectors, "SELECT count(*) FROM phrasing_vectors");
  for (const auto& [out, sql] : counts) {
    Statement count;
    int rc = count.prepare(db_, sql);
    if (rc == SQLITE_OK) rc = sqlite3_step(count.get());
    if (rc != SQLITE_ROW) return fail(rc, "counting entries");
    *out = static_cast<std::size_t>(sqlite3_column_int64(count.get(), 0));
  }
  stats.bytes = file_size(path_) + file_size(path_ + "-wal");
  return stats;
}

template <typename Body>
Status SqliteKnowledgeStore::in_transaction(const std::string& what, Body&& body) {
  if (Status s = exec("BEGIN IMMEDIATE", what); !s.is_ok()) return s;
  Status s = body();
  if (s.is_ok()) {
    const int rc = sqlite3_exec(db_, "COMMIT", nullptr, nullptr, nullptr);
    if (rc == SQLITE_OK) return s;
    s = fail(rc, what);
  }
  if (!sqlite3_get_autocommit(db_)) (void)sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  return s;
}

Result<std::int64_t> SqliteKnowledgeStore::fingerprint_id(const std::string& fingerprint) {
  Statement add, find;
  int rc = add.prepare(db_, "INSERT OR IGNORE INTO encoder_fingerprints(fingerprint) VALUES (?1)");
  if (rc == SQLITE_OK) {
    bind_text(add.get(), 1, fingerprint);
    rc = sqlite3_step(add.get());
  }
  if (rc != SQLITE_DONE && rc != SQLITE_OK) return fail(rc, "recording an encoder fingerprint");
  rc = find.prepare(db_, "SELECT id FROM encoder_fingerprints WHERE fingerprint = ?1");
  if (rc == SQLITE_OK) {
    bind_text(find.get(), 1, fingerprint);
    rc = sqlite3_step(find.get());
  }
  if (rc != SQLITE_ROW) return fail(rc, "reading an encoder fingerprint");
  return sqlite3_column_int64(find.get(), 0);
}

Status SqliteKnowledgeStore::save_vectors(const std::string& fingerprint, const std::vector<StoredVectors>& vectors) {
  if (read_only_) return Status::failed_precondition(fmt::format("{} is open read-only", name_));
  std::lock_guard<std::mutex> lock(mu_);
  return in_transaction("saving vectors", [&]() -> Status {
    auto id = fingerprint_id(fingerprint);
    if (!id) return id.status();
    Statement drop_older, insert;
    int rc = drop_older.prepare(
        db_, "DELETE FROM phrasing_vectors WHERE fingerprint_id = ?1 AND entry_id = ?2 AND version <> ?3");
    if (rc == SQLITE_OK) {
      rc = insert.prepare(db_,
                          "INSERT OR REPLACE INTO phrasing_vectors(fingerprint_id, entry_id, version, dimension, "
                          "vectors) SELECT ?1, ?2, ?3, ?4, ?5 WHERE EXISTS (SELECT 1 FROM current_entries "
                          "WHERE entry_id = ?2 AND version = ?3)");
    }
    if (rc != SQLITE_OK) return fail(rc, "preparing to save vectors");
    for (const StoredVectors& v : vectors) {
      if (v.dimension == 0 || v.values.empty() || v.values.size() % v.dimension != 0) {
        return Status::invalid_argument(fmt::format("vectors of entry '{}': {} values are not rows of {}",
                                                    detail::clip_for_message(v.entry_id), v.values.size(),
                                                    v.dimension));
      }
      for (Statement* statement : {&drop_older, &insert}) {
        sqlite3_stmt* row = statement->fresh();
        sqlite3_bind_int64(row, 1, *id);
        bind_text(row, 2, v.entry_id);
        sqlite3_bind_int64(row, 3, static_cast<std::int64_t>(v.version));
        if (statement == &insert) {
          sqlite3_bind_int64(row, 4, static_cast<std::int64_t>(v.dimension));
          sqlite3_bind_blob64(row, 5, v.values.data(), v.values.size() * sizeof(float), SQLITE_STATIC);
        }
        rc = sqlite3_step(row);
        sqlite3_reset(row);
        if (rc != SQLITE_DONE) return fail(rc, "saving vectors");
      }
    }
    return Status::ok();
  });
}

Result<std::vector<StoredVectors>> SqliteKnowledgeStore::load_vectors(const std::string& fingerprint) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<StoredVectors> all;
  if (schema_version_ < 2) return all;  // an older file opened read-only keeps none
  Statement rows;
  int rc = rows.prepare(db_,
                        "SELECT v.entry_id, v.version, v.dimension, v.vectors FROM phrasing_vectors v "
                        "JOIN encoder_fingerprints f ON f.id = v.fingerprint_id "
                        "JOIN current_entries c ON c.entry_id = v.entry_id AND c.version = v.version "
                        "WHERE f.fingerprint = ?1 ORDER BY v.entry_id");
  if (rc != SQLITE_OK) return fail(rc, "loading vectors");
  bind_text(rows.get(), 1, fingerprint);
  while ((rc = sqlite3_step(rows.get())) == SQLITE_ROW) {
    StoredVectors v;
    v.entry_id = column_text(rows.get(), 0);
    v.version = static_cast<std::uint64_t>(sqlite3_column_int64(rows.get(), 1));
    v.dimension = static_cast<std::size_t>(sqlite3_column_int64(rows.get(), 2));
    const auto bytes = static_cast<std::size_t>(sqlite3_column_bytes(rows.get(), 3));
    // A row whose size does not fit its dimension is left out: its entry
    // is encoded again, as if it had no vectors.
    if (v.dimension == 0 || bytes == 0 || bytes % (v.dimension * sizeof(float)) != 0) continue;
    v.values.resize(bytes / sizeof(float));
    std::memcpy(v.values.data(), sqlite3_column_blob(rows.get(), 3), bytes);
    all.push_back(std::move(v));
  }
  if (rc != SQLITE_DONE) return fail(rc, "loading vectors");
  return all;
}

Status SqliteKnowledgeStore::drop_vectors_except(const std::string& keep) {
  if (read_only_) return Status::failed_precondition(fmt::format("{} is open read-only", name_));
  std::lock_guard<std::mutex> lock(mu_);
  return in_transaction("dropping older vectors", [&]() -> Status {
    Statement drop;
    int rc = drop.prepare(db_,
                          "DELETE FROM phrasing_vectors WHERE fingerprint_id NOT IN "
                          "(SELECT id FROM encoder_fingerprints WHERE fingerprint = ?1)");
    if (rc == SQLITE_OK) {
      bind_text(drop.get(), 1, keep);
      rc = sqlite3_step(drop.get());
    }
    return rc == SQLITE_DONE ? Status::ok() : fail(rc, "dropping older vectors");
  });
}

Status SqliteKnowledgeStore::save_encoder_state(const std::string& untrained_fingerprint, const std::string& state) {
  if (read_only_) return Status::failed_precondition(fmt::format("{} is open read-only", name_));
  std::lock_guard<std::mutex> lock(mu_);
  return in_transaction("saving the encoder's state", [&]() -> Status {
    Statement save;
    int rc = save.prepare(db_,
                          "INSERT OR REPLACE INTO encoder_states(untrained_fingerprint, state, saved_at_ms) "
                          "VALUES (?1, ?2, ?3)");
    if (rc == SQLITE_OK) {
      bind_text(save.get(), 1, untrained_fingerprint);
      sqlite3_bind_blob64(save.get(), 2, state.data(), state.size(), SQLITE_STATIC);
      sqlite3_bind_int64(save.get(), 3, unix_now_ms());
      rc = sqlite3_step(save.get());
    }
    return rc == SQLITE_DONE ? Status::ok() : fail(rc, "saving the encoder's state");
  });
}

Result<std::string> SqliteKnowledgeStore::load_encoder_state(const std::string& untrained_fingerprint) {
  std::lock_guard<std::mutex> lock(mu_);
  if (schema_version_ < 2) return std::string();
  Statement load;
  int rc = load.prepare(db_, "SELECT state FROM encoder_states WHERE untrained_fingerprint = ?1");
  if (rc != SQLITE_OK) return fail(rc, "loading the encoder's state");
  bind_text(load.get(), 1, untrained_fingerprint);
  rc = sqlite3_step(load.get());
  if (rc == SQLITE_DONE) return std::string();
  if (rc != SQLITE_ROW) return fail(rc, "loading the encoder's state");
  const auto* bytes = static_cast<const char*>(sqlite3_column_blob(load.get(), 0));
  return std::string(bytes ? bytes : "", static_cast<std::size_t>(sqlite3_column_bytes(load.get(), 0)));
}

}  // namespace

Result<std::unique_ptr<KnowledgeStore>> open_sqlite_store(const std::string& path, const std::string& store_name,
                                                          const KnowledgeStoreOptions& options) {
  if (path.empty()) return Status::invalid_argument(fmt::format("'{}' names no database file", store_name));
  auto store = std::make_unique<SqliteKnowledgeStore>(path, store_name, options.read_only);
  Status opened = store->open(options);
  if (!opened.is_ok()) return opened;
  return std::unique_ptr<KnowledgeStore>(std::move(store));
}

}  // namespace rapidqa::store

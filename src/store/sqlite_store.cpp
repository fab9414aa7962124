#include "store/sqlite_store.h"

#include <sqlite3.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "common/bounded_json.h"
#include "store/change_rules.h"
#include "store/writer_lock.h"

namespace rapidqa::store {
namespace {

constexpr std::int64_t kSchemaVersion = 1;

// A failed SQLite call as a Status whose code says what the caller can do
// about it: a full disk is kResourceExhausted, an I/O or permission error
// kIoError, a damaged file kDataLoss, another connection's lock kUnavailable.
Status sqlite_status(sqlite3* db, int code, const std::string& store_name, const std::string& what) {
  const std::string message =
      fmt::format("{}: {}: {} (SQLite error {})", store_name, what,
                  db ? sqlite3_errmsg(db) : sqlite3_errstr(code), db ? sqlite3_extended_errcode(db) : code);
  switch (code & 0xff) {
    case SQLITE_FULL: return Status::resource_exhausted(message + "; the disk or file-size limit is full");
    case SQLITE_IOERR:
    case SQLITE_READONLY:
    case SQLITE_CANTOPEN:
    case SQLITE_PERM: return Status::io_error(message);
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB: return Status::data_loss(message);
    case SQLITE_BUSY:
    case SQLITE_LOCKED: return Status::unavailable(message);
    case SQLITE_NOMEM: return Status::resource_exhausted(message);
    default: return Status::internal(message);
  }
}

// One prepared statement, finalized with its owner.
class Statement {
 public:
  Statement() = default;
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  ~Statement() { sqlite3_finalize(stmt_); }

  int prepare(sqlite3* db, const char* sql) { return sqlite3_prepare_v3(db, sql, -1, SQLITE_PREPARE_PERSISTENT, &stmt_, nullptr); }
  sqlite3_stmt* get() { return stmt_; }
  // Ready for the next use: unbound and rewound.
  sqlite3_stmt* fresh() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
    return stmt_;
  }

 private:
  sqlite3_stmt* stmt_ = nullptr;
};

void bind_text(sqlite3_stmt* stmt, int index, const std::string& text) {
  sqlite3_bind_text(stmt, index, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT);
}

std::string column_text(sqlite3_stmt* stmt, int index) {
  const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(stmt, index));
  return text ? std::string(text, static_cast<std::size_t>(sqlite3_column_bytes(stmt, index))) : std::string();
}

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
  // quick_check reads every page and checks its structure (what a torn or
  // overwritten file breaks) without the index cross-checks that make
  // integrity_check slow on a large file.
  Statement check;
  int rc = check.prepare(db_, "PRAGMA quick_check(5)");
  if (rc != SQLITE_OK) return fail(rc, "checking the database's integrity");
  std::string problems;
  while ((rc = sqlite3_step(check.get())) == SQLITE_ROW) {
    const std::string line = column_text(check.get(), 0);
    if (line == "ok") continue;
    if (!problems.empty()) problems += "; ";
    problems += line;
  }
  if (rc != SQLITE_DONE) {
    Status s = fail(rc, "checking the database's integrity");
    return Status::data_loss(s.message());
  }
  if (!problems.empty()) {
    return Status::data_loss(fmt::format("{}: the database file is damaged ({}); restore it from a backup",
                                         name_, detail::clip_for_message(problems)));
  }
  return Status::ok();
}

Status SqliteKnowledgeStore::create_or_check_schema() {
  Statement tables;
  int rc = tables.prepare(db_, "SELECT name FROM sqlite_schema WHERE type='table'");
  if (rc != SQLITE_OK) return fail(rc, "reading the schema");
  bool has_version_table = false;
  std::size_t table_count = 0;
  while ((rc = sqlite3_step(tables.get())) == SQLITE_ROW) {
    ++table_count;
    if (column_text(tables.get(), 0) == "schema_version") has_version_table = true;
  }
  if (rc != SQLITE_DONE) return fail(rc, "reading the schema");

  if (!has_version_table) {
    if (table_count > 0) {
      return Status::failed_precondition(
          fmt::format("{}: the file is a SQLite database but not a knowledge store (no schema_version table); "
                      "refusing to add tables to it",
                      name_));
    }
    if (read_only_) {
      return Status::failed_precondition(fmt::format("{}: the store is empty (never opened for writing)", name_));
    }
    return exec(
        "BEGIN IMMEDIATE;"
        "CREATE TABLE schema_version(version INTEGER NOT NULL);"
        "INSERT INTO schema_version VALUES (1);"
        "CREATE TABLE entry_versions("
        "  entry_id TEXT NOT NULL, version INTEGER NOT NULL, removed INTEGER NOT NULL,"
        "  body TEXT NOT NULL, committed_at_ms INTEGER NOT NULL,"
        "  PRIMARY KEY (entry_id, version)) WITHOUT ROWID;"
        "CREATE TABLE current_entries("
        "  entry_id TEXT PRIMARY KEY, version INTEGER NOT NULL, body TEXT NOT NULL) WITHOUT ROWID;"
        "COMMIT;",
        "creating the schema");
  }
  Statement version;
  rc = version.prepare(db_, "SELECT max(version) FROM schema_version");
  if (rc != SQLITE_OK) return fail(rc, "reading the schema version");
  rc = sqlite3_step(version.get());
  if (rc != SQLITE_ROW) return fail(rc, "reading the schema version");
  const std::int64_t found = sqlite3_column_int64(version.get(), 0);
  if (found > kSchemaVersion) {
    return Status::failed_precondition(fmt::format(
        "{}: written by a newer rapidqa (schema version {}, this one reads up to {})", name_, found, kSchemaVersion));
  }
  if (found < 1) return Status::data_loss(fmt::format("{}: the schema_version table is empty", name_));
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
  const std::string id = column_text(row, 0);
  auto entry = parse_knowledge_entry_json(column_text(row, 2));
  if (!entry) {
    return Status::data_loss(fmt::format("{}: entry '{}' is stored damaged: {}", name_, detail::clip_for_message(id),
                                         entry.status().message()));
  }
  entry->version = static_cast<std::uint64_t>(sqlite3_column_int64(row, 1));
  return entry;
}

Result<std::vector<KnowledgeEntry>> SqliteKnowledgeStore::load_current() {
  std::lock_guard<std::mutex> lock(mu_);
  sqlite3_stmt* row = statements_->load_current.fresh();
  std::vector<KnowledgeEntry> entries;
  int rc;
  while ((rc = sqlite3_step(row)) == SQLITE_ROW) {
    auto entry = entry_from_row(row);
    if (!entry) {
      sqlite3_reset(row);
      return entry.status();
    }
    entries.push_back(std::move(entry).value());
  }
  sqlite3_reset(row);
  if (rc != SQLITE_DONE) return fail(rc, "loading the current entries");
  return entries;
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
  EntryVersion v;
  v.version = static_cast<std::uint64_t>(sqlite3_column_int64(row, 0));
  v.removed = sqlite3_column_int(row, 1) != 0;
  v.committed_at_ms = sqlite3_column_int64(row, 3);
  if (v.removed) {
    v.entry.id = id;
  } else {
    auto entry = parse_knowledge_entry_json(column_text(row, 2));
    if (!entry) {
      return Status::data_loss(fmt::format("{}: version {} of entry '{}' is stored damaged: {}", name_, v.version,
                                           detail::clip_for_message(id), entry.status().message()));
    }
    v.entry = std::move(entry).value();
  }
  v.entry.version = v.version;
  return v;
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
  stats.schema_version = kSchemaVersion;
  const std::pair<std::size_t*, const char*> counts[] = {
      {&stats.current_entries, "SELECT count(*) FROM current_entries"},
      {&stats.versions, "SELECT count(*) FROM entry_versions"},
  };
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

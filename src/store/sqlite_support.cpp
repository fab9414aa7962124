#include "store/sqlite_support.h"

#include <fmt/format.h>

namespace rapidqa::store {

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

void bind_text(sqlite3_stmt* stmt, int index, const std::string& text) {
  sqlite3_bind_text(stmt, index, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT);
}

std::string column_text(sqlite3_stmt* stmt, int index) {
  const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(stmt, index));
  return text ? std::string(text, static_cast<std::size_t>(sqlite3_column_bytes(stmt, index))) : std::string();
}

namespace {

// Each step takes the layout from version N to N + 1 and says so in
// schema_version, inside the transaction the caller opened.
struct Migration {
  std::int64_t to;
  const char* sql;
};
const Migration kMigrations[] = {
    {1,
     "CREATE TABLE schema_version(version INTEGER NOT NULL);"
     "INSERT INTO schema_version VALUES (1);"
     "CREATE TABLE entry_versions("
     "  entry_id TEXT NOT NULL, version INTEGER NOT NULL, removed INTEGER NOT NULL,"
     "  body TEXT NOT NULL, committed_at_ms INTEGER NOT NULL,"
     "  PRIMARY KEY (entry_id, version)) WITHOUT ROWID;"
     "CREATE TABLE current_entries("
     "  entry_id TEXT PRIMARY KEY, version INTEGER NOT NULL, body TEXT NOT NULL) WITHOUT ROWID;"},
    // 2: vectors kept per entry version and encoder, and encoders' learned
    // state, for restarts that read instead of encoding.
    {2,
     "CREATE TABLE encoder_fingerprints(id INTEGER PRIMARY KEY, fingerprint TEXT NOT NULL UNIQUE);"
     "CREATE TABLE phrasing_vectors("
     "  fingerprint_id INTEGER NOT NULL, entry_id TEXT NOT NULL, version INTEGER NOT NULL,"
     "  dimension INTEGER NOT NULL, vectors BLOB NOT NULL,"
     "  PRIMARY KEY (fingerprint_id, entry_id, version)) WITHOUT ROWID;"
     "CREATE TABLE encoder_states("
     "  untrained_fingerprint TEXT PRIMARY KEY, state BLOB NOT NULL, saved_at_ms INTEGER NOT NULL) WITHOUT ROWID;"
     "UPDATE schema_version SET version = 2;"},
};

Status run(sqlite3* db, const char* sql, const std::string& name, const std::string& what) {
  const int rc = sqlite3_exec(db, sql, nullptr, nullptr, nullptr);
  return rc == SQLITE_OK ? Status::ok() : sqlite_status(db, rc, name, what);
}

// The file's layout version: 0 for an empty file, -1 for another
// program's database.
Result<std::int64_t> layout_version(sqlite3* db, const std::string& name) {
  Statement tables;
  int rc = tables.prepare(db, "SELECT name FROM sqlite_schema WHERE type='table'");
  if (rc != SQLITE_OK) return sqlite_status(db, rc, name, "reading the schema");
  bool has_version_table = false;
  std::size_t table_count = 0;
  while ((rc = sqlite3_step(tables.get())) == SQLITE_ROW) {
    ++table_count;
    if (column_text(tables.get(), 0) == "schema_version") has_version_table = true;
  }
  if (rc != SQLITE_DONE) return sqlite_status(db, rc, name, "reading the schema");
  if (!has_version_table) return table_count > 0 ? -1 : 0;
  Statement version;
  rc = version.prepare(db, "SELECT max(version) FROM schema_version");
  if (rc == SQLITE_OK) rc = sqlite3_step(version.get());
  if (rc != SQLITE_ROW) return sqlite_status(db, rc, name, "reading the schema version");
  const std::int64_t found = sqlite3_column_int64(version.get(), 0);
  if (found < 1) return Status::data_loss(fmt::format("{}: the schema_version table is empty", name));
  return found;
}

}  // namespace

Result<std::int64_t> create_or_migrate_sqlite_schema(sqlite3* db, const std::string& name, bool read_only) {
  auto found = layout_version(db, name);
  if (!found) return found.status();
  if (*found < 0) {
    return Status::failed_precondition(
        fmt::format("{}: the file is a SQLite database but not a knowledge store (no schema_version table); "
                    "refusing to add tables to it",
                    name));
  }
  if (*found > kSqliteSchemaVersion) {
    return Status::failed_precondition(fmt::format("{}: written by a newer rapidqa (schema version {}, this one reads "
                                                   "up to {})",
                                                   name, *found, kSqliteSchemaVersion));
  }
  if (*found == 0 && read_only) {
    return Status::failed_precondition(fmt::format("{}: the store is empty (never opened for writing)", name));
  }
  if (read_only) return *found;
  std::int64_t version = *found;
  for (const Migration& step : kMigrations) {
    if (step.to <= version) continue;
    const std::string what = fmt::format("migrating the layout to schema version {}", step.to);
    if (Status s = run(db, "BEGIN IMMEDIATE", name, what); !s.is_ok()) return s;
    Status s = run(db, step.sql, name, what);
    if (s.is_ok()) s = run(db, "COMMIT", name, what);
    if (!s.is_ok()) {
      if (!sqlite3_get_autocommit(db)) (void)sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
      return s;
    }
    version = step.to;
  }
  return version;
}

}  // namespace rapidqa::store

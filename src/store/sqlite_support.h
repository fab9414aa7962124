// What the SQLite store's parts share: failed calls as a Status, owned
// prepared statements, text columns, and the layout with its migrations.
//
// Thread safety: none of its own; the store serialises calls on a
// connection.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <string>

#include "rapidqa/status.h"

namespace rapidqa::store {

// The layout this library writes, and the newest it reads.
constexpr std::int64_t kSqliteSchemaVersion = 2;

// A failed SQLite call as a Status whose code says what the caller can do
// about it: a full disk is kResourceExhausted, an I/O or permission error
// kIoError, a damaged file kDataLoss, another connection's lock kUnavailable.
Status sqlite_status(sqlite3* db, int code, const std::string& store_name, const std::string& what);

// One prepared statement, finalized with its owner.
class Statement {
 public:
  Statement() = default;
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  ~Statement() { sqlite3_finalize(stmt_); }

  int prepare(sqlite3* db, const char* sql) {
    return sqlite3_prepare_v3(db, sql, -1, SQLITE_PREPARE_PERSISTENT, &stmt_, nullptr);
  }
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

void bind_text(sqlite3_stmt* stmt, int index, const std::string& text);
std::string column_text(sqlite3_stmt* stmt, int index);

// Creates the layout in an empty file, or migrates an older one to
// kSqliteSchemaVersion one version at a time, each step in a transaction
// of its own (a crash mid-way leaves the file at the last whole step).
// Returns the file's version: a read-only open migrates nothing and reads
// what it can. kFailedPrecondition for another program's database, an
// empty file opened read-only, or a layout newer than this library's.
Result<std::int64_t> create_or_migrate_sqlite_schema(sqlite3* db, const std::string& store_name, bool read_only);

}  // namespace rapidqa::store

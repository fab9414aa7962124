// SqliteKnowledgeStore: the KnowledgeStore on one SQLite database file, the
// embedded choice (Debian's libsqlite3). The file is opened in WAL mode with
// synchronous=FULL, so a commit that returned is on disk and a crash at any
// moment leaves either the whole transaction or none of it. One process
// writes the file (WriterLock on PATH.lock); read-only opens take no lock.
//
// Layout (schema_version 1):
//   schema_version(version)                     one row: the layout version
//   entry_versions(entry_id, version, removed,  every version of every entry,
//                  body, committed_at_ms)        body = the entry as a JSONL line
//   current_entries(entry_id, version, body)    the versions a load returns
// A later layout adds tables (stored vectors with the encoder's
// fingerprint) and bumps schema_version; open() migrates forward and
// refuses a file written by a newer layout.
//
// Thread safety: thread-safe (one mutex over the connection).
#pragma once

#include <memory>
#include <string>

#include "rapidqa/knowledge_store.h"

namespace rapidqa::store {

// path: the database file (created when missing). store_name: how messages
// name it ("sqlite:/var/lib/faq.db").
Result<std::unique_ptr<KnowledgeStore>> open_sqlite_store(const std::string& path, const std::string& store_name,
                                                          const KnowledgeStoreOptions& options);

}  // namespace rapidqa::store

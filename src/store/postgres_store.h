// PostgresKnowledgeStore: the KnowledgeStore in a PostgreSQL database (libpq),
// the store several instances share. Every instance connects to the same
// database; the server is the one source of truth for versions.
//
// Layout (schema "rapidqa", schema_version 1; the same tables as the SQLite
// store):
//   rapidqa.schema_version(version)
//   rapidqa.entry_versions(entry_id, version, removed, body, committed_at_ms)
//   rapidqa.current_entries(entry_id, version, body)
// One store per database. The first open creates the layout (under an
// advisory lock, so instances starting together do not race).
//
// Writers: every commit takes one transaction-scoped advisory lock before
// reading any version, so commits from all instances are serialized and
// each entry's versions count up without gaps or duplicates, whoever
// writes. Writes in this store are rare next to asks, so one lock (no
// deadlocks between batches, no retry loops) costs nothing that matters;
// docs/store.md has the throughput. A batch costs a fixed number of round
// trips (arrays in, unnest on the server), not one per change.
//
// Peers: each commit sends NOTIFY rapidqa_changes with the ids it touched
// (or "*" when they do not fit the 8,000-byte payload); watch() LISTENs on a
// connection of its own and reports other connections' commits. Delivery
// is tied to the commit itself: a commit is announced exactly when it
// becomes visible, with no second system (Redis) to keep consistent with
// the database.
//
// Connections: a call that finds its connection lost reconnects first; a
// call whose connection is lost midway fails with kUnavailable and changes
// nothing it can know of. A COMMIT whose reply is lost is the one unknown
// outcome: it is reported as a failure (never acknowledged), and the
// watchers' resync after the reconnection brings memory and store together.
//
// Thread safety: thread-safe (one mutex over the writing connection).
#pragma once

#include <memory>
#include <string>

#include "rapidqa/knowledge_store.h"

namespace rapidqa::store {

// uri: a libpq connection URI ("postgresql://user@host:port/db"); it also
// names the store in messages (without its password).
Result<std::unique_ptr<KnowledgeStore>> open_postgres_store(const std::string& uri,
                                                            const KnowledgeStoreOptions& options);

}  // namespace rapidqa::store

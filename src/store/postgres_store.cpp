#include "store/postgres_store.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/bounded_json.h"
#include "store/change_rules.h"
#include "store/postgres_connection.h"
#include "store/postgres_schema.h"
#include "store/postgres_watch.h"

namespace rapidqa::store {
namespace {

// The advisory lock key (any 64-bit number no other application of the
// database uses) that serializes commits.
constexpr const char* kWriterLockKey = "7245617064510002";
// NOTIFY payloads must stay under 8,000 bytes; a longer list of ids is
// sent as "*" (compare everything).
constexpr std::size_t kMaxPayloadBytes = 7000;
// Changes per round trip inside one commit; progress is reported after each.
constexpr std::size_t kChunk = 1000;

std::int64_t unix_now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The URI without its password, to name the store in messages and stats.
std::string without_password(const std::string& uri) {
  std::string shown = uri;
  const std::size_t scheme_end = shown.find("://");
  if (scheme_end != std::string::npos) {
    const std::size_t authority = scheme_end + 3;
    const std::size_t at = shown.find('@', authority);
    const std::size_t slash = shown.find('/', authority);
    if (at != std::string::npos && (slash == std::string::npos || at < slash)) {
      const std::size_t colon = shown.find(':', authority);
      if (colon != std::string::npos && colon < at) shown.replace(colon + 1, at - colon - 1, "***");
    }
  }
  const std::size_t password = shown.find("password=");
  if (password != std::string::npos) {
    const std::size_t value = password + 9;
    const std::size_t end = shown.find('&', value);
    shown.replace(value, (end == std::string::npos ? shown.size() : end) - value, "***");
  }
  return shown;
}

// The ids a commit touched, as a NOTIFY payload: a JSON array, or "*".
std::string notify_payload(const std::vector<std::string>& ids) {
  std::string payload = nlohmann::json(ids).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return payload.size() > kMaxPayloadBytes ? std::string("*") : payload;
}

// One session's set-up, after every (re)connection.
Status prepare_session(PGconn* connection, const std::string& name, const KnowledgeStoreOptions& options) {
  const std::string sql = fmt::format(
      "SET client_encoding = 'UTF8'; SET synchronous_commit = on; SET lock_timeout = {}; "
      "SET default_transaction_read_only = {}",
      options.busy_timeout.count(), options.read_only ? "on" : "off");
  auto done = pg::exec(connection, sql.c_str(), PGRES_COMMAND_OK, name, "setting up the session");
  return done ? Status::ok() : done.status();
}

class PostgresKnowledgeStore final : public KnowledgeStore {
 public:
  PostgresKnowledgeStore(std::string uri, KnowledgeStoreOptions options)
      : uri_(std::move(uri)), name_(without_password(uri_)), options_(std::move(options)) {}

  Status open();

  Result<std::vector<KnowledgeEntry>> load_current() override;
  Result<std::vector<KnowledgeEntry>> load_current(const std::vector<std::string>& entry_ids) override;
  Result<std::vector<CommittedVersion>> commit(const std::vector<StoreChange>& changes,
                                               const StoreProgress& progress) override;
  Result<std::vector<EntryVersion>> history(const std::string& id) override;
  Result<EntryVersion> version_of(const std::string& id, std::uint64_t version) override;
  Result<KnowledgeStoreStats> stats() override;
  Result<std::unique_ptr<StoreWatch>> watch(StoreWatcher watcher) override;
  Status save_vectors(const std::string& fingerprint, const std::vector<StoredVectors>& vectors) override;
  Result<std::vector<StoredVectors>> load_vectors(const std::string& fingerprint) override;
  Status drop_vectors_except(const std::string& keep) override;
  Status save_encoder_state(const std::string& untrained_fingerprint, const std::string& state) override;
  Result<std::string> load_encoder_state(const std::string& untrained_fingerprint) override;

 private:
  // What a commit knows of one entry as it goes.
  struct EntryState {
    bool current = false;
    std::int64_t last_version = 0;  // highest version ever (0: never stored)
    std::string body;               // current body ("" when not current)
  };

  // Under mu_: reconnects when the connection was lost.
  Status ensure_connected();
  // Under mu_: runs a read, once more on a fresh connection when the
  // connection turns out to have been lost (a server restarted since the
  // last call leaves a connection that looks open until it is used).
  // Reads are safe to repeat.
  template <typename Read>
  auto reading(Read&& read) -> decltype(read()) {
    if (Status s = ensure_connected(); !s.is_ok()) return s;
    auto result = read();
    if (result || !pg::lost(connection_.get())) return result;
    if (Status s = ensure_connected(); !s.is_ok()) return result;
    return read();
  }
  Status create_or_check_schema();
  Result<pg::ResultPtr> run(const char* sql, const std::vector<std::string>& params, ExecStatusType expected,
                            const std::string& what, bool binary_results = false) {
    return pg::exec_params(connection_.get(), sql, params, expected, name_, what, binary_results);
  }
  // Inside the open transaction: the state of ids not yet in `states`.
  Status read_states(const std::vector<std::string>& ids, std::unordered_map<std::string, EntryState>& states);
  Result<std::vector<CommittedVersion>> commit_in_transaction(const std::vector<StoreChange>& changes,
                                                              const StoreProgress& progress);
  Result<std::vector<KnowledgeEntry>> entries_from(const PGresult* rows);
  Result<EntryVersion> version_from(const PGresult* rows, int row, const std::string& id);

  const std::string uri_;
  const std::string name_;
  const KnowledgeStoreOptions options_;
  // The writing connection's server process, so the watch can skip this
  // store's own notifications (shared: a watch may outlive the store).
  std::shared_ptr<std::atomic<int>> writer_backend_ = std::make_shared<std::atomic<int>>(0);
  std::mutex mu_;  // over the connection
  pg::ConnectionPtr connection_;
  std::int64_t schema_version_ = 0;
};

Status PostgresKnowledgeStore::ensure_connected() {
  if (connection_ && !pg::lost(connection_.get())) return Status::ok();
  connection_.reset();
  writer_backend_->store(0);
  auto connected = pg::connect(uri_, name_);
  if (!connected) return connected.status();
  pg::ConnectionPtr connection = std::move(connected).value();
  if (Status s = prepare_session(connection.get(), name_, options_); !s.is_ok()) return s;
  writer_backend_->store(PQbackendPID(connection.get()));
  connection_ = std::move(connection);
  return Status::ok();
}

Status PostgresKnowledgeStore::open() {
  std::lock_guard<std::mutex> lock(mu_);
  if (Status s = ensure_connected(); !s.is_ok()) return s;
  return create_or_check_schema();
}

Status PostgresKnowledgeStore::create_or_check_schema() {
  auto version = create_or_migrate_postgres_schema(connection_.get(), name_, options_.read_only);
  if (!version) return version.status();
  schema_version_ = *version;
  return Status::ok();
}

Result<std::vector<KnowledgeEntry>> PostgresKnowledgeStore::entries_from(const PGresult* rows) {
  // A PGresult is only read here, which libpq allows from several threads.
  return entries_in_parallel(static_cast<std::size_t>(PQntuples(rows)), [&](std::size_t i) {
    const int row = static_cast<int>(i);
    return entry_from_body(pg::text_at(rows, row, 0), static_cast<std::uint64_t>(pg::int64_at(rows, row, 1)),
                           pg::text_at(rows, row, 2), name_);
  });
}

Result<std::vector<KnowledgeEntry>> PostgresKnowledgeStore::load_current() {
  std::lock_guard<std::mutex> lock(mu_);
  auto rows = reading([&] {
    // COLLATE "C": the same byte order as the SQLite store and std::string.
    return run("SELECT entry_id, version, body FROM rapidqa.current_entries ORDER BY entry_id COLLATE \"C\"", {},
               PGRES_TUPLES_OK, "loading the current entries");
  });
  if (!rows) return rows.status();
  return entries_from(rows->get());
}

Result<std::vector<KnowledgeEntry>> PostgresKnowledgeStore::load_current(const std::vector<std::string>& entry_ids) {
  std::lock_guard<std::mutex> lock(mu_);
  auto rows = reading([&] {
    return run(
        "SELECT entry_id, version, body FROM rapidqa.current_entries WHERE entry_id = ANY($1::text[]) "
        "ORDER BY entry_id COLLATE \"C\"",
        {pg::text_array(entry_ids)}, PGRES_TUPLES_OK, "loading entries");
  });
  if (!rows) return rows.status();
  return entries_from(rows->get());
}

Status PostgresKnowledgeStore::read_states(const std::vector<std::string>& ids,
                                           std::unordered_map<std::string, EntryState>& states) {
  if (ids.empty()) return Status::ok();
  auto rows = run(
      "SELECT ids.id, c.version IS NOT NULL, coalesce(c.body, ''),"
      "  coalesce((SELECT max(v.version) FROM rapidqa.entry_versions v WHERE v.entry_id = ids.id), 0) "
      "FROM unnest($1::text[]) AS ids(id) LEFT JOIN rapidqa.current_entries c ON c.entry_id = ids.id",
      {pg::text_array(ids)}, PGRES_TUPLES_OK, "reading the entries' versions");
  if (!rows) return rows.status();
  for (int row = 0; row < PQntuples(rows->get()); ++row) {
    EntryState& state = states[pg::text_at(rows->get(), row, 0)];
    state.current = pg::text_at(rows->get(), row, 1) == "t";
    state.body = pg::text_at(rows->get(), row, 2);
    state.last_version = pg::int64_at(rows->get(), row, 3);
  }
  return Status::ok();
}

Result<std::vector<CommittedVersion>> PostgresKnowledgeStore::commit_in_transaction(
    const std::vector<StoreChange>& changes, const StoreProgress& progress) {
  const std::string lock_sql = fmt::format("SELECT pg_advisory_xact_lock({})", kWriterLockKey);
  auto locked = run(lock_sql.c_str(), {}, PGRES_TUPLES_OK, "waiting for the other writers");
  if (!locked) return locked.status();

  const std::string now = std::to_string(unix_now_ms());
  std::unordered_map<std::string, EntryState> states;
  std::vector<CommittedVersion> committed;
  committed.reserve(changes.size());
  std::set<std::string> touched;  // ordered: the NOTIFY lists ids in a stable order
  for (std::size_t begin = 0; begin < changes.size(); begin += kChunk) {
    const std::size_t end = std::min(changes.size(), begin + kChunk);
    std::vector<std::string> unknown;
    for (std::size_t i = begin; i < end; ++i) {
      if (!states.count(changes[i].id())) unknown.push_back(changes[i].id());
    }
    std::sort(unknown.begin(), unknown.end());
    unknown.erase(std::unique(unknown.begin(), unknown.end()), unknown.end());
    if (Status s = read_states(unknown, states); !s.is_ok()) return s;

    std::vector<std::string> ids, versions, removed, bodies, times;
    for (std::size_t i = begin; i < end; ++i) {
      const StoreChange& change = changes[i];
      EntryState& state = states[change.id()];
      if (Status refused = check_change(change, state.current); !refused.is_ok()) {
        return in_batch(refused, i, changes.size());
      }
      CommittedVersion version;
      version.entry_id = change.id();
      version.version = static_cast<std::uint64_t>(++state.last_version);
      version.removed = change.kind == StoreChange::Kind::kRemove;
      state.current = !version.removed;
      state.body = version.removed ? std::string() : knowledge_entry_to_json(change.entry);
      ids.push_back(version.entry_id);
      versions.push_back(std::to_string(version.version));
      removed.push_back(version.removed ? "t" : "f");
      bodies.push_back(state.body);
      times.push_back(now);
      touched.insert(version.entry_id);
      committed.push_back(std::move(version));
    }
    auto recorded = run(
        "INSERT INTO rapidqa.entry_versions(entry_id, version, removed, body, committed_at_ms) "
        "SELECT * FROM unnest($1::text[], $2::bigint[], $3::boolean[], $4::text[], $5::bigint[])",
        {pg::text_array(ids), pg::text_array(versions), pg::text_array(removed), pg::text_array(bodies),
         pg::text_array(times)},
        PGRES_COMMAND_OK, "recording the new versions");
    if (!recorded) return recorded.status();
    if (progress) progress(end, changes.size());
  }

  // The current rows, once per touched entry, as the batch left them.
  std::vector<std::string> current_ids, current_versions, current_bodies, gone;
  for (const auto& id : touched) {
    const EntryState& state = states[id];
    if (state.current) {
      current_ids.push_back(id);
      current_versions.push_back(std::to_string(state.last_version));
      current_bodies.push_back(state.body);
    } else {
      gone.push_back(id);
    }
  }
  if (!current_ids.empty()) {
    auto upserted = run(
        "INSERT INTO rapidqa.current_entries(entry_id, version, body) "
        "SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[]) "
        "ON CONFLICT (entry_id) DO UPDATE SET version = EXCLUDED.version, body = EXCLUDED.body",
        {pg::text_array(current_ids), pg::text_array(current_versions), pg::text_array(current_bodies)},
        PGRES_COMMAND_OK, "making the new versions current");
    if (!upserted) return upserted.status();
  }
  if (!gone.empty()) {
    auto deleted = run("DELETE FROM rapidqa.current_entries WHERE entry_id = ANY($1::text[])",
                       {pg::text_array(gone)}, PGRES_COMMAND_OK, "removing entries");
    if (!deleted) return deleted.status();
  }
  const std::string payload = notify_payload(std::vector<std::string>(touched.begin(), touched.end()));
  auto notified = run("SELECT pg_notify($1, $2)", {kChangeChannel, payload}, PGRES_TUPLES_OK, "notifying the peers");
  if (!notified) return notified.status();
  return committed;
}

Result<std::vector<CommittedVersion>> PostgresKnowledgeStore::commit(const std::vector<StoreChange>& changes,
                                                                     const StoreProgress& progress) {
  if (options_.read_only) return Status::failed_precondition(fmt::format("{} is open read-only", name_));
  std::lock_guard<std::mutex> lock(mu_);
  // BEGIN alone commits nothing, so a BEGIN that finds the connection lost
  // is repeated on a fresh one; anything later is not.
  auto begun = reading([&] { return run("BEGIN", {}, PGRES_COMMAND_OK, "starting a transaction"); });
  if (!begun) return begun.status();
  auto committed = commit_in_transaction(changes, progress);
  if (committed) {
    // synchronous_commit=on: COMMIT returns once the server has flushed
    // the transaction's log records.
    auto done = run("COMMIT", {}, PGRES_COMMAND_OK, "committing");
    if (done) return committed;
    committed = done.status();
  }
  if (!pg::lost(connection_.get())) (void)run("ROLLBACK", {}, PGRES_COMMAND_OK, "rolling back");
  return committed.status();
}

Result<EntryVersion> PostgresKnowledgeStore::version_from(const PGresult* rows, int row, const std::string& id) {
  return entry_version_from(id, static_cast<std::uint64_t>(pg::int64_at(rows, row, 0)), pg::text_at(rows, row, 1) == "t",
                            pg::int64_at(rows, row, 3), pg::text_at(rows, row, 2), name_);
}

Result<std::vector<EntryVersion>> PostgresKnowledgeStore::history(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto rows = reading([&] {
    return run(
        "SELECT version, removed, body, committed_at_ms FROM rapidqa.entry_versions WHERE entry_id = $1 "
        "ORDER BY version",
        {id}, PGRES_TUPLES_OK, "reading an entry's history");
  });
  if (!rows) return rows.status();
  std::vector<EntryVersion> versions;
  for (int row = 0; row < PQntuples(rows->get()); ++row) {
    auto v = version_from(rows->get(), row, id);
    if (!v) return v.status();
    versions.push_back(std::move(v).value());
  }
  if (versions.empty()) {
    return Status::not_found(fmt::format("no entry with id '{}' was ever stored", detail::clip_for_message(id)));
  }
  return versions;
}

Result<EntryVersion> PostgresKnowledgeStore::version_of(const std::string& id, std::uint64_t version) {
  std::lock_guard<std::mutex> lock(mu_);
  auto rows = reading([&] {
    return run(
        "SELECT version, removed, body, committed_at_ms FROM rapidqa.entry_versions "
        "WHERE entry_id = $1 AND version = $2",
        {id, std::to_string(version)}, PGRES_TUPLES_OK, "reading an entry version");
  });
  if (!rows) return rows.status();
  if (PQntuples(rows->get()) == 0) {
    return Status::not_found(fmt::format("entry '{}' has no version {}", detail::clip_for_message(id), version));
  }
  return version_from(rows->get(), 0, id);
}

Result<KnowledgeStoreStats> PostgresKnowledgeStore::stats() {
  std::lock_guard<std::mutex> lock(mu_);
  // Vectors only exist from schema version 2 (a read-only open may find 1).
  const bool vectors = schema_version_ >= 2;
  const std::string sql = fmt::format(
      "SELECT (SELECT count(*) FROM rapidqa.current_entries), (SELECT count(*) FROM rapidqa.entry_versions),"
      "  (SELECT max(version) FROM rapidqa.schema_version),"
      "  pg_total_relation_size('rapidqa.current_entries') + pg_total_relation_size('rapidqa.entry_versions'){},"
      "  {}",
      vectors ? " + pg_total_relation_size('rapidqa.phrasing_vectors')" : "",
      vectors ? "(SELECT count(*) FROM rapidqa.phrasing_vectors)" : "0");
  auto rows = reading([&] { return run(sql.c_str(), {}, PGRES_TUPLES_OK, "counting entries"); });
  if (!rows) return rows.status();
  KnowledgeStoreStats stats;
  stats.uri = name_;
  stats.current_entries = static_cast<std::size_t>(pg::int64_at(rows->get(), 0, 0));
  stats.versions = static_cast<std::size_t>(pg::int64_at(rows->get(), 0, 1));
  stats.schema_version = pg::int64_at(rows->get(), 0, 2);
  stats.bytes = static_cast<std::uint64_t>(pg::int64_at(rows->get(), 0, 3));
  stats.stored_vectors = static_cast<std::size_t>(pg::int64_at(rows->get(), 0, 4));
  return stats;
}

Status PostgresKnowledgeStore::save_vectors(const std::string& fingerprint,
                                           const std::vector<StoredVectors>& vectors) {
  if (options_.read_only) return Status::failed_precondition(fmt::format("{} is open read-only", name_));
  for (const StoredVectors& v : vectors) {
    if (v.dimension == 0 || v.values.empty() || v.values.size() % v.dimension != 0) {
      return Status::invalid_argument(fmt::format("vectors of entry '{}': {} values are not rows of {}",
                                                  detail::clip_for_message(v.entry_id), v.values.size(),
                                                  v.dimension));
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  auto begun = reading([&] { return run("BEGIN", {}, PGRES_COMMAND_OK, "starting a transaction"); });
  if (!begun) return begun.status();
  Status saved = [&]() -> Status {
    auto id = run(
        "WITH added AS (INSERT INTO rapidqa.encoder_fingerprints(fingerprint) VALUES ($1) "
        "ON CONFLICT (fingerprint) DO NOTHING RETURNING id) "
        "SELECT id FROM added UNION ALL SELECT id FROM rapidqa.encoder_fingerprints WHERE fingerprint = $1",
        {fingerprint}, PGRES_TUPLES_OK, "recording an encoder fingerprint");
    if (!id) return id.status();
    const std::string fingerprint_id = pg::text_at(id->get(), 0, 0);
    for (std::size_t begin = 0; begin < vectors.size(); begin += kChunk) {
      const std::size_t end = std::min(vectors.size(), begin + kChunk);
      std::vector<std::string> ids, versions, dimensions, blobs;
      for (std::size_t i = begin; i < end; ++i) {
        ids.push_back(vectors[i].entry_id);
        versions.push_back(std::to_string(vectors[i].version));
        dimensions.push_back(std::to_string(vectors[i].dimension));
        blobs.push_back(pg::bytea_hex(vectors[i].values.data(), vectors[i].values.size() * sizeof(float)));
      }
      auto dropped = run(
          "DELETE FROM rapidqa.phrasing_vectors p USING unnest($2::text[], $3::bigint[]) AS t(entry_id, version) "
          "WHERE p.fingerprint_id = $1 AND p.entry_id = t.entry_id AND p.version <> t.version",
          {fingerprint_id, pg::text_array(ids), pg::text_array(versions)}, PGRES_COMMAND_OK,
          "dropping older vectors");
      if (!dropped) return dropped.status();
      auto inserted = run(
          "INSERT INTO rapidqa.phrasing_vectors(fingerprint_id, entry_id, version, dimension, vectors) "
          "SELECT $1, t.entry_id, t.version, t.dimension, t.vectors "
          "FROM unnest($2::text[], $3::bigint[], $4::integer[], $5::bytea[]) AS t(entry_id, version, dimension, vectors) "
          "JOIN rapidqa.current_entries c ON c.entry_id = t.entry_id AND c.version = t.version "
          "ON CONFLICT (fingerprint_id, entry_id, version) DO UPDATE SET dimension = EXCLUDED.dimension, "
          "vectors = EXCLUDED.vectors",
          {fingerprint_id, pg::text_array(ids), pg::text_array(versions), pg::text_array(dimensions),
           pg::text_array(blobs)},
          PGRES_COMMAND_OK, "saving vectors");
      if (!inserted) return inserted.status();
    }
    auto done = run("COMMIT", {}, PGRES_COMMAND_OK, "committing the vectors");
    return done ? Status::ok() : done.status();
  }();
  if (!saved.is_ok() && !pg::lost(connection_.get())) (void)run("ROLLBACK", {}, PGRES_COMMAND_OK, "rolling back");
  return saved;
}

Result<std::vector<StoredVectors>> PostgresKnowledgeStore::load_vectors(const std::string& fingerprint) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<StoredVectors> all;
  if (schema_version_ < 2) return all;
  auto rows = reading([&] {
    return run(
        "SELECT v.entry_id, v.version, v.dimension, v.vectors FROM rapidqa.phrasing_vectors v "
        "JOIN rapidqa.encoder_fingerprints f ON f.id = v.fingerprint_id "
        "JOIN rapidqa.current_entries c ON c.entry_id = v.entry_id AND c.version = v.version "
        "WHERE f.fingerprint = $1 ORDER BY v.entry_id COLLATE \"C\"",
        {fingerprint}, PGRES_TUPLES_OK, "loading vectors", /*binary_results=*/true);
  });
  if (!rows) return rows.status();
  const PGresult* result = rows->get();
  all.reserve(static_cast<std::size_t>(PQntuples(result)));
  for (int row = 0; row < PQntuples(result); ++row) {
    StoredVectors v;
    v.entry_id.assign(PQgetvalue(result, row, 0), static_cast<std::size_t>(PQgetlength(result, row, 0)));
    std::int64_t version = 0, dimension = 0;
    const auto bytes = static_cast<std::size_t>(PQgetlength(result, row, 3));
    // A row that does not decode to whole rows is left out: its entry is
    // encoded again, as if it had no vectors.
    if (!pg::binary_int_at(result, row, 1, version) || !pg::binary_int_at(result, row, 2, dimension) ||
        dimension <= 0 || bytes == 0 || bytes % (static_cast<std::size_t>(dimension) * sizeof(float)) != 0) {
      continue;
    }
    v.version = static_cast<std::uint64_t>(version);
    v.dimension = static_cast<std::size_t>(dimension);
    v.values.resize(bytes / sizeof(float));
    std::memcpy(v.values.data(), PQgetvalue(result, row, 3), bytes);
    all.push_back(std::move(v));
  }
  return all;
}

Status PostgresKnowledgeStore::drop_vectors_except(const std::string& keep) {
  if (options_.read_only) return Status::failed_precondition(fmt::format("{} is open read-only", name_));
  std::lock_guard<std::mutex> lock(mu_);
  auto dropped = reading([&] {
    return run(
        "DELETE FROM rapidqa.phrasing_vectors WHERE fingerprint_id NOT IN "
        "(SELECT id FROM rapidqa.encoder_fingerprints WHERE fingerprint = $1)",
        {keep}, PGRES_COMMAND_OK, "dropping older vectors");
  });
  return dropped ? Status::ok() : dropped.status();
}

Status PostgresKnowledgeStore::save_encoder_state(const std::string& untrained_fingerprint, const std::string& state) {
  if (options_.read_only) return Status::failed_precondition(fmt::format("{} is open read-only", name_));
  std::lock_guard<std::mutex> lock(mu_);
  auto saved = reading([&] {
    return run(
        "INSERT INTO rapidqa.encoder_states(untrained_fingerprint, state, saved_at_ms) VALUES ($1, $2::bytea, $3) "
        "ON CONFLICT (untrained_fingerprint) DO UPDATE SET state = EXCLUDED.state, saved_at_ms = EXCLUDED.saved_at_ms",
        {untrained_fingerprint, pg::bytea_hex(state.data(), state.size()), std::to_string(unix_now_ms())},
        PGRES_COMMAND_OK, "saving the encoder's state");
  });
  return saved ? Status::ok() : saved.status();
}

Result<std::string> PostgresKnowledgeStore::load_encoder_state(const std::string& untrained_fingerprint) {
  std::lock_guard<std::mutex> lock(mu_);
  if (schema_version_ < 2) return std::string();
  auto rows = reading([&] {
    return run("SELECT state FROM rapidqa.encoder_states WHERE untrained_fingerprint = $1", {untrained_fingerprint},
               PGRES_TUPLES_OK, "loading the encoder's state");
  });
  if (!rows) return rows.status();
  if (PQntuples(rows->get()) == 0) return std::string();
  std::string state;
  if (!pg::bytes_from_bytea_hex(PQgetvalue(rows->get(), 0, 0), static_cast<std::size_t>(PQgetlength(rows->get(), 0, 0)),
                                state)) {
    return Status::data_loss(fmt::format("{}: the encoder's saved state is not bytea", name_));
  }
  return state;
}

Result<std::unique_ptr<StoreWatch>> PostgresKnowledgeStore::watch(StoreWatcher watcher) {
  return start_postgres_watch(uri_, name_, std::move(watcher), writer_backend_);
}

}  // namespace

Result<std::unique_ptr<KnowledgeStore>> open_postgres_store(const std::string& uri,
                                                            const KnowledgeStoreOptions& options) {
  auto store = std::make_unique<PostgresKnowledgeStore>(uri, options);
  if (Status s = store->open(); !s.is_ok()) return s;
  return std::unique_ptr<KnowledgeStore>(std::move(store));
}

}  // namespace rapidqa::store

#include "store/postgres_schema.h"

#include <fmt/format.h>

#include "store/postgres_connection.h"

namespace rapidqa::store {
namespace {

// Serializes layout changes (any 64-bit number no other application of the
// database uses).
constexpr const char* kSchemaLockKey = "7245617064510001";

// Version 1: entries and their history. Version 2: vectors per entry
// version and encoder, and encoders' learned state. Each step runs only
// when the layout is older, and says so in schema_version.
constexpr const char* kCreateAndMigrate =
    "BEGIN;"
    "SELECT pg_advisory_xact_lock({lock});"
    "CREATE SCHEMA IF NOT EXISTS rapidqa;"
    "CREATE TABLE IF NOT EXISTS rapidqa.schema_version(version integer NOT NULL);"
    "INSERT INTO rapidqa.schema_version SELECT 1 WHERE NOT EXISTS (SELECT 1 FROM rapidqa.schema_version);"
    "CREATE TABLE IF NOT EXISTS rapidqa.entry_versions("
    "  entry_id text NOT NULL, version bigint NOT NULL, removed boolean NOT NULL,"
    "  body text NOT NULL, committed_at_ms bigint NOT NULL, PRIMARY KEY (entry_id, version));"
    "CREATE TABLE IF NOT EXISTS rapidqa.current_entries("
    "  entry_id text PRIMARY KEY, version bigint NOT NULL, body text NOT NULL);"
    "DO $migrate$ BEGIN"
    "  IF (SELECT max(version) FROM rapidqa.schema_version) < 2 THEN"
    "    CREATE TABLE rapidqa.encoder_fingerprints(id bigserial PRIMARY KEY, fingerprint text NOT NULL UNIQUE);"
    "    CREATE TABLE rapidqa.phrasing_vectors("
    "      fingerprint_id bigint NOT NULL, entry_id text NOT NULL, version bigint NOT NULL,"
    "      dimension integer NOT NULL, vectors bytea NOT NULL,"
    "      PRIMARY KEY (fingerprint_id, entry_id, version));"
    "    CREATE TABLE rapidqa.encoder_states("
    "      untrained_fingerprint text PRIMARY KEY, state bytea NOT NULL, saved_at_ms bigint NOT NULL);"
    "    UPDATE rapidqa.schema_version SET version = 2;"
    "  END IF;"
    "END $migrate$;"
    "COMMIT;";

}  // namespace

Result<std::int64_t> create_or_migrate_postgres_schema(PGconn* connection, const std::string& name,
                                                       bool read_only) {
  if (!read_only) {
    const std::string sql = fmt::format(kCreateAndMigrate, fmt::arg("lock", kSchemaLockKey));
    auto created = pg::exec(connection, sql.c_str(), PGRES_COMMAND_OK, name, "creating or migrating the schema");
    if (!created) {
      if (!pg::lost(connection)) (void)pg::exec(connection, "ROLLBACK", PGRES_COMMAND_OK, name, "rolling back");
      return created.status();
    }
  }
  auto exists = pg::exec(connection, "SELECT to_regclass('rapidqa.schema_version') IS NOT NULL", PGRES_TUPLES_OK,
                         name, "reading the schema");
  if (!exists) return exists.status();
  if (pg::text_at(exists->get(), 0, 0) != "t") {
    return Status::failed_precondition(fmt::format("{}: the store is empty (never opened for writing)", name));
  }
  auto version = pg::exec(connection, "SELECT max(version) FROM rapidqa.schema_version", PGRES_TUPLES_OK, name,
                          "reading the schema version");
  if (!version) return version.status();
  const std::int64_t found = pg::int64_at(version->get(), 0, 0);
  if (found > kPostgresSchemaVersion) {
    return Status::failed_precondition(fmt::format("{}: written by a newer rapidqa (schema version {}, this one "
                                                   "reads up to {})",
                                                   name, found, kPostgresSchemaVersion));
  }
  if (found < 1) return Status::data_loss(fmt::format("{}: the schema_version table is empty", name));
  return found;
}

}  // namespace rapidqa::store

// The PostgreSQL store's layout (schema "rapidqa") and its migrations, and
// the change channel its commits notify on.
//
// Thread safety: none of its own; one connection per call.
#pragma once

#include <libpq-fe.h>

#include <cstdint>
#include <string>

#include "rapidqa/status.h"

namespace rapidqa::store {

// The layout this library writes, and the newest it reads.
constexpr std::int64_t kPostgresSchemaVersion = 2;
// Every commit NOTIFYs this channel with the ids it touched.
constexpr const char* kChangeChannel = "rapidqa_changes";

// Creates the layout in a database without one, or migrates an older one
// to kPostgresSchemaVersion, in one transaction under an advisory lock (so
// instances starting together do it once). Returns the database's layout
// version; a read-only open changes nothing. kFailedPrecondition for an
// empty database opened read-only or a layout newer than this library's.
Result<std::int64_t> create_or_migrate_postgres_schema(PGconn* connection, const std::string& store_name,
                                                       bool read_only);

}  // namespace rapidqa::store

// The libpq plumbing the PostgreSQL store shares between its writing
// connection and its listening one: owning handles, connecting with sane
// time-outs, and failed calls turned into a Status whose code says what the
// caller can do (a lost connection or a busy lock is kUnavailable: retry).
//
// Thread safety: a PGconn is used by one thread at a time; these functions
// keep no state of their own.
#pragma once

#include <libpq-fe.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "rapidqa/status.h"

namespace rapidqa::store::pg {

struct ConnectionCloser {
  void operator()(PGconn* connection) const { PQfinish(connection); }
};
struct ResultClearer {
  void operator()(PGresult* result) const { PQclear(result); }
};
using ConnectionPtr = std::unique_ptr<PGconn, ConnectionCloser>;
using ResultPtr = std::unique_ptr<PGresult, ResultClearer>;

// Connects to a libpq connection URI; kUnavailable with the server's
// reason when it cannot. store_name: how messages name the store.
Result<ConnectionPtr> connect(const std::string& uri, const std::string& store_name);

// Whether the connection is gone (the server stopped, the network broke).
inline bool lost(PGconn* connection) { return connection == nullptr || PQstatus(connection) == CONNECTION_BAD; }

// A failed call as a Status: kUnavailable for a lost connection, a server
// shutting down, a lock time-out or a serialization failure;
// kResourceExhausted for a full disk or too many connections; kDataLoss for
// damaged data; kFailedPrecondition for a read-only transaction or missing
// privileges; kInternal otherwise. The message names the store, what was
// being done, the server's reason and its SQLSTATE.
Status error_status(PGconn* connection, const PGresult* result, const std::string& store_name,
                    const std::string& what);

// Runs SQL without parameters (several statements may be given), expecting
// `expected` (PGRES_COMMAND_OK or PGRES_TUPLES_OK) from the last.
Result<ResultPtr> exec(PGconn* connection, const char* sql, ExecStatusType expected, const std::string& store_name,
                       const std::string& what);

// Runs one statement with text parameters ($1, $2, ...), unprepared, so a
// reconnected session needs no set-up. Results come as text, or with
// binary_results in PostgreSQL's binary forms (big-endian integers, bytea
// as its bytes: half the bytes of hex and no decoding, for vectors).
Result<ResultPtr> exec_params(PGconn* connection, const char* sql, const std::vector<std::string>& params,
                              ExecStatusType expected, const std::string& store_name, const std::string& what,
                              bool binary_results = false);

// A binary-result column as a big-endian integer of its width (2, 4 or 8
// bytes); false for any other width (or NULL).
bool binary_int_at(const PGresult* result, int row, int column, std::int64_t& out);

// A PostgreSQL array literal of text values ('{"a","b\"c"}'), for passing
// many values as one parameter (= ANY($1::text[]), unnest($1::text[])).
std::string text_array(const std::vector<std::string>& values);

// Bytes as bytea's hex text form ("\\x0a1b..."), for a parameter or an
// element of text_array; and back (false when the text is not that form).
std::string bytea_hex(const void* data, std::size_t size);
bool bytes_from_bytea_hex(const char* text, std::size_t length, std::string& out);

// A column of a row as text ("" when NULL) or as an integer (0 when NULL).
std::string text_at(const PGresult* result, int row, int column);
std::int64_t int64_at(const PGresult* result, int row, int column);

}  // namespace rapidqa::store::pg

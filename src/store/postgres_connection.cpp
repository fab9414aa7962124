#include "store/postgres_connection.h"

#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

namespace rapidqa::store::pg {
namespace {

std::string trimmed(const char* message) {
  std::string text = message ? message : "";
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text.empty() ? "no reason given" : text;
}

bool starts_with(const char* text, const char* prefix) {
  return text && std::strncmp(text, prefix, std::strlen(prefix)) == 0;
}

}  // namespace

Result<ConnectionPtr> connect(const std::string& uri, const std::string& store_name) {
  // Processed in order, the last value of a key word wins: the URI (after
  // expansion) overrides these defaults.
  const char* const keywords[] = {"connect_timeout", "keepalives", "keepalives_idle", "fallback_application_name",
                                  "dbname", nullptr};
  const char* const values[] = {"10", "1", "30", "rapidqa", uri.c_str(), nullptr};
  ConnectionPtr connection(PQconnectdbParams(keywords, values, /*expand_dbname=*/1));
  if (!connection) return Status::resource_exhausted(fmt::format("{}: out of memory connecting", store_name));
  if (PQstatus(connection.get()) != CONNECTION_OK) {
    return Status::unavailable(fmt::format("{}: cannot connect to the server: {}", store_name,
                                           trimmed(PQerrorMessage(connection.get()))));
  }
  // The server's notices ("relation already exists, skipping") are not the
  // library's to print; errors come back as Status.
  PQsetNoticeProcessor(connection.get(), [](void*, const char*) {}, nullptr);
  return connection;
}

Status error_status(PGconn* connection, const PGresult* result, const std::string& store_name,
                    const std::string& what) {
  const char* sqlstate = result ? PQresultErrorField(result, PG_DIAG_SQLSTATE) : nullptr;
  const std::string reason =
      trimmed(result && *PQresultErrorMessage(result) ? PQresultErrorMessage(result) : PQerrorMessage(connection));
  if (lost(connection)) {
    return Status::unavailable(fmt::format("{}: {}: the connection to the server was lost ({}); the next call "
                                           "reconnects",
                                           store_name, what, reason));
  }
  const std::string message =
      fmt::format("{}: {}: {}{}", store_name, what, reason, sqlstate ? fmt::format(" (SQLSTATE {})", sqlstate) : "");
  if (starts_with(sqlstate, "08") || starts_with(sqlstate, "57P") || starts_with(sqlstate, "55P03") ||
      starts_with(sqlstate, "40")) {
    return Status::unavailable(message);
  }
  if (starts_with(sqlstate, "53")) return Status::resource_exhausted(message);
  if (starts_with(sqlstate, "XX001") || starts_with(sqlstate, "XX002")) return Status::data_loss(message);
  if (starts_with(sqlstate, "22")) return Status::invalid_argument(message);
  if (starts_with(sqlstate, "25006") || starts_with(sqlstate, "42501")) return Status::failed_precondition(message);
  return Status::internal(message);
}

namespace {

Result<ResultPtr> checked(PGconn* connection, PGresult* raw, ExecStatusType expected, const std::string& store_name,
                          const std::string& what) {
  ResultPtr result(raw);
  if (result && PQresultStatus(result.get()) == expected) return result;
  return error_status(connection, result.get(), store_name, what);
}

}  // namespace

Result<ResultPtr> exec(PGconn* connection, const char* sql, ExecStatusType expected, const std::string& store_name,
                       const std::string& what) {
  return checked(connection, PQexec(connection, sql), expected, store_name, what);
}

Result<ResultPtr> exec_params(PGconn* connection, const char* sql, const std::vector<std::string>& params,
                              ExecStatusType expected, const std::string& store_name, const std::string& what,
                              bool binary_results) {
  std::vector<const char*> values;
  values.reserve(params.size());
  for (const auto& p : params) values.push_back(p.c_str());
  PGresult* raw = PQexecParams(connection, sql, static_cast<int>(values.size()), nullptr, values.data(), nullptr,
                               nullptr, /*resultFormat=*/binary_results ? 1 : 0);
  return checked(connection, raw, expected, store_name, what);
}

bool binary_int_at(const PGresult* result, int row, int column, std::int64_t& out) {
  const int length = PQgetlength(result, row, column);
  if (PQgetisnull(result, row, column) || (length != 2 && length != 4 && length != 8)) return false;
  const auto* bytes = reinterpret_cast<const unsigned char*>(PQgetvalue(result, row, column));
  std::uint64_t value = 0;
  for (int i = 0; i < length; ++i) value = value << 8 | bytes[i];
  // Sign-extend from the column's width.
  const int unused_bits = 64 - 8 * length;
  out = static_cast<std::int64_t>(value << unused_bits) >> unused_bits;
  return true;
}

std::string text_array(const std::vector<std::string>& values) {
  std::string literal = "{";
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i) literal += ',';
    literal += '"';
    for (const char c : values[i]) {
      if (c == '"' || c == '\\') literal += '\\';
      literal += c;
    }
    literal += '"';
  }
  literal += '}';
  return literal;
}

std::string bytea_hex(const void* data, std::size_t size) {
  static const char digits[] = "0123456789abcdef";
  const auto* bytes = static_cast<const unsigned char*>(data);
  std::string text(2 + 2 * size, '\0');
  text[0] = '\\';
  text[1] = 'x';
  for (std::size_t i = 0; i < size; ++i) {
    text[2 + 2 * i] = digits[bytes[i] >> 4];
    text[3 + 2 * i] = digits[bytes[i] & 0xf];
  }
  return text;
}

bool bytes_from_bytea_hex(const char* text, std::size_t length, std::string& out) {
  if (length < 2 || text[0] != '\\' || text[1] != 'x' || length % 2 != 0) return false;
  const auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  out.resize((length - 2) / 2);
  for (std::size_t i = 0; i < out.size(); ++i) {
    const int high = nibble(text[2 + 2 * i]), low = nibble(text[3 + 2 * i]);
    if (high < 0 || low < 0) return false;
    out[i] = static_cast<char>(high << 4 | low);
  }
  return true;
}

std::string text_at(const PGresult* result, int row, int column) {
  if (PQgetisnull(result, row, column)) return "";
  return std::string(PQgetvalue(result, row, column), static_cast<std::size_t>(PQgetlength(result, row, column)));
}

std::int64_t int64_at(const PGresult* result, int row, int column) {
  if (PQgetisnull(result, row, column)) return 0;
  return std::strtoll(PQgetvalue(result, row, column), nullptr, 10);
}

}  // namespace rapidqa::store::pg

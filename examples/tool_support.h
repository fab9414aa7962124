// What every command-line tool shares: exceptions become one clean error
// line instead of an abort, and JSON output never throws on text that is
// not valid UTF-8 (a question typed by a user, a byte from a hostile file).
#pragma once

#include <cstdio>
#include <exception>
#include <new>
#include <string>

#include <nlohmann/json.hpp>
#include <rapidqa/compute_runtime.h>

namespace rapidqa::tools {

// Runs a tool's body; any exception that escapes it (a bug, running out of
// memory) is reported on stderr as "NAME: ..." and gives exit code 1.
template <typename Body>
int run_tool(const char* name, Body&& body) noexcept {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "%s: out of memory\n", name);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: internal error: %.500s\n", name, e.what());  // a message may quote input
  } catch (...) {
    std::fprintf(stderr, "%s: internal error (unknown exception)\n", name);
  }
  return 1;
}

// One line of JSON; invalid UTF-8 in any string is replaced by U+FFFD.
inline std::string json_line(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// A --threads value as the runtime's int: -1 for anything beyond what the
// runtime could accept (casting a huge double to int is undefined), which
// configure_compute_threads then refuses, naming the limit.
template <typename Number>
int thread_count_arg(Number value) {
  const double v = static_cast<double>(value);
  return v >= 0 && v <= static_cast<double>(max_compute_threads()) ? static_cast<int>(v) : max_compute_threads() + 1;
}

}  // namespace rapidqa::tools

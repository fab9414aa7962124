// Log: where the library reports what a caller cannot see in a return value
// (a lost connection to Redis, a background rebuild that failed). The
// library never logs on the request path.
//
// Thread safety: a LogSink may be called from any of the library's threads
// at once; the sinks below are thread-safe.
#pragma once

#include <functional>
#include <string>

#include "rapidqa/export.h"

namespace rapidqa {

enum class LogLevel { kInfo, kWarning, kError };
RAPIDQA_EXPORT const char* log_level_name(LogLevel level) noexcept;  // "info", "warning", "error"

// Receives one message (no trailing newline). Must not call back into the
// object that logs.
using LogSink = std::function<void(LogLevel level, const std::string& message)>;

// Writes "rapidqa: <level>: <message>" lines to standard error.
RAPIDQA_EXPORT LogSink stderr_log_sink();

}  // namespace rapidqa

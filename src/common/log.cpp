#include "rapidqa/log.h"

#include <cstdio>
#include <mutex>

namespace rapidqa {

const char* log_level_name(LogLevel level) noexcept {
  switch (level) {
    case LogLevel::kInfo: return "info";
    case LogLevel::kWarning: return "warning";
    case LogLevel::kError: return "error";
  }
  return "unknown";
}

LogSink stderr_log_sink() {
  return [](LogLevel level, const std::string& message) {
    // One fprintf per line keeps lines from different threads whole.
    std::fprintf(stderr, "rapidqa: %s: %s\n", log_level_name(level), message.c_str());
  };
}

}  // namespace rapidqa

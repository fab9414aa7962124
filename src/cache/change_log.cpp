#include "cache/change_log.h"

#include <charconv>
#include <limits>

#include <fmt/format.h>

namespace rapidqa::cache {
namespace {

bool parse_number(std::string_view text, std::uint64_t& out) {
  if (text.empty()) return false;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), out);
  return error == std::errc() && end == text.data() + text.size();
}

}  // namespace

std::optional<StreamId> StreamId::parse(std::string_view text) {
  const auto dash = text.find('-');
  if (dash == std::string_view::npos) return std::nullopt;
  StreamId id;
  if (!parse_number(text.substr(0, dash), id.ms) || !parse_number(text.substr(dash + 1), id.seq)) {
    return std::nullopt;
  }
  return id;
}

std::string StreamId::to_string() const { return fmt::format("{}-{}", ms, seq); }

StreamId StreamId::next() const {
  if (seq == std::numeric_limits<std::uint64_t>::max()) return {ms + 1, 0};
  return {ms, seq + 1};
}

std::string missed_changes_reason(StreamId cursor, const ChangeLogState& log) {
  const StreamId origin{};
  const std::string last = cursor.to_string();
  if (!log.exists) {
    if (cursor == origin) return "";
    return fmt::format("the change log is gone from Redis (deleted, or Redis restarted without it) "
                       "after change {} was seen",
                       last);
  }
  if (log.last_generated < cursor) {
    return fmt::format("the change log in Redis ends at {}, before change {} this instance saw "
                       "(Redis restored from an older copy?)",
                       log.last_generated.to_string(), last);
  }
  if (log.max_deleted && *log.max_deleted > cursor) {
    return fmt::format("change {} was deleted from the change log after change {} was seen",
                       log.max_deleted->to_string(), last);
  }
  if (cursor == origin) {
    // Nothing of the log was seen, so every entry it ever held counts.
    if (log.entries_added) {
      if (*log.entries_added > log.length) {
        return fmt::format("the change log was trimmed ({} of {} changes left) before this instance read it",
                           log.length, *log.entries_added);
      }
      return "";
    }
    if (log.length > 0 || log.last_generated > origin) {
      return "this Redis (before 7.0) cannot tell whether the change log was trimmed before this instance read it";
    }
    return "";
  }
  if (log.length == 0) {
    if (log.last_generated > cursor) {
      return fmt::format("the change log was emptied after change {} was seen", last);
    }
    return "";
  }
  if (log.first_entry > cursor) {
    return fmt::format("the change log was trimmed past change {} (it now starts at {}); "
                       "a longer change_log_length keeps more",
                       last, log.first_entry.to_string());
  }
  return "";
}

}  // namespace rapidqa::cache

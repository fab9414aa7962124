// The change log in Redis: a capped stream that holds every knowledge change
// the instances published, so one that was disconnected can replay what it
// missed. This file knows stream ids and decides, from what Redis reports
// about the stream, whether a replay from a given id is complete.
//
// Thread safety: value types and pure functions; thread-compatible.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace rapidqa::cache {

// A Redis stream entry id "<milliseconds>-<sequence>". Ids grow with every
// entry added, so they order the log.
struct StreamId {
  std::uint64_t ms = 0;
  std::uint64_t seq = 0;

  // nullopt unless the text is two decimal numbers joined by '-'.
  static std::optional<StreamId> parse(std::string_view text);
  std::string to_string() const;
  // The smallest id after this one (XRANGE's start is inclusive).
  StreamId next() const;

  friend bool operator==(StreamId a, StreamId b) { return a.ms == b.ms && a.seq == b.seq; }
  friend bool operator!=(StreamId a, StreamId b) { return !(a == b); }
  friend bool operator<(StreamId a, StreamId b) { return a.ms != b.ms ? a.ms < b.ms : a.seq < b.seq; }
  friend bool operator>(StreamId a, StreamId b) { return b < a; }
  friend bool operator<=(StreamId a, StreamId b) { return !(b < a); }
};

// What XINFO STREAM reports about the log. Redis 7 adds the optional fields.
struct ChangeLogState {
  bool exists = false;                         // false: no such key
  std::uint64_t length = 0;                    // entries held now
  StreamId first_entry;                        // valid when length > 0
  StreamId last_generated;                     // the newest id ever added
  std::optional<StreamId> max_deleted;         // newest id removed by XDEL (Redis >= 7)
  std::optional<std::uint64_t> entries_added;  // entries ever added (Redis >= 7)
};

// Why a replay of every entry after `cursor` may have missed some, or ""
// when the log provably still holds them all. Trimming removes entries from
// the head only, so the log is complete after the cursor while an entry at
// or before the cursor is still in it. A cursor of 0-0 (the log was empty
// or absent when this instance last looked) needs Redis 7's count of
// entries ever added; without it the answer is "maybe missed".
std::string missed_changes_reason(StreamId cursor, const ChangeLogState& log);

}  // namespace rapidqa::cache

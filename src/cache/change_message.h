// The wire format of a knowledge change between instances: one JSON object,
// the same in the Redis stream and on the pub/sub channel,
//
//   {"v":1,"origin":"4f1c...","kind":"upsert","entry_id":"faq-1","version":3,
//    "entry":{...the entry as a knowledge-file line...}}
//
// kind is upsert (with entry), remove, invalidate, reload, or gap: "the
// origin dropped changes it could not send; drop every cached answer".
// On the channel the object also carries "stream_id" first, the id of the
// stream entry holding the same change, so a subscriber knows how far the
// log it has seen goes. A reader refuses a format version it does not know
// rather than guess at its meaning.
//
// Thread safety: pure functions; thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "cache/knowledge_change.h"
#include "rapidqa/status.h"

namespace rapidqa::cache {

inline constexpr int kChangeMessageVersion = 1;

struct ChangeMessage {
  KnowledgeChange change;     // origin is always set; the rest is empty for a gap
  bool origin_dropped_changes = false;  // kind "gap"
  std::string stream_id;      // "" unless the message came through the channel
};

std::string encode_change_message(const KnowledgeChange& change);
std::string encode_gap_message(const std::string& origin);
// kInvalidArgument naming what is wrong (not JSON, unknown version, a
// missing or mistyped field, a bad entry).
Result<ChangeMessage> parse_change_message(std::string_view text);

}  // namespace rapidqa::cache

// The common knowledge line, read fast: a JSON object of the entry's string
// fields (id, question, answer, context) and string arrays (alternates,
// tags), each at most once, as rapidqa writes them into stores and files.
// A restart reads every stored entry this way (a million at a large
// store), where a general JSON parser building a document per entry took
// most of the restart.
//
// Anything else (numbers such as cache_ttl_seconds, null, other types,
// unknown or repeated keys, lone surrogate escapes, malformed text) makes it
// return false without a reason: the caller then parses the line with the
// general parser, which says what is wrong. The strings are not checked
// here beyond JSON's own rules (validate_entry checks them after).
//
// Thread safety: a free function, no shared state.
#pragma once

#include <string_view>

#include "rapidqa/knowledge_file.h"

namespace rapidqa::detail {

// Fills `entry` (expected fresh) and returns true when `line` is such an
// object holding id, question and answer; false otherwise (`entry` then
// holds whatever was read before the reader stopped).
bool read_common_entry(std::string_view line, KnowledgeEntry& entry);

// parse_knowledge_entry_json (knowledge_file.h) on a view: the fast reader
// for the common line, the general parser with its messages for the rest.
Result<KnowledgeEntry> parse_knowledge_entry(std::string_view json_object);

}  // namespace rapidqa::detail

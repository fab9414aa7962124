// KnowledgeEntry: one FAQ item of the knowledge base, as read from a JSONL
// line or added at run time.
//
// Thread safety: value type; thread-compatible.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace rapidqa {

struct KnowledgeEntry {
  std::string id;                       // unique, non-empty, at most 256 bytes
  std::string question;                 // canonical phrasing, non-empty
  std::vector<std::string> alternates;  // other phrasings of the same question
  std::string answer;                   // the FAQ answer, non-empty
  std::string context;                  // optional passage (for an extractive reader)
  std::vector<std::string> tags;        // optional labels
  // Assigned by the engine: 1 when first added, +1 on every update. Cached
  // answers record it so a changed entry is never served from a cache.
  std::uint64_t version = 0;
  // How long answers built from this entry may stay in any cache tier, when
  // shorter than the tier's own TTL (volatile facts: opening hours, stock
  // levels). 0 = the tiers' TTLs. JSONL field `cache_ttl_seconds`.
  std::chrono::milliseconds cache_ttl{0};
};

}  // namespace rapidqa

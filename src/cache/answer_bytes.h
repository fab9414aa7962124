// What a cached Answer costs in memory, for the tiers' byte bounds. An
// estimate (allocator overhead is not counted) that grows with everything
// the answer holds, so a tier of long answers holds fewer of them.
#pragma once

#include <cstddef>

#include "rapidqa/answer.h"

namespace rapidqa::cache {

inline std::size_t answer_bytes(const Answer& a) {
  std::size_t bytes = sizeof(Answer) + a.text.capacity() + a.degraded_reason.capacity() +
                      a.near_miss_reason.capacity() + a.matches.capacity() * sizeof(EntryMatch);
  for (const auto& m : a.matches) bytes += m.entry_id.capacity();
  if (a.extracted) bytes += a.extracted->entry_id.capacity();
  return bytes;
}

}  // namespace rapidqa::cache

// Whether a cached Answer was built from a given knowledge entry.
#pragma once

#include <algorithm>
#include <string>

#include "rapidqa/answer.h"

namespace rapidqa::cache {

inline bool built_from(const Answer& answer, const std::string& entry_id) {
  return std::any_of(answer.matches.begin(), answer.matches.end(),
                     [&](const EntryMatch& m) { return m.entry_id == entry_id; });
}

}  // namespace rapidqa::cache

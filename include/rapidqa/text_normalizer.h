// Text normalisation: the first pipeline stage. Two questions that differ
// only in width, case, Unicode composition, spacing or punctuation normalise
// to the same string, which is the exact-cache key and the encoder's input.
//
// Thread safety: free functions; thread-safe.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "rapidqa/export.h"
#include "rapidqa/status.h"

namespace rapidqa {

struct NormalizeOptions {
  bool case_fold = true;           // Unicode case folding ("Straße" -> "strasse")
  bool strip_punctuation = true;   // punctuation becomes a word break ("reset?" -> "reset")
  std::size_t max_bytes = 4096;    // longer input is refused (kOutOfRange), never truncated
};

// NFKC (which also maps full-width forms to half-width), optional case
// folding, control characters removed, punctuation turned into spaces
// (apostrophes inside words are dropped: "can't" -> "cant"), runs of white
// space collapsed to one ASCII space, trimmed.
// Errors: kInvalidArgument for invalid UTF-8 (with the byte offset), or for
// text that is empty after normalisation; kOutOfRange when longer than
// max_bytes.
RAPIDQA_EXPORT Result<std::string> normalize_text(std::string_view text,
                                                  const NormalizeOptions& options = {});

}  // namespace rapidqa

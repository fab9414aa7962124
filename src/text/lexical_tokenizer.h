// Splits normalised text into the lexical units the HashingEncoder hashes:
// words (runs of non-space, non-CJK characters) and single CJK characters.
#pragma once

#include <string_view>
#include <vector>

namespace rapidqa::text {

struct LexicalToken {
  std::string_view text;  // a view into the tokenised string
  bool cjk = false;       // one CJK character
};

// Text must be valid UTF-8 (normalised text always is).
std::vector<LexicalToken> lexical_tokens(std::string_view text);

}  // namespace rapidqa::text

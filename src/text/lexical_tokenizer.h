// Splits normalised text into the lexical units the HashingEncoder hashes:
// words (runs of non-space, non-CJK characters) and single CJK characters.
#pragma once

#include <string_view>
#include <vector>

#include "text/utf8.h"

namespace rapidqa::text {

struct LexicalToken {
  std::string_view text;  // a view into the tokenised string
  bool cjk = false;       // one CJK character
};

// Calls visit(LexicalToken) for each token in order, keeping none: for
// callers that look at one token at a time. Text must be valid UTF-8.
template <typename Visit>
void for_each_lexical_token(std::string_view text, Visit&& visit) {
  std::size_t word_start = std::string_view::npos;
  auto close_word = [&](std::size_t end) {
    if (word_start != std::string_view::npos) {
      visit(LexicalToken{text.substr(word_start, end - word_start), false});
      word_start = std::string_view::npos;
    }
  };
  for (std::size_t pos = 0; pos < text.size();) {
    std::size_t len = 0;
    const std::int32_t cp = decode_at(text, pos, len);
    if (is_space(cp)) {
      close_word(pos);
    } else if (!is_ascii(cp) && is_cjk(cp)) {
      close_word(pos);
      visit(LexicalToken{text.substr(pos, len), true});
    } else if (word_start == std::string_view::npos) {
      word_start = pos;
    }
    pos += len;
  }
  close_word(text.size());
}

// Every token, in order (normalised text always is valid UTF-8).
std::vector<LexicalToken> lexical_tokens(std::string_view text);

}  // namespace rapidqa::text

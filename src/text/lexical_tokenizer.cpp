#include "text/lexical_tokenizer.h"

#include "text/utf8.h"

namespace rapidqa::text {

std::vector<LexicalToken> lexical_tokens(std::string_view text) {
  std::vector<LexicalToken> tokens;
  std::size_t word_start = std::string_view::npos;
  auto close_word = [&](std::size_t end) {
    if (word_start != std::string_view::npos) {
      tokens.push_back({text.substr(word_start, end - word_start), false});
      word_start = std::string_view::npos;
    }
  };
  for (std::size_t pos = 0; pos < text.size();) {
    std::size_t len = 0;
    const std::int32_t cp = decode_at(text, pos, len);
    if (is_space(cp)) {
      close_word(pos);
    } else if (is_cjk(cp)) {
      close_word(pos);
      tokens.push_back({text.substr(pos, len), true});
    } else if (word_start == std::string_view::npos) {
      word_start = pos;
    }
    pos += len;
  }
  close_word(text.size());
  return tokens;
}

}  // namespace rapidqa::text

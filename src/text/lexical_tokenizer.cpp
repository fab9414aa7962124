#include "text/lexical_tokenizer.h"

namespace rapidqa::text {

std::vector<LexicalToken> lexical_tokens(std::string_view text) {
  std::vector<LexicalToken> tokens;
  for_each_lexical_token(text, [&](const LexicalToken& token) { tokens.push_back(token); });
  return tokens;
}

}  // namespace rapidqa::text

// NearMissGuard: refuses a semantic-cache hit between two questions that are
// close as vectors but ask opposite things: "how do I open an account" and
// "how do I close an account", "为什么不能登录" and "为什么能登录", "transfer
// 100" and "transfer 1000". Lexical and embedding encoders alike score such
// pairs high, because they share almost every word.
//
// Thread safety: immutable after construction; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace rapidqa::cache {

class NearMissGuard {
 public:
  // The built-in English and Chinese negations and opposite key terms.
  NearMissGuard();

  // Both questions as normalize_text() returns them. Returns the reason
  // ("negation", "open/close", "number") when they must not share an
  // answer, or an empty string when they may.
  std::string conflict(std::string_view cached_question, std::string_view new_question) const;

 private:
  // Which term sets a question touches, one bit each: bit 0 negation, then
  // per opposite pair i, bit 1 + 2i its left side and bit 2 + 2i its right.
  using TermFlags = std::uint64_t;
  TermFlags flags_of(std::string_view question) const;
  void add_term(const std::string& term, TermFlags flag);

  std::vector<std::pair<std::string, std::string>> opposite_names_;  // each pair's first terms, for the reason
  // English terms, whole words, in an open-addressing table (a power of two
  // of slots, at most half full, linear probing by the word's FNV hash): a
  // word of the question costs one hash and one compare, and no string.
  struct WordSlot {
    std::string word;  // empty: a free slot
    TermFlags flags = 0;
  };
  std::vector<WordSlot> word_flags_;
  const WordSlot* find_word(std::string_view word) const;
  WordSlot& slot_for(std::string_view word);
  std::vector<std::pair<std::string, TermFlags>> cjk_flags_;         // Chinese terms: substrings
};

}  // namespace rapidqa::cache

// Small UTF-8 helpers over utf8proc shared by the text stage.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace rapidqa::text {

// Byte offset of the first invalid UTF-8 sequence, or npos if valid.
std::size_t find_invalid_utf8(std::string_view text);

// Decodes the code point at text[pos]; sets length to its byte count.
// Text must be valid UTF-8.
std::int32_t decode_at(std::string_view text, std::size_t pos, std::size_t& length);

void append_utf8(std::string& out, std::int32_t code_point);

// A word marked at both ends ("<word>") and the byte offset of each of its
// code points, then its size: the character n-grams of a word (the
// HashingEncoder's, the BM25 index's trigrams) never split a character.
struct MarkedWord {
  std::string text;
  std::vector<std::size_t> starts;
  std::size_t characters() const { return starts.size() - 1; }
  // The n characters from character `first`.
  std::string_view gram(std::size_t first, std::size_t n) const {
    return std::string_view(text).substr(starts[first], starts[first + n] - starts[first]);
  }
};
// The word must be valid UTF-8.
MarkedWord mark_word(std::string_view word);

// Each code point lower-cased by its Unicode simple mapping (Python's
// str.lower() but for its few one-to-many mappings). Text must be valid
// UTF-8.
std::string lower_case(std::string_view text);

// CJK ideographs (the ranges BERT's tokenizer splits one by one) and kana.
bool is_cjk(std::int32_t code_point);

// Unicode general category P* (punctuation).
bool is_punctuation(std::int32_t code_point);
// Unicode Z* categories and ASCII white space.
bool is_space(std::int32_t code_point);
// Unicode's White_Space property (Rust's char::is_whitespace, and \s in the
// regular expressions Hugging Face's tokenizers use): is_space plus U+0085.
bool is_white_space(std::int32_t code_point);
// Unicode general categories L* (letters) and N* (numbers): \p{L}, \p{N}.
bool is_letter(std::int32_t code_point);
bool is_number(std::int32_t code_point);
// How many code points of valid UTF-8 text are letters or numbers: what a
// question offers to match on (an emoji or "?!" offers nothing).
std::size_t count_letters_and_numbers(std::string_view text);

}  // namespace rapidqa::text

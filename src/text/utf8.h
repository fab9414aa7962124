// Small UTF-8 helpers over utf8proc shared by the text stage.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace rapidqa::text {

// Byte offset of the first invalid UTF-8 sequence, or npos if valid.
std::size_t find_invalid_utf8(std::string_view text);

// Decodes a code point of two or more bytes at text[pos] (decode_at's slow
// path, out of line).
std::int32_t decode_multibyte_at(std::string_view text, std::size_t pos, std::size_t& length);

// Decodes the code point at text[pos]; sets length to its byte count.
// Text must be valid UTF-8. Inline: questions are mostly ASCII, and every
// stage from normalising to hashing walks them a code point at a time.
inline std::int32_t decode_at(std::string_view text, std::size_t pos, std::size_t& length) {
  const auto byte = static_cast<unsigned char>(text[pos]);
  if (byte < 0x80) {
    length = 1;
    return byte;
  }
  return decode_multibyte_at(text, pos, length);
}

void append_multibyte_utf8(std::string& out, std::int32_t code_point);
inline void append_utf8(std::string& out, std::int32_t code_point) {
  if (static_cast<std::uint32_t>(code_point) < 0x80) {
    out.push_back(static_cast<char>(code_point));
    return;
  }
  append_multibyte_utf8(out, code_point);
}

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
// The same into `marked`, reusing its memory (one per question, not one per
// word).
void mark_word_into(std::string_view word, MarkedWord& marked);

// Each code point lower-cased by its Unicode simple mapping (Python's
// str.lower() but for its few one-to-many mappings). Text must be valid
// UTF-8.
std::string lower_case(std::string_view text);

// CJK ideographs (the ranges BERT's tokenizer splits one by one) and kana.
bool is_cjk(std::int32_t code_point);

// The character classes below for the 128 ASCII code points, one bit each,
// as Unicode's tables give them (a test compares every one with utf8proc):
// the classes of an ASCII character cost a table read instead of a call
// into utf8proc.
namespace ascii {
enum Class : std::uint8_t { kSpace = 1, kPunctuation = 2, kLetter = 4, kNumber = 8 };
constexpr std::array<std::uint8_t, 128> make_classes() {
  std::array<std::uint8_t, 128> classes{};
  for (char c : {' ', '\t', '\n', '\r', '\v', '\f'}) classes[static_cast<unsigned char>(c)] |= kSpace;
  // Unicode's P* in ASCII; $ + < = > ^ ` | ~ are symbols (S*), not punctuation.
  for (char c : {'!', '"', '#', '%', '&', '\'', '(', ')', '*', ',', '-', '.', '/', ':', ';', '?', '@', '[', '\\', ']',
                 '_', '{', '}'}) {
    classes[static_cast<unsigned char>(c)] |= kPunctuation;
  }
  for (int c = 'a'; c <= 'z'; ++c) classes[c] |= kLetter, classes[c - 'a' + 'A'] |= kLetter;
  for (int c = '0'; c <= '9'; ++c) classes[c] |= kNumber;
  return classes;
}
inline constexpr std::array<std::uint8_t, 128> kClasses = make_classes();
inline bool is(std::int32_t code_point, Class c) { return kClasses[static_cast<std::size_t>(code_point)] & c; }
}  // namespace ascii

// The classes past ASCII (utf8proc's tables); the inline functions below
// call them only for code points of 0x80 and above.
bool is_punctuation_beyond_ascii(std::int32_t code_point);
bool is_space_beyond_ascii(std::int32_t code_point);
bool is_letter_beyond_ascii(std::int32_t code_point);
bool is_number_beyond_ascii(std::int32_t code_point);

inline bool is_ascii(std::int32_t code_point) { return static_cast<std::uint32_t>(code_point) < 0x80; }

// Unicode general category P* (punctuation).
inline bool is_punctuation(std::int32_t code_point) {
  return is_ascii(code_point) ? ascii::is(code_point, ascii::kPunctuation) : is_punctuation_beyond_ascii(code_point);
}
// Unicode Z* categories and ASCII white space.
inline bool is_space(std::int32_t code_point) {
  return is_ascii(code_point) ? ascii::is(code_point, ascii::kSpace) : is_space_beyond_ascii(code_point);
}
// Unicode's White_Space property (Rust's char::is_whitespace, and \s in the
// regular expressions Hugging Face's tokenizers use): is_space plus U+0085.
bool is_white_space(std::int32_t code_point);
// Unicode general categories L* (letters) and N* (numbers): \p{L}, \p{N}.
inline bool is_letter(std::int32_t code_point) {
  return is_ascii(code_point) ? ascii::is(code_point, ascii::kLetter) : is_letter_beyond_ascii(code_point);
}
inline bool is_number(std::int32_t code_point) {
  return is_ascii(code_point) ? ascii::is(code_point, ascii::kNumber) : is_number_beyond_ascii(code_point);
}
// How many code points of valid UTF-8 text are letters or numbers: what a
// question offers to match on (an emoji or "?!" offers nothing).
std::size_t count_letters_and_numbers(std::string_view text);

}  // namespace rapidqa::text

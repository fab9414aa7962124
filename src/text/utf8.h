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

// The byte offset of each code point of `text`, then text.size(): character
// n-grams cut at these never split a character. Text must be valid UTF-8.
std::vector<std::size_t> code_point_starts(std::string_view text);

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

}  // namespace rapidqa::text

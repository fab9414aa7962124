#include <utf8proc.h>

#include <cstdlib>
#include <memory>

#include "rapidqa/text_normalizer.h"
#include "text/utf8.h"

namespace rapidqa {
namespace text {

std::size_t find_invalid_utf8(std::string_view text) {
  std::size_t pos = 0;
  while (pos < text.size()) {
    const auto byte = static_cast<unsigned char>(text[pos]);
    if (byte < 0x80) {
      ++pos;
      continue;
    }
    utf8proc_int32_t cp = 0;
    const auto n = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(text.data() + pos),
                                    static_cast<utf8proc_ssize_t>(text.size() - pos), &cp);
    if (n <= 0 || cp < 0) return pos;
    pos += static_cast<std::size_t>(n);
  }
  return std::string_view::npos;
}

std::int32_t decode_multibyte_at(std::string_view text, std::size_t pos, std::size_t& length) {
  utf8proc_int32_t cp = 0;
  const auto n = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(text.data() + pos),
                                  static_cast<utf8proc_ssize_t>(text.size() - pos), &cp);
  length = n > 0 ? static_cast<std::size_t>(n) : 1;
  return n > 0 ? cp : 0xFFFD;
}

void mark_word_into(std::string_view word, MarkedWord& marked) {
  marked.text.clear();
  marked.starts.clear();
  marked.text.reserve(word.size() + 2);
  marked.text.push_back('<');
  marked.text.append(word);
  marked.text.push_back('>');
  marked.starts.reserve(marked.text.size() + 1);
  for (std::size_t pos = 0; pos < marked.text.size();) {
    marked.starts.push_back(pos);
    std::size_t len = 0;
    decode_at(marked.text, pos, len);
    pos += len;
  }
  marked.starts.push_back(marked.text.size());
}

MarkedWord mark_word(std::string_view word) {
  MarkedWord marked;
  mark_word_into(word, marked);
  return marked;
}

void append_multibyte_utf8(std::string& out, std::int32_t code_point) {
  utf8proc_uint8_t buf[4];
  const auto n = utf8proc_encode_char(code_point, buf);
  out.append(reinterpret_cast<const char*>(buf), static_cast<std::size_t>(n));
}

std::string lower_case(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t pos = 0; pos < text.size();) {
    std::size_t length = 0;
    const std::int32_t cp = decode_at(text, pos, length);
    append_utf8(out, utf8proc_tolower(cp));
    pos += length;
  }
  return out;
}

bool is_cjk(std::int32_t cp) {
  return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
         (cp >= 0x20000 && cp <= 0x2A6DF) || (cp >= 0x2A700 && cp <= 0x2B73F) ||
         (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B820 && cp <= 0x2CEAF) ||
         (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F) ||
         (cp >= 0x3040 && cp <= 0x30FF);  // hiragana and katakana
}

bool is_punctuation_beyond_ascii(std::int32_t cp) {
  switch (utf8proc_category(cp)) {
    case UTF8PROC_CATEGORY_PC: case UTF8PROC_CATEGORY_PD: case UTF8PROC_CATEGORY_PS:
    case UTF8PROC_CATEGORY_PE: case UTF8PROC_CATEGORY_PI: case UTF8PROC_CATEGORY_PF:
    case UTF8PROC_CATEGORY_PO:
      return true;
    default:
      return false;
  }
}

bool is_white_space(std::int32_t cp) { return cp == 0x85 || is_space(cp); }

bool is_letter_beyond_ascii(std::int32_t cp) {
  switch (utf8proc_category(cp)) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM: case UTF8PROC_CATEGORY_LO:
      return true;
    default:
      return false;
  }
}

bool is_number_beyond_ascii(std::int32_t cp) {
  switch (utf8proc_category(cp)) {
    case UTF8PROC_CATEGORY_ND: case UTF8PROC_CATEGORY_NL: case UTF8PROC_CATEGORY_NO:
      return true;
    default:
      return false;
  }
}

std::size_t count_letters_and_numbers(std::string_view text) {
  std::size_t count = 0;
  for (std::size_t pos = 0, length = 0; pos < text.size(); pos += length) {
    const std::int32_t cp = decode_at(text, pos, length);
    count += is_letter(cp) || is_number(cp);
  }
  return count;
}

bool is_space_beyond_ascii(std::int32_t cp) {
  switch (utf8proc_category(cp)) {
    case UTF8PROC_CATEGORY_ZS: case UTF8PROC_CATEGORY_ZL: case UTF8PROC_CATEGORY_ZP:
      return true;
    default:
      return false;
  }
}

}  // namespace text

namespace {

bool is_apostrophe(std::int32_t cp) { return cp == '\'' || cp == 0x2019; }
bool is_word_char(std::int32_t cp) {
  return cp > 0 && !text::is_space(cp) && !text::is_punctuation(cp);
}

// Second pass over NFKC text: punctuation to spaces (apostrophes inside a
// word dropped), white space collapsed, trimmed.
std::string clean_spacing(std::string_view in, bool strip_punctuation) {
  std::string out;
  out.reserve(in.size());
  bool pending_space = false;
  std::int32_t prev = 0;
  for (std::size_t pos = 0; pos < in.size();) {
    std::size_t len = 0;
    const std::int32_t cp = text::decode_at(in, pos, len);
    std::size_t next_len = 0;
    const std::int32_t next = pos + len < in.size() ? text::decode_at(in, pos + len, next_len) : 0;
    pos += len;
    if (cp < 0x20 || cp == 0x7F) {  // control characters left by the first pass
      pending_space = pending_space || !out.empty();
      prev = cp;
      continue;
    }
    if (strip_punctuation && is_apostrophe(cp) && is_word_char(prev) && is_word_char(next)) {
      continue;  // "can't" -> "cant"
    }
    if (text::is_space(cp) || (strip_punctuation && text::is_punctuation(cp))) {
      pending_space = pending_space || !out.empty();
      prev = cp;
      continue;
    }
    if (pending_space) out.push_back(' ');
    pending_space = false;
    text::append_utf8(out, cp);
    prev = cp;
  }
  return out;
}

}  // namespace

Result<std::string> normalize_text(std::string_view input, const NormalizeOptions& options) {
  if (input.size() > options.max_bytes) {
    return Status::out_of_range("question is " + std::to_string(input.size()) +
                                " bytes, more than the limit of " + std::to_string(options.max_bytes));
  }
  const std::size_t bad = text::find_invalid_utf8(input);
  if (bad != std::string_view::npos) {
    return Status::invalid_argument("question is not valid UTF-8 (bad byte at offset " +
                                    std::to_string(bad) + ")");
  }
  bool ascii = true;
  for (char c : input) ascii = ascii && static_cast<unsigned char>(c) < 0x80;

  std::string result;
  if (ascii) {
    // NFKC and case folding are the identity / tolower on ASCII: skip utf8proc.
    std::string lowered(input);
    if (options.case_fold) {
      for (char& c : lowered) {
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
      }
    }
    result = clean_spacing(lowered, options.strip_punctuation);
  } else {
    int flags = UTF8PROC_STABLE | UTF8PROC_COMPAT | UTF8PROC_COMPOSE | UTF8PROC_IGNORE |
                UTF8PROC_STRIPCC;
    if (options.case_fold) flags |= UTF8PROC_CASEFOLD;
    utf8proc_uint8_t* mapped = nullptr;
    const auto n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(input.data()),
                                static_cast<utf8proc_ssize_t>(input.size()), &mapped,
                                static_cast<utf8proc_option_t>(flags));
    std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> owner(mapped, &std::free);
    if (n < 0) {
      return Status::invalid_argument(std::string("question could not be normalised: ") +
                                      utf8proc_errmsg(n));
    }
    result = clean_spacing(std::string_view(reinterpret_cast<const char*>(mapped),
                                            static_cast<std::size_t>(n)),
                           options.strip_punctuation);
  }
  if (result.empty()) {
    return Status::invalid_argument("question is empty (nothing left after removing spaces and punctuation)");
  }
  return result;
}

}  // namespace rapidqa

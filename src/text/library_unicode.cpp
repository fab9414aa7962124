#include <algorithm>
#include <unordered_map>
#include <utility>

#include "text/unicode_tables.h"

namespace rapidqa::text::library_unicode {

// The generated tables (unicode_tables.cpp).
extern const CodeRange k_strip_marks[], k_bert_strip_marks[], k_bert_removed[], k_bert_spaces[], k_punctuation[], k_numeric[], k_word[],
    k_combining[];
extern const std::size_t k_strip_marks_size, k_bert_strip_marks_size, k_bert_removed_size, k_bert_spaces_size, k_punctuation_size,
    k_numeric_size, k_word_size, k_combining_size;
extern const std::int32_t k_lowercase[], k_nfd[], k_nfkd[];
extern const std::size_t k_lowercase_size, k_nfd_size, k_nfkd_size;

namespace {

bool in_ranges(const CodeRange* table, std::size_t size, std::int32_t cp) {
  const CodeRange* end = table + size;
  const CodeRange* it = std::upper_bound(table, end, cp, [](std::int32_t c, const CodeRange& r) { return c < r.first; });
  return it != table && cp <= (it - 1)->last;
}

// A flat mapping (code point, length, code points...) as a map from code
// point to its place in the table.
using Index = std::unordered_map<std::int32_t, std::pair<const std::int32_t*, std::size_t>>;
Index index_of(const std::int32_t* table, std::size_t size) {
  Index index;
  for (std::size_t i = 0; i + 1 < size;) {
    const auto length = static_cast<std::size_t>(table[i + 1]);
    index.emplace(table[i], std::pair{table + i + 2, length});
    i += 2 + length;
  }
  return index;
}

}  // namespace

bool is_strip_mark(std::int32_t cp) { return cp >= 0x300 && in_ranges(k_strip_marks, k_strip_marks_size, cp); }
bool is_bert_strip_mark(std::int32_t cp) {
  return cp >= 0x300 && in_ranges(k_bert_strip_marks, k_bert_strip_marks_size, cp);
}
bool is_bert_removed(std::int32_t cp) { return in_ranges(k_bert_removed, k_bert_removed_size, cp); }
bool is_bert_space(std::int32_t cp) { return in_ranges(k_bert_spaces, k_bert_spaces_size, cp); }
bool is_punctuation(std::int32_t cp) { return in_ranges(k_punctuation, k_punctuation_size, cp); }
bool is_numeric(std::int32_t cp) { return in_ranges(k_numeric, k_numeric_size, cp); }
bool is_word(std::int32_t cp) { return in_ranges(k_word, k_word_size, cp); }
bool has_combining_class(std::int32_t cp) { return cp >= 0x300 && in_ranges(k_combining, k_combining_size, cp); }

std::size_t lowercase(std::int32_t cp, std::int32_t out[3]) {
  if (cp >= 'A' && cp <= 'Z') {
    out[0] = cp + 32;
    return 1;
  }
  static const Index index = index_of(k_lowercase, k_lowercase_size);
  if (cp < 0x80) {
    out[0] = cp;
    return 1;
  }
  const auto it = index.find(cp);
  if (it == index.end()) {
    out[0] = cp;
    return 1;
  }
  const std::size_t n = std::min<std::size_t>(it->second.second, 3);
  std::copy_n(it->second.first, n, out);
  return n;
}

const std::int32_t* decomposition(std::int32_t cp, bool compatibility, std::size_t& count) {
  if (cp < 0xA0) return nullptr;
  static const Index canonical = index_of(k_nfd, k_nfd_size), compat = index_of(k_nfkd, k_nfkd_size);
  const Index& index = compatibility ? compat : canonical;
  const auto it = index.find(cp);
  if (it == index.end()) return nullptr;
  count = it->second.second;
  return it->second.first;
}

}  // namespace rapidqa::text::library_unicode

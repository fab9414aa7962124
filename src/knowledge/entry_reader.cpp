#include "knowledge/entry_reader.h"

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace rapidqa::detail {
namespace {

class Reader {
 public:
  explicit Reader(std::string_view text) : p_(text.data()), end_(text.data() + text.size()) {}

  void skip_space() {
    while (p_ < end_ && (*p_ == ' ' || *p_ == '\t' || *p_ == '\n' || *p_ == '\r')) ++p_;
  }
  bool take(char c) {
    skip_space();
    if (p_ == end_ || *p_ != c) return false;
    ++p_;
    return true;
  }
  bool peek(char c) {
    skip_space();
    return p_ < end_ && *p_ == c;
  }
  bool at_end() {
    skip_space();
    return p_ == end_;
  }

  // A JSON string into `out` (replacing it).
  bool string(std::string& out) {
    if (!take('"')) return false;
    out.clear();
    for (;;) {
      // Plain bytes in one run: most strings have no escape at all.
      const char* run = p_;
      while (p_ < end_ && *p_ != '"' && *p_ != '\\' && static_cast<unsigned char>(*p_) >= 0x20) ++p_;
      out.append(run, static_cast<std::size_t>(p_ - run));
      if (p_ == end_ || static_cast<unsigned char>(*p_) < 0x20) return false;  // unterminated, or a raw control
      if (*p_++ == '"') return true;
      if (!escape(out)) return false;
    }
  }

  // A JSON array of strings, appended to `out`.
  bool string_array(std::vector<std::string>& out) {
    if (!take('[')) return false;
    if (take(']')) return true;
    do {
      out.emplace_back();
      if (!string(out.back())) return false;
    } while (take(','));
    return take(']');
  }

 private:
  // After a backslash.
  bool escape(std::string& out) {
    if (p_ == end_) return false;
    switch (*p_++) {
      case '"': out += '"'; return true;
      case '\\': out += '\\'; return true;
      case '/': out += '/'; return true;
      case 'b': out += '\b'; return true;
      case 'f': out += '\f'; return true;
      case 'n': out += '\n'; return true;
      case 'r': out += '\r'; return true;
      case 't': out += '\t'; return true;
      case 'u': break;
      default: return false;
    }
    std::uint32_t code = 0;
    if (!hex4(code)) return false;
    if (code >= 0xD800 && code <= 0xDBFF) {  // a high surrogate: its low half must follow
      std::uint32_t low = 0;
      if (end_ - p_ < 2 || p_[0] != '\\' || p_[1] != 'u') return false;
      p_ += 2;
      if (!hex4(low) || low < 0xDC00 || low > 0xDFFF) return false;
      code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
    } else if (code >= 0xDC00 && code <= 0xDFFF) {
      return false;  // a lone low surrogate
    }
    append_utf8(code, out);
    return true;
  }

  bool hex4(std::uint32_t& code) {
    if (end_ - p_ < 4) return false;
    for (int i = 0; i < 4; ++i) {
      const char c = *p_++;
      std::uint32_t digit;
      if (c >= '0' && c <= '9') digit = static_cast<std::uint32_t>(c - '0');
      else if (c >= 'a' && c <= 'f') digit = static_cast<std::uint32_t>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F') digit = static_cast<std::uint32_t>(c - 'A' + 10);
      else return false;
      code = code << 4 | digit;
    }
    return true;
  }

  static void append_utf8(std::uint32_t code, std::string& out) {
    if (code < 0x80) {
      out += static_cast<char>(code);
    } else if (code < 0x800) {
      out += static_cast<char>(0xC0 | code >> 6);
      out += static_cast<char>(0x80 | (code & 0x3F));
    } else if (code < 0x10000) {
      out += static_cast<char>(0xE0 | code >> 12);
      out += static_cast<char>(0x80 | (code >> 6 & 0x3F));
      out += static_cast<char>(0x80 | (code & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | code >> 18);
      out += static_cast<char>(0x80 | (code >> 12 & 0x3F));
      out += static_cast<char>(0x80 | (code >> 6 & 0x3F));
      out += static_cast<char>(0x80 | (code & 0x3F));
    }
  }

  const char* p_;
  const char* end_;
};

enum Field : unsigned { kId, kQuestion, kAnswer, kContext, kAlternates, kTags, kFieldCount };

bool field_named(const std::string& key, Field& field) {
  static const char* const kNames[kFieldCount] = {"id", "question", "answer", "context", "alternates", "tags"};
  for (unsigned f = 0; f < kFieldCount; ++f) {
    if (key == kNames[f]) {
      field = static_cast<Field>(f);
      return true;
    }
  }
  return false;
}

}  // namespace

bool read_common_entry(std::string_view line, KnowledgeEntry& entry) {
  // The general parser takes a byte order mark as an error; so does this.
  Reader in(line);
  if (!in.take('{')) return false;
  unsigned seen = 0;
  std::string key;
  if (!in.peek('}')) {
    do {
      Field field;
      if (!in.string(key) || !field_named(key, field) || (seen & 1u << field) || !in.take(':')) return false;
      seen |= 1u << field;
      bool read = false;
      switch (field) {
        case kId: read = in.string(entry.id); break;
        case kQuestion: read = in.string(entry.question); break;
        case kAnswer: read = in.string(entry.answer); break;
        case kContext: read = in.string(entry.context); break;
        case kAlternates: read = in.string_array(entry.alternates); break;
        case kTags: read = in.string_array(entry.tags); break;
        case kFieldCount: break;
      }
      if (!read) return false;
    } while (in.take(','));
  }
  if (!in.take('}') || !in.at_end()) return false;
  constexpr unsigned kRequired = 1u << kId | 1u << kQuestion | 1u << kAnswer;
  return (seen & kRequired) == kRequired;
}

}  // namespace rapidqa::detail

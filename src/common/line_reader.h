// Reading text line by line with a bound: `--kb /dev/zero` or a file with no
// newline must not grow one std::string until memory runs out.
//
// Thread safety: thread-compatible (one reader per stream).
#pragma once

#include <cstddef>
#include <istream>
#include <string>

namespace rapidqa::detail {

// The longest line any rapidqa text input accepts by default (a knowledge
// line with a long answer and context, a question, a text to encode).
inline constexpr std::size_t kDefaultMaxLineBytes = 16u << 20;  // 16 MiB

enum class LineRead {
  kLine,     // `line` holds the next line, without its '\n' (and '\r')
  kEnd,      // no more input
  kTooLong,  // the line is longer than max_bytes; `line` holds its first max_bytes
};

// Reads the next line, at most max_bytes of it. After kTooLong the stream
// is left inside the long line: callers stop reading (the input is refused).
inline LineRead read_bounded_line(std::istream& in, std::string& line, std::size_t max_bytes = kDefaultMaxLineBytes) {
  line.clear();
  std::streambuf* buffer = in.rdbuf();
  if (!buffer) return LineRead::kEnd;
  bool any = false;
  for (;;) {
    const int c = buffer->sbumpc();
    if (c == std::char_traits<char>::eof()) {
      in.setstate(std::ios::eofbit);
      if (!any) return LineRead::kEnd;
      break;
    }
    any = true;
    if (c == '\n') break;
    // A CRLF line of exactly max_bytes is not too long: its '\r' goes.
    if (line.size() >= max_bytes && !(c == '\r' && line.size() == max_bytes)) return LineRead::kTooLong;
    line.push_back(static_cast<char>(c));
  }
  if (!line.empty() && line.back() == '\r') line.pop_back();
  return LineRead::kLine;
}

}  // namespace rapidqa::detail

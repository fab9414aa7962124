// Reading a whole small file (config.json, vocab.txt, tokenizer.json) with a
// size cap: a model directory may come from anyone, and `config.json ->
// /dev/zero` or a multi-gigabyte "vocabulary" must be refused, not read
// until memory runs out.
//
// Thread safety: free functions, no shared state.
#pragma once

#include <cstddef>
#include <fstream>
#include <string>

#include <fmt/format.h>

#include "rapidqa/status.h"

namespace rapidqa::detail {

// The file's bytes. kNotFound when it cannot be opened, kInvalidArgument
// when it holds more than max_bytes (read no further than that), kIOError
// when reading fails. `what` names the file in messages ("config.json").
inline Result<std::string> read_file_bounded(const std::string& path, std::size_t max_bytes, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::not_found(fmt::format("{} '{}' cannot be opened (missing or unreadable)", what, path));
  std::string content;
  char chunk[1 << 16];
  for (;;) {
    in.read(chunk, sizeof chunk);
    const auto got = static_cast<std::size_t>(in.gcount());
    if (got > max_bytes - content.size()) {
      return Status::invalid_argument(
          fmt::format("{} '{}' is larger than {} bytes; refusing to read it", what, path, max_bytes));
    }
    content.append(chunk, got);
    if (!in) break;
  }
  if (in.bad()) return Status::io_error(fmt::format("{} '{}': read failed", what, path));
  return content;
}

}  // namespace rapidqa::detail

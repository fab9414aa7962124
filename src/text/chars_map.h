// CharsMap: sentencepiece's precompiled character map, the normalisation
// rules a sentencepiece model carries (nmt_nfkc and its variants) and
// Hugging Face's Precompiled normalizer embeds: a double-array trie
// (darts-clone units) from UTF-8 keys to offsets of NUL-terminated
// replacements, after a little-endian length of the trie. Every read is
// bounds-checked: the map comes from a model file.
//
// Thread safety: immutable after parse; every method is const.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rapidqa/status.h"

namespace rapidqa::text {

class CharsMap {
 public:
  // kInvalidArgument, naming `where`, for a blob shorter than its header,
  // a trie that does not fit it, or replacements that are not UTF-8.
  static Result<CharsMap> parse(const std::string& blob, std::string_view where);

  // The replacement of the shortest key that starts chunk (Hugging Face's
  // Precompiled takes the first of the common-prefix search), or nullopt.
  std::optional<std::string_view> transform(std::string_view chunk) const;

  struct Match {
    std::size_t length = 0;        // bytes of the input the key covers
    std::string_view replacement;
  };
  // The longest key that starts input and its replacement (sentencepiece's
  // own normalizer takes the longest), or nullopt.
  std::optional<Match> longest_prefix(std::string_view input) const;

 private:
  static std::uint32_t label(std::uint32_t unit) { return unit & (0x80000000u | 0xFFu); }
  static std::size_t offset(std::uint32_t unit) { return (unit >> 10) << ((unit & (1u << 9)) >> 6); }
  std::optional<std::string_view> replacement(std::size_t at) const;
  // Calls on_key(length, value) for each key that starts input, shortest
  // first, until it returns false.
  template <typename OnKey>
  void prefixes(std::string_view input, OnKey&& on_key) const;

  std::vector<std::uint32_t> units_;
  std::string normalized_;
};

}  // namespace rapidqa::text

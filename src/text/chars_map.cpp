#include "text/chars_map.h"

#include <fmt/format.h>

#include "text/utf8.h"

namespace rapidqa::text {

Result<CharsMap> CharsMap::parse(const std::string& blob, std::string_view where) {
  auto fail = [&](std::string_view what) { return Status::invalid_argument(fmt::format("{}: {}", where, what)); };
  if (blob.size() < 4) return fail("shorter than its header");
  const std::uint32_t trie_bytes = static_cast<std::uint8_t>(blob[0]) | static_cast<std::uint8_t>(blob[1]) << 8 |
                                   static_cast<std::uint8_t>(blob[2]) << 16 |
                                   static_cast<std::uint32_t>(static_cast<std::uint8_t>(blob[3])) << 24;
  if (trie_bytes % 4 != 0 || trie_bytes > blob.size() - 4 || trie_bytes == 0) {
    return fail("its trie's length does not fit the map");
  }
  CharsMap map;
  map.units_.resize(trie_bytes / 4);
  for (std::size_t i = 0; i < map.units_.size(); ++i) {
    const auto* p = reinterpret_cast<const unsigned char*>(blob.data() + 4 + i * 4);
    map.units_[i] = p[0] | p[1] << 8 | p[2] << 16 | static_cast<std::uint32_t>(p[3]) << 24;
  }
  map.normalized_ = blob.substr(4 + trie_bytes);
  if (find_invalid_utf8(map.normalized_) != std::string::npos) return fail("its replacements are not UTF-8");
  return map;
}

template <typename OnKey>
void CharsMap::prefixes(std::string_view input, OnKey&& on_key) const {
  if (units_.empty()) return;
  std::size_t node = offset(units_[0]);
  for (std::size_t i = 0; i < input.size(); ++i) {
    const auto c = static_cast<unsigned char>(input[i]);
    if (c == 0) return;  // keys hold no NUL
    node ^= c;
    if (node >= units_.size()) return;
    const std::uint32_t unit = units_[node];
    if (label(unit) != c) return;
    node ^= offset(unit);
    if (node >= units_.size()) return;
    if (((unit >> 8) & 1) && !on_key(i + 1, units_[node] & 0x7FFFFFFFu)) return;
  }
}

std::optional<std::string_view> CharsMap::transform(std::string_view chunk) const {
  std::optional<std::string_view> out;
  prefixes(chunk, [&](std::size_t, std::size_t value) {
    out = replacement(value);
    return false;
  });
  return out;
}

std::optional<CharsMap::Match> CharsMap::longest_prefix(std::string_view input) const {
  std::optional<Match> out;
  prefixes(input, [&](std::size_t length, std::size_t value) {
    if (const auto r = replacement(value)) {
      out = Match{length, *r};
    } else {
      out.reset();
    }
    return true;
  });
  return out;
}

std::optional<std::string_view> CharsMap::replacement(std::size_t at) const {
  if (at > normalized_.size()) return std::nullopt;
  std::size_t end = normalized_.find('\0', at);
  if (end == std::string::npos) end = normalized_.size();
  const std::string_view out(normalized_.data() + at, end - at);
  // A replacement starting inside a character is no replacement.
  if (!out.empty() && (static_cast<unsigned char>(out[0]) & 0xC0) == 0x80) return std::nullopt;
  return out;
}

}  // namespace rapidqa::text

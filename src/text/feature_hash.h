// Hashing text features to 64 bits, shared by the HashingEncoder's buckets
// and the BM25 index's terms: FNV-1a over the bytes, finished with
// splitmix64's mixer so nearby inputs land far apart. Not for security.
#pragma once

#include <cstdint>
#include <string_view>

namespace rapidqa::text {

inline std::uint64_t mix64(std::uint64_t x) {  // splitmix64 finaliser
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

inline constexpr std::uint64_t kFnvOffset = 0xcbf29ce484222325ULL;
inline constexpr std::uint64_t kFnvPrime = 0x100000001b3ULL;

// FNV-1a of `bytes`, continuing from `h`.
inline std::uint64_t fnv1a(std::uint64_t h, std::string_view bytes) {
  for (unsigned char c : bytes) {
    h ^= c;
    h *= kFnvPrime;
  }
  return h;
}

}  // namespace rapidqa::text

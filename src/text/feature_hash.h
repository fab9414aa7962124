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

// hash % buckets without a division per hash (an encode has a couple of
// hundred features, and a 64-bit division was the slowest instruction in
// its loop): with M = floor((2^128 - 1) / d) + 1, the remainder of a 64-bit a by
// d is the high 64 bits of (M * a mod 2^128) * d (Lemire, Kaser and Kurz,
// "Faster remainder by direct computation", 2019: 128 fraction bits are
// exact for every 64-bit a and d).
class BucketOf {
  // GCC and Clang's 128-bit integer (__extension__: no -Wpedantic warning
  // in every file that includes this one).
  __extension__ using Uint128 = unsigned __int128;

 public:
  explicit BucketOf(std::uint64_t buckets = 1) : buckets_(buckets) {
    multiplier_ = ~static_cast<Uint128>(0) / buckets + 1;
  }
  std::uint64_t of(std::uint64_t hash) const {
    const Uint128 fraction = multiplier_ * hash;  // mod 2^128
    // (fraction * d) >> 128, from fraction's two 64-bit halves.
    const Uint128 low = static_cast<Uint128>(static_cast<std::uint64_t>(fraction)) * buckets_;
    const Uint128 high = (fraction >> 64) * buckets_;
    return static_cast<std::uint64_t>((high + (low >> 64)) >> 64);
  }

 private:
  std::uint64_t buckets_;
  Uint128 multiplier_;
};

}  // namespace rapidqa::text

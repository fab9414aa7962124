// A fast 64-bit hash of bytes, for telling whether content changed (model
// files behind an encoder's fingerprint, snapshot files against damage).
// Eight bytes per step with a strong finaliser: gigabytes per second, and
// any change of content changes the hash except with probability about
// 2^-64. It is not a cryptographic hash: it detects change and damage, not
// tampering.
//
// Thread safety: pure functions; ContentHasher is a value type.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace rapidqa::detail {

class ContentHasher {
 public:
  explicit ContentHasher(std::uint64_t seed = 0x7261706964716168ULL) : state_(mix(seed)) {}

  void update(const void* data, std::size_t size) {
    const auto* bytes = static_cast<const unsigned char*>(data);
    length_ += size;
    // Top up a partial word left by the previous call first.
    while (size > 0 && pending_bytes_ != 0) {
      pending_ |= static_cast<std::uint64_t>(*bytes++) << (8 * pending_bytes_);
      --size;
      if (++pending_bytes_ == 8) absorb_pending();
    }
    while (size >= 8) {
      std::uint64_t word;
      std::memcpy(&word, bytes, 8);
      absorb(word);
      bytes += 8;
      size -= 8;
    }
    while (size > 0) {
      pending_ |= static_cast<std::uint64_t>(*bytes++) << (8 * pending_bytes_++);
      --size;
    }
  }
  void update(std::string_view text) { update(text.data(), text.size()); }

  std::uint64_t digest() const {
    std::uint64_t h = state_;
    if (pending_bytes_ != 0) h = step(h, pending_);
    return mix(h ^ length_);
  }

 private:
  static std::uint64_t mix(std::uint64_t x) {  // splitmix64's finaliser
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
  }
  static std::uint64_t step(std::uint64_t h, std::uint64_t word) {
    h ^= word * 0x9e3779b97f4a7c15ULL;
    h = (h << 27) | (h >> 37);
    return h * 0xff51afd7ed558ccdULL + 0x2545f4914f6cdd1dULL;
  }
  void absorb(std::uint64_t word) { state_ = step(state_, word); }
  void absorb_pending() {
    absorb(pending_);
    pending_ = 0;
    pending_bytes_ = 0;
  }

  std::uint64_t state_;
  std::uint64_t length_ = 0;
  std::uint64_t pending_ = 0;
  unsigned pending_bytes_ = 0;
};

inline std::uint64_t content_hash(const void* data, std::size_t size) {
  ContentHasher hasher;
  hasher.update(data, size);
  return hasher.digest();
}

}  // namespace rapidqa::detail

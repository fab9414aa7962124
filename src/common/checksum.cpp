#include "common/checksum.h"

#include <cstring>

namespace rapidqa::detail {
namespace {

constexpr std::uint64_t kPrime1 = 0x9E3779B185EBCA87ULL;
constexpr std::uint64_t kPrime2 = 0xC2B2AE3D27D4EB4FULL;
constexpr std::uint64_t kPrime3 = 0x165667B19E3779F9ULL;
constexpr std::uint64_t kPrime4 = 0x85EBCA77C2B2AE63ULL;
constexpr std::uint64_t kPrime5 = 0x27D4EB2F165667C5ULL;
constexpr std::size_t kStripeBytes = 32;

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "XXH64 reads its input as little-endian words; a big-endian port must swap them");

inline std::uint64_t rotate_left(std::uint64_t x, int bits) { return (x << bits) | (x >> (64 - bits)); }

inline std::uint64_t read64(const unsigned char* p) {
  std::uint64_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

inline std::uint32_t read32(const unsigned char* p) {
  std::uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

inline std::uint64_t round(std::uint64_t lane, std::uint64_t input) {
  lane += input * kPrime2;
  return rotate_left(lane, 31) * kPrime1;
}

inline std::uint64_t merge_round(std::uint64_t hash, std::uint64_t lane) {
  hash ^= round(0, lane);
  return hash * kPrime1 + kPrime4;
}

// Consumes whole stripes; returns how many bytes it used.
std::size_t consume_stripes(std::uint64_t lanes[4], const unsigned char* p, std::size_t size) {
  std::uint64_t a = lanes[0], b = lanes[1], c = lanes[2], d = lanes[3];
  const unsigned char* const end = p + size / kStripeBytes * kStripeBytes;
  for (; p < end; p += kStripeBytes) {
    a = round(a, read64(p));
    b = round(b, read64(p + 8));
    c = round(c, read64(p + 16));
    d = round(d, read64(p + 24));
  }
  lanes[0] = a, lanes[1] = b, lanes[2] = c, lanes[3] = d;
  return size / kStripeBytes * kStripeBytes;
}

}  // namespace

Xxh64::Xxh64(std::uint64_t seed)
    : lanes_{seed + kPrime1 + kPrime2, seed + kPrime2, seed, seed - kPrime1}, seed_(seed), pending_{} {}

void Xxh64::update(const void* data, std::size_t size) {
  if (size == 0) return;  // data may be null then (an empty vector's)
  const auto* p = static_cast<const unsigned char*>(data);
  total_bytes_ += size;
  if (pending_bytes_ > 0) {
    const std::size_t take = size < kStripeBytes - pending_bytes_ ? size : kStripeBytes - pending_bytes_;
    std::memcpy(pending_ + pending_bytes_, p, take);
    pending_bytes_ += take;
    p += take;
    size -= take;
    if (pending_bytes_ < kStripeBytes) return;
    consume_stripes(lanes_, pending_, kStripeBytes);
    pending_bytes_ = 0;
  }
  const std::size_t used = consume_stripes(lanes_, p, size);
  std::memcpy(pending_, p + used, size - used);
  pending_bytes_ = size - used;
}

std::uint64_t Xxh64::digest() const {
  std::uint64_t hash;
  if (total_bytes_ >= kStripeBytes) {
    hash = rotate_left(lanes_[0], 1) + rotate_left(lanes_[1], 7) + rotate_left(lanes_[2], 12) +
           rotate_left(lanes_[3], 18);
    for (const std::uint64_t lane : lanes_) hash = merge_round(hash, lane);
  } else {
    hash = seed_ + kPrime5;
  }
  hash += total_bytes_;
  const unsigned char* p = pending_;
  std::size_t left = pending_bytes_;
  for (; left >= 8; p += 8, left -= 8) {
    hash ^= round(0, read64(p));
    hash = rotate_left(hash, 27) * kPrime1 + kPrime4;
  }
  if (left >= 4) {
    hash ^= static_cast<std::uint64_t>(read32(p)) * kPrime1;
    hash = rotate_left(hash, 23) * kPrime2 + kPrime3;
    p += 4, left -= 4;
  }
  for (; left > 0; ++p, --left) {
    hash ^= *p * kPrime5;
    hash = rotate_left(hash, 11) * kPrime1;
  }
  hash ^= hash >> 33;
  hash *= kPrime2;
  hash ^= hash >> 29;
  hash *= kPrime3;
  hash ^= hash >> 32;
  return hash;
}

std::uint64_t xxh64(const void* data, std::size_t size, std::uint64_t seed) {
  Xxh64 hasher(seed);
  hasher.update(data, size);
  return hasher.digest();
}

}  // namespace rapidqa::detail

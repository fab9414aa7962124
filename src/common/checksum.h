// XXH64, the 64-bit xxHash of Yann Collet, written from its published
// specification: a checksum fast enough to run over gigabytes at load time
// (it reads eight bytes per step in four independent lanes; measured by
// BM_SnapshotChecksum in benchmarks/bench_index_snapshot.cpp). It detects
// accidental damage (a torn write, a truncated or bit-flipped copy), not
// tampering: anyone can recompute it, so a file it vouches for must still be
// validated as it is parsed. The values equal the reference library's
// XXH64() for the same bytes and seed, so files can be checked with xxhsum.
//
// Thread safety: Xxh64 is thread-compatible (one object per stream of
// bytes); xxh64() is a pure function.
#pragma once

#include <cstddef>
#include <cstdint>

namespace rapidqa::detail {

// The checksum of bytes fed in any number of pieces: the result depends
// only on the concatenated bytes, not on how they were split.
class Xxh64 {
 public:
  explicit Xxh64(std::uint64_t seed = 0);

  void update(const void* data, std::size_t size);
  // The checksum of everything fed so far (the object may be fed further).
  std::uint64_t digest() const;

 private:
  std::uint64_t lanes_[4];
  std::uint64_t seed_;
  std::uint64_t total_bytes_ = 0;
  unsigned char pending_[32];    // the start of a 32-byte stripe not yet complete
  std::size_t pending_bytes_ = 0;
};

std::uint64_t xxh64(const void* data, std::size_t size, std::uint64_t seed = 0);

}  // namespace rapidqa::detail

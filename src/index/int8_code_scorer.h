// Int8CodeScorer: one query against Int8FlatIP codes (d int8 values, then
// the float scale), the storage the HNSW graph walks and is built over. The
// query is quantized once, as Int8Rows' scan does (8-bit for AVX-512 VNNI,
// 7-bit for AVX2), and each code is scored with integer dot products; the
// portable path multiplies the float query with the codes.
//
// Thread safety: a scorer is immutable after construction; score() may run
// concurrently.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "index/int8_rows.h"

namespace rapidqa::index {

class Int8CodeScorer {
 public:
  Int8CodeScorer(const float* query, std::size_t d);

  // The approximate inner product of the query with one code.
  float score(const std::uint8_t* code) const;
  // Asks for every cache line of a code that score() will read.
  void prefetch(const std::uint8_t* code) const;

 private:
  float score_vnni(const std::uint8_t* code) const;
  float score_avx2(const std::uint8_t* code) const;

  const float* query_;
  std::size_t d_;
  ScanKernel kernel_;
  QueryCode code_;  // the quantized query (unused by the portable path)
  // AVX2: the centred query's values and magnitudes, padded with zeros.
  std::vector<std::int8_t> signed_query_;
  std::vector<std::uint8_t> query_magnitude_;
};

// sum a_j b_j of two codes' int8 values (graph construction compares stored
// vectors with each other).
std::int32_t dot_codes(const std::int8_t* a, const std::int8_t* b, std::size_t d);

}  // namespace rapidqa::index

// Float inner products with the widest kernels the CPU has, for code above
// index/ that compares a few vectors without building an index.
#pragma once

#include <cstddef>
#include <cstdint>

namespace rapidqa::index {

// Inner product of two float vectors of length d (AVX2/FMA when available).
float inner_product(const float* a, const float* b, std::size_t d);
// Inner product of a float query with one Int8FlatIP code (d int8 values,
// then the float scale).
float int8_code_inner_product(const float* q, const std::uint8_t* code, std::size_t d);

}  // namespace rapidqa::index

// Register-resident multiply-accumulate steps for the hand-written kernels
// (model/int8_gemm, model/packed_linear, index/int8_rows).
//
// Each is one asm statement rather than the intrinsic because GCC 12
// compiles the intrinsics' tied accumulator operand into a register copy
// and a stack store per call inside unrolled accumulator arrays, which
// halved the INT8 GEMM's throughput; the "+v" constraint leaves the
// accumulator where it is. Callers compile with the matching target
// attribute and run only where the CPU has the instruction.
#pragma once

#include <immintrin.h>

namespace rapidqa::simd {

// acc += u8 a . s8 b in groups of four bytes (vpdpbusd).
__attribute__((target("avx512f,avx512vnni"), always_inline)) inline void dot_accumulate_u8s8(__m512i& acc, __m512i a,
                                                                                               __m512i b) {
  asm("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(a), "v"(b));
}

// acc += a * b (vfmadd231ps).
__attribute__((target("avx512f"), always_inline)) inline void fma_accumulate(__m512& acc, __m512 a, __m512 b) {
  asm("vfmadd231ps %2, %1, %0" : "+v"(acc) : "v"(a), "v"(b));
}

}  // namespace rapidqa::simd

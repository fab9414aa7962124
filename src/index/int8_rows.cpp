#include "index/int8_rows.h"

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

#include "common/simd_accumulate.h"

namespace rapidqa::index {
namespace {

// ---- kernel choice ---------------------------------------------------------

std::string upper(const char* text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

// The caps the environment puts on the CPU's best kernel.
ScanKernel capped_by_environment(ScanKernel kernel) {
  if (const char* forced = std::getenv("RAPIDQA_SCAN_KERNEL"); forced && *forced) {
    const std::string name = upper(forced);
    if (name == "PORTABLE") return ScanKernel::kPortable;
    if (name == "AVX2") return std::min(kernel, ScanKernel::kAvx2);
    if (name != "AVX512" && name != "AVX512-VNNI") {
      std::fprintf(stderr, "rapidqa: RAPIDQA_SCAN_KERNEL='%s' is not avx512, avx2 or portable; ignored\n", forced);
    }
  }
  // ONEDNN_MAX_CPU_ISA pins the model runtime's kernels; an ISA below
  // AVX-512 with VNNI pins these too, so one variable tests the AVX2 path.
  if (const char* isa = std::getenv("ONEDNN_MAX_CPU_ISA"); isa && *isa) {
    const std::string name = upper(isa);
    const bool has_vnni512 = name.rfind("AVX512_CORE_VNNI", 0) == 0 || name.rfind("AVX512_CORE_BF16", 0) == 0 ||
                             name.rfind("AVX512_CORE_FP16", 0) == 0 || name.rfind("AVX512_CORE_AMX", 0) == 0 ||
                             name.rfind("AVX10", 0) == 0 || name == "ALL" || name == "DEFAULT";
    if (!has_vnni512) {
      kernel = std::min(kernel, name.rfind("AVX2", 0) == 0 || name.rfind("AVX512", 0) == 0 ? ScanKernel::kAvx2
                                                                                             : ScanKernel::kPortable);
    }
  }
  return kernel;
}

// Rounds to the nearest integer, ties to even, as the AVX-512 path's
// vcvtps2dq does, without a libm call per value: adding and subtracting
// 1.5 * 2^23 leaves x rounded for |x| < 2^22 (IEEE arithmetic, which the
// compiler may not fold without -ffast-math). Non-finite values become 0.
int round_level(float x) {
  if (!std::isfinite(x)) return 0;
  constexpr float kMagic = 12582912.0f;
  return static_cast<int>((x + kMagic) - kMagic);
}

std::atomic<ScanKernel>& active_kernel() {
  static std::atomic<ScanKernel> kernel{capped_by_environment(best_scan_kernel_for_cpu())};
  return kernel;
}

// ---- AVX-512 VNNI ----------------------------------------------------------

// Scores B consecutive blocks for Q queries: Q * B accumulators of 16 rows
// each, one 64-byte load per block and dimension group shared by every
// query.
template <int Q, int B>
struct Vnni512Pass {
  __attribute__((target("avx512f,avx512bw,avx512vnni"))) static void run(const std::int8_t* first_block,
                                                                          std::size_t block_bytes,
                                                                          const QueryCode* const* queries,
                                                                          const float* row_scales,
                                                                          const std::int32_t* code_sums, float* const* out) {
    const std::size_t groups = block_bytes / 64;
    __m512i acc[Q][B];
#pragma GCC unroll 4
    for (int q = 0; q < Q; ++q) {
#pragma GCC unroll 8
      for (int b = 0; b < B; ++b) acc[q][b] = _mm512_setzero_si512();
    }
    for (std::size_t g = 0; g < groups; ++g) {
      __m512i line[B];
#pragma GCC unroll 8
      for (int b = 0; b < B; ++b) line[b] = _mm512_load_si512(first_block + b * block_bytes + g * 64);
#pragma GCC unroll 4
      for (int q = 0; q < Q; ++q) {
        std::int32_t four;
        std::memcpy(&four, queries[q]->bytes.data() + 4 * g, sizeof four);
        const __m512i broadcast = _mm512_set1_epi32(four);
#pragma GCC unroll 8
        for (int b = 0; b < B; ++b) simd::dot_accumulate_u8s8(acc[q][b], broadcast, line[b]);
      }
    }
#pragma GCC unroll 8
    for (int b = 0; b < B; ++b) {
      const __m512 scales = _mm512_loadu_ps(row_scales + b * 16);
      const __m512i sums = _mm512_loadu_si512(code_sums + b * 16);
#pragma GCC unroll 4
      for (int q = 0; q < Q; ++q) {
        const __m512i dot = _mm512_sub_epi32(acc[q][b], _mm512_mullo_epi32(sums, _mm512_set1_epi32(queries[q]->offset)));
        const __m512 score =
            _mm512_mul_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(dot), scales), _mm512_set1_ps(queries[q]->scale));
        _mm512_storeu_ps(out[q] + b * 16, score);
      }
    }
  }
};

// ---- AVX2 ------------------------------------------------------------------

// The same pass on 256-bit registers: each 64-byte line is two halves of 8
// rows; vpmaddubsw multiplies u8 x s8 into 16-bit pair sums (no saturation:
// queries are 7-bit), vpmaddwd against ones adds the pairs into 32 bits.
//
// Each line also asks for the same line of the next pass's blocks. A pass
// of AVX2 reads only one or two blocks (so few accumulators fit in 16
// registers), and the hardware prefetchers follow a stream within a 4 KiB
// page only: left to them, an index larger than the cache streamed at
// under half the AVX-512 pass's rate (eight blocks at once) on an AMD
// EPYC; asked one pass ahead, the two run level. The address is formed as
// an integer: past the last block it points outside the rows, which a
// prefetch may do and pointer arithmetic may not.
template <int Q, int B>
struct Avx2Pass {
  __attribute__((target("avx2,fma"))) static void run(const std::int8_t* first_block, std::size_t block_bytes,
                                                      const QueryCode* const* queries, const float* row_scales,
                                                      const std::int32_t* code_sums, float* const* out) {
    const std::size_t groups = block_bytes / 64;
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i acc[Q][B][2];
#pragma GCC unroll 4
    for (int q = 0; q < Q; ++q) {
#pragma GCC unroll 4
      for (int b = 0; b < B; ++b) acc[q][b][0] = acc[q][b][1] = _mm256_setzero_si256();
    }
    for (std::size_t g = 0; g < groups; ++g) {
      __m256i line[B][2];
#pragma GCC unroll 4
      for (int b = 0; b < B; ++b) {
        const std::int8_t* at = first_block + b * block_bytes + g * 64;
        __builtin_prefetch(reinterpret_cast<const void*>(reinterpret_cast<std::uintptr_t>(at) + B * block_bytes));
        line[b][0] = _mm256_load_si256(reinterpret_cast<const __m256i*>(at));
        line[b][1] = _mm256_load_si256(reinterpret_cast<const __m256i*>(at + 32));
      }
#pragma GCC unroll 4
      for (int q = 0; q < Q; ++q) {
        std::int32_t four;
        std::memcpy(&four, queries[q]->bytes.data() + 4 * g, sizeof four);
        const __m256i broadcast = _mm256_set1_epi32(four);
#pragma GCC unroll 4
        for (int b = 0; b < B; ++b) {
#pragma GCC unroll 2
          for (int h = 0; h < 2; ++h) {
            const __m256i pairs = _mm256_maddubs_epi16(broadcast, line[b][h]);
            acc[q][b][h] = _mm256_add_epi32(acc[q][b][h], _mm256_madd_epi16(pairs, ones));
          }
        }
      }
    }
#pragma GCC unroll 4
    for (int b = 0; b < B; ++b) {
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) {
        const __m256 scales = _mm256_loadu_ps(row_scales + b * 16 + h * 8);
        const __m256i sums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(code_sums + b * 16 + h * 8));
#pragma GCC unroll 4
        for (int q = 0; q < Q; ++q) {
          const __m256i dot =
              _mm256_sub_epi32(acc[q][b][h], _mm256_mullo_epi32(sums, _mm256_set1_epi32(queries[q]->offset)));
          const __m256 score =
              _mm256_mul_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(dot), scales), _mm256_set1_ps(queries[q]->scale));
          _mm256_storeu_ps(out[q] + b * 16 + h * 8, score);
        }
      }
    }
  }
};

// ---- portable --------------------------------------------------------------

template <int Q, int B>
struct PortablePass {
  static void run(const std::int8_t* first_block, std::size_t block_bytes, const QueryCode* const* queries,
                  const float* row_scales, const std::int32_t* code_sums, float* const* out) {
    const std::size_t groups = block_bytes / 64;
    for (int b = 0; b < B; ++b) {
      const std::int8_t* block = first_block + b * block_bytes;
      for (int q = 0; q < Q; ++q) {
        std::int32_t dot[Int8Rows::kBlockRows] = {};
        for (std::size_t g = 0; g < groups; ++g) {
          for (std::size_t r = 0; r < Int8Rows::kBlockRows; ++r) {
            for (std::size_t t = 0; t < 4; ++t) {
              dot[r] += static_cast<std::int32_t>(queries[q]->bytes[4 * g + t]) * block[g * 64 + r * 4 + t];
            }
          }
        }
        for (std::size_t r = 0; r < Int8Rows::kBlockRows; ++r) {
          const std::int32_t centred = dot[r] - queries[q]->offset * code_sums[b * 16 + r];
          out[q][b * 16 + r] = static_cast<float>(centred) * row_scales[b * 16 + r] * queries[q]->scale;
        }
      }
    }
  }
};

using PassFn = void (*)(const std::int8_t*, std::size_t, const QueryCode* const*, const float*, const std::int32_t*,
                        float* const*);

// Blocks per pass: enough independent accumulators to hide the
// multiply-add latency, few enough to stay in registers (AVX2 has 16). The
// blocks left over after the widest passes go through one narrower pass
// (seven blocks as one pass of seven, not seven passes of one: a pass of one
// block waits on one accumulator's latency at every step).
template <template <int, int> class Pass, int Wide1, int Wide2, int Wide3, int Wide4>
struct PassTable {
  static int width(std::size_t nq) { return nq == 1 ? Wide1 : nq == 2 ? Wide2 : nq == 3 ? Wide3 : Wide4; }
  // The pass for nq queries over `blocks` blocks, 1 <= blocks <= width(nq).
  static PassFn pass(std::size_t nq, std::size_t blocks) {
    switch (nq) {
      case 1: return of<1>(blocks, std::make_integer_sequence<int, Wide1>());
      case 2: return of<2>(blocks, std::make_integer_sequence<int, Wide2>());
      case 3: return of<3>(blocks, std::make_integer_sequence<int, Wide3>());
      default: return of<4>(blocks, std::make_integer_sequence<int, Wide4>());
    }
  }

 private:
  template <int Q, int... B>
  static PassFn of(std::size_t blocks, std::integer_sequence<int, B...>) {
    static constexpr PassFn kByBlocks[] = {&Pass<Q, B + 1>::run...};
    return kByBlocks[blocks - 1];
  }
};

using Vnni512Table = PassTable<Vnni512Pass, 8, 4, 2, 2>;
using Avx2Table = PassTable<Avx2Pass, 2, 1, 1, 1>;
using PortableTable = PassTable<PortablePass, 1, 1, 1, 1>;

template <typename Table>
void run_passes(const std::int8_t* blocks, std::size_t block_bytes, std::size_t first_block, std::size_t block_count,
                const QueryCode* const* queries, std::size_t nq, const float* scales, const std::int32_t* sums,
                float* scores, std::size_t stride) {
  float* out[Int8Rows::kMaxQueries];
  const auto width = static_cast<std::size_t>(Table::width(nq));
  std::size_t done = 0;
  while (done < block_count) {
    const std::size_t step = std::min(width, block_count - done);
    const std::size_t block = first_block + done;
    for (std::size_t q = 0; q < nq; ++q) out[q] = scores + q * stride + done * Int8Rows::kBlockRows;
    Table::pass(nq, step)(blocks + block * block_bytes, block_bytes, queries, scales + block * Int8Rows::kBlockRows,
                          sums + block * Int8Rows::kBlockRows, out);
    done += step;
  }
}

}  // namespace

ScanKernel best_scan_kernel_for_cpu() {
  static const ScanKernel best = [] {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vnni")) {
      return ScanKernel::kAvx512Vnni;
    }
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return ScanKernel::kAvx2;
    return ScanKernel::kPortable;
  }();
  return best;
}

ScanKernel scan_kernel() { return active_kernel().load(std::memory_order_relaxed); }

void set_scan_kernel(ScanKernel kernel) {
  active_kernel().store(std::min(kernel, best_scan_kernel_for_cpu()), std::memory_order_relaxed);
}

const char* scan_kernel_name(ScanKernel kernel) {
  switch (kernel) {
    case ScanKernel::kAvx512Vnni: return "avx512-vnni";
    case ScanKernel::kAvx2: return "avx2";
    case ScanKernel::kPortable: break;
  }
  return "portable";
}

namespace {

// x with its non-finite elements set to 0, as the scalar path counts them:
// x - x is 0 exactly for finite x and NaN otherwise.
__attribute__((target("avx512f"))) __m512 finite(__m512 x) {
  return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(_mm512_sub_ps(x, x), _mm512_setzero_ps(), _CMP_EQ_OQ), x);
}

// The largest of sixteen lanes (GCC 12's _mm512_reduce_max_ps warns of an
// uninitialized operand inside its own header).
__attribute__((target("avx512f"))) float largest_lane(__m512 x) {
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, x);
  return *std::max_element(lanes, lanes + 16);
}

// The scalar parts the vector quantizers share: the largest finite |v|
// over the elements past the last whole vector, and a row's scale.
float largest_from(float largest, const float* v, std::size_t from, std::size_t d) {
  for (std::size_t t = from; t < d; ++t) {
    if (std::isfinite(v[t])) largest = std::max(largest, std::abs(v[t]));
  }
  return largest;
}

// The scale for `largest`, and its inverse; false (every code set to 0,
// as the scalar loop codes them) where the scale is subnormal and its
// inverse overflows.
bool row_scale(float largest, std::size_t d, std::int8_t* codes, float& scale, float& inverse) {
  scale = largest > 0 ? largest / 127.0f : 1.0f;
  inverse = 1.0f / scale;
  if (std::isfinite(inverse)) return true;
  std::fill(codes, codes + d, std::int8_t{0});
  return false;
}

// The largest |v| over v's finite elements (0 when there are none), on
// AVX-512: the first pass of both vector quantizers.
__attribute__((target("avx512f"))) float largest_finite_magnitude_avx512(const float* v, std::size_t d) {
  __m512 max_abs = _mm512_setzero_ps();
  std::size_t j = 0;
  for (; j + 16 <= d; j += 16) max_abs = _mm512_max_ps(max_abs, _mm512_abs_ps(finite(_mm512_loadu_ps(v + j))));
  return largest_from(largest_lane(max_abs), v, j, d);
}

void codes_from(const float* v, std::size_t from, std::size_t d, float inverse, std::int8_t* codes) {
  for (std::size_t j = from; j < d; ++j) {
    codes[j] = static_cast<std::int8_t>(std::clamp(round_level(v[j] * inverse), -127, 127));
  }
}

// quantize_query's loop on AVX-512: one pass for max |q|, one to scale,
// round (to nearest even) and offset; the scalar loop cost as much as
// scanning a thousand rows.
__attribute__((target("avx512f,avx512bw"))) void quantize_query_avx512(const float* query, std::size_t d,
                                                                        QueryCode& code) {
  const float largest = largest_finite_magnitude_avx512(query, d);
  code.scale = largest > 0 ? largest / 127.0f : 1.0f;  // largest is finite: non-finite elements read as 0
  // A subnormal scale: the scalar loop codes every element 0 (the offset
  // the bytes already hold).
  if (!std::isfinite(1.0f / code.scale)) return;
  const __m512 inverse = _mm512_set1_ps(1.0f / code.scale);
  const __m512i offset = _mm512_set1_epi32(code.offset), low = _mm512_set1_epi32(1), high = _mm512_set1_epi32(255);
  std::size_t j = 0;
  for (; j + 16 <= d; j += 16) {
    __m512i level =
        _mm512_add_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(finite(_mm512_loadu_ps(query + j)), inverse)), offset);
    level = _mm512_min_epi32(_mm512_max_epi32(level, low), high);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(code.bytes.data() + j), _mm512_cvtepi32_epi8(level));
  }
  for (; j < d; ++j) {
    const int level = std::clamp(round_level(query[j] * (1.0f / code.scale)), -127, 127);
    code.bytes[j] = static_cast<std::uint8_t>(level + code.offset);
  }
}

// quantize_row on AVX-512, the same codes as the scalar loop (max |v| over
// the finite elements, scale, round to nearest even, clamp): a restart
// quantizes every stored vector of its index, two million at a
// million-entry knowledge base.
__attribute__((target("avx512f,avx512bw"))) float quantize_row_avx512(const float* v, std::size_t d,
                                                                      std::int8_t* codes) {
  float scale, inverse;
  if (!row_scale(largest_finite_magnitude_avx512(v, d), d, codes, scale, inverse)) return scale;
  const __m512 inverse16 = _mm512_set1_ps(inverse);
  const __m512i low = _mm512_set1_epi32(-127), high = _mm512_set1_epi32(127);
  std::size_t j = 0;
  for (; j + 16 <= d; j += 16) {
    __m512i level = _mm512_cvtps_epi32(_mm512_mul_ps(finite(_mm512_loadu_ps(v + j)), inverse16));
    level = _mm512_min_epi32(_mm512_max_epi32(level, low), high);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(codes + j), _mm512_cvtepi32_epi8(level));
  }
  codes_from(v, j, d, inverse, codes);
  return scale;
}

// finite() on eight lanes.
__attribute__((target("avx2"))) __m256 finite8(__m256 x) {
  return _mm256_and_ps(x, _mm256_cmp_ps(_mm256_sub_ps(x, x), _mm256_setzero_ps(), _CMP_EQ_OQ));
}

// largest_finite_magnitude on AVX2.
__attribute__((target("avx2"))) float largest_finite_magnitude_avx2(const float* v, std::size_t d) {
  const __m256 magnitude = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  __m256 max_abs = _mm256_setzero_ps();
  std::size_t j = 0;
  for (; j + 8 <= d; j += 8) max_abs = _mm256_max_ps(max_abs, _mm256_and_ps(finite8(_mm256_loadu_ps(v + j)), magnitude));
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, max_abs);
  return largest_from(*std::max_element(lanes, lanes + 8), v, j, d);
}

// quantize_row on AVX2 (eight lanes; the codes packed down through 16 bits,
// exact because every level is within [-127, 127]).
__attribute__((target("avx2"))) float quantize_row_avx2(const float* v, std::size_t d, std::int8_t* codes) {
  float scale, inverse;
  if (!row_scale(largest_finite_magnitude_avx2(v, d), d, codes, scale, inverse)) return scale;
  const __m256 inverse8 = _mm256_set1_ps(inverse);
  const __m256i low = _mm256_set1_epi32(-127), high = _mm256_set1_epi32(127);
  std::size_t j = 0;
  for (; j + 8 <= d; j += 8) {
    __m256i level = _mm256_cvtps_epi32(_mm256_mul_ps(finite8(_mm256_loadu_ps(v + j)), inverse8));
    level = _mm256_min_epi32(_mm256_max_epi32(level, low), high);
    const __m128i words = _mm_packs_epi32(_mm256_castsi256_si128(level), _mm256_extracti128_si256(level, 1));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(codes + j), _mm_packs_epi16(words, words));
  }
  codes_from(v, j, d, inverse, codes);
  return scale;
}

// quantize_query's loop on AVX2 (eight lanes), with the AVX2 scan's 7-bit
// levels: the same bytes as the scalar loop, which cost a fifth of a small
// index's whole search.
__attribute__((target("avx2"))) void quantize_query_avx2(const float* query, std::size_t d, int levels,
                                                         QueryCode& code) {
  const float largest = largest_finite_magnitude_avx2(query, d);
  code.scale = largest > 0 ? largest / static_cast<float>(levels) : 1.0f;
  const float inverse = 1.0f / code.scale;
  if (!std::isfinite(inverse)) return;  // a subnormal scale codes every element 0: the offset already there
  const __m256 inverse8 = _mm256_set1_ps(inverse);
  const __m256i offset = _mm256_set1_epi32(code.offset), low = _mm256_set1_epi32(code.offset - levels),
                high = _mm256_set1_epi32(code.offset + levels);
  std::size_t j = 0;
  for (; j + 8 <= d; j += 8) {
    __m256i level =
        _mm256_add_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(finite8(_mm256_loadu_ps(query + j)), inverse8)), offset);
    level = _mm256_min_epi32(_mm256_max_epi32(level, low), high);
    // Every level is within [0, 255]: packing through 16 bits is exact.
    const __m128i words = _mm_packs_epi32(_mm256_castsi256_si128(level), _mm256_extracti128_si256(level, 1));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(code.bytes.data() + j), _mm_packus_epi16(words, words));
  }
  for (; j < d; ++j) {
    const int level = std::clamp(round_level(query[j] * inverse), -levels, levels);
    code.bytes[j] = static_cast<std::uint8_t>(level + code.offset);
  }
}

}  // namespace

namespace {

// Symmetric quantization to [-levels, levels] with the vector's own max |v|
// (non-finite values ignored for the range and coded as 0): store(j, level)
// for each element; returns the scale (1 for a zero vector).
template <typename Store>
float quantize_symmetric(const float* v, std::size_t d, int levels, Store&& store) {
  float max_abs = 0;
  for (std::size_t j = 0; j < d; ++j) {
    if (std::isfinite(v[j])) max_abs = std::max(max_abs, std::abs(v[j]));
  }
  const float scale = max_abs > 0 ? max_abs / static_cast<float>(levels) : 1.0f;
  const float inverse = 1.0f / scale;
  for (std::size_t j = 0; j < d; ++j) store(j, std::clamp(round_level(v[j] * inverse), -levels, levels));
  return scale;
}

}  // namespace

QueryCode quantize_query(const float* query, std::size_t d, ScanKernel kernel) {
  kernel = std::min(kernel, best_scan_kernel_for_cpu());  // as score() will run it
  // AVX2's vpmaddubsw adds two u8 x s8 products in 16 bits: with 7-bit
  // queries (u <= 127) the pair sum stays under 32,767.
  const int levels = kernel == ScanKernel::kAvx2 ? 63 : 127;
  QueryCode code;
  code.offset = levels + 1;
  code.bytes.assign((d + 63) / 64 * 64, static_cast<std::uint8_t>(code.offset));
  if (kernel == ScanKernel::kAvx512Vnni) {
    quantize_query_avx512(query, d, code);
    return code;
  }
  if (kernel == ScanKernel::kAvx2) {
    quantize_query_avx2(query, d, levels, code);
    return code;
  }
  code.scale = quantize_symmetric(query, d, levels, [&](std::size_t j, int level) {
    code.bytes[j] = static_cast<std::uint8_t>(level + code.offset);
  });
  return code;
}

float quantize_row(const float* vector, std::size_t d, std::int8_t* codes) {
  switch (scan_kernel()) {
    case ScanKernel::kAvx512Vnni: return quantize_row_avx512(vector, d, codes);
    case ScanKernel::kAvx2: return quantize_row_avx2(vector, d, codes);
    case ScanKernel::kPortable: break;
  }
  return quantize_symmetric(vector, d, 127, [&](std::size_t j, int level) { codes[j] = static_cast<std::int8_t>(level); });
}

Int8Rows::Int8Rows(std::size_t dimension) : dimension_(dimension) {}

void Int8Rows::append(std::size_t n, const float* vectors) {
  const std::size_t lines_per_block = padded_dimension() / 4;
  const std::size_t needed_blocks = (rows_ + n + kBlockRows - 1) / kBlockRows;
  lines_.resize(needed_blocks * lines_per_block);
  scales_.resize(needed_blocks * kBlockRows, 0.0f);
  code_sums_.resize(needed_blocks * kBlockRows, 0);
  std::vector<std::int8_t> codes(dimension_);
  for (std::size_t i = 0; i < n; ++i, ++rows_) {
    const float scale = quantize_row(vectors + i * dimension_, dimension_, codes.data());
    Line* block = lines_.data() + rows_ / kBlockRows * lines_per_block;
    const std::size_t slot = rows_ % kBlockRows;
    std::int32_t sum = 0;
    for (std::size_t j = 0; j < dimension_; ++j) {
      block[j / 4].bytes[slot * 4 + j % 4] = codes[j];
      sum += codes[j];
    }
    scales_[rows_] = scale;
    code_sums_[rows_] = sum;
  }
}

void Int8Rows::clear() {
  rows_ = 0;
  lines_ = {};
  scales_ = {};
  code_sums_ = {};
}

std::size_t Int8Rows::memory_bytes() const {
  return lines_.capacity() * sizeof(Line) + scales_.capacity() * sizeof(float) +
         code_sums_.capacity() * sizeof(std::int32_t);
}

std::int8_t Int8Rows::code_at(std::size_t row, std::size_t j) const {
  const Line& line = lines_[row / kBlockRows * (padded_dimension() / 4) + j / 4];
  return line.bytes[row % kBlockRows * 4 + j % 4];
}

std::int64_t Int8Rows::reference_dot(const QueryCode& query, std::size_t row) const {
  std::int64_t dot = 0;
  for (std::size_t j = 0; j < dimension_; ++j) {
    dot += (static_cast<std::int64_t>(query.bytes[j]) - query.offset) * code_at(row, j);
  }
  return dot;
}

void Int8Rows::score(const QueryCode* const* queries, std::size_t nq, std::size_t first_block,
                     std::size_t block_count, float* scores, std::size_t stride, ScanKernel kernel) const {
  if (nq == 0 || block_count == 0) return;
  nq = std::min(nq, kMaxQueries);
  const auto* blocks = reinterpret_cast<const std::int8_t*>(lines_.data());
  switch (std::min(kernel, best_scan_kernel_for_cpu())) {
    case ScanKernel::kAvx512Vnni:
      run_passes<Vnni512Table>(blocks, block_bytes(), first_block, block_count, queries, nq, scales_.data(),
                               code_sums_.data(), scores, stride);
      break;
    case ScanKernel::kAvx2:
      run_passes<Avx2Table>(blocks, block_bytes(), first_block, block_count, queries, nq, scales_.data(),
                            code_sums_.data(), scores, stride);
      break;
    case ScanKernel::kPortable:
      run_passes<PortableTable>(blocks, block_bytes(), first_block, block_count, queries, nq, scales_.data(),
                                code_sums_.data(), scores, stride);
      break;
  }
}

}  // namespace rapidqa::index

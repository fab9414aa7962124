#include "model/int8_gemm.h"

#include <immintrin.h>

#include <cstring>

#include "common/simd_accumulate.h"
#include "model/cpu_features.h"
#include "model/gemm_blocking.h"
#include "model/vector_math.h"

namespace rapidqa::model {
namespace {

static_assert(PackedInt8Matrix::kPanelWidth == gemm::kPanelWidth);

struct BlockArgs {
  const std::uint8_t* a;  // first row of the block
  std::int64_t lda;
  const std::int8_t* w;  // first panel of the block
  std::int64_t panel_bytes;
  std::int64_t groups;               // padded inputs / 4
  const std::int32_t* column_sums;  // at the block's first column
  const float* channel_scales;      // at the block's first column
  const float* bias;                // at the block's first column, or null
  float input_scale;
  std::int32_t zero_point;
  Activation activation;
  float* y;  // at the block's first row and column
  std::int64_t ldy;
  std::int64_t columns;  // valid columns in the block, (P - 1) * 16 < columns <= P * 16
  const std::int8_t* prefetch;  // first of the next block's panels to prefetch (gemm::NextPanels)
  int prefetch_panels;          // 0: none
};

template <int R, int P>
struct Int8Block {
  // acc += the block's rows times its panels over every input group,
  // prefetching one line of each of b.prefetch_panels panels per group when
  // Prefetch.
  template <bool Prefetch>
  __attribute__((target("avx512f,avx512bw,avx512vnni"), always_inline)) static void accumulate(const BlockArgs& b,
                                                                                              __m512i (&acc)[R][P]) {
    const std::int8_t* w = b.w;
    const std::uint8_t* a = b.a;
    const char* line = reinterpret_cast<const char*>(b.prefetch);
    for (std::int64_t g = 0; g < b.groups; ++g, w += 64, a += 4) {
      if constexpr (Prefetch) {
        gemm::prefetch_panel_lines(line, b.prefetch_panels, b.panel_bytes);
        line += 64;
      }
      __m512i wv[P];
#pragma GCC unroll 8
      for (int p = 0; p < P; ++p) wv[p] = _mm512_load_si512(w + p * b.panel_bytes);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        std::int32_t four;
        std::memcpy(&four, a + r * b.lda, sizeof four);
        const __m512i av = _mm512_set1_epi32(four);
#pragma GCC unroll 8
        for (int p = 0; p < P; ++p) simd::dot_accumulate_u8s8(acc[r][p], av, wv[p]);
      }
    }
  }

  __attribute__((target("avx512f,avx512bw,avx512vnni"))) static void run(const BlockArgs& b) {
    __m512i acc[R][P];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
      for (int p = 0; p < P; ++p) acc[r][p] = _mm512_setzero_si512();
    }
    if (b.prefetch_panels > 0) {
      accumulate<true>(b, acc);
    } else {
      accumulate<false>(b, acc);
    }
    const __m512i zero_point = _mm512_set1_epi32(b.zero_point);
    const __m512 input_scale = _mm512_set1_ps(b.input_scale);
#pragma GCC unroll 8
    for (int p = 0; p < P; ++p) {
      const __mmask16 mask = gemm::panel_mask(b.columns, p);
      const __m512i correction =
          _mm512_mullo_epi32(zero_point, _mm512_maskz_loadu_epi32(mask, b.column_sums + 16 * p));
      const __m512 scale = _mm512_mul_ps(input_scale, _mm512_maskz_loadu_ps(mask, b.channel_scales + 16 * p));
      const __m512 bias = b.bias ? _mm512_maskz_loadu_ps(mask, b.bias + 16 * p) : _mm512_setzero_ps();
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const __m512 sum = _mm512_cvtepi32_ps(_mm512_sub_epi32(acc[r][p], correction));
        _mm512_mask_storeu_ps(b.y + r * b.ldy + 16 * p, mask,
                              vmath::activate512(_mm512_fmadd_ps(sum, scale, bias), b.activation));
      }
    }
  }
};

}  // namespace

bool vnni_gemm_available() { return cpu_features().avx512_vnni; }

PackedInt8Matrix::PackedInt8Matrix(const std::int8_t* weights, std::int64_t n, std::int64_t k)
    : n_(n), k_(k), k_padded_((k + kGroup - 1) / kGroup * kGroup) {
  const std::int64_t panel_count = panels();
  data_ = gemm::zeroed_aligned_array<std::int8_t>(panel_count * panel_bytes());
  column_sums_ = gemm::zeroed_aligned_array<std::int32_t>(panel_count * kPanelWidth);
  for (std::int64_t col = 0; col < n; ++col) {
    const std::int8_t* row = weights + col * k;
    std::int8_t* panel_base = data_.get() + (col / kPanelWidth) * panel_bytes() + (col % kPanelWidth) * kGroup;
    std::int32_t sum = 0;
    for (std::int64_t i = 0; i < k; ++i) {
      panel_base[(i / kGroup) * kPanelWidth * kGroup + i % kGroup] = row[i];
      sum += row[i];
    }
    column_sums_[static_cast<std::size_t>(col)] = sum;
  }
}

std::size_t PackedInt8Matrix::bytes() const {
  return static_cast<std::size_t>(panels() * (panel_bytes() + kPanelWidth * static_cast<std::int64_t>(sizeof(std::int32_t))));
}

void int8_gemm_columns(const std::uint8_t* a, std::int64_t lda, std::int64_t rows, const PackedInt8Matrix& w,
                       std::int64_t n0, std::int64_t count, const Int8Epilogue& epilogue, float* y, std::int64_t ldy) {
  BlockArgs args{};
  args.lda = lda;
  args.panel_bytes = w.panel_bytes();
  args.groups = w.padded_inputs() / PackedInt8Matrix::kGroup;
  args.input_scale = epilogue.input_scale;
  args.zero_point = epilogue.zero_point;
  args.activation = epilogue.activation;
  args.ldy = ldy;
  gemm::for_each_register_block(rows, count, [&](std::int64_t r, int block_rows, std::int64_t c, std::int64_t columns,
                                                 int panels, gemm::NextPanels next) {
    const std::int64_t col = n0 + c;
    args.a = a + r * lda;
    args.w = w.panel(col / PackedInt8Matrix::kPanelWidth);
    args.prefetch = w.panel((n0 + next.first_column) / PackedInt8Matrix::kPanelWidth);
    args.prefetch_panels = next.count;
    args.column_sums = w.column_sums() + col;
    args.channel_scales = epilogue.channel_scales + col;
    args.bias = epilogue.bias ? epilogue.bias + col : nullptr;
    args.y = y + r * ldy + col;
    args.columns = columns;
    gemm::run_block<Int8Block>(block_rows, panels, args);
  });
}

}  // namespace rapidqa::model

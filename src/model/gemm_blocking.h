// What the runtime's own product kernels (packed_linear.cpp for FP32,
// int8_gemm.cpp for INT8) share: 64-byte aligned, zeroed weight storage and
// the walk over register blocks, which prefetches the next column block's
// weights during a block's row passes. Each kernel is a class template
// Kernel<Rows, Panels> with a static run(const Args&): Rows activation rows
// (1 to kBlockRows) times Panels panels of 16 output columns (1 to
// kBlockPanels) held in registers over the whole input length.
//
// Thread safety: stateless.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <immintrin.h>
#include <memory>
#include <new>

namespace rapidqa::model::gemm {

// 6 rows x 4 panels = 24 accumulators, plus the 4 panels' weights and one
// broadcast: 29 of the 32 zmm registers.
constexpr int kBlockRows = 6;
constexpr int kBlockPanels = 4;
constexpr std::int64_t kPanelWidth = 16;  // floats or s32 sums in one zmm
constexpr std::int64_t kBlockColumns = kBlockPanels * kPanelWidth;

struct FreeAligned {
  void operator()(void* p) const { std::free(p); }
};
template <typename T>
using AlignedArray = std::unique_ptr<T[], FreeAligned>;

// count zeroed elements on a 64-byte boundary (one cache line, one zmm).
template <typename T>
AlignedArray<T> zeroed_aligned_array(std::int64_t count) {
  constexpr std::size_t kAlign = 64;
  const std::size_t bytes =
      std::max<std::size_t>((static_cast<std::size_t>(count) * sizeof(T) + kAlign - 1) / kAlign * kAlign, kAlign);
  void* p = std::aligned_alloc(kAlign, bytes);
  if (!p) throw std::bad_alloc();
  std::memset(p, 0, bytes);
  return AlignedArray<T>(static_cast<T*>(p));
}

// The store mask of panel p in a block of `columns` valid columns.
inline std::uint16_t panel_mask(std::int64_t columns, int p) {
  const std::int64_t valid = columns - kPanelWidth * p;
  return static_cast<std::uint16_t>(valid >= kPanelWidth ? 0xFFFF : (1u << valid) - 1);
}

template <template <int, int> class Kernel, int Rows, typename Args>
void run_with_panels(int panels, const Args& args) {
  switch (panels) {
    case 1: Kernel<Rows, 1>::run(args); return;
    case 2: Kernel<Rows, 2>::run(args); return;
    case 3: Kernel<Rows, 3>::run(args); return;
    default: Kernel<Rows, 4>::run(args); return;
  }
}

// Kernel<rows, panels>::run(args) for rows in 1..kBlockRows, panels in
// 1..kBlockPanels.
template <template <int, int> class Kernel, typename Args>
void run_block(int rows, int panels, const Args& args) {
  switch (rows) {
    case 1: run_with_panels<Kernel, 1>(panels, args); return;
    case 2: run_with_panels<Kernel, 2>(panels, args); return;
    case 3: run_with_panels<Kernel, 3>(panels, args); return;
    case 4: run_with_panels<Kernel, 4>(panels, args); return;
    case 5: run_with_panels<Kernel, 5>(panels, args); return;
    default: run_with_panels<Kernel, 6>(panels, args); return;
  }
}

// The next column block's panels that one row pass fetches into L2 ahead of
// use. The first row pass over a block reads its weights from memory and is
// bound by memory bandwidth; the later passes read the same block from cache
// and are bound by the multiply-adds (BERT-base at 32 rows reads 340 MB of
// FP32 weights for 5.4 GFLOP: prefetching took 10-16% off its forward on
// Zen 5). Spreading the next block's reads over this block's passes
// overlaps the two. A panel holds one cache line per input step, so a pass
// that prefetches `count` panels issues `count` prefetches per step. With
// fewer than kMinPrefetchPasses passes the hardware prefetcher alone does as
// well (measured: 6-18 rows no faster, 6 rows slower).
struct NextPanels {
  std::int64_t first_column = 0;  // in the product's columns, like a block's
  int count = 0;                  // 0: nothing to prefetch in this pass
};
constexpr int kMinPrefetchPasses = 3;

inline NextPanels next_panels_for_pass(std::int64_t next_column, std::int64_t count, int pass, int passes) {
  NextPanels out;
  if (next_column >= count || passes < kMinPrefetchPasses) return out;
  const auto next_panels = static_cast<int>(
      (std::min(kBlockColumns, count - next_column) + kPanelWidth - 1) / kPanelWidth);
  const int per_pass = (next_panels + passes - 1) / passes;
  const int first = pass * per_pass;
  if (first >= next_panels) return out;
  out.first_column = next_column + first * kPanelWidth;
  out.count = std::min(per_pass, next_panels - first);
  return out;
}

// Fetches one cache line of each of `panels` panels `panel_stride` bytes
// apart into L2.
__attribute__((always_inline)) inline void prefetch_panel_lines(const char* line, int panels,
                                                                std::int64_t panel_stride) {
  for (int q = 0; q < panels; ++q) _mm_prefetch(line + q * panel_stride, _MM_HINT_T1);
}

// Calls block(row, rows_in_block, column, columns_in_block, panels,
// next_panels) for every register block of a rows x count product. Column
// blocks outside, row blocks inside: a block's panels (every input of 64
// columns) stay in L1/L2 while every row passes over them, and each pass
// prefetches part of the next block's (NextPanels).
template <typename Block>
void for_each_register_block(std::int64_t rows, std::int64_t count, Block&& block) {
  const auto passes = static_cast<int>((rows + kBlockRows - 1) / kBlockRows);
  for (std::int64_t c = 0; c < count; c += kBlockColumns) {
    const std::int64_t columns = std::min(kBlockColumns, count - c);
    const auto panels = static_cast<int>((columns + kPanelWidth - 1) / kPanelWidth);
    int pass = 0;
    for (std::int64_t r = 0; r < rows; r += kBlockRows, ++pass) {
      block(r, static_cast<int>(std::min<std::int64_t>(kBlockRows, rows - r)), c, columns, panels,
            next_panels_for_pass(c + kBlockColumns, count, pass, passes));
    }
  }
}

}  // namespace rapidqa::model::gemm

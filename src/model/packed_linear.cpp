#include "model/packed_linear.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <immintrin.h>

#include <stdexcept>

#include "common/simd_accumulate.h"
#include "model/cpu_features.h"
#include "model/fp32_gemm.h"
#include "model/gemm_blocking.h"
#include "model/vector_math.h"

namespace rapidqa::model {
namespace {

static_assert(PackedFloatMatrix::kPanelWidth == gemm::kPanelWidth);

struct BlockArgs {
  const float* x;  // first row of the block
  std::int64_t ldx;
  const float* w;  // first panel of the block
  std::int64_t panel_floats;  // from one panel to the next
  std::int64_t input_stride;  // from one input to the next within a panel (kPanelWidth when packed)
  std::int64_t inputs;
  const float* bias;  // at the block's first column, or null
  Activation activation;
  float* y;  // at the block's first row and column
  std::int64_t ldy;
  std::int64_t columns;  // valid columns in the block
  const char* prefetch;  // first of the next block's panels to prefetch (gemm::NextPanels)
  int prefetch_panels;   // 0: none
};

template <int R, int P>
struct Fp32Block {
  // acc += the block's rows times its panels over every input, prefetching
  // one line of each of b.prefetch_panels panels per input when Prefetch.
  template <bool Prefetch>
  __attribute__((target("avx512f"), always_inline)) static void accumulate(const BlockArgs& b, __m512 (&acc)[R][P]) {
    const float* w = b.w;
    const float* x = b.x;
    const char* line = b.prefetch;
    const std::int64_t panel_stride = b.panel_floats * static_cast<std::int64_t>(sizeof(float));
    for (std::int64_t i = 0; i < b.inputs; ++i, w += b.input_stride, ++x) {
      if constexpr (Prefetch) {
        gemm::prefetch_panel_lines(line, b.prefetch_panels, panel_stride);
        line += PackedFloatMatrix::kPanelWidth * sizeof(float);
      }
      __m512 wv[P];
#pragma GCC unroll 8
      for (int p = 0; p < P; ++p) wv[p] = _mm512_loadu_ps(w + p * b.panel_floats);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const __m512 xv = _mm512_set1_ps(x[r * b.ldx]);
#pragma GCC unroll 8
        for (int p = 0; p < P; ++p) simd::fma_accumulate(acc[r][p], xv, wv[p]);
      }
    }
  }

  __attribute__((target("avx512f"))) static void run(const BlockArgs& b) {
    __m512 acc[R][P];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
      for (int p = 0; p < P; ++p) acc[r][p] = _mm512_setzero_ps();
    }
    if (b.prefetch_panels > 0) {
      accumulate<true>(b, acc);
    } else {
      accumulate<false>(b, acc);
    }
#pragma GCC unroll 8
    for (int p = 0; p < P; ++p) {
      const __mmask16 mask = gemm::panel_mask(b.columns, p);
      const __m512 bias = b.bias ? _mm512_maskz_loadu_ps(mask, b.bias + 16 * p) : _mm512_setzero_ps();
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        _mm512_mask_storeu_ps(b.y + r * b.ldy + 16 * p, mask,
                              vmath::activate512(_mm512_add_ps(acc[r][p], bias), b.activation));
      }
    }
  }
};

}  // namespace

bool packed_linear_available() { return cpu_features().avx512; }

PackedFloatMatrix::PackedFloatMatrix(const float* weights, std::int64_t n, std::int64_t k)
    : n_(n), k_(k), data_(gemm::zeroed_aligned_array<float>(panels() * panel_floats())) {
  // Columns past n in the last panel stay zero.
  for (std::int64_t col = 0; col < n; ++col) {
    float* dst = data_.get() + (col / kPanelWidth) * panel_floats() + col % kPanelWidth;
    const float* src = weights + col * k;
    for (std::int64_t i = 0; i < k; ++i) dst[i * kPanelWidth] = src[i];
  }
}

at::Tensor PackedFloatMatrix::unpack() const {
  at::Tensor out = at::empty({n_, k_}, at::kFloat);
  float* dst = out.data_ptr<float>();
  for (std::int64_t col = 0; col < n_; ++col) {
    const float* src = data_.get() + (col / kPanelWidth) * panel_floats() + col % kPanelWidth;
    for (std::int64_t i = 0; i < k_; ++i) dst[col * k_ + i] = src[i * kPanelWidth];
  }
  return out;
}

namespace {

// Every register block of y[rows x count] = activation(x w + bias) over w's
// columns [0, count) (bias at those columns, or null). With prefetch_next,
// each row pass prefetches part of the next block: packed panels only, whose
// inputs are consecutive cache lines.
void run_fp32_blocks(const float* x, std::int64_t ldx, std::int64_t rows, const FloatPanels& w, std::int64_t count,
                     const float* bias, Activation activation, bool prefetch_next, float* y, std::int64_t ldy) {
  BlockArgs args{};
  args.ldx = ldx;
  args.panel_floats = w.panel_stride;
  args.input_stride = w.input_stride;
  args.inputs = w.inputs;
  args.activation = activation;
  args.ldy = ldy;
  gemm::for_each_register_block(rows, count, [&](std::int64_t r, int block_rows, std::int64_t c, std::int64_t columns,
                                                 int panels, gemm::NextPanels next) {
    args.x = x + r * ldx;
    args.w = w.first + (c / PackedFloatMatrix::kPanelWidth) * w.panel_stride;
    args.prefetch = reinterpret_cast<const char*>(w.first + (next.first_column / PackedFloatMatrix::kPanelWidth) *
                                                                  w.panel_stride);
    args.prefetch_panels = prefetch_next ? next.count : 0;
    args.bias = bias ? bias + c : nullptr;
    args.y = y + r * ldy + c;
    args.columns = columns;
    gemm::run_block<Fp32Block>(block_rows, panels, args);
  });
}

}  // namespace

void fp32_gemm_columns(const float* x, std::int64_t ldx, std::int64_t rows, const PackedFloatMatrix& w,
                       std::int64_t n0, std::int64_t count, const float* bias, Activation activation, float* y,
                       std::int64_t ldy) {
  const FloatPanels panels{w.panel(n0 / PackedFloatMatrix::kPanelWidth), w.panel_floats(),
                           PackedFloatMatrix::kPanelWidth, w.inputs()};
  run_fp32_blocks(x, ldx, rows, panels, count, bias ? bias + n0 : nullptr, activation, /*prefetch_next=*/true,
                  y + n0, ldy);
}

void fp32_gemm_panels(const float* x, std::int64_t ldx, std::int64_t rows, const FloatPanels& w, std::int64_t count,
                      float* y, std::int64_t ldy) {
  // Nothing prefetched: these weights are small and already in cache, and
  // values read in place are not consecutive lines.
  run_fp32_blocks(x, ldx, rows, w, count, nullptr, Activation::kNone, /*prefetch_next=*/false, y, ldy);
}

PackedLinear::PackedLinear(const at::Tensor& weight_in, const at::Tensor& bias, Activation activation)
    : activation_(activation) {
  if (!packed_linear_available()) throw std::logic_error("PackedLinear needs AVX-512");
  c10::InferenceMode inference;
  const at::Tensor weight = weight_in.to(at::kFloat).contiguous();
  if (weight.dim() != 2) throw std::invalid_argument("PackedLinear: weight must be 2-D");
  packed_ = PackedFloatMatrix(weight.data_ptr<float>(), weight.size(0), weight.size(1));
  tiles_ = ColumnTiles(weight.size(0));
  if (bias.defined()) {
    bias_ = bias.to(at::kFloat).contiguous().clone();
    if (bias_.dim() != 1 || bias_.size(0) != weight.size(0)) {
      throw std::invalid_argument("PackedLinear: bias length must equal the output features");
    }
  }
}

std::size_t PackedLinear::weight_bytes() const {
  return packed_.bytes() + (bias_.defined() ? static_cast<std::size_t>(bias_.numel()) * sizeof(float) : 0);
}

at::Tensor PackedLinear::forward(const at::Tensor& input) const {
  LinearIo io = prepare_linear_io(input, in_features(), out_features());
  forward_rows(io.input.data_ptr<float>(), io.rows, io.output.data_ptr<float>());
  return io.output;
}

void PackedLinear::forward_rows(const float* x, std::int64_t rows, float* y) const {
  const float* bias = bias_.defined() ? bias_.data_ptr<float>() : nullptr;
  const std::int64_t in = in_features(), out = out_features();
  run_tiled(rows, tiles_, [&](std::int64_t r0, std::int64_t count, std::int64_t tile) {
    fp32_gemm_columns(x + r0 * in, in, count, packed_, tiles_.begin(tile), tiles_.size(tile), bias, activation_,
                      y + r0 * out, out);
  });
}

}  // namespace rapidqa::model

#include "model/packed_linear.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <immintrin.h>
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>

#include "model/vector_math.h"

namespace rapidqa::model {
namespace {

// 6 rows x 4 panels = 24 accumulators, 4 weight registers and one
// broadcast: 29 of the 32 zmm registers.
constexpr int kRows = 6;
constexpr int kPanels = 4;
constexpr std::size_t kAlign = 64;

struct BlockArgs {
  const float* x;  // first row of the block
  std::int64_t ldx;
  const float* w;  // first panel of the block
  std::int64_t panel_floats;
  std::int64_t inputs;
  const float* bias;  // at the block's first column, or null
  Activation activation;
  float* y;  // at the block's first row and column
  std::int64_t ldy;
  std::int64_t columns;  // valid columns in the block
};

// acc += a * b. An asm statement for the reason int8_gemm.cpp gives: GCC 12
// otherwise copies and spills the accumulator array around each call.
__attribute__((target("avx512f"), always_inline)) inline void fma_accumulate(__m512& acc, __m512 a, __m512 b) {
  asm("vfmadd231ps %2, %1, %0" : "+v"(acc) : "v"(a), "v"(b));
}

template <int R, int P>
__attribute__((target("avx512f"))) void block_kernel(const BlockArgs& b) {
  __m512 acc[R][P];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int p = 0; p < P; ++p) acc[r][p] = _mm512_setzero_ps();
  }
  const float* w = b.w;
  const float* x = b.x;
  for (std::int64_t i = 0; i < b.inputs; ++i, w += PackedFloatMatrix::kPanelWidth, ++x) {
    __m512 wv[P];
#pragma GCC unroll 8
    for (int p = 0; p < P; ++p) wv[p] = _mm512_load_ps(w + p * b.panel_floats);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512 xv = _mm512_set1_ps(x[r * b.ldx]);
#pragma GCC unroll 8
      for (int p = 0; p < P; ++p) fma_accumulate(acc[r][p], xv, wv[p]);
    }
  }
#pragma GCC unroll 8
  for (int p = 0; p < P; ++p) {
    const std::int64_t valid = b.columns - 16 * p;
    const auto mask = static_cast<__mmask16>(valid >= 16 ? 0xFFFF : (1u << valid) - 1);
    const __m512 bias = b.bias ? _mm512_maskz_loadu_ps(mask, b.bias + 16 * p) : _mm512_setzero_ps();
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      _mm512_mask_storeu_ps(b.y + r * b.ldy + 16 * p, mask,
                            vmath::activate512(_mm512_add_ps(acc[r][p], bias), b.activation));
    }
  }
}

using BlockKernel = void (*)(const BlockArgs&);

template <int R>
constexpr BlockKernel kernel_for(int panels) {
  return panels == 1 ? block_kernel<R, 1> : panels == 2 ? block_kernel<R, 2> : panels == 3 ? block_kernel<R, 3>
                                                                                           : block_kernel<R, 4>;
}

BlockKernel select_kernel(int rows, int panels) {
  switch (rows) {
    case 1: return kernel_for<1>(panels);
    case 2: return kernel_for<2>(panels);
    case 3: return kernel_for<3>(panels);
    case 4: return kernel_for<4>(panels);
    case 5: return kernel_for<5>(panels);
    default: return kernel_for<6>(panels);
  }
}

}  // namespace

bool packed_linear_available() {
  static const bool available = [] {
    if (!__builtin_cpu_supports("avx512f")) return false;
    using dnnl::cpu_isa;
    switch (dnnl::get_effective_cpu_isa()) {
      case cpu_isa::avx512_core:
      case cpu_isa::avx512_core_vnni:
      case cpu_isa::avx512_core_bf16:
      case cpu_isa::avx512_core_amx:
        return true;
      default:
        return false;
    }
  }();
  return available;
}

void PackedFloatMatrix::FreeAligned::operator()(void* p) const { std::free(p); }

PackedFloatMatrix::PackedFloatMatrix(const float* weights, std::int64_t n, std::int64_t k) : n_(n), k_(k) {
  const std::size_t bytes = std::max<std::size_t>((this->bytes() + kAlign - 1) / kAlign * kAlign, kAlign);
  void* p = std::aligned_alloc(kAlign, bytes);
  if (!p) throw std::bad_alloc();
  std::memset(p, 0, bytes);  // columns past n in the last panel stay zero
  data_.reset(static_cast<float*>(p));
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

void fp32_gemm_columns(const float* x, std::int64_t ldx, std::int64_t rows, const PackedFloatMatrix& w,
                       std::int64_t n0, std::int64_t count, const float* bias, Activation activation, float* y,
                       std::int64_t ldy) {
  constexpr std::int64_t kBlockColumns = kPanels * PackedFloatMatrix::kPanelWidth;
  BlockArgs args{};
  args.ldx = ldx;
  args.panel_floats = w.panel_floats();
  args.inputs = w.inputs();
  args.activation = activation;
  args.ldy = ldy;
  // Column blocks outside, row blocks inside: a block's four panels stay
  // in L2 while every row block passes over them.
  for (std::int64_t c = 0; c < count; c += kBlockColumns) {
    const std::int64_t col = n0 + c;
    const std::int64_t columns = std::min(kBlockColumns, count - c);
    const int panels = static_cast<int>((columns + PackedFloatMatrix::kPanelWidth - 1) / PackedFloatMatrix::kPanelWidth);
    args.w = w.panel(col / PackedFloatMatrix::kPanelWidth);
    args.bias = bias ? bias + col : nullptr;
    args.columns = columns;
    const BlockKernel full = select_kernel(kRows, panels);
    for (std::int64_t r = 0; r < rows; r += kRows) {
      const auto block_rows = static_cast<int>(std::min<std::int64_t>(kRows, rows - r));
      args.x = x + r * ldx;
      args.y = y + r * ldy + col;
      (block_rows == kRows ? full : select_kernel(block_rows, panels))(args);
    }
  }
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

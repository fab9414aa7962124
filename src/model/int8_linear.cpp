#include "model/int8_linear.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <immintrin.h>
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "model/cpu_features.h"
#include "model/cpu_kernels.h"
#include "model/int8_gemm.h"
#include "model/onednn_linear.h"
#include "model/tiled_matmul.h"
#include "runtime/work_pool.h"

namespace rapidqa::model {
namespace {

// Below this many elements a single thread quantizes faster than waking
// the pool.
constexpr std::int64_t kParallelQuantizeGrain = 1 << 15;

__attribute__((target("avx2,fma"))) void quantize_avx2(const float* x, std::int64_t n, float inverse_scale,
                                                       float zero_point, float qmax, std::uint8_t* out) {
  const __m256 inv = _mm256_set1_ps(inverse_scale);
  const __m256 zp = _mm256_set1_ps(zero_point);
  const __m256 lo = _mm256_setzero_ps();
  const __m256 hi = _mm256_set1_ps(qmax);
  std::int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    __m256i q[4];
    for (int j = 0; j < 4; ++j) {
      // Round the scaled value first (half to even, the default rounding
      // mode), then add the zero point, as quantize_per_tensor does.
      __m256 v = _mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i + 8 * j), inv),
                                 _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      v = _mm256_min_ps(_mm256_max_ps(_mm256_add_ps(v, zp), lo), hi);
      q[j] = _mm256_cvtps_epi32(v);
    }
    // 32-bit -> 16-bit -> 8-bit packs work per 128-bit lane; the permute
    // restores element order.
    const __m256i w01 = _mm256_packus_epi32(q[0], q[1]);
    const __m256i w23 = _mm256_packus_epi32(q[2], q[3]);
    __m256i b = _mm256_packus_epi16(w01, w23);
    b = _mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), b);
  }
  for (; i < n; ++i) {
    const float v = std::nearbyint(x[i] * inverse_scale) + zero_point;
    out[i] = static_cast<std::uint8_t>(std::min(std::max(v, 0.0f), qmax));
  }
}

void quantize_scalar(const float* x, std::int64_t n, float inverse_scale, float zero_point, float qmax,
                     std::uint8_t* out) {
  for (std::int64_t i = 0; i < n; ++i) {
    const float v = std::nearbyint(x[i] * inverse_scale) + zero_point;
    out[i] = static_cast<std::uint8_t>(std::min(std::max(v, 0.0f), qmax));
  }
}

}  // namespace

bool all_positive_and_finite(const at::Tensor& scales) {
  const at::Tensor s = scales.to(at::kFloat).contiguous();
  const float* p = s.data_ptr<float>();
  for (std::int64_t i = 0; i < s.numel(); ++i) {
    if (!(p[i] > 0.0f && p[i] <= FLT_MAX)) return false;  // also false for NaN
  }
  return true;
}

QuantParams affine_qparams(float min_value, float max_value, std::int32_t qmin, std::int32_t qmax) {
  const float min_neg = std::min(min_value, 0.0f);
  const float max_pos = std::max(max_value, 0.0f);
  QuantParams p;
  p.scale = std::max((max_pos - min_neg) / static_cast<float>(qmax - qmin), FLT_EPSILON);
  const auto zp = static_cast<std::int32_t>(qmin - std::nearbyint(min_neg / p.scale));
  p.zero_point = std::clamp(zp, qmin, qmax);
  return p;
}

QuantParams symmetric_qparams(float min_value, float max_value, std::int32_t qmin, std::int32_t qmax) {
  const float max_abs = std::max(-std::min(min_value, 0.0f), std::max(max_value, 0.0f));
  QuantParams p;
  p.scale = std::max(max_abs / (static_cast<float>(qmax - qmin) / 2.0f), FLT_EPSILON);
  p.zero_point = qmin < 0 ? 0 : (qmin + qmax + 1) / 2;
  return p;
}

at::Tensor QuantizedWeight::dequantize() const { return values.to(at::kFloat).mul_(scales.unsqueeze(1)); }

QuantizedWeight quantize_weight_per_channel(const at::Tensor& weight_in) {
  c10::InferenceMode inference;
  const at::Tensor weight = weight_in.to(at::kFloat).contiguous();
  if (weight.dim() != 2) throw std::invalid_argument("quantize_weight_per_channel: weight must be 2-D");
  const at::Tensor mins = std::get<0>(weight.min(1));
  const at::Tensor maxs = std::get<0>(weight.max(1));
  const std::int64_t rows = weight.size(0);
  QuantizedWeight q;
  q.scales = at::empty({rows}, at::kFloat);
  float* s = q.scales.data_ptr<float>();
  const float* lo = mins.data_ptr<float>();
  const float* hi = maxs.data_ptr<float>();
  for (std::int64_t r = 0; r < rows; ++r) s[r] = symmetric_qparams(lo[r], hi[r], -128, 127).scale;
  // round(w / s) clamped, as quantize_per_channel computes it.
  q.values = at::round(weight / q.scales.unsqueeze(1)).clamp_(-128, 127).to(at::kChar).contiguous();
  return q;
}

bool int8_needs_reduced_range() { return !cpu_features().int8_vnni; }

void quantize_to_u8(const float* x, std::int64_t count, QuantParams params, std::int32_t qmax, std::uint8_t* out) {
  const bool has_avx2 = cpu_features().avx2;
  const float inverse = 1.0f / params.scale;
  const auto zp = static_cast<float>(params.zero_point);
  const auto hi = static_cast<float>(qmax);
  auto run = [&](std::int64_t begin, std::int64_t end) {
    if (has_avx2) {
      quantize_avx2(x + begin, end - begin, inverse, zp, hi, out + begin);
    } else {
      quantize_scalar(x + begin, end - begin, inverse, zp, hi, out + begin);
    }
  };
  runtime::parallel_ranges(count, kParallelQuantizeGrain, run);
}

struct Int8Linear::Impl {
  // With AVX-512 VNNI, the own kernel (int8_gemm.h) over column tiles;
  // elsewhere oneDNN, one primitive per tile.
  bool own_kernel = false;
  PackedInt8Matrix vnni;
  ColumnTiles vnni_tiles;
  TilePrimitives packed;             // s8 weights per tile (oneDNN)
  at::Tensor static_output_scales;  // [out]: input scale x channel scale (static, oneDNN)
};

namespace {

// The range of x over the pool for large inputs.
std::pair<float, float> input_range(const float* x, std::int64_t count) {
  const auto chunks = static_cast<std::size_t>((count + kParallelQuantizeGrain - 1) / kParallelQuantizeGrain);
  std::vector<float> lows(chunks), highs(chunks);
  runtime::parallel_ranges(count, kParallelQuantizeGrain, [&](std::int64_t begin, std::int64_t end) {
    const auto c = static_cast<std::size_t>(begin / kParallelQuantizeGrain);
    kernels::min_max(x + begin, end - begin, &lows[c], &highs[c]);
  });
  return {*std::min_element(lows.begin(), lows.end()), *std::max_element(highs.begin(), highs.end())};
}

}  // namespace

Int8Linear::Int8Linear(QuantizedWeight weight, const at::Tensor& bias, Activation activation,
                       InputQuantization input)
    : impl_(std::make_unique<Impl>()), weight_(std::move(weight)), activation_(activation), input_(input) {
  using namespace dnnl;
  c10::InferenceMode inference;
  if (weight_.values.dim() != 2 || weight_.values.scalar_type() != at::kChar) {
    throw std::invalid_argument("Int8Linear: weight values must be a 2-D int8 tensor");
  }
  out_ = weight_.values.size(0);
  in_ = weight_.values.size(1);
  weight_.values = weight_.values.contiguous();
  weight_.scales = weight_.scales.to(at::kFloat).contiguous();
  if (weight_.scales.dim() != 1 || weight_.scales.size(0) != out_) {
    throw std::invalid_argument("Int8Linear: one weight scale per output channel is needed");
  }
  // The loader checks these with the tensor named; this guards every other
  // caller, since a bad scale or range silently changes every output.
  if (!all_positive_and_finite(weight_.scales)) {
    throw std::invalid_argument("Int8Linear: weight scales must be finite and positive");
  }
  if (!input_.dynamic && !(std::isfinite(input_.range_min) && std::isfinite(input_.range_max) &&
                           input_.range_min <= input_.range_max)) {
    throw std::invalid_argument("Int8Linear: the static input range must be finite with min <= max");
  }
  if (bias.defined()) {
    bias_ = bias.to(at::kFloat).contiguous().clone();
    if (bias_.dim() != 1 || bias_.size(0) != out_) {
      throw std::invalid_argument("Int8Linear: bias length must equal the output features");
    }
  }
  if (int8_needs_reduced_range()) input_.reduced_range = true;
  if (!input_.dynamic) {
    static_params_ = affine_qparams(input_.range_min, input_.range_max, 0, activation_qmax(input_.reduced_range));
  }

  if (vnni_gemm_available()) {
    impl_->own_kernel = true;
    impl_->vnni = PackedInt8Matrix(static_cast<const std::int8_t*>(weight_.values.data_ptr()), out_, in_);
    impl_->vnni_tiles = ColumnTiles(out_);
    return;
  }
  const memory::dim rows = DNNL_RUNTIME_DIM_VAL;
  impl_->packed.build(
      out_,
      [&](std::int64_t width) {
        const memory::desc src_md({rows, in_}, memory::data_type::u8, memory::format_tag::ab);
        const memory::desc weights_any({in_, width}, memory::data_type::s8, memory::format_tag::any);
        // A dense destination (TilePrimitives::execute_dense).
        const memory::desc dst_md({rows, width}, memory::data_type::f32, memory::format_tag::ab);
        const memory::desc bias_md({1, width}, memory::data_type::f32, memory::format_tag::ab);
        primitive_attr attr;
        attr.set_output_scales(1 << 1, {DNNL_RUNTIME_F32_VAL});
        attr.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
        // Post-ops run after the output scales, so the float bias is added to the
        // real-valued product and the activation sees the finished sum.
        post_ops ops;
        if (bias_.defined()) ops.append_binary(algorithm::binary_add, bias_md);
        append_activation(ops, activation);
        attr.set_post_ops(ops);
        return matmul::primitive_desc(matmul::desc(src_md, weights_any, dst_md), attr, cpu_engine());
      },
      [&](std::int64_t n0, std::int64_t width) {
        // Our weights are [out, in] row-major: a tile's rows are [in, width] in layout "ba".
        return memory({{in_, width}, memory::data_type::s8, memory::format_tag::ba}, cpu_engine(),
                      static_cast<std::int8_t*>(weight_.values.data_ptr()) + n0 * in_);
      });
  if (!input_.dynamic) impl_->static_output_scales = weight_.scales * static_params_.scale;
}

Int8Linear::~Int8Linear() = default;

std::size_t Int8Linear::weight_bytes() const {
  // Packed weights, channel scales and bias.
  const std::size_t packed = impl_->own_kernel ? impl_->vnni.bytes() : impl_->packed.packed_bytes;
  return packed + static_cast<std::size_t>(out_) * sizeof(float) *
                                          (bias_.defined() ? 2 : 1);
}

at::Tensor Int8Linear::forward(const at::Tensor& input) const {
  LinearIo io = prepare_linear_io(input, in_, out_);
  forward_rows(io.input.data_ptr<float>(), io.rows, io.output.data_ptr<float>());
  return io.output;
}

void Int8Linear::forward_rows(const float* x, std::int64_t rows, float* y) const {
  using namespace dnnl;
  if (rows == 0) return;
  if (impl_->own_kernel) {
    forward_rows_vnni(x, rows, y);
    return;
  }
  const TilePrimitives& packed = impl_->packed;
  const std::int32_t qmax = activation_qmax(input_.reduced_range);
  // Per calling thread, reused across calls: the quantized input and the
  // output scales of a dynamic layer.
  thread_local std::vector<std::uint8_t> quantized;
  thread_local std::vector<float> dynamic_scales;
  QuantParams params = static_params_;
  const float* output_scales = nullptr;
  if (input_.dynamic) {
    const auto [lo, hi] = input_range(x, rows * in_);
    params = affine_qparams(lo, hi, 0, qmax);
    dynamic_scales.resize(static_cast<std::size_t>(out_));
    const float* channel = weight_.scales.data_ptr<float>();
    for (std::int64_t n = 0; n < out_; ++n) dynamic_scales[static_cast<std::size_t>(n)] = channel[n] * params.scale;
    output_scales = dynamic_scales.data();
  } else {
    output_scales = impl_->static_output_scales.data_ptr<float>();
  }
  quantized.resize(static_cast<std::size_t>(rows * in_));
  quantize_to_u8(x, rows * in_, params, qmax, quantized.data());
  const std::uint8_t* q = quantized.data();
  float* bias = bias_.defined() ? bias_.data_ptr<float>() : nullptr;
  const std::int32_t zero_point = params.zero_point;
  run_tiled(rows, packed.tiles, [&](std::int64_t r0, std::int64_t count, std::int64_t tile) {
    const std::int64_t n0 = packed.tiles.begin(tile), width = packed.tiles.size(tile);
    const engine& eng = cpu_engine();
    std::int32_t zp = zero_point;
    memory src({{count, in_}, memory::data_type::u8, memory::format_tag::ab}, eng,
               const_cast<std::uint8_t*>(q + r0 * in_));
    memory scales({{width}, memory::data_type::f32, memory::format_tag::x}, eng,
                  const_cast<float*>(output_scales + n0));
    memory zero_point_memory({{1}, memory::data_type::s32, memory::format_tag::x}, eng, &zp);
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, src},
                                         {DNNL_ARG_WEIGHTS, packed.weights[static_cast<std::size_t>(tile)]},
                                         {DNNL_ARG_ATTR_OUTPUT_SCALES, scales},
                                         {DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC, zero_point_memory}};
    if (bias) {
      args.emplace(DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1,
                   memory({{1, width}, memory::data_type::f32, memory::format_tag::ab}, eng, bias + n0));
    }
    packed.execute_dense(tile, r0, count, args, y, out_);
  });
}

void Int8Linear::forward_rows_vnni(const float* x, std::int64_t rows, float* y) const {
  const PackedInt8Matrix& packed = impl_->vnni;
  const std::int32_t qmax = activation_qmax(input_.reduced_range);
  QuantParams params = static_params_;
  if (input_.dynamic) {
    const auto [lo, hi] = input_range(x, rows * in_);
    params = affine_qparams(lo, hi, 0, qmax);
  }
  // Rows padded to whole groups of 4 inputs; the padding meets zero weights.
  thread_local std::vector<std::uint8_t> quantized;
  const std::int64_t lda = packed.padded_inputs();
  quantized.resize(static_cast<std::size_t>(rows * lda));
  if (lda == in_) {
    quantize_to_u8(x, rows * in_, params, qmax, quantized.data());
  } else {
    for (std::int64_t r = 0; r < rows; ++r) quantize_to_u8(x + r * in_, in_, params, qmax, quantized.data() + r * lda);
  }
  Int8Epilogue epilogue;
  epilogue.input_scale = params.scale;
  epilogue.zero_point = params.zero_point;
  epilogue.channel_scales = weight_.scales.data_ptr<float>();
  epilogue.bias = bias_.defined() ? bias_.data_ptr<float>() : nullptr;
  epilogue.activation = activation_;
  const std::uint8_t* q = quantized.data();
  const ColumnTiles& tiles = impl_->vnni_tiles;
  run_tiled(rows, tiles, [&](std::int64_t r0, std::int64_t count, std::int64_t tile) {
    int8_gemm_columns(q + r0 * lda, lda, count, packed, tiles.begin(tile), tiles.size(tile), epilogue, y + r0 * out_,
                      out_);
  });
}

}  // namespace rapidqa::model

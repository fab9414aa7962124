#include "model/bf16_linear.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "model/cpu_features.h"
#include "model/onednn_linear.h"
#include "model/tiled_matmul.h"
#include "runtime/work_pool.h"

namespace rapidqa::model {
namespace {

// Round to nearest even on the bit pattern; written so the compiler
// vectorises it at the width of the function it is inlined into.
__attribute__((always_inline)) inline void round_lanes(const float* x, std::int64_t n, std::uint16_t* out) {
  for (std::int64_t i = 0; i < n; ++i) {
    std::uint32_t u;
    std::memcpy(&u, &x[i], sizeof u);
    u += 0x7FFFu + ((u >> 16) & 1u);
    out[i] = static_cast<std::uint16_t>(u >> 16);
  }
}
__attribute__((target("avx512f,avx512bw"))) void round_avx512(const float* x, std::int64_t n, std::uint16_t* out) {
  round_lanes(x, n, out);
}
__attribute__((target("avx2"))) void round_avx2(const float* x, std::int64_t n, std::uint16_t* out) {
  round_lanes(x, n, out);
}

constexpr std::int64_t kParallelRoundGrain = 1 << 15;

}  // namespace

bool bf16_native() { return cpu_features().bf16; }

const char* bf16_requirement() { return "a CPU with AVX512-BF16 or AMX-BF16 instructions"; }

void round_to_bf16(const float* x, std::int64_t n, std::uint16_t* out) {
  const bool avx512 = cpu_features().avx512;
  const bool avx2 = cpu_features().avx2;
  auto run = [&](std::int64_t begin, std::int64_t end) {
    if (avx512) {
      round_avx512(x + begin, end - begin, out + begin);
    } else if (avx2) {
      round_avx2(x + begin, end - begin, out + begin);
    } else {
      round_lanes(x + begin, end - begin, out + begin);
    }
  };
  runtime::parallel_ranges(n, kParallelRoundGrain, run);
}

struct Bf16Linear::Impl {
  TilePrimitives packed;     // bf16 weights per tile
  at::Tensor rounded_weight;  // [out, in] bf16 (for dense_weight)
};

Bf16Linear::Bf16Linear(const at::Tensor& weight_in, const at::Tensor& bias, Activation activation)
    : impl_(std::make_unique<Impl>()), activation_(activation) {
  using namespace dnnl;
  c10::InferenceMode inference;
  const at::Tensor weight = weight_in.to(at::kFloat).contiguous();
  if (weight.dim() != 2) throw std::invalid_argument("Bf16Linear: weight must be 2-D");
  out_ = weight.size(0);
  in_ = weight.size(1);
  if (bias.defined()) {
    bias_ = bias.to(at::kFloat).contiguous().clone();
    if (bias_.dim() != 1 || bias_.size(0) != out_) {
      throw std::invalid_argument("Bf16Linear: bias length must equal the output features");
    }
  }
  impl_->rounded_weight = at::empty({out_, in_}, at::kBFloat16);
  round_to_bf16(weight.data_ptr<float>(), weight.numel(),
                reinterpret_cast<std::uint16_t*>(impl_->rounded_weight.data_ptr()));
  const memory::dim rows = DNNL_RUNTIME_DIM_VAL;
  post_ops ops;
  append_activation(ops, activation);
  primitive_attr attr;
  attr.set_post_ops(ops);
  impl_->packed.build(
      out_,
      [&](std::int64_t width) {
        const memory::desc src_md({rows, in_}, memory::data_type::bf16, memory::format_tag::ab);
        const memory::desc weights_any({in_, width}, memory::data_type::bf16, memory::format_tag::any);
        // A dense destination (TilePrimitives::execute_dense).
        const memory::desc dst_md({rows, width}, memory::data_type::f32, memory::format_tag::ab);
        const memory::desc bias_md({1, width}, memory::data_type::f32, memory::format_tag::ab);
        const matmul::desc desc = bias_.defined() ? matmul::desc(src_md, weights_any, bias_md, dst_md)
                                                  : matmul::desc(src_md, weights_any, dst_md);
        return matmul::primitive_desc(desc, attr, cpu_engine());
      },
      [&](std::int64_t n0, std::int64_t width) {
        return memory({{in_, width}, memory::data_type::bf16, memory::format_tag::ba}, cpu_engine(),
                      static_cast<std::uint16_t*>(impl_->rounded_weight.data_ptr()) + n0 * in_);
      });
}

Bf16Linear::~Bf16Linear() = default;

std::size_t Bf16Linear::weight_bytes() const {
  return impl_->packed.packed_bytes + (bias_.defined() ? static_cast<std::size_t>(out_) * sizeof(float) : 0);
}

at::Tensor Bf16Linear::dense_weight() const { return impl_->rounded_weight.to(at::kFloat); }

at::Tensor Bf16Linear::forward(const at::Tensor& input) const {
  LinearIo io = prepare_linear_io(input, in_, out_);
  forward_rows(io.input.data_ptr<float>(), io.rows, io.output.data_ptr<float>());
  return io.output;
}

void Bf16Linear::forward_rows(const float* x, std::int64_t rows, float* y) const {
  using namespace dnnl;
  if (rows == 0) return;
  const TilePrimitives& packed = impl_->packed;
  thread_local std::vector<std::uint16_t> rounded;  // per calling thread, reused
  rounded.resize(static_cast<std::size_t>(rows * in_));
  round_to_bf16(x, rows * in_, rounded.data());
  const std::uint16_t* src_data = rounded.data();
  float* bias = bias_.defined() ? bias_.data_ptr<float>() : nullptr;
  run_tiled(rows, packed.tiles, [&](std::int64_t r0, std::int64_t count, std::int64_t tile) {
    const std::int64_t n0 = packed.tiles.begin(tile), width = packed.tiles.size(tile);
    const engine& eng = cpu_engine();
    memory src({{count, in_}, memory::data_type::bf16, memory::format_tag::ab}, eng,
               const_cast<std::uint16_t*>(src_data + r0 * in_));
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, src},
                                         {DNNL_ARG_WEIGHTS, packed.weights[static_cast<std::size_t>(tile)]}};
    if (bias) {
      args.emplace(DNNL_ARG_BIAS, memory({{1, width}, memory::data_type::f32, memory::format_tag::ab}, eng, bias + n0));
    }
    packed.execute_dense(tile, r0, count, args, y, out_);
  });
}

}  // namespace rapidqa::model

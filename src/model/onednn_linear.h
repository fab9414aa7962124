// OneDnnLinear: an FP32 linear layer through oneDNN's matmul primitive, with
// the bias and activation fused as post-ops. The output columns are cut
// into tiles (tiled_matmul.h), each tile's weights reordered once into
// oneDNN's preferred blocked layout, and each call runs one single-threaded
// primitive per tile and row block on the WorkPool. One primitive per tile
// width serves every row count (the row dimension is a run-time value).
//
// make_fp32_linear() picks the FP32 layer: the packed AVX-512 kernel
// (packed_linear.h) where the CPU has AVX-512, and elsewhere whichever of
// this and the OpenBLAS DenseLinear is faster for the weight shape on the
// machine it runs on (measured once per shape and remembered).
//
// Thread safety: forward() is thread-safe (oneDNN primitives are).
#pragma once

#include <ATen/Tensor.h>
#include <oneapi/dnnl/dnnl.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <unordered_map>
#include <vector>

#include "model/linear_op.h"
#include "model/tiled_matmul.h"

namespace rapidqa::model {

class OneDnnLinear final : public LinearOp {
 public:
  // weight [out, in], bias [out] or undefined.
  OneDnnLinear(const at::Tensor& weight, const at::Tensor& bias, Activation activation);
  ~OneDnnLinear() override;

  at::Tensor forward(const at::Tensor& input) const override;
  void forward_rows(const float* x, std::int64_t rows, float* y) const override;
  std::int64_t in_features() const override { return in_; }
  std::int64_t out_features() const override { return out_; }
  Activation activation() const override { return activation_; }
  std::string kind() const override { return "f32-onednn"; }
  std::size_t weight_bytes() const override;
  at::Tensor dense_weight() const override;  // reordered back from the blocked layout
  at::Tensor dense_bias() const override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::int64_t in_ = 0, out_ = 0;
  Activation activation_;
};

// The CPU engine every oneDNN primitive of the runtime uses, and the
// calling thread's stream on it (primitives run on the thread that
// executes them: the WorkPool limits OpenMP to one thread inside tasks).
dnnl::engine& cpu_engine();
dnnl::stream& thread_stream();
// The activation as a oneDNN eltwise post-op appended to ops (none: nothing).
void append_activation(dnnl::post_ops& ops, Activation activation);

// One layer's column tiles as oneDNN runs them (FP32, BF16 and INT8 alike):
// a primitive per tile width and each tile's weights reordered once into
// its primitive's layout.
struct TilePrimitives {
  ColumnTiles tiles;
  std::vector<dnnl::matmul> primitives;  // [0] the common width, [1] a narrower last tile
  std::vector<dnnl::memory> weights;     // per tile
  std::size_t packed_bytes = 0;          // the packed weights'

  // describe(width): the primitive for a tile that wide; plain(n0, width):
  // that tile's weights as they are ([in, width] in layout "ba").
  void build(std::int64_t out, const std::function<dnnl::matmul::primitive_desc(std::int64_t)>& describe,
             const std::function<dnnl::memory(std::int64_t, std::int64_t)>& plain);
  const dnnl::matmul& primitive_for(std::int64_t tile) const {
    return tiles.size(tile) == tiles.width() ? primitives[0] : primitives[1];
  }
  // Runs `tile`'s primitive with args (all but the destination) into a
  // per-thread dense block of count rows, then copies it into place in y
  // (rows of `stride` floats, the tile's columns, from row r0): oneDNN 2.6
  // has fast int8 and bf16 kernels only for a dense destination (a strided
  // one falls back to its reference code, 1000x slower).
  void execute_dense(std::int64_t tile, std::int64_t r0, std::int64_t count,
                     std::unordered_map<int, dnnl::memory>& args, float* y, std::int64_t stride) const;
};

enum class Fp32Backend { kAuto, kOpenBlas, kOneDnn, kPacked };

// The FP32 linear layer for this shape on this machine. kAuto takes the
// packed AVX-512 kernel (packed_linear.h) where the CPU has AVX-512, and
// elsewhere measures oneDNN against OpenBLAS once per (out, in) shape at a
// few row counts; kPacked falls back the same way without AVX-512. The
// environment variable RAPIDQA_FP32_BACKEND=openblas|onednn|packed
// overrides kAuto.
std::unique_ptr<LinearOp> make_fp32_linear(const at::Tensor& weight, const at::Tensor& bias, Activation activation,
                                           Fp32Backend backend = Fp32Backend::kAuto);

}  // namespace rapidqa::model

// The runtime's element-wise kernels against ATen's own: softmax, residual
// LayerNorm, min/max and one attention head, over lengths that exercise
// every vector tail. ctest runs them twice: at the CPU's widest ISA and
// with ONEDNN_MAX_CPU_ISA=AVX2 (the kernels follow oneDNN's limit).
#include <ATen/ATen.h>
#include <catch2/catch.hpp>

#include <cmath>

#include "model/cpu_kernels.h"

namespace kernels = rapidqa::model::kernels;

namespace {
double max_abs_diff(const at::Tensor& a, const at::Tensor& b) { return (a - b).abs().max().item<double>(); }
}  // namespace

TEST_CASE("softmax_rows matches ATen's softmax at every length", "[kernels]") {
  INFO("vector ISA " << kernels::vector_isa());
  at::manual_seed(1);
  for (const std::int64_t cols : {1, 2, 7, 15, 16, 17, 31, 33, 64, 100, 128, 257}) {
    INFO("columns " << cols);
    at::Tensor x = at::randn({5, cols + 3}) * 8;  // stride wider than the row
    x[0].fill_(0.0);                               // a flat row
    x[1][0] = 80.0;                                // a dominant entry
    at::Tensor expected = at::softmax(x.narrow(1, 0, cols), 1);
    at::Tensor ours = x.clone();
    kernels::softmax_rows(ours.data_ptr<float>(), 5, cols, cols + 3);
    CHECK(max_abs_diff(ours.narrow(1, 0, cols), expected) < 1e-6);
    CHECK(at::equal(ours.narrow(1, cols, 3), x.narrow(1, cols, 3)));  // beyond the row: untouched
  }
}

TEST_CASE("residual_layer_norm matches ATen's layer_norm of the sum", "[kernels]") {
  INFO("vector ISA " << kernels::vector_isa());
  at::manual_seed(2);
  for (const std::int64_t width : {2, 15, 16, 33, 128, 384, 768, 1000}) {
    INFO("width " << width);
    const at::Tensor x = at::randn({6, width}) * 3 + 1, residual = at::randn({6, width});
    const at::Tensor gamma = at::randn({width}), beta = at::randn({width});
    at::Tensor ours = x.clone();
    kernels::residual_layer_norm(ours.data_ptr<float>(), residual.data_ptr<float>(), gamma.data_ptr<float>(),
                                 beta.data_ptr<float>(), 1e-12f, 6, width);
    CHECK(max_abs_diff(ours, at::layer_norm(x + residual, {width}, gamma, beta, 1e-12)) < 1e-4);
    at::Tensor plain = x.clone();
    kernels::residual_layer_norm(plain.data_ptr<float>(), nullptr, gamma.data_ptr<float>(), beta.data_ptr<float>(),
                                 1e-5f, 6, width);
    CHECK(max_abs_diff(plain, at::layer_norm(x, {width}, gamma, beta, 1e-5)) < 1e-4);
  }
}

TEST_CASE("min_max finds the extremes wherever they are", "[kernels]") {
  at::manual_seed(3);
  for (const std::int64_t n : {1, 5, 16, 17, 31, 32, 63, 64, 65, 127, 1000, 4099}) {
    const at::Tensor x = at::randn({n});
    float lo = 0, hi = 0;
    kernels::min_max(x.data_ptr<float>(), n, &lo, &hi);
    CHECK(lo == x.min().item<float>());
    CHECK(hi == x.max().item<float>());
    // The extremes at each end and in the tail past the vector blocks.
    for (const std::int64_t at : {std::int64_t{0}, n / 2, n - 1}) {
      at::Tensor y = x.clone();
      y[at] = -100.0f;
      y[at == n - 1 ? 0 : n - 1] = 100.0f;  // the same place when n is 1
      kernels::min_max(y.data_ptr<float>(), n, &lo, &hi);
      CHECK(lo == (n == 1 ? 100.0f : -100.0f));
      CHECK(hi == 100.0f);
    }
  }
}

TEST_CASE("attention_head matches softmax(q k^T / sqrt(d)) v read from a fused projection", "[kernels]") {
  at::manual_seed(4);
  // Head widths of whole 16-float panels run the runtime's own product on
  // AVX-512 (24 keeps OpenBLAS); the last head's values end its row.
  for (const std::int64_t d : {16, 24, 64}) {
    for (const std::int64_t tokens : {1, 5, 17, 32, 70}) {
      for (const std::int64_t head : {1, 2}) {
        INFO("head width " << d << " tokens " << tokens << " head " << head);
        const std::int64_t heads = 3, width = heads * d;
        const at::Tensor qkv = at::randn({tokens, 3 * width});
        at::Tensor out = at::full({tokens, width}, 7.0f);
        std::vector<float> scratch(static_cast<std::size_t>(kernels::attention_scratch_floats(tokens, d)), NAN);
        const float* q = qkv.data_ptr<float>() + head * d;
        kernels::attention_head(q, q + width, q + 2 * width, 3 * width, tokens, d, out.data_ptr<float>() + head * d,
                                width, scratch.data());
        const at::Tensor qh = qkv.narrow(1, head * d, d), kh = qkv.narrow(1, width + head * d, d),
                         vh = qkv.narrow(1, 2 * width + head * d, d);
        const at::Tensor expected =
            at::softmax(at::matmul(qh, kh.t()) / std::sqrt(static_cast<double>(d)), 1).matmul(vh);
        CHECK(max_abs_diff(out.narrow(1, head * d, d), expected) < 1e-5);
        // Other heads' columns untouched.
        CHECK(out.narrow(1, 0, head * d).eq(7.0f).all().item<bool>());
        if (head + 1 < heads) CHECK(out.narrow(1, (head + 1) * d, width - (head + 1) * d).eq(7.0f).all().item<bool>());
      }
    }
  }
}

// The runtime's own product kernels. The FP32 one (src/model/packed_linear.*)
// against ATen's addmm and activations. The VNNI INT8 one
// (src/model/int8_gemm.*) against an exact integer reference: every row count of its register blocks (1..6 and beyond),
// column counts that end inside a panel, input lengths that are not whole
// groups of 4, a column range that starts past the first panel, and every
// fused activation against ATen's. On a CPU without AVX-512 VNNI (or with
// ONEDNN_MAX_CPU_ISA below it) the kernel is unavailable and Int8Linear
// uses oneDNN; the quantizer's tests cover that path. Likewise without
// AVX-512 the FP32 layers are oneDNN's or OpenBLAS's (model_reference_on_avx2).
#include <ATen/ATen.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "model/gemm_blocking.h"
#include "model/int8_gemm.h"
#include "model/packed_linear.h"

using rapidqa::model::Activation;
using rapidqa::model::Int8Epilogue;
using rapidqa::model::PackedInt8Matrix;

namespace {

at::Tensor activated(const at::Tensor& y, Activation activation) {
  switch (activation) {
    case Activation::kNone: return y;
    case Activation::kRelu: return at::relu(y);
    case Activation::kGelu: return at::gelu(y);
    case Activation::kGeluTanh: return at::gelu(y, "tanh");
    case Activation::kTanh: return at::tanh(y);
  }
  return y;
}

at::Tensor reference(const at::Tensor& a_u8, const at::Tensor& w_s8, const Int8Epilogue& e, std::int64_t n0,
                     std::int64_t count) {
  // s32 sums are exact in int64; the epilogue in double, then ATen's
  // activation in float.
  const at::Tensor sums = at::matmul(a_u8.to(at::kLong), w_s8.to(at::kLong).t());
  const at::Tensor column_sums = w_s8.to(at::kLong).sum(1);
  const at::Tensor scales = at::from_blob(const_cast<float*>(e.channel_scales), {w_s8.size(0)}, at::kFloat).to(at::kDouble);
  at::Tensor y = (sums - e.zero_point * column_sums).to(at::kDouble) * (scales * static_cast<double>(e.input_scale));
  if (e.bias) y = y + at::from_blob(const_cast<float*>(e.bias), {w_s8.size(0)}, at::kFloat).to(at::kDouble);
  return activated(y.to(at::kFloat).narrow(1, n0, count), e.activation);
}

}  // namespace

TEST_CASE("The VNNI INT8 product equals exact integer arithmetic", "[int8gemm]") {
  if (!rapidqa::model::vnni_gemm_available()) {
    WARN("AVX-512 VNNI not available (or limited by ONEDNN_MAX_CPU_ISA): Int8Linear runs oneDNN here");
    return;
  }
  at::manual_seed(7);
  struct Shape {
    std::int64_t rows, n, k;
  };
  for (const Shape s : {Shape{1, 16, 4}, Shape{2, 17, 3}, Shape{3, 33, 7}, Shape{4, 64, 64}, Shape{5, 100, 129},
                        Shape{6, 130, 384}, Shape{7, 65, 5}, Shape{13, 200, 768}, Shape{64, 384, 1536}}) {
    for (const Activation act :
         {Activation::kNone, Activation::kRelu, Activation::kGelu, Activation::kGeluTanh, Activation::kTanh}) {
      INFO("rows " << s.rows << " n " << s.n << " k " << s.k << " activation " << static_cast<int>(act));
      const at::Tensor a = at::randint(0, 256, {s.rows, s.k}, at::kByte);
      const at::Tensor w = at::randint(-128, 128, {s.n, s.k}, at::kChar);
      const at::Tensor scales = at::rand({s.n}) * 1e-3 + 1e-5;
      const at::Tensor bias = at::randn({s.n});
      const PackedInt8Matrix packed(w.data_ptr<std::int8_t>(), s.n, s.k);
      REQUIRE(packed.padded_inputs() % 4 == 0);
      // Rows padded to whole groups, the padding filled with garbage: it
      // must meet zero weights.
      const std::int64_t lda = packed.padded_inputs() + 4;
      std::vector<std::uint8_t> rows(static_cast<std::size_t>(s.rows * lda), 0xAB);
      for (std::int64_t r = 0; r < s.rows; ++r) {
        std::memcpy(rows.data() + r * lda, a.data_ptr<std::uint8_t>() + r * s.k, static_cast<std::size_t>(s.k));
      }
      Int8Epilogue e;
      e.input_scale = 0.02f;
      e.zero_point = 37;
      e.channel_scales = scales.data_ptr<float>();
      e.bias = act == Activation::kTanh ? nullptr : bias.data_ptr<float>();
      e.activation = act;
      // All columns, then a range starting at the second panel.
      for (const auto [n0, count] : {std::pair<std::int64_t, std::int64_t>{0, s.n},
                                     std::pair<std::int64_t, std::int64_t>{16, s.n > 16 ? s.n - 16 : 0}}) {
        if (count == 0) continue;
        const std::int64_t ldy = s.n + 3;
        at::Tensor y = at::full({s.rows, ldy}, -7.0f);
        rapidqa::model::int8_gemm_columns(rows.data(), lda, s.rows, packed, n0, count, e, y.data_ptr<float>(), ldy);
        const at::Tensor expected = reference(a, w, e, n0, count);
        const at::Tensor ours = y.narrow(1, n0, count);
        const double tolerance = 1e-5 * (1.0 + expected.abs().max().item<double>());
        CHECK((ours - expected).abs().max().item<double>() < tolerance);
        // Nothing outside the range is written.
        if (n0 > 0) CHECK(y.narrow(1, 0, n0).eq(-7.0f).all().item<bool>());
        CHECK(y.narrow(1, n0 + count, ldy - n0 - count).eq(-7.0f).all().item<bool>());
      }
    }
  }
}

TEST_CASE("Packed INT8 weights keep each column's sum for the zero point", "[int8gemm]") {
  const std::vector<std::int8_t> w = {1, -2, 3, 127, -128, 0, 5, 5, 5};  // 3 columns x 3 inputs
  const PackedInt8Matrix packed(w.data(), 3, 3);
  CHECK(packed.columns() == 3);
  CHECK(packed.padded_inputs() == 4);
  CHECK(packed.panels() == 1);
  CHECK(packed.column_sums()[0] == 2);
  CHECK(packed.column_sums()[1] == -1);
  CHECK(packed.column_sums()[2] == 15);
  CHECK(packed.column_sums()[3] == 0);  // padding columns
  // Column 1's inputs sit in lane 1 of the first group row: bytes 4..7.
  CHECK(packed.panel(0)[4] == 127);
  CHECK(packed.panel(0)[5] == -128);
  CHECK(packed.panel(0)[6] == 0);
  CHECK(packed.panel(0)[7] == 0);  // padded input
}

TEST_CASE("A block's row passes prefetch each of the next block's panels once", "[packedgemm][int8gemm]") {
  namespace gemm = rapidqa::model::gemm;
  // count columns in the product; the block at `column` is being computed.
  for (const std::int64_t count : {std::int64_t{16}, std::int64_t{64}, std::int64_t{100}, std::int64_t{192},
                                   std::int64_t{576}, std::int64_t{1000}}) {
    for (int passes = 1; passes <= 12; ++passes) {
      for (std::int64_t column = 0; column < count; column += gemm::kBlockColumns) {
        INFO("count " << count << " passes " << passes << " column " << column);
        const std::int64_t next = column + gemm::kBlockColumns;
        std::vector<int> fetched(static_cast<std::size_t>(gemm::kBlockPanels), 0);
        for (int pass = 0; pass < passes; ++pass) {
          const gemm::NextPanels p = gemm::next_panels_for_pass(next, count, pass, passes);
          if (p.count == 0) continue;
          REQUIRE(p.first_column >= next);
          REQUIRE((p.first_column - next) % gemm::kPanelWidth == 0);
          // Never past the product's last panel.
          REQUIRE(p.first_column + (p.count - 1) * gemm::kPanelWidth < count);
          for (int q = 0; q < p.count; ++q) {
            ++fetched[static_cast<std::size_t>((p.first_column - next) / gemm::kPanelWidth + q)];
          }
        }
        const std::int64_t next_columns = std::max<std::int64_t>(0, std::min(gemm::kBlockColumns, count - next));
        const auto next_panels = static_cast<int>((next_columns + gemm::kPanelWidth - 1) / gemm::kPanelWidth);
        for (int q = 0; q < gemm::kBlockPanels; ++q) {
          const bool expected = passes >= gemm::kMinPrefetchPasses && q < next_panels;
          CHECK(fetched[static_cast<std::size_t>(q)] == (expected ? 1 : 0));
        }
      }
    }
  }
}

TEST_CASE("The packed FP32 product equals ATen's addmm and activations", "[packedgemm]") {
  if (!rapidqa::model::packed_linear_available()) {
    WARN("AVX-512 not available (or limited by ONEDNN_MAX_CPU_ISA): FP32 layers run oneDNN or OpenBLAS here");
    return;
  }
  at::manual_seed(8);
  struct Shape {
    std::int64_t rows, n, k;
  };
  for (const Shape s : {Shape{1, 16, 1}, Shape{2, 17, 3}, Shape{3, 33, 7}, Shape{5, 100, 129}, Shape{6, 130, 384},
                        Shape{7, 65, 5}, Shape{13, 200, 768}, Shape{64, 384, 1536}}) {
    for (const Activation act :
         {Activation::kNone, Activation::kRelu, Activation::kGelu, Activation::kGeluTanh, Activation::kTanh}) {
      INFO("rows " << s.rows << " n " << s.n << " k " << s.k << " activation " << static_cast<int>(act));
      const at::Tensor x = at::randn({s.rows, s.k + 2});  // rows wider than the product reads
      const at::Tensor w = at::randn({s.n, s.k}) / std::sqrt(static_cast<double>(s.k));
      const at::Tensor bias = at::randn({s.n});
      const rapidqa::model::PackedFloatMatrix packed(w.data_ptr<float>(), s.n, s.k);
      CHECK(at::equal(packed.unpack(), w));
      const at::Tensor expected = activated(at::addmm(bias, x.narrow(1, 0, s.k), w.t()), act);
      for (const auto [n0, count] : {std::pair<std::int64_t, std::int64_t>{0, s.n},
                                     std::pair<std::int64_t, std::int64_t>{16, s.n > 16 ? s.n - 16 : 0}}) {
        if (count == 0) continue;
        const std::int64_t ldy = s.n + 3;
        at::Tensor y = at::full({s.rows, ldy}, -7.0f);
        rapidqa::model::fp32_gemm_columns(x.data_ptr<float>(), s.k + 2, s.rows, packed, n0, count,
                                          bias.data_ptr<float>(), act, y.data_ptr<float>(), ldy);
        CHECK((y.narrow(1, n0, count) - expected.narrow(1, n0, count)).abs().max().item<double>() < 2e-5);
        if (n0 > 0) CHECK(y.narrow(1, 0, n0).eq(-7.0f).all().item<bool>());
        CHECK(y.narrow(1, n0 + count, ldy - n0 - count).eq(-7.0f).all().item<bool>());
      }
    }
  }
}

TEST_CASE("PackedLinear is a linear layer: forward, weights back and refusals", "[packedgemm]") {
  if (!rapidqa::model::packed_linear_available()) {
    CHECK_THROWS_AS(rapidqa::model::PackedLinear(at::randn({4, 4}), at::Tensor()), std::logic_error);
    return;
  }
  at::manual_seed(9);
  const at::Tensor w = at::randn({300, 96}), bias = at::randn({300}), x = at::randn({2, 37, 96});
  const rapidqa::model::PackedLinear layer(w, bias, Activation::kGelu);
  CHECK(layer.in_features() == 96);
  CHECK(layer.out_features() == 300);
  CHECK(at::equal(layer.dense_weight(), w));
  CHECK(at::equal(layer.dense_bias(), bias));
  const at::Tensor y = layer.forward(x);
  CHECK(y.sizes() == at::IntArrayRef({2, 37, 300}));
  CHECK((y - at::gelu(at::linear(x, w, bias))).abs().max().item<double>() < 2e-5);
  CHECK_THROWS_AS(layer.forward(at::randn({3, 95})), std::invalid_argument);
  CHECK_THROWS_AS(rapidqa::model::PackedLinear(w, at::randn({299})), std::invalid_argument);
  CHECK_THROWS_AS(rapidqa::model::PackedLinear(at::randn({3, 4, 5}), at::Tensor()), std::invalid_argument);
}

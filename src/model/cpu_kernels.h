// The transformer's small element-wise kernels on raw float rows: softmax,
// residual + LayerNorm, and the attention of one (sequence, head). Each
// runs on the calling thread (the forward spreads rows and heads over the
// WorkPool itself) and picks AVX-512 or AVX2 code from what the CPU offers,
// as limited by ONEDNN_MAX_CPU_ISA, so one variable pins every kernel of
// the runtime to the AVX2 path for testing.
//
// Thread safety: stateless; safe from any thread.
#pragma once

#include <cstdint>

namespace rapidqa::model::kernels {

// The vector width the kernels use on this machine: "avx512", "avx2" or
// "scalar".
const char* vector_isa();

// x[r * stride + c] = softmax over c of x[r * stride + c], in place.
void softmax_rows(float* x, std::int64_t rows, std::int64_t cols, std::int64_t stride);

// For each of `rows` rows of `width` floats: x = LayerNorm(x + residual)
// with the given scale and shift (residual may be null: plain LayerNorm).
void residual_layer_norm(float* x, const float* residual, const float* gamma, const float* beta, float eps,
                         std::int64_t rows, std::int64_t width);

// The smallest and largest of n floats (n > 0).
void min_max(const float* x, std::int64_t n, float* lowest, float* highest);

// Scaled dot-product attention of one sequence and one head, reading the
// fused projection in place: q, k and v point at the head's first element
// in the sequence's first token row, consecutive tokens are qkv_stride
// floats apart; the context (tokens x head_dim) goes to out, rows
// out_stride apart. scratch holds attention_scratch_floats(tokens,
// head_dim) floats (the scores and, on AVX-512, the keys packed for the
// product). relative_bias, when given, points at the bias for distance 0:
// query i's score for key j adds relative_bias[j - i] (MPNet), for j - i in
// (-tokens, tokens).
std::int64_t attention_scratch_floats(std::int64_t tokens, std::int64_t head_dim);
void attention_head(const float* q, const float* k, const float* v, std::int64_t qkv_stride, std::int64_t tokens,
                    std::int64_t head_dim, float* out, std::int64_t out_stride, float* scratch,
                    const float* relative_bias = nullptr);

}  // namespace rapidqa::model::kernels

// EmbeddingTable: a lookup table of rows (word, position or segment
// embeddings), held as float32 or as INT8 with one max-abs scale per row
// (the Quantizer's default for embeddings: a quarter of the memory, and a
// row's error bounded by its own largest value, not the table's).
//
// Thread safety: thread-compatible; the const methods may run concurrently.
#pragma once

#include <ATen/Tensor.h>

#include <cstddef>
#include <cstdint>

namespace rapidqa::model {

class EmbeddingTable {
 public:
  EmbeddingTable() = default;
  explicit EmbeddingTable(at::Tensor rows);  // [n, width] float32
  // values [n, width] int8, scales [n] float32: row i is values[i] * scales[i].
  // Throws std::invalid_argument for other shapes or a scale that is not
  // finite and positive.
  static EmbeddingTable quantized(at::Tensor values, at::Tensor scales);
  // The same table with every row quantized to INT8 (per row, symmetric).
  EmbeddingTable quantize() const;

  bool defined() const { return values_.defined(); }
  bool is_quantized() const { return scales_.defined(); }
  std::int64_t rows() const { return values_.size(0); }
  std::int64_t width() const { return values_.size(1); }
  std::int64_t numel() const { return values_.numel(); }
  std::size_t bytes() const;

  // ids (any shape, int64) -> [..., width] float32.
  at::Tensor lookup(const at::Tensor& ids) const;
  // Rows [first, first + count) as float32 [count, width].
  at::Tensor slice(std::int64_t first, std::int64_t count) const;
  // out[0, width) += row `row` (dequantized); row must be in range.
  void add_row(std::int64_t row, float* out) const;
  // The whole table as float32.
  at::Tensor dense() const;

  const at::Tensor& values() const { return values_; }  // float32 or int8
  const at::Tensor& scales() const { return scales_; }  // undefined unless quantized

 private:
  at::Tensor values_;
  at::Tensor scales_;
};

}  // namespace rapidqa::model

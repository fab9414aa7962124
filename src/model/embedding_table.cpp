#include "model/embedding_table.h"

#include <ATen/ATen.h>

#include <stdexcept>

#include "model/int8_linear.h"

namespace rapidqa::model {

EmbeddingTable::EmbeddingTable(at::Tensor rows) : values_(rows.contiguous()) {
  if (values_.dim() != 2) throw std::invalid_argument("EmbeddingTable: rows must be a 2-D tensor");
}

EmbeddingTable EmbeddingTable::quantized(at::Tensor values, at::Tensor scales) {
  if (values.dim() != 2 || values.scalar_type() != at::kChar || scales.dim() != 1 ||
      scales.size(0) != values.size(0)) {
    throw std::invalid_argument("EmbeddingTable: quantized rows need int8 values [n, width] and n scales");
  }
  if (!all_positive_and_finite(scales)) {
    throw std::invalid_argument("EmbeddingTable: row scales must be finite and positive");
  }
  EmbeddingTable t;
  t.values_ = values.contiguous();
  t.scales_ = scales.to(at::kFloat).contiguous();
  return t;
}

EmbeddingTable EmbeddingTable::quantize() const {
  if (is_quantized()) return *this;
  QuantizedWeight q = quantize_weight_per_channel(values_);
  return quantized(std::move(q.values), std::move(q.scales));
}

std::size_t EmbeddingTable::bytes() const {
  if (!defined()) return 0;
  return static_cast<std::size_t>(values_.numel() * values_.element_size() +
                                  (scales_.defined() ? scales_.numel() * 4 : 0));
}

at::Tensor EmbeddingTable::lookup(const at::Tensor& ids) const {
  if (!is_quantized()) return at::embedding(values_, ids);
  const at::Tensor flat = ids.reshape({-1});
  at::Tensor rows = values_.index_select(0, flat).to(at::kFloat).mul_(scales_.index_select(0, flat).unsqueeze(1));
  auto sizes = ids.sizes().vec();
  sizes.push_back(width());
  return rows.view(sizes);
}

at::Tensor EmbeddingTable::slice(std::int64_t first, std::int64_t count) const {
  if (!is_quantized()) return values_.narrow(0, first, count);
  return values_.narrow(0, first, count).to(at::kFloat).mul_(scales_.narrow(0, first, count).unsqueeze(1));
}

void EmbeddingTable::add_row(std::int64_t row, float* out) const {
  const std::int64_t w = width();
  if (!is_quantized()) {
    const float* v = values_.data_ptr<float>() + row * w;
    for (std::int64_t i = 0; i < w; ++i) out[i] += v[i];
    return;
  }
  const std::int8_t* v = static_cast<const std::int8_t*>(values_.data_ptr()) + row * w;
  const float scale = scales_.data_ptr<float>()[row];
  for (std::int64_t i = 0; i < w; ++i) out[i] += static_cast<float>(v[i]) * scale;
}

at::Tensor EmbeddingTable::dense() const { return is_quantized() ? slice(0, rows()) : values_; }

}  // namespace rapidqa::model

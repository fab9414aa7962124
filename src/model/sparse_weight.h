// SparseWeight: the compact form of a pruned weight in a checkpoint. Only
// the kept entries' values are stored, with a bitmap of which entries they
// are, so a weight with 40% zeros takes 63% of its dense bytes (and less as
// sparsity grows).
//
// In model.safetensors, a weight "<name>" stored sparsely is three tensors:
//   <name>.sparse_values  F32 [kept]           the kept values, row-major order
//   <name>.sparse_bitmap  I8  [ceil(numel/8)]  bit i (LSB first within each
//                                              byte) set when entry i is kept
//   <name>.sparse_shape   F32 [rank]           the dense shape
// load_transformer turns them back into "<name>" before anything else reads
// the checkpoint.
#pragma once

#include <ATen/Tensor.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "rapidqa/status.h"

namespace rapidqa::model {

struct SparseWeight {
  std::vector<std::int64_t> shape;
  at::Tensor bitmap;  // uint8 [ceil(numel / 8)]
  at::Tensor values;  // float32 [kept]
  std::size_t byte_size() const;  // bitmap and values
};

// Keeps the entries where mask is 1 (mask undefined: the nonzero entries).
SparseWeight encode_sparse(const at::Tensor& weight, const at::Tensor& mask = {});
// kDataLoss when bitmap, values and shape disagree (which, in the message).
Result<at::Tensor> decode_sparse(const SparseWeight& sparse);
// The 0/1 float mask of the kept entries; errors as decode_sparse.
Result<at::Tensor> decode_sparse_mask(const SparseWeight& sparse);

// Replaces every weight of `tensors` whose sparse form is smaller by its
// three sparse tensors (names above).
void store_sparse_weights(std::map<std::string, at::Tensor>& tensors);
// The reverse, in place; kDataLoss naming the weight for a broken triple.
Status load_sparse_weights(std::map<std::string, at::Tensor>& tensors);

}  // namespace rapidqa::model

// Pruning masks with the semantics of torch.nn.utils.prune, so that a model
// pruned here and one pruned in PyTorch with the same calls end up with the
// same zeros:
//
//   global_l1_unstructured  prune.global_unstructured(params,
//                           pruning_method=prune.L1Unstructured, amount=...)
//   l1_unstructured         prune.l1_unstructured(module, name, amount)
//   ln_structured           prune.ln_structured(module, name, amount, n, dim)
//   make_permanent          prune.remove(module, name)
//
// Masks are kept apart from the weights (PyTorch's weight_orig and
// weight_mask), so pruning can be repeated, inspected or dropped before it
// is made permanent. Repeated pruning follows PyTorch's PruningContainer:
// only what the current mask keeps competes, and a fraction applies to what
// remains, so pruning 0.4 and then 0.4 again removes 64% of the entries.
//
// How many are pruned: a fraction f of c candidates prunes round(f * c)
// with Python's round (half to even: 2.5 -> 2, 3.5 -> 4), the product taken
// in double as Python does; a count prunes exactly that many.
//
// Which ones, when values are equal: PyTorch leaves the order of equal
// values to torch.topk, which does not specify it. Here it is fixed: the
// candidates are ranked with a stable sort, so among equal magnitudes (or
// equal slice norms) the one at the lower position is pruned first. For
// global pruning the position runs through the tensors in the order given,
// row-major within each tensor; for structured pruning it is the slice's
// index along `dim`.
//
// Every function either succeeds or changes nothing: masks are computed in
// full before any is stored.
//
// Thread safety: thread-compatible (the functions are free functions; two
// threads may prune different PrunableTensors at once, but not one that
// shares a weight or mask with another being pruned).
#pragma once

#include <ATen/Tensor.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "model/sparse_weight.h"
#include "rapidqa/status.h"

namespace rapidqa::compress {

// How much to prune: a fraction of the candidates or an absolute number of
// them, as PyTorch's float and int `amount`. Constructing never fails; an
// amount out of range is reported by validate() and by every pruning call.
class PruningAmount {
 public:
  // f in [0, 1]: the fraction of the entries (or slices) not pruned yet.
  static PruningAmount fraction(double f) { return PruningAmount(true, f, 0); }
  // n >= 0 entries (or slices); at most the number not pruned yet.
  static PruningAmount count(std::int64_t n) { return PruningAmount(false, 0.0, n); }

  bool is_fraction() const noexcept { return is_fraction_; }
  double fraction_value() const noexcept { return fraction_; }  // 0 for a count
  std::int64_t count_value() const noexcept { return count_; }  // 0 for a fraction

  // kInvalidArgument for a fraction outside [0, 1] (or NaN) and a negative
  // count; the message says which and what is accepted.
  Status validate() const;
  // How many of `candidates` to prune (see the top of this file).
  // kInvalidArgument from validate(), or for a count above `candidates`.
  Result<std::int64_t> number_to_prune(std::int64_t candidates) const;
  // "fraction 0.4" or "count 7", for messages.
  std::string to_string() const;

 private:
  PruningAmount(bool is_fraction, double f, std::int64_t n) : is_fraction_(is_fraction), fraction_(f), count_(n) {}
  bool is_fraction_;
  double fraction_;
  std::int64_t count_;
};

// A weight and its pruning mask. The pruning functions read `weight` and
// write only `mask`; make_permanent is the one call that writes the weight.
struct PrunableTensor {
  std::string name;   // named in error messages ("encoder.layer.0.attention.self.query.weight")
  at::Tensor weight;  // float32, CPU, any shape (2 or more dimensions for ln_structured)
  // Undefined: nothing pruned yet (as a mask of ones). Otherwise float32, CPU,
  // the weight's shape, every entry 0 (pruned) or 1 (kept). Each pruning call
  // stores a new tensor here, never writing into the previous mask, so a
  // caller that kept the old one still has it.
  at::Tensor mask;
};

// Unstructured L1 pruning of all `tensors` together: one ranking by |w| of
// every entry whose mask is 1 (the weight taken as weight * mask), the
// smallest pruned. An entry already at 0 but still kept counts as the
// smallest magnitude, as in PyTorch. After the call every tensor has a mask,
// all ones where nothing was pruned.
// kInvalidArgument for a bad amount, a weight that is not float32 on the CPU,
// a NaN among the candidates, or a mask of the wrong shape, type or values;
// the message names the tensor.
Status global_l1_unstructured(std::vector<PrunableTensor>& tensors, const PruningAmount& amount);

// The same ranking within one tensor (prune.l1_unstructured).
Status l1_unstructured(PrunableTensor& tensor, const PruningAmount& amount);

// Structured pruning (prune.ln_structured): whole slices along `dim` (rows of
// a Linear weight for dim 0, columns for dim 1; negative counts from the
// end) are ranked by their Ln norm over all other dimensions, of the weight
// taken as weight * mask, and the smallest are pruned. n: 1, 2, any p > 0,
// or std::numeric_limits<double>::infinity() (the largest |w| of the
// slice). Only slices with a kept entry compete, and the amount counts
// slices. Norms are computed in double, so slices whose float32 norms
// PyTorch would order by rounding noise alone may be ordered differently;
// equal norms follow the lower-index-first rule.
// kInvalidArgument as for l1_unstructured, and for a weight of fewer than
// 2 dimensions, a dim out of range, or n not > 0.
Status ln_structured(PrunableTensor& tensor, const PruningAmount& amount, double n, std::int64_t dim);

// weight * mask as a new tensor (the weight is left as it is): what a layer
// computes with while the mask is kept apart. Pruned entries are +0.0 and
// kept entries keep their exact bits. A copy of the weight when there is no
// mask. kInvalidArgument for a bad weight or mask.
Result<at::Tensor> masked_weight(const PrunableTensor& tensor);

// Writes the mask into the weight and drops it (prune.remove): pruned
// entries become +0.0 in place, in the weight's own storage, so every
// tensor sharing that storage (the model's layer) sees the pruned weight;
// kept entries are untouched. No mask: nothing to do. kInvalidArgument for a
// bad weight or mask; the overload for many tensors checks them all before
// writing any.
Status make_permanent(PrunableTensor& tensor);
Status make_permanent(std::vector<PrunableTensor>& tensors);

// The fraction of entries of `tensor` equal to zero (-0.0 included); 0 for an
// undefined or empty tensor.
double sparsity(const at::Tensor& tensor);

// Sparse storage of a pruned weight lives with the checkpoint code
// (model/sparse_weight.h, which documents the layout); this checks the
// tensor as the functions above do, then encodes masked_weight(tensor): the
// entries whose mask is 1, or without a mask the nonzero ones.
using model::SparseWeight;
using model::decode_sparse;
using model::decode_sparse_mask;
Result<SparseWeight> encode_sparse(const PrunableTensor& tensor);

}  // namespace rapidqa::compress

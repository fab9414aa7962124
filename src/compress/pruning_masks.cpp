#include "compress/pruning_masks.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <cmath>
#include <limits>
#include <tuple>
#include <utility>

#include <fmt/format.h>

#include "common/guard.h"

namespace rapidqa::compress {
namespace {

// Python's round() on a non-negative double: ties go to the even neighbour.
// Written out rather than left to std::nearbyint, whose result depends on
// the thread's floating-point rounding mode.
std::int64_t round_half_to_even(double x) {
  const double lower = std::floor(x);
  const double diff = x - lower;
  double rounded = lower;
  if (diff > 0.5 || (diff == 0.5 && std::fmod(lower, 2.0) != 0.0)) rounded += 1.0;
  return static_cast<std::int64_t>(rounded);
}

// The positions of `keys` (1-D) from smallest to largest, equal keys in
// their original order: the documented tie-break. The stable flag must be
// an optional: a plain `true` would bind to sort's int64 `dim` overload.
at::Tensor stable_ascending_order(const at::Tensor& keys) {
  return std::get<1>(at::sort(keys, c10::optional<bool>(true), /*dim=*/0, /*descending=*/false));
}

std::string shape_string(at::IntArrayRef sizes) {
  std::string s = "[";
  for (std::size_t i = 0; i < sizes.size(); ++i) s += (i ? ", " : "") + std::to_string(sizes[i]);
  return s + "]";
}

// "(3, 1)": the entry at row-major position `flat` of a tensor of `sizes`,
// which a user can look up, unlike a flat offset.
std::string coordinates(std::int64_t flat, at::IntArrayRef sizes) {
  std::vector<std::int64_t> index(sizes.size());
  for (std::size_t d = sizes.size(); d-- > 0;) {
    index[d] = sizes[d] ? flat % sizes[d] : 0;
    flat = sizes[d] ? flat / sizes[d] : 0;
  }
  std::string s = "(";
  for (std::size_t d = 0; d < index.size(); ++d) s += (d ? ", " : "") + std::to_string(index[d]);
  return s + ")";
}

// The row-major position of the first true entry of a bool tensor.
std::int64_t first_true(const at::Tensor& flags) {
  // argmax returns the first of equal maxima; bool has no argmax kernel.
  return flags.reshape(-1).to(at::kByte).argmax().item<std::int64_t>();
}

std::string label_of(const PrunableTensor& t, std::size_t index) {
  return t.name.empty() ? fmt::format("tensor #{}", index) : fmt::format("'{}'", t.name);
}

// A model has dozens of weights; a message names a few.
std::string join_labels(const std::vector<PrunableTensor*>& tensors) {
  std::string s;
  const std::size_t shown = std::min<std::size_t>(tensors.size(), 3);
  for (std::size_t i = 0; i < shown; ++i) s += (i ? ", " : "") + label_of(*tensors[i], i);
  if (tensors.size() > shown) s += fmt::format(" and {} more", tensors.size() - shown);
  return s.empty() ? "no tensors" : s;
}

Status check_tensor(const PrunableTensor& t, const std::string& label) {
  if (!t.weight.defined()) return Status::invalid_argument(label + ": the weight is undefined");
  if (t.weight.scalar_type() != at::kFloat) {
    return Status::invalid_argument(fmt::format("{}: the weight is {}; pruning works on float32 weights "
                                                "(convert with .to(at::kFloat))",
                                                label, c10::toString(t.weight.scalar_type())));
  }
  if (!t.weight.device().is_cpu()) {
    return Status::invalid_argument(
        fmt::format("{}: the weight is on {}; pruning works on CPU tensors", label, t.weight.device().str()));
  }
  if (!t.mask.defined()) return Status::ok();
  if (t.mask.sizes() != t.weight.sizes()) {
    return Status::invalid_argument(fmt::format("{}: the mask has shape {} but the weight {}; a mask has the "
                                                "weight's shape",
                                                label, shape_string(t.mask.sizes()), shape_string(t.weight.sizes())));
  }
  if (t.mask.scalar_type() != at::kFloat || !t.mask.device().is_cpu()) {
    return Status::invalid_argument(fmt::format("{}: the mask is {} on {}; masks are float32 CPU tensors of 0 and 1",
                                                label, c10::toString(t.mask.scalar_type()), t.mask.device().str()));
  }
  const at::Tensor not_binary = at::logical_and(t.mask != 0, t.mask != 1);
  if (not_binary.any().item<bool>()) {
    const std::int64_t at_flat = first_true(not_binary);
    return Status::invalid_argument(fmt::format(
        "{}: the mask holds {} at {}; every entry of a mask is 1 (kept) or 0 (pruned)", label,
        t.mask.reshape(-1)[at_flat].item<float>(), coordinates(at_flat, t.mask.sizes())));
  }
  return Status::ok();
}

Status nan_error(const std::string& label, std::int64_t flat, at::IntArrayRef sizes) {
  return Status::invalid_argument(fmt::format("{}: the weight is NaN at {}, an entry not pruned yet; a NaN has no "
                                              "magnitude to rank it by, so fix or prune it first",
                                              label, coordinates(flat, sizes)));
}

// The weight with every pruned entry at +0.0 (PyTorch's module.weight,
// orig * mask, up to the sign of the zeros).
at::Tensor apply_mask(const PrunableTensor& t) {
  return t.mask.defined() ? t.weight.masked_fill(t.mask == 0, 0.0) : t.weight.clone();
}

// PyTorch's PruningContainer for 'unstructured' methods, and
// global_unstructured: the candidates are the entries whose mask is 1,
// ranked together by |w|.
Status prune_unstructured(const std::vector<PrunableTensor*>& tensors, const PruningAmount& amount,
                          const char* operation) {
  const std::string context = fmt::format("{} over {}", operation, join_labels(tensors));
  if (Status s = amount.validate(); !s) return Status::invalid_argument(context + ": " + s.message());
  std::vector<std::string> labels;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    labels.push_back(label_of(*tensors[i], i));
    if (Status s = check_tensor(*tensors[i], labels.back()); !s) return s;
  }

  // Candidates in position order (tensor by tensor, row-major within one),
  // which the stable sort below turns into the tie-break.
  std::vector<at::Tensor> masks, magnitudes, positions;
  std::int64_t offset = 0;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const PrunableTensor& t = *tensors[i];
    const at::Tensor weight = t.weight.reshape(-1);
    const at::Tensor mask = t.mask.defined() ? t.mask.reshape(-1) : at::ones({weight.numel()}, at::kFloat);
    const at::Tensor local = at::nonzero(mask == 1).reshape(-1);
    const at::Tensor candidates = weight.index_select(0, local);
    const at::Tensor nan = at::isnan(candidates);
    if (nan.any().item<bool>()) {
      return nan_error(labels[i], local[first_true(nan)].item<std::int64_t>(), t.weight.sizes());
    }
    masks.push_back(mask);
    magnitudes.push_back(candidates.abs());
    positions.push_back(local + offset);
    offset += weight.numel();
  }
  const std::int64_t candidate_count = [&] {
    std::int64_t c = 0;
    for (const auto& p : positions) c += p.numel();
    return c;
  }();
  const Result<std::int64_t> to_prune = amount.number_to_prune(candidate_count);
  if (!to_prune) {
    return Status::invalid_argument(context + ": " + to_prune.status().message());
  }
  if (tensors.empty()) return Status::ok();

  at::Tensor combined = at::cat(masks);  // a new tensor: the callers' masks are never written
  if (*to_prune > 0) {
    const at::Tensor order = stable_ascending_order(at::cat(magnitudes));
    combined.index_fill_(0, at::cat(positions).index_select(0, order.slice(0, 0, *to_prune)), 0.0);
  }
  offset = 0;
  std::vector<at::Tensor> new_masks;
  for (PrunableTensor* t : tensors) {
    const std::int64_t n = t->weight.numel();
    // A copy each, so no mask keeps the whole combined buffer alive.
    new_masks.push_back(combined.slice(0, offset, offset + n).view(t->weight.sizes()).clone());
    offset += n;
  }
  for (std::size_t i = 0; i < tensors.size(); ++i) tensors[i]->mask = std::move(new_masks[i]);
  return Status::ok();
}

}  // namespace

Status PruningAmount::validate() const {
  if (is_fraction_) {
    if (!(fraction_ >= 0.0 && fraction_ <= 1.0)) {
      return Status::invalid_argument(fmt::format(
          "pruning amount: fraction {} is outside [0, 1]; pass the share of the entries not pruned yet "
          "(0 to 1), or PruningAmount::count(n) for an absolute number",
          fraction_));
    }
  } else if (count_ < 0) {
    return Status::invalid_argument(
        fmt::format("pruning amount: count {} is negative; pass 0 or more entries to prune", count_));
  }
  return Status::ok();
}

Result<std::int64_t> PruningAmount::number_to_prune(std::int64_t candidates) const {
  if (Status s = validate(); !s) return s;
  // Python computes amount * size in double too, so the same products land
  // on .5 here and there.
  if (is_fraction_) return round_half_to_even(fraction_ * static_cast<double>(candidates));
  if (count_ > candidates) {
    return Status::invalid_argument(fmt::format(
        "pruning amount: count {} is more than the {} candidates not pruned yet; prune at most {}, or pass "
        "a fraction",
        count_, candidates, candidates));
  }
  return count_;
}

std::string PruningAmount::to_string() const {
  return is_fraction_ ? fmt::format("fraction {}", fraction_) : fmt::format("count {}", count_);
}

Status global_l1_unstructured(std::vector<PrunableTensor>& tensors, const PruningAmount& amount) {
  return detail::guarded("global_l1_unstructured", [&] {
    std::vector<PrunableTensor*> all;
    for (PrunableTensor& t : tensors) all.push_back(&t);
    return prune_unstructured(all, amount, "global_l1_unstructured");
  });
}

Status l1_unstructured(PrunableTensor& tensor, const PruningAmount& amount) {
  return detail::guarded("l1_unstructured",
                         [&] { return prune_unstructured({&tensor}, amount, "l1_unstructured"); });
}

Status ln_structured(PrunableTensor& tensor, const PruningAmount& amount, double n, std::int64_t dim) {
  return detail::guarded("ln_structured", [&]() -> Status {
    const std::string label = label_of(tensor, 0);
    if (Status s = amount.validate(); !s) return Status::invalid_argument(label + ": ln_structured: " + s.message());
    if (Status s = check_tensor(tensor, label); !s) return s;
    const at::Tensor& weight = tensor.weight;
    const std::int64_t dims = weight.dim();
    if (dims < 2) {
      return Status::invalid_argument(fmt::format(
          "{}: ln_structured removes slices of a tensor of 2 or more dimensions, the weight has shape {}; "
          "use l1_unstructured for it",
          label, shape_string(weight.sizes())));
    }
    if (dim < -dims || dim >= dims) {
      return Status::invalid_argument(fmt::format("{}: ln_structured: dim {} is out of range for shape {} "
                                                  "(expected {} to {})",
                                                  label, dim, shape_string(weight.sizes()), -dims, dims - 1));
    }
    const std::int64_t d = dim < 0 ? dim + dims : dim;
    if (!(n > 0.0)) {
      return Status::invalid_argument(fmt::format(
          "{}: ln_structured: n = {} is not a norm order; use 1, 2, another p > 0, or infinity", label, n));
    }

    const at::Tensor masked = apply_mask(tensor);
    const at::Tensor nan = at::isnan(masked);
    if (nan.any().item<bool>()) return nan_error(label, first_true(nan), weight.sizes());
    std::vector<std::int64_t> others;
    for (std::int64_t i = 0; i < dims; ++i) {
      if (i != d) others.push_back(i);
    }
    const at::Tensor norms = at::linalg_vector_norm(masked.to(at::kDouble), n, others);
    // A slice competes while any of its entries is kept (PyTorch: the
    // mask's sum over the other dimensions is not 0).
    const at::Tensor alive = tensor.mask.defined() ? tensor.mask.sum(others) != 0
                                                   : at::ones({weight.size(d)}, at::kBool);
    const at::Tensor candidates = at::nonzero(alive).reshape(-1);
    const Result<std::int64_t> to_prune = amount.number_to_prune(candidates.numel());
    if (!to_prune) {
      return Status::invalid_argument(fmt::format("{}: ln_structured along dim {} ({} of {} slices not pruned yet): {}",
                                                  label, d, candidates.numel(), weight.size(d),
                                                  to_prune.status().message()));
    }
    at::Tensor mask = tensor.mask.defined() ? tensor.mask.clone(at::MemoryFormat::Contiguous)
                                            : at::ones(weight.sizes(), at::kFloat);
    if (*to_prune > 0) {
      const at::Tensor order = stable_ascending_order(norms.index_select(0, candidates));
      mask.index_fill_(d, candidates.index_select(0, order.slice(0, 0, *to_prune)), 0.0);
    }
    tensor.mask = std::move(mask);
    return Status::ok();
  });
}

Result<at::Tensor> masked_weight(const PrunableTensor& tensor) {
  return detail::guarded("masked_weight", [&]() -> Result<at::Tensor> {
    if (Status s = check_tensor(tensor, label_of(tensor, 0)); !s) return s;
    return apply_mask(tensor);
  });
}

Status make_permanent(PrunableTensor& tensor) {
  return detail::guarded("make_permanent", [&]() -> Status {
    if (Status s = check_tensor(tensor, label_of(tensor, 0)); !s) return s;
    if (!tensor.mask.defined()) return Status::ok();
    // Like PyTorch's `orig.data = weight.data`: a weight that requires grad
    // is pruned outside autograd.
    at::NoGradGuard no_grad;
    tensor.weight.masked_fill_(tensor.mask == 0, 0.0);
    tensor.mask = at::Tensor();
    return Status::ok();
  });
}

Status make_permanent(std::vector<PrunableTensor>& tensors) {
  return detail::guarded("make_permanent", [&]() -> Status {
    for (std::size_t i = 0; i < tensors.size(); ++i) {
      if (Status s = check_tensor(tensors[i], label_of(tensors[i], i)); !s) return s;
    }
    at::NoGradGuard no_grad;
    for (PrunableTensor& t : tensors) {
      if (!t.mask.defined()) continue;
      t.weight.masked_fill_(t.mask == 0, 0.0);
      t.mask = at::Tensor();
    }
    return Status::ok();
  });
}

double sparsity(const at::Tensor& tensor) {
  if (!tensor.defined() || tensor.numel() == 0) return 0.0;
  return static_cast<double>((tensor == 0).sum().item<std::int64_t>()) / static_cast<double>(tensor.numel());
}

Result<SparseWeight> encode_sparse(const PrunableTensor& tensor) {
  return detail::guarded("encode_sparse", [&]() -> Result<SparseWeight> {
    if (Status s = check_tensor(tensor, label_of(tensor, 0)); !s) return s;
    return model::encode_sparse(tensor.weight, tensor.mask);
  });
}

}  // namespace rapidqa::compress

#include "model/sparse_weight.h"

#include <ATen/ATen.h>

#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "common/bounded_json.h"

namespace rapidqa::model {
namespace {

constexpr const char* kValues = ".sparse_values";
constexpr const char* kBitmap = ".sparse_bitmap";
constexpr const char* kShape = ".sparse_shape";

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

std::size_t SparseWeight::byte_size() const {
  return static_cast<std::size_t>(bitmap.numel() + values.numel() * 4);
}

SparseWeight encode_sparse(const at::Tensor& weight_in, const at::Tensor& mask) {
  const at::Tensor weight = weight_in.to(at::kFloat).contiguous().reshape(-1);
  const at::Tensor kept = (mask.defined() ? mask.reshape(-1) == 1 : weight != 0).contiguous();
  SparseWeight sparse;
  sparse.shape = weight_in.sizes().vec();
  sparse.values = weight.masked_select(kept).contiguous();
  const std::int64_t numel = weight.numel();
  sparse.bitmap = at::zeros({(numel + 7) / 8}, at::kByte);
  std::uint8_t* bits = sparse.bitmap.data_ptr<std::uint8_t>();
  const bool* keep = kept.data_ptr<bool>();
  for (std::int64_t i = 0; i < numel; ++i) {
    if (keep[i]) bits[i >> 3] = static_cast<std::uint8_t>(bits[i >> 3] | (1u << (i & 7)));
  }
  return sparse;
}

namespace {

std::string shape_string(const std::vector<std::int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

Status check_sparse(const SparseWeight& sparse, std::int64_t& numel) {
  numel = 1;
  for (const std::int64_t size : sparse.shape) {
    if (size < 0) return Status::data_loss("sparse weight: negative size in shape " + shape_string(sparse.shape));
    if (size != 0 && numel > std::numeric_limits<std::int64_t>::max() / 8 / size) {
      return Status::data_loss("sparse weight: shape " + shape_string(sparse.shape) + " is too large");
    }
    numel *= size;
  }
  const std::int64_t bitmap_bytes = (numel + 7) / 8;
  if (!sparse.bitmap.defined() || sparse.bitmap.scalar_type() != at::kByte || sparse.bitmap.dim() != 1 ||
      !sparse.bitmap.device().is_cpu()) {
    return Status::data_loss("sparse weight: the bitmap is not a 1-D uint8 CPU tensor");
  }
  if (sparse.bitmap.numel() != bitmap_bytes) {
    return Status::data_loss(fmt::format("sparse weight: the bitmap has {} bytes, shape {} needs {}",
                                         sparse.bitmap.numel(), shape_string(sparse.shape), bitmap_bytes));
  }
  if (!sparse.values.defined() || sparse.values.scalar_type() != at::kFloat || sparse.values.dim() != 1 ||
      !sparse.values.device().is_cpu()) {
    return Status::data_loss("sparse weight: the values are not a 1-D float32 CPU tensor");
  }
  const at::Tensor bitmap = sparse.bitmap.contiguous();
  const std::uint8_t* bits = bitmap.data_ptr<std::uint8_t>();
  std::int64_t set = 0;
  for (std::int64_t i = 0; i < bitmap_bytes; ++i) set += __builtin_popcount(bits[i]);
  if (numel % 8 != 0 && (bits[bitmap_bytes - 1] >> (numel % 8)) != 0) {
    return Status::data_loss(
        fmt::format("sparse weight: the bitmap has bits set past entry {} of shape {}", numel, shape_string(sparse.shape)));
  }
  if (set != sparse.values.numel()) {
    return Status::data_loss(fmt::format("sparse weight: the bitmap keeps {} entries but there are {} values", set,
                                         sparse.values.numel()));
  }
  return Status::ok();
}

// Calls keep(i, j) for the i-th entry (row-major) with the j-th set bit.
template <typename Fn>
void for_each_kept(const at::Tensor& bitmap, std::int64_t numel, Fn&& keep) {
  const std::uint8_t* bits = bitmap.data_ptr<std::uint8_t>();
  std::int64_t j = 0;
  for (std::int64_t i = 0; i < numel; ++i) {
    if ((bits[i >> 3] >> (i & 7)) & 1u) keep(i, j++);
  }
}

Result<at::Tensor> decode(const SparseWeight& sparse, bool mask_only) {
  std::int64_t numel = 0;
  if (Status s = check_sparse(sparse, numel); !s.is_ok()) return s;
  const at::Tensor bitmap = sparse.bitmap.contiguous();
  const at::Tensor values = sparse.values.contiguous();
  at::Tensor dense = at::zeros({numel}, at::kFloat);
  float* out = dense.data_ptr<float>();
  const float* in = values.data_ptr<float>();
  for_each_kept(bitmap, numel, [&](std::int64_t i, std::int64_t j) { out[i] = mask_only ? 1.0f : in[j]; });
  return dense.view(sparse.shape);
}

}  // namespace

Result<at::Tensor> decode_sparse(const SparseWeight& sparse) { return decode(sparse, false); }
Result<at::Tensor> decode_sparse_mask(const SparseWeight& sparse) { return decode(sparse, true); }

void store_sparse_weights(std::map<std::string, at::Tensor>& tensors) {
  std::vector<std::string> names;
  for (const auto& [name, t] : tensors) {
    if (ends_with(name, ".weight") && t.dim() == 2 && t.scalar_type() == at::kFloat) names.push_back(name);
  }
  for (const std::string& name : names) {
    const at::Tensor& t = tensors.at(name);
    const std::int64_t nonzero = t.ne(0).sum().item<std::int64_t>();
    // Sparse wins when 4 bytes per kept value plus 1 bit per entry is less than 4 bytes per entry.
    if (nonzero * 32 + t.numel() >= t.numel() * 32) continue;
    SparseWeight s = encode_sparse(t);
    std::vector<float> shape(s.shape.begin(), s.shape.end());
    tensors[name + kValues] = s.values;
    tensors[name + kBitmap] = s.bitmap.view(at::kChar);
    tensors[name + kShape] = at::tensor(shape);
    tensors.erase(name);
  }
}

Status load_sparse_weights(std::map<std::string, at::Tensor>& tensors) {
  std::vector<std::string> names;
  for (const auto& [name, t] : tensors) {
    if (ends_with(name, kValues)) names.push_back(name.substr(0, name.size() - std::string(kValues).size()));
  }
  for (const std::string& name : names) {
    const auto bitmap = tensors.find(name + kBitmap);
    const auto shape = tensors.find(name + kShape);
    if (bitmap == tensors.end() || shape == tensors.end()) {
      return Status::data_loss(fmt::format("sparse weight '{}': needs {}, {} and {}", detail::clip_for_message(name),
                                           kValues, kBitmap, kShape));
    }
    SparseWeight s;
    const at::Tensor dims = shape->second.to(at::kFloat).contiguous();
    for (std::int64_t i = 0; i < dims.numel(); ++i) {
      const float d = dims.data_ptr<float>()[i];
      // Bounded before the cast: a float beyond int64 converts to undefined.
      if (!(d >= 0 && d <= 1e12f) || d != std::floor(d)) {
        return Status::data_loss(fmt::format("sparse weight '{}': bad shape", detail::clip_for_message(name)));
      }
      s.shape.push_back(static_cast<std::int64_t>(d));
    }
    s.bitmap = bitmap->second.view(at::kByte);
    s.values = tensors.at(name + kValues);
    auto dense = decode_sparse(s);
    if (!dense) return Status::data_loss(fmt::format("'{}': {}", detail::clip_for_message(name), dense.status().message()));
    tensors[name] = std::move(dense).value();
    tensors.erase(name + kValues);
    tensors.erase(name + kBitmap);
    tensors.erase(name + kShape);
  }
  return Status::ok();
}

}  // namespace rapidqa::model

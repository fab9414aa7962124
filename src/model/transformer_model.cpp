#include "model/transformer_model.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <limits>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>

#include "common/guard.h"
#include "model/bf16_linear.h"
#include "model/cpu_kernels.h"
#include "model/int8_linear.h"
#include "model/onednn_linear.h"
#include "model/checkpoint_files.h"
#include "model/safetensors_file.h"
#include "model/sparse_weight.h"
#include "runtime/work_pool.h"

namespace rapidqa::model {
namespace {

std::string shape_string(at::IntArrayRef shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// The index of the first NaN or infinite element of a float tensor, or -1
// (also for integer tensors). One pass over the data without allocating:
// it runs over every weight at load, so it must stay cheap next to reading
// them. An all-ones exponent marks both NaN and infinity.
std::int64_t first_non_finite(const at::Tensor& tensor) {
  if (tensor.scalar_type() != at::kFloat) return -1;
  const at::Tensor t = tensor.contiguous();
  const auto* bits = static_cast<const std::uint32_t*>(t.data_ptr());
  const std::int64_t n = t.numel();
  constexpr std::uint32_t kExponent = 0x7f800000u;
  constexpr std::int64_t kBlock = 4096;  // scanned branch-free (vectorised); the exact index only on a hit
  for (std::int64_t first = 0; first < n; first += kBlock) {
    const std::int64_t last = std::min(n, first + kBlock);
    bool any = false;
    for (std::int64_t i = first; i < last; ++i) any |= (bits[i] & kExponent) == kExponent;
    if (!any) continue;
    for (std::int64_t i = first; i < last; ++i) {
      if ((bits[i] & kExponent) == kExponent) return i;
    }
  }
  return -1;
}

// Looks tensors up under one name prefix and checks their shapes, so every
// error names the tensor and what was expected.
class TensorLookup {
 public:
  TensorLookup(const std::map<std::string, at::Tensor>& tensors, std::string prefix, std::string source)
      : tensors_(tensors), prefix_(std::move(prefix)), source_(std::move(source)) {}

  Result<at::Tensor> get(const std::string& name, std::vector<std::int64_t> shape) const {
    const auto it = tensors_.find(prefix_ + name);
    if (it == tensors_.end()) {
      return Status::invalid_argument(
          fmt::format("{}: tensor '{}{}' is missing (expected shape {})", source_, prefix_, name, shape_string(shape)));
    }
    if (it->second.sizes() != at::IntArrayRef(shape)) {
      return Status::invalid_argument(fmt::format("{}: tensor '{}{}' has shape {}, expected {}", source_, prefix_,
                                                  name, shape_string(it->second.sizes()), shape_string(shape)));
    }
    const auto type = it->second.scalar_type();
    at::Tensor tensor = type != at::kFloat && type != at::kChar ? it->second.to(at::kFloat) : it->second;
    // A NaN or infinity in any weight turns every output into NaN, and the
    // engine would then answer everything with its fallback at score NaN:
    // refuse the checkpoint here, naming the tensor.
    if (const std::int64_t bad = first_non_finite(tensor); bad >= 0) {
      return Status::invalid_argument(fmt::format("{}: holds a NaN or infinite value (element {}); the checkpoint is corrupt",
                                                  describe(name), bad));
    }
    return tensor;
  }

  bool has(const std::string& name) const { return tensors_.count(prefix_ + name) != 0; }
  // "<source>: tensor '<prefix><name>'", for messages.
  std::string describe(const std::string& name) const {
    return fmt::format("{}: tensor '{}{}'", source_, prefix_, name);
  }

 private:
  const std::map<std::string, at::Tensor>& tensors_;
  std::string prefix_;
  std::string source_;
};

#define RAPIDQA_ASSIGN_OR_RETURN(lhs, expr) \
  auto lhs##_result = (expr);               \
  if (!lhs##_result) return lhs##_result.status(); \
  at::Tensor lhs = std::move(lhs##_result).value()

Result<LayerNormWeights> layer_norm(const TensorLookup& t, const std::string& name, std::int64_t width,
                                    double eps) {
  RAPIDQA_ASSIGN_OR_RETURN(weight, t.get(name + ".weight", {width}));
  RAPIDQA_ASSIGN_OR_RETURN(bias, t.get(name + ".bias", {width}));
  return LayerNormWeights{weight.contiguous(), bias.contiguous(), eps};
}

// A quantized layer's parts: int8 weight, channel scales, and for a static
// layer its calibrated input range.
struct QuantizedParts {
  QuantizedWeight weight;
  InputQuantization input;
};

// A weight_scale tensor (already known finite) must be positive: a zero
// scale erases its channel and a negative one flips its sign, silently.
Status check_weight_scales(const TensorLookup& t, const std::string& name, const at::Tensor& scales) {
  const at::Tensor s = scales.contiguous();
  const float* p = s.data_ptr<float>();
  for (std::int64_t i = 0; i < s.numel(); ++i) {
    if (!(p[i] > 0.0f)) {
      return Status::invalid_argument(fmt::format("{}: element {} is {}; weight scales must be positive",
                                                  t.describe(name), i, p[i]));
    }
  }
  return Status::ok();
}

Result<QuantizedParts> quantized_parts(const TensorLookup& t, const std::string& name, std::int64_t out,
                                       std::int64_t in) {
  RAPIDQA_ASSIGN_OR_RETURN(values, t.get(name + ".weight", {out, in}));
  if (values.scalar_type() != at::kChar) {
    return Status::invalid_argument(fmt::format("{} has a weight_scale beside it but is not I8",
                                                t.describe(name + ".weight")));
  }
  RAPIDQA_ASSIGN_OR_RETURN(scales, t.get(name + ".weight_scale", {out}));
  if (Status s = check_weight_scales(t, name + ".weight_scale", scales); !s.is_ok()) return s;
  QuantizedParts parts{{values, scales}, {}};
  if (t.has(name + ".input_range")) {
    RAPIDQA_ASSIGN_OR_RETURN(range, t.get(name + ".input_range", {2}));
    parts.input.dynamic = false;
    parts.input.range_min = range[0].item<float>();
    parts.input.range_max = range[1].item<float>();
    // get() has refused NaN and infinity; an inverted range is no range.
    if (parts.input.range_min > parts.input.range_max) {
      return Status::invalid_argument(fmt::format("{}: [{}, {}] is inverted; the minimum must not exceed the maximum",
                                                  t.describe(name + ".input_range"), parts.input.range_min,
                                                  parts.input.range_max));
    }
  }
  return parts;
}

Result<std::unique_ptr<LinearOp>> dense(const TensorLookup& t, const std::string& name, std::int64_t out,
                                        std::int64_t in, Activation act) {
  RAPIDQA_ASSIGN_OR_RETURN(bias, t.get(name + ".bias", {out}));
  if (t.has(name + ".weight_scale")) {
    auto parts = quantized_parts(t, name, out, in);
    if (!parts) return parts.status();
    return std::unique_ptr<LinearOp>(
        std::make_unique<Int8Linear>(std::move(parts->weight), bias, act, parts->input));
  }
  RAPIDQA_ASSIGN_OR_RETURN(weight, t.get(name + ".weight", {out, in}));
  if (weight.scalar_type() != at::kFloat) {
    return Status::invalid_argument(fmt::format("{} is I8 without a weight_scale", t.describe(name + ".weight")));
  }
  return make_fp32_linear(weight, bias, act);
}

// Query, key and value as one product. Quantized checkpoints keep the three
// apart (Hugging Face names) with one input range; their rows and channel
// scales are stacked.
Result<std::unique_ptr<LinearOp>> fused_qkv(const TensorLookup& t, const std::string& query,
                                            const std::string& key, const std::string& value, std::int64_t w,
                                            std::int64_t h) {
  RAPIDQA_ASSIGN_OR_RETURN(qb, t.get(query + ".bias", {w}));
  RAPIDQA_ASSIGN_OR_RETURN(kb, t.get(key + ".bias", {w}));
  RAPIDQA_ASSIGN_OR_RETURN(vb, t.get(value + ".bias", {w}));
  const at::Tensor bias = at::cat({qb, kb, vb}, 0);
  const bool quantized = t.has(query + ".weight_scale");
  if (quantized != t.has(key + ".weight_scale") || quantized != t.has(value + ".weight_scale")) {
    return Status::invalid_argument(
        fmt::format("'{}', '{}' and '{}' must be all quantized or all float", query, key, value));
  }
  if (quantized) {
    std::vector<QuantizedParts> parts;
    for (const std::string* name : {&query, &key, &value}) {
      auto p = quantized_parts(t, *name, w, h);
      if (!p) return p.status();
      parts.push_back(std::move(p).value());
    }
    QuantizedWeight weight{at::cat({parts[0].weight.values, parts[1].weight.values, parts[2].weight.values}, 0),
                           at::cat({parts[0].weight.scales, parts[1].weight.scales, parts[2].weight.scales}, 0)};
    return std::unique_ptr<LinearOp>(
        std::make_unique<Int8Linear>(std::move(weight), bias, Activation::kNone, parts[0].input));
  }
  RAPIDQA_ASSIGN_OR_RETURN(qw, t.get(query + ".weight", {w, h}));
  RAPIDQA_ASSIGN_OR_RETURN(kw, t.get(key + ".weight", {w, h}));
  RAPIDQA_ASSIGN_OR_RETURN(vw, t.get(value + ".weight", {w, h}));
  return make_fp32_linear(at::cat({qw, kw, vw}, 0), bias, Activation::kNone);
}

// An embedding table, INT8 per row when a "<name>.weight_scale" is there.
Result<EmbeddingTable> embedding_table(const TensorLookup& t, const std::string& name, std::int64_t rows,
                                       std::int64_t width) {
  RAPIDQA_ASSIGN_OR_RETURN(values, t.get(name + ".weight", {rows, width}));
  if (t.has(name + ".weight_scale")) {
    RAPIDQA_ASSIGN_OR_RETURN(scales, t.get(name + ".weight_scale", {rows}));
    if (values.scalar_type() != at::kChar) {
      return Status::invalid_argument(
          fmt::format("{} has a weight_scale but is not I8", t.describe(name + ".weight")));
    }
    if (Status s = check_weight_scales(t, name + ".weight_scale", scales); !s.is_ok()) return s;
    return EmbeddingTable::quantized(values, scales);
  }
  return EmbeddingTable(values);
}

Result<TransformerLayer> build_layer(const TensorLookup& t, const TransformerConfig& c, std::int64_t index) {
  const LayerNames n = names_for(c.architecture);
  const std::string p = n.layer_prefix + std::to_string(index) + ".";
  const std::int64_t h = c.hidden_size;
  TransformerLayer layer;
  layer.head_dim = c.head_dim();
  // Structured pruning leaves layers with fewer heads and neurons: their
  // sizes come from the tensors, checked against what config.json says was
  // removed.
  // A mask rather than a search per index: config.json may list many.
  const auto kept = [&](std::int64_t total, const std::map<std::int64_t, std::vector<std::int64_t>>& removed) {
    std::vector<bool> gone(static_cast<std::size_t>(total), false);
    if (const auto it = removed.find(index); it != removed.end()) {
      for (const std::int64_t i : it->second) {
        if (i >= 0 && i < total) gone[static_cast<std::size_t>(i)] = true;
      }
    }
    std::vector<std::int64_t> ids;
    for (std::int64_t i = 0; i < total; ++i) {
      if (!gone[static_cast<std::size_t>(i)]) ids.push_back(i);
    }
    return ids;
  };
  layer.head_ids = kept(c.num_heads, c.pruned_heads);
  layer.neuron_ids = kept(c.intermediate_size, c.pruned_intermediate);
  layer.num_heads = static_cast<std::int64_t>(layer.head_ids.size());
  const std::int64_t width = layer.num_heads * layer.head_dim;
  const std::int64_t inner = static_cast<std::int64_t>(layer.neuron_ids.size());
  if (width == 0 || inner == 0) {
    return Status::invalid_argument(
        fmt::format("layer {}: config.json prunes every head or every FFN neuron; at least one must stay", index));
  }
  auto qkv = fused_qkv(t, p + n.query, p + n.key, p + n.value, width, h);
  if (!qkv) return qkv.status();
  layer.qkv = std::move(qkv).value();
  auto attention_output = dense(t, p + n.attention_output, h, width, Activation::kNone);
  if (!attention_output) return attention_output.status();
  layer.attention_output = std::move(attention_output).value();
  auto attention_norm = layer_norm(t, p + n.attention_norm, h, c.layer_norm_eps);
  if (!attention_norm) return attention_norm.status();
  layer.attention_norm = attention_norm.value();
  auto intermediate = dense(t, p + n.intermediate, inner, h, c.hidden_act);
  if (!intermediate) return intermediate.status();
  layer.intermediate = std::move(intermediate).value();
  auto output = dense(t, p + n.output, h, inner, Activation::kNone);
  if (!output) return output.status();
  layer.output = std::move(output).value();
  auto output_norm = layer_norm(t, p + n.output_norm, h, c.layer_norm_eps);
  if (!output_norm) return output_norm.status();
  layer.output_norm = output_norm.value();
  return layer;
}

// The prefix under which the encoder's tensors are stored ("" or a head
// model's "bert." etc.), found from the word embeddings.
Result<std::string> find_prefix(const std::map<std::string, at::Tensor>& tensors, const std::string& source) {
  for (const char* prefix : {"", "bert.", "distilbert.", "model.", "roberta.", "electra.", "mpnet."}) {
    if (tensors.count(std::string(prefix) + "embeddings.word_embeddings.weight")) return std::string(prefix);
  }
  return Status::invalid_argument(fmt::format(
      "{}: tensor 'embeddings.word_embeddings.weight' is missing (also looked for it under the prefixes bert., "
      "distilbert., model., roberta., electra., mpnet.); is this a BERT-family checkpoint?",
      source));
}

// Per calling thread, reused across forward passes: the activations of
// one layer, sized for the largest batch seen. Reuse matters: fresh
// buffers of a few megabytes come from mmap and cost a page fault per 4 KiB
// on every pass.
struct Workspace {
  std::vector<float> x, embedded, qkv, context, attended, inner, out;
};

float* at_least(std::vector<float>& buffer, std::int64_t floats) {
  if (buffer.size() < static_cast<std::size_t>(floats)) buffer.resize(static_cast<std::size_t>(floats));
  return buffer.data();
}

// Which rows of the padded batch hold tokens: the forward pass packs them
// (no work is spent on padding) and attends within each sequence's rows.
struct PackedBatch {
  std::vector<std::int64_t> source_row;  // packed token -> b * seq + position
  std::vector<std::int64_t> first;       // sequence b's tokens are packed rows [first[b], first[b + 1])
  std::int64_t tokens() const { return static_cast<std::int64_t>(source_row.size()); }
};

PackedBatch pack(const at::Tensor& mask, std::int64_t batch, std::int64_t seq) {
  PackedBatch p;
  p.first.reserve(static_cast<std::size_t>(batch + 1));
  p.source_row.reserve(static_cast<std::size_t>(batch * seq));
  at::Tensor m;
  if (mask.defined()) m = mask.to(at::kLong).contiguous();
  const std::int64_t* valid = m.defined() ? m.data_ptr<std::int64_t>() : nullptr;
  for (std::int64_t b = 0; b < batch; ++b) {
    p.first.push_back(p.tokens());
    for (std::int64_t i = 0; i < seq; ++i) {
      if (!valid || valid[b * seq + i] != 0) p.source_row.push_back(b * seq + i);
    }
  }
  p.first.push_back(p.tokens());
  return p;
}

constexpr std::int64_t kNormRowsPerTask = 32;

void layer_norm_rows(float* x, const float* residual, const LayerNormWeights& ln, std::int64_t rows,
                     std::int64_t width) {
  const float* gamma = ln.weight.data_ptr<float>();
  const float* beta = ln.bias.data_ptr<float>();
  const auto eps = static_cast<float>(ln.eps);
  runtime::parallel_ranges(rows, kNormRowsPerTask, [&](std::int64_t first, std::int64_t end) {
    kernels::residual_layer_norm(x + first * width, residual ? residual + first * width : nullptr, gamma, beta, eps,
                                 end - first, width);
  });
}

void check_ids(const at::Tensor& ids, std::int64_t limit, const char* what) {
  if (ids.numel() == 0) return;
  const std::int64_t lo = ids.min().item<std::int64_t>(), hi = ids.max().item<std::int64_t>();
  if (lo < 0 || hi >= limit) {
    throw std::invalid_argument(fmt::format("{} {} is out of range: the model has {}", what, lo < 0 ? lo : hi, limit));
  }
}

}  // namespace

std::int64_t relative_position_bucket(std::int64_t relative, std::int64_t buckets) {
  // Computed in float32 as PyTorch does, so the boundaries fall alike.
  constexpr std::int64_t kMaxDistance = 128;
  const std::int64_t half = buckets / 2, exact = half / 2;
  std::int64_t n = -relative;
  const std::int64_t bucket = n < 0 ? half : 0;
  n = n < 0 ? -n : n;
  if (n < exact) return bucket + n;
  const float scale = static_cast<float>(std::log(static_cast<double>(kMaxDistance) / static_cast<double>(exact)));
  const float logarithmic =
      std::log(static_cast<float>(n) / static_cast<float>(exact)) / scale * static_cast<float>(half - exact);
  return bucket + std::min<std::int64_t>(exact + static_cast<std::int64_t>(logarithmic), half - 1);
}

LayerNames names_for(Architecture arch) {
  if (arch == Architecture::kMPNet) {
    return {"encoder.layer.",     "attention.attn.q",   "attention.attn.k", "attention.attn.v", "attention.attn.o",
            "attention.LayerNorm", "intermediate.dense", "output.dense",     "output.LayerNorm"};
  }
  if (arch == Architecture::kDistilBert) {
    return {"transformer.layer.", "attention.q_lin",   "attention.k_lin", "attention.v_lin", "attention.out_lin",
            "sa_layer_norm",      "ffn.lin1",          "ffn.lin2",        "output_layer_norm"};
  }
  return {"encoder.layer.",          "attention.self.query", "attention.self.key",
          "attention.self.value",    "attention.output.dense", "attention.output.LayerNorm",
          "intermediate.dense",      "output.dense",         "output.LayerNorm"};
}

at::Tensor TransformerModel::forward(const ModelInputs& inputs) const {
  c10::InferenceMode inference;
  const at::Tensor ids = inputs.input_ids.to(at::kLong).contiguous();
  const std::int64_t batch = ids.size(0), seq = ids.size(1);
  const std::int64_t h = config.hidden_size;
  const std::int64_t offset = config.position_offset;
  if (seq > position_embeddings.rows() - offset) {
    throw std::invalid_argument(fmt::format("sequence of {} tokens is longer than the model's {} positions", seq,
                                            position_embeddings.rows() - offset));
  }
  check_ids(ids, word_embeddings.rows(), "token id");
  at::Tensor types;
  // A model with one token type (the RoBERTa family) reads every token as
  // type 0, whatever segment a pair's second text would be.
  if (token_type_embeddings.defined() && inputs.token_type_ids.defined() && token_type_embeddings.rows() > 1) {
    types = inputs.token_type_ids.to(at::kLong).contiguous();
    check_ids(types, token_type_embeddings.rows(), "token type");
  }
  const PackedBatch packed = pack(inputs.attention_mask, batch, seq);
  const std::int64_t tokens = packed.tokens();
  thread_local Workspace ws;
  float* x = at_least(ws.x, tokens * h);
  // ELECTRA's narrower embeddings are summed and normalised at their own
  // width, then projected up to the layers'.
  const std::int64_t e = config.embedding_width();
  float* embedded = embedding_projection ? at_least(ws.embedded, tokens * e) : x;

  // Embeddings: word + position + token type, then LayerNorm, per token.
  const std::int64_t* id = ids.data_ptr<std::int64_t>();
  const std::int64_t* type = types.defined() ? types.data_ptr<std::int64_t>() : nullptr;
  runtime::parallel_ranges(tokens, kNormRowsPerTask, [&](std::int64_t first, std::int64_t end) {
    for (std::int64_t t = first; t < end; ++t) {
      const std::int64_t row = packed.source_row[static_cast<std::size_t>(t)];
      float* out = embedded + t * e;
      std::fill(out, out + e, 0.0f);
      word_embeddings.add_row(id[row], out);
      // BERT reads the position in the padded row; RoBERTa counts the
      // sequence's own tokens from past the padding index, as Hugging Face
      // does from the ids that are not padding.
      const std::int64_t position =
          offset == 0 ? row % seq : offset + t - packed.first[static_cast<std::size_t>(row / seq)];
      position_embeddings.add_row(position, out);
      if (token_type_embeddings.defined()) token_type_embeddings.add_row(type ? type[row] : 0, out);
    }
    kernels::residual_layer_norm(embedded + first * e, nullptr, embedding_norm.weight.data_ptr<float>(),
                                 embedding_norm.bias.data_ptr<float>(), static_cast<float>(embedding_norm.eps),
                                 end - first, e);
  });
  if (embedding_projection) embedding_projection->forward_rows(embedded, tokens, x);

  // MPNet: each head's bias by relative position, for every distance this
  // batch has, from -(seq - 1) to seq - 1.
  const std::int64_t distances = 2 * seq - 1;
  std::vector<float> relative_bias;
  if (relative_attention_bias.defined()) {
    const std::int64_t buckets = relative_attention_bias.size(0), all_heads = relative_attention_bias.size(1);
    const float* table = relative_attention_bias.data_ptr<float>();
    relative_bias.resize(static_cast<std::size_t>(all_heads * distances));
    for (std::int64_t r = -(seq - 1); r < seq; ++r) {
      const std::int64_t bucket = relative_position_bucket(r, buckets);
      for (std::int64_t head = 0; head < all_heads; ++head) {
        relative_bias[static_cast<std::size_t>(head * distances + r + seq - 1)] = table[bucket * all_heads + head];
      }
    }
  }

  for (const TransformerLayer& layer : layers) {
    const std::int64_t heads = layer.num_heads, d = layer.head_dim, width = heads * d;
    const std::int64_t inner_width = layer.intermediate->out_features();
    float* qkv = at_least(ws.qkv, tokens * 3 * width);
    float* context = at_least(ws.context, tokens * width);
    float* attended = at_least(ws.attended, tokens * h);
    float* inner = at_least(ws.inner, tokens * inner_width);
    float* out = at_least(ws.out, tokens * h);
    layer.qkv->forward_rows(x, tokens, qkv);
    // One task per (sequence, head), each over its own sequence's rows only.
    runtime::parallel_tasks(batch * heads, [&](std::int64_t i) {
      const std::int64_t b = i / heads, a = i % heads;
      const std::int64_t first = packed.first[static_cast<std::size_t>(b)];
      const std::int64_t length = packed.first[static_cast<std::size_t>(b + 1)] - first;
      if (length == 0) return;
      thread_local std::vector<float> scores;
      const float* q = qkv + first * 3 * width + a * d;
      const float* bias =
          relative_bias.empty()
              ? nullptr
              : relative_bias.data() + layer.head_ids[static_cast<std::size_t>(a)] * distances + (seq - 1);
      kernels::attention_head(q, q + width, q + 2 * width, 3 * width, length, d, context + first * width + a * d,
                              width, at_least(scores, kernels::attention_scratch_floats(length, d)), bias);
    });
    layer.attention_output->forward_rows(context, tokens, attended);
    layer_norm_rows(attended, x, layer.attention_norm, tokens, h);
    layer.intermediate->forward_rows(attended, tokens, inner);
    layer.output->forward_rows(inner, tokens, out);
    layer_norm_rows(out, attended, layer.output_norm, tokens, h);
    std::swap(ws.x, ws.out);
    x = ws.x.data();
  }

  // Back to the padded shape; padding positions are zero.
  at::Tensor hidden = tokens == batch * seq ? at::empty({batch, seq, h}, at::kFloat) : at::zeros({batch, seq, h}, at::kFloat);
  float* dst = hidden.data_ptr<float>();
  for (std::int64_t t = 0; t < tokens; ++t) {
    std::copy(x + t * h, x + (t + 1) * h, dst + packed.source_row[static_cast<std::size_t>(t)] * h);
  }
  return hidden;
}

Status convert_to_bf16(TransformerModel& model) {
  if (!bf16_native()) {
    return Status::failed_precondition(fmt::format("BF16 needs {}; this CPU (as limited by ONEDNN_MAX_CPU_ISA) has none",
                                                   bf16_requirement()));
  }
  return detail::guarded("converting the model to BF16", [&]() -> Status {
    auto convert = [](std::unique_ptr<LinearOp>& op) {
      if (!op || op->kind().rfind("f32", 0) != 0) return;
      op = std::make_unique<Bf16Linear>(op->dense_weight(), op->dense_bias(), op->activation());
    };
    for (TransformerLayer& layer : model.layers) {
      for (auto* op : {&layer.qkv, &layer.attention_output, &layer.intermediate, &layer.output}) convert(*op);
    }
    convert(model.pooler);
    convert(model.qa_head);
    return Status::ok();
  });
}

std::int64_t TransformerLayer::parameter_count() const {
  std::int64_t n = 4 * attention_norm.weight.numel();
  for (const LinearOp* op : {qkv.get(), attention_output.get(), intermediate.get(), output.get()}) {
    n += op->in_features() * op->out_features() + op->out_features();
  }
  return n;
}

std::int64_t TransformerModel::layer_parameter_count() const {
  std::int64_t n = 0;
  for (const auto& l : layers) n += l.parameter_count();
  return n;
}

std::int64_t TransformerModel::parameter_count() const {
  return word_embeddings.numel() + position_embeddings.numel() +
         (token_type_embeddings.defined() ? token_type_embeddings.numel() : 0) + embedding_norm.weight.numel() * 2 +
         layer_parameter_count();
}

std::size_t TransformerModel::weight_bytes() const {
  std::size_t bytes = word_embeddings.bytes() + position_embeddings.bytes() + token_type_embeddings.bytes() +
                      static_cast<std::size_t>(embedding_norm.weight.numel() * 2) * sizeof(float);
  for (const auto& l : layers) {
    for (const LinearOp* op : {l.qkv.get(), l.attention_output.get(), l.intermediate.get(), l.output.get()}) {
      bytes += op->weight_bytes();
    }
    bytes += static_cast<std::size_t>(4 * l.attention_norm.weight.numel()) * sizeof(float);
  }
  return bytes;
}

Result<std::shared_ptr<TransformerModel>> build_transformer(const TransformerConfig& c,
                                                           const std::map<std::string, at::Tensor>& tensors,
                                                           const std::string& source) {
  return detail::guarded("building the model", [&]() -> Result<std::shared_ptr<TransformerModel>> {
    auto prefix = find_prefix(tensors, source);
    if (!prefix) return prefix.status();
    const TensorLookup t(tensors, prefix.value(), source);
    auto model = std::make_shared<TransformerModel>();
    model->config = c;
    const std::int64_t h = c.hidden_size, e = c.embedding_width();
    auto word = embedding_table(t, "embeddings.word_embeddings", c.vocab_size, e);
    if (!word) return word.status();
    model->word_embeddings = std::move(word).value();
    auto position = embedding_table(t, "embeddings.position_embeddings", c.max_position_embeddings, e);
    if (!position) return position.status();
    model->position_embeddings = std::move(position).value();
    if (c.architecture == Architecture::kBert && c.type_vocab_size > 0) {
      auto types = embedding_table(t, "embeddings.token_type_embeddings", c.type_vocab_size, e);
      if (!types) return types.status();
      model->token_type_embeddings = std::move(types).value();
    }
    auto norm = layer_norm(t, "embeddings.LayerNorm", e, c.layer_norm_eps);
    if (!norm) return norm.status();
    model->embedding_norm = norm.value();
    if (e != h) {
      auto projection = dense(t, "embeddings_project", h, e, Activation::kNone);
      if (!projection) return projection.status();
      model->embedding_projection = std::move(projection).value();
    }
    if (c.architecture == Architecture::kMPNet) {
      auto bias = t.get("encoder.relative_attention_bias.weight", {c.relative_attention_buckets, c.num_heads});
      if (!bias) return bias.status();
      model->relative_attention_bias = bias->contiguous();
    }
    for (std::int64_t i = 0; i < c.num_layers; ++i) {
      auto layer = build_layer(t, c, i);
      if (!layer) return layer.status();
      model->layers.push_back(std::move(layer).value());
    }
    const LayerNames names = names_for(c.architecture);
    if (t.has(names.layer_prefix + std::to_string(c.num_layers) + "." + names.output + ".weight")) {
      return Status::invalid_argument(fmt::format(
          "{}: the checkpoint has more layers than the {} that config.json declares", source, c.num_layers));
    }
    if (t.has("pooler.dense.weight")) {
      auto pooler = dense(t, "pooler.dense", h, h, Activation::kTanh);
      if (!pooler) return pooler.status();
      model->pooler = std::move(pooler).value();
    }
    // Heads live outside the encoder prefix.
    const TensorLookup heads(tensors, "", source);
    if (heads.has("qa_outputs.weight")) {
      auto qa = dense(heads, "qa_outputs", 2, h, Activation::kNone);
      if (!qa) return qa.status();
      model->qa_head = std::move(qa).value();
    }
    return model;
  });
}

Result<std::shared_ptr<const TransformerModel>> load_transformer(const std::string& model_dir) {
  namespace fs = std::filesystem;
  return detail::guarded("loading the model", [&]() -> Result<std::shared_ptr<const TransformerModel>> {
    if (!fs::is_directory(model_dir)) {
      return Status::not_found(fmt::format("model directory '{}' does not exist", model_dir));
    }
    auto config = TransformerConfig::from_json_file((fs::path(model_dir) / "config.json").string());
    if (!config) return config.status();
    auto checkpoint = read_checkpoint_tensors(model_dir);
    if (!checkpoint) return checkpoint.status();
    std::map<std::string, at::Tensor>& tensors = checkpoint->tensors;
    const std::string& source = checkpoint->source;
    if (Status sparse = load_sparse_weights(tensors); !sparse.is_ok()) {
      return Status(sparse.code(), fmt::format("{}: {}", source, sparse.message()));
    }
    auto model = build_transformer(config.value(), tensors, source);
    if (!model) return model.status();
    return std::shared_ptr<const TransformerModel>(std::move(model).value());
  });
}

}  // namespace rapidqa::model

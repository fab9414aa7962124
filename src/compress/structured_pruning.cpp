#include "compress/structured_pruning.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <fstream>
#include <numeric>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/bounded_file.h"
#include "common/bounded_json.h"
#include "model/onednn_linear.h"
#include "model/transformer_checkpoint.h"

namespace rapidqa::compress {
namespace {

bool is_fp32(const model::LinearOp& op) { return op.kind().rfind("f32", 0) == 0; }

// Rows [h * d, (h + 1) * d) of each kept head, within one of the q/k/v blocks.
at::Tensor head_rows(std::int64_t heads, std::int64_t head_dim, const std::vector<std::int64_t>& kept,
                     std::int64_t block) {
  std::vector<std::int64_t> rows;
  for (std::int64_t h : kept) {
    for (std::int64_t d = 0; d < head_dim; ++d) rows.push_back(block * heads * head_dim + h * head_dim + d);
  }
  return at::tensor(rows, at::kLong);
}

std::vector<std::int64_t> complement(std::int64_t n, const std::vector<std::int64_t>& removed) {
  std::vector<std::int64_t> kept;
  for (std::int64_t i = 0; i < n; ++i) {
    if (std::find(removed.begin(), removed.end(), i) == removed.end()) kept.push_back(i);
  }
  return kept;
}

}  // namespace

std::int64_t StructuredPlan::head_count() const {
  std::int64_t n = 0;
  for (const auto& h : heads) n += static_cast<std::int64_t>(h.size());
  return n;
}
std::int64_t StructuredPlan::neuron_count() const {
  std::int64_t n = 0;
  for (const auto& v : neurons) n += static_cast<std::int64_t>(v.size());
  return n;
}

std::vector<at::Tensor> head_magnitude(const model::TransformerModel& m) {
  c10::InferenceMode inference;
  std::vector<at::Tensor> out;
  for (const auto& layer : m.layers) {
    const std::int64_t a = layer.num_heads, d = layer.head_dim, h = m.config.hidden_size;
    const at::Tensor qkv = layer.qkv->dense_weight().view({3, a, d, h});
    const at::Tensor o = layer.attention_output->dense_weight().view({h, a, d});
    out.push_back((qkv.pow(2).sum(at::IntArrayRef{0, 2, 3}) + o.pow(2).sum(at::IntArrayRef{0, 2})).sqrt());
  }
  return out;
}

std::vector<at::Tensor> neuron_magnitude(const model::TransformerModel& m) {
  c10::InferenceMode inference;
  std::vector<at::Tensor> out;
  for (const auto& layer : m.layers) {
    out.push_back((layer.intermediate->dense_weight().pow(2).sum(1) + layer.output->dense_weight().pow(2).sum(0)).sqrt());
  }
  return out;
}

Result<StructuredPlan> plan_structured(const model::TransformerModel& m, const std::vector<at::Tensor>& head_importance,
                                       const std::vector<at::Tensor>& neuron_importance,
                                       const StructuredOptions& options) {
  for (double f : {options.head_fraction, options.neuron_fraction}) {
    if (!(f >= 0.0 && f < 1.0)) {
      return Status::invalid_argument(fmt::format("a pruning fraction must be in [0, 1), not {}", f));
    }
  }
  const auto layers = static_cast<std::int64_t>(m.layers.size());
  if (static_cast<std::int64_t>(head_importance.size()) != layers ||
      static_cast<std::int64_t>(neuron_importance.size()) != layers) {
    return Status::invalid_argument("importance scores must come one tensor per layer");
  }
  StructuredPlan plan;
  plan.heads.resize(m.layers.size());
  plan.neurons.resize(m.layers.size());
  struct Candidate {
    double score;
    std::int64_t layer, position;
  };
  auto choose = [&](const std::vector<at::Tensor>& importance, double fraction, bool depth_weighted,
                    std::vector<std::vector<std::int64_t>>& out, auto size_of) -> Status {
    std::vector<Candidate> candidates;
    std::int64_t total = 0;
    for (std::int64_t l = 0; l < layers; ++l) {
      const at::Tensor s = importance[l].to(at::kDouble).contiguous();
      if (s.dim() != 1 || s.size(0) != size_of(m.layers[l])) {
        return Status::invalid_argument(fmt::format("layer {}: {} importance scores for {} units", l, s.numel(),
                                                    size_of(m.layers[l])));
      }
      const double mean = std::max(s.mean().item<double>(), 1e-30);
      const double depth = depth_weighted ? 0.5 + 0.5 * static_cast<double>(layers - 1 - l) / std::max<std::int64_t>(1, layers - 1) : 1.0;
      const double* p = s.data_ptr<double>();
      for (std::int64_t i = 0; i < s.size(0); ++i) candidates.push_back({p[i] / mean * depth, l, i});
      total += s.size(0);
    }
    // Lowest score first; ties by layer then position, so plans are deterministic.
    std::stable_sort(candidates.begin(), candidates.end(),
                     [](const Candidate& a, const Candidate& b) { return a.score < b.score; });
    const auto wanted = static_cast<std::int64_t>(std::nearbyint(fraction * static_cast<double>(total)));
    std::vector<std::int64_t> left(static_cast<std::size_t>(layers));
    for (std::int64_t l = 0; l < layers; ++l) left[l] = size_of(m.layers[l]);
    std::int64_t taken = 0;
    for (const Candidate& c : candidates) {
      if (taken >= wanted) break;
      if (left[c.layer] <= 1) continue;  // every layer keeps one
      out[c.layer].push_back(c.position);
      --left[c.layer];
      ++taken;
    }
    for (auto& v : out) std::sort(v.begin(), v.end());
    return Status::ok();
  };
  Status s = choose(head_importance, options.head_fraction, options.last_layers_first, plan.heads,
                    [](const model::TransformerLayer& l) { return l.num_heads; });
  if (!s.is_ok()) return s;
  s = choose(neuron_importance, options.neuron_fraction, false, plan.neurons,
             [](const model::TransformerLayer& l) { return l.intermediate->out_features(); });
  if (!s.is_ok()) return s;
  return plan;
}

Status apply_structured(model::TransformerModel& m, const StructuredPlan& plan) {
  c10::InferenceMode inference;
  if (plan.heads.size() > m.layers.size() || plan.neurons.size() > m.layers.size()) {
    return Status::invalid_argument("the plan names more layers than the model has");
  }
  for (std::size_t l = 0; l < m.layers.size(); ++l) {
    model::TransformerLayer& layer = m.layers[l];
    const bool heads = l < plan.heads.size() && !plan.heads[l].empty();
    const bool neurons = l < plan.neurons.size() && !plan.neurons[l].empty();
    if (!heads && !neurons) continue;
    for (const model::LinearOp* op : {layer.qkv.get(), layer.attention_output.get(), layer.intermediate.get(),
                                      layer.output.get()}) {
      if (!is_fp32(*op)) {
        return Status::invalid_argument(
            fmt::format("layer {} is quantized ({}); prune before quantizing", l, op->kind()));
      }
    }
    if (heads) {
      for (std::int64_t p : plan.heads[l]) {
        if (p < 0 || p >= layer.num_heads) {
          return Status::invalid_argument(fmt::format("layer {}: no head at position {}", l, p));
        }
      }
      const std::vector<std::int64_t> kept = complement(layer.num_heads, plan.heads[l]);
      if (kept.empty()) return Status::invalid_argument(fmt::format("layer {}: every head would go", l));
      const at::Tensor rows = at::cat({head_rows(layer.num_heads, layer.head_dim, kept, 0),
                                       head_rows(layer.num_heads, layer.head_dim, kept, 1),
                                       head_rows(layer.num_heads, layer.head_dim, kept, 2)});
      const at::Tensor qkv_bias = layer.qkv->dense_bias();
      layer.qkv = model::make_fp32_linear(layer.qkv->dense_weight().index_select(0, rows).contiguous(),
                                          qkv_bias.defined() ? qkv_bias.index_select(0, rows) : at::Tensor(),
                                          model::Activation::kNone);
      const at::Tensor columns = head_rows(layer.num_heads, layer.head_dim, kept, 0);
      layer.attention_output = model::make_fp32_linear(
          layer.attention_output->dense_weight().index_select(1, columns).contiguous(),
          layer.attention_output->dense_bias(), model::Activation::kNone);
      std::vector<std::int64_t> ids;
      for (std::int64_t k : kept) ids.push_back(layer.head_ids[static_cast<std::size_t>(k)]);
      layer.head_ids = std::move(ids);
      layer.num_heads = static_cast<std::int64_t>(kept.size());
    }
    if (neurons) {
      const std::int64_t inner = layer.intermediate->out_features();
      for (std::int64_t p : plan.neurons[l]) {
        if (p < 0 || p >= inner) return Status::invalid_argument(fmt::format("layer {}: no neuron at position {}", l, p));
      }
      const std::vector<std::int64_t> kept = complement(inner, plan.neurons[l]);
      if (kept.empty()) return Status::invalid_argument(fmt::format("layer {}: every FFN neuron would go", l));
      const at::Tensor index = at::tensor(kept, at::kLong);
      const at::Tensor bias = layer.intermediate->dense_bias();
      layer.intermediate = model::make_fp32_linear(layer.intermediate->dense_weight().index_select(0, index).contiguous(),
                                                   bias.defined() ? bias.index_select(0, index) : at::Tensor(),
                                                   layer.intermediate->activation());
      layer.output = model::make_fp32_linear(layer.output->dense_weight().index_select(1, index).contiguous(),
                                             layer.output->dense_bias(), model::Activation::kNone);
      std::vector<std::int64_t> ids;
      for (std::int64_t k : kept) ids.push_back(layer.neuron_ids[static_cast<std::size_t>(k)]);
      layer.neuron_ids = std::move(ids);
    }
  }
  return Status::ok();
}

Result<std::string> pruned_config_json(const std::string& source_config_path, const model::TransformerModel& m) {
  // The same bounds as the loader's (TransformerConfig::from_json_file).
  auto text = detail::read_file_bounded(source_config_path, 16u << 20, "config.json");
  if (!text) return text.status();
  auto parsed = detail::parse_json_bounded(text.value());
  if (!parsed) return Status::invalid_argument(fmt::format("{}: {}", source_config_path, parsed.status().message()));
  nlohmann::json config = std::move(parsed).value();
  if (!config.is_object()) return Status::invalid_argument(fmt::format("{}: expected a JSON object", source_config_path));
  const model::TransformerConfig pruned = pruned_config(m);
  nlohmann::json heads = nlohmann::json::object(), neurons = nlohmann::json::object();
  for (const auto& [layer, ids] : pruned.pruned_heads) heads[std::to_string(layer)] = ids;
  for (const auto& [layer, ids] : pruned.pruned_intermediate) neurons[std::to_string(layer)] = ids;
  config["pruned_heads"] = heads;
  config["pruned_intermediate"] = neurons;
  return config.dump(2) + "\n";
}

model::TransformerConfig pruned_config(const model::TransformerModel& m) {
  model::TransformerConfig config = m.config;
  config.pruned_heads.clear();
  config.pruned_intermediate.clear();
  for (std::size_t l = 0; l < m.layers.size(); ++l) {
    const auto& layer = m.layers[l];
    const auto removed_heads = complement(m.config.num_heads, layer.head_ids);
    const auto removed_neurons = complement(m.config.intermediate_size, layer.neuron_ids);
    if (!removed_heads.empty()) config.pruned_heads[static_cast<std::int64_t>(l)] = removed_heads;
    if (!removed_neurons.empty()) config.pruned_intermediate[static_cast<std::int64_t>(l)] = removed_neurons;
  }
  return config;
}

std::map<std::string, at::Tensor> dense_checkpoint(const model::TransformerModel& m) {
  c10::InferenceMode inference;
  std::map<std::string, at::Tensor> t = model::checkpoint_tensors(m);
  const model::LayerNames n = model::names_for(m.config.architecture);
  const std::int64_t h = m.config.hidden_size, d = m.config.head_dim();
  for (std::size_t l = 0; l < m.layers.size(); ++l) {
    const auto& layer = m.layers[l];
    const std::string p = n.layer_prefix + std::to_string(l) + ".";
    std::vector<std::int64_t> rows;
    for (std::int64_t id : layer.head_ids) {
      for (std::int64_t k = 0; k < d; ++k) rows.push_back(id * d + k);
    }
    const at::Tensor head_index = at::tensor(rows, at::kLong);
    for (const std::string* name : {&n.query, &n.key, &n.value}) {
      at::Tensor w = at::zeros({h, h});
      w.index_copy_(0, head_index, t.at(p + *name + ".weight").to(at::kFloat));
      at::Tensor b = at::zeros({h});
      b.index_copy_(0, head_index, t.at(p + *name + ".bias"));
      t[p + *name + ".weight"] = w;
      t[p + *name + ".bias"] = b;
    }
    at::Tensor out = at::zeros({h, h});
    out.index_copy_(1, head_index, t.at(p + n.attention_output + ".weight").to(at::kFloat));
    t[p + n.attention_output + ".weight"] = out;
    const at::Tensor neuron_index = at::tensor(layer.neuron_ids, at::kLong);
    const std::int64_t inner = m.config.intermediate_size;
    at::Tensor w1 = at::zeros({inner, h});
    w1.index_copy_(0, neuron_index, t.at(p + n.intermediate + ".weight").to(at::kFloat));
    at::Tensor b1 = at::zeros({inner});
    b1.index_copy_(0, neuron_index, t.at(p + n.intermediate + ".bias"));
    at::Tensor w2 = at::zeros({h, inner});
    w2.index_copy_(1, neuron_index, t.at(p + n.output + ".weight").to(at::kFloat));
    t[p + n.intermediate + ".weight"] = w1;
    t[p + n.intermediate + ".bias"] = b1;
    t[p + n.output + ".weight"] = w2;
  }
  return t;
}

}  // namespace rapidqa::compress

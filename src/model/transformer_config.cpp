#include "model/transformer_config.h"

#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace rapidqa::model {
namespace {

using json = nlohmann::json;

Result<Activation> parse_activation(const std::string& name, const std::string& source) {
  if (name == "gelu") return Activation::kGelu;
  if (name == "gelu_new" || name == "gelu_pytorch_tanh" || name == "gelu_fast") return Activation::kGeluTanh;
  if (name == "relu") return Activation::kRelu;
  return Status::invalid_argument(
      fmt::format("{}: hidden_act '{}' is not supported (gelu, gelu_new, gelu_pytorch_tanh, relu)", source, name));
}

}  // namespace

const char* activation_name(Activation a) {
  switch (a) {
    case Activation::kNone: return "none";
    case Activation::kGelu: return "gelu";
    case Activation::kGeluTanh: return "gelu_tanh";
    case Activation::kRelu: return "relu";
    case Activation::kTanh: return "tanh";
  }
  return "?";
}

Result<TransformerConfig> TransformerConfig::from_json_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::not_found(fmt::format("{}: cannot open (a model directory needs config.json)", path));
  std::stringstream buffer;
  buffer << in.rdbuf();
  return from_json_text(buffer.str(), path);
}

Result<TransformerConfig> TransformerConfig::from_json_text(const std::string& text, const std::string& source) {
  json j;
  try {
    j = json::parse(text);
  } catch (const std::exception& e) {
    return Status::invalid_argument(fmt::format("{}: not valid JSON: {}", source, e.what()));
  }
  if (!j.is_object()) return Status::invalid_argument(fmt::format("{}: expected a JSON object", source));
  TransformerConfig c;
  const std::string model_type = j.value("model_type", std::string("bert"));
  // Field names differ between the two families; read each from its own.
  const bool distil = model_type == "distilbert";
  if (!distil && model_type != "bert") {
    return Status::invalid_argument(fmt::format(
        "{}: model_type '{}' is not supported (bert, and models sharing its layout, or distilbert)", source,
        model_type));
  }
  c.architecture = distil ? Architecture::kDistilBert : Architecture::kBert;
  std::string problem;
  auto integer = [&](const char* field, std::int64_t& out, bool required) {
    if (!problem.empty()) return;
    const auto it = j.find(field);
    if (it == j.end()) {
      if (required) problem = fmt::format("field '{}' is missing", field);
      return;
    }
    if (!it->is_number_integer() || it->get<std::int64_t>() < 0) {
      problem = fmt::format("field '{}': expected a non-negative integer", field);
      return;
    }
    out = it->get<std::int64_t>();
  };
  integer("vocab_size", c.vocab_size, true);
  integer(distil ? "dim" : "hidden_size", c.hidden_size, true);
  integer(distil ? "n_layers" : "num_hidden_layers", c.num_layers, true);
  integer(distil ? "n_heads" : "num_attention_heads", c.num_heads, true);
  integer(distil ? "hidden_dim" : "intermediate_size", c.intermediate_size, true);
  integer("max_position_embeddings", c.max_position_embeddings, false);
  integer("pad_token_id", c.pad_token_id, false);
  if (distil) {
    c.type_vocab_size = 0;
  } else {
    integer("type_vocab_size", c.type_vocab_size, false);
  }
  if (!problem.empty()) return Status::invalid_argument(fmt::format("{}: {}", source, problem));
  if (!distil && j.contains("layer_norm_eps")) c.layer_norm_eps = j.at("layer_norm_eps").get<double>();
  const std::string act = j.value(distil ? "activation" : "hidden_act", std::string("gelu"));
  auto activation = parse_activation(act, source);
  if (!activation) return activation.status();
  c.hidden_act = activation.value();
  if (c.hidden_size == 0 || c.num_heads == 0 || c.num_layers == 0 || c.intermediate_size == 0 || c.vocab_size == 0) {
    return Status::invalid_argument(fmt::format("{}: sizes must be positive", source));
  }
  if (c.hidden_size % c.num_heads != 0) {
    return Status::invalid_argument(fmt::format("{}: hidden size {} is not a multiple of the {} attention heads",
                                                source, c.hidden_size, c.num_heads));
  }
  // {"layer": [index, ...]} maps; a layer or index out of range is refused.
  auto pruned = [&](const char* field, std::int64_t limit,
                    std::map<std::int64_t, std::vector<std::int64_t>>& out) -> Status {
    const auto it = j.find(field);
    if (it == j.end() || it->is_null()) return Status::ok();
    if (!it->is_object()) return Status::invalid_argument(fmt::format("{}: field '{}': expected an object", source, field));
    for (const auto& [key, value] : it->items()) {
      std::int64_t layer = -1;
      try {
        std::size_t used = 0;
        layer = std::stoll(key, &used);
        if (used != key.size()) layer = -1;
      } catch (const std::exception&) {
      }
      if (layer < 0 || layer >= c.num_layers || !value.is_array()) {
        return Status::invalid_argument(
            fmt::format("{}: field '{}': '{}' must be a layer below {} with a list of indices", source, field, key,
                        c.num_layers));
      }
      for (const auto& v : value) {
        if (!v.is_number_integer() || v.get<std::int64_t>() < 0 || v.get<std::int64_t>() >= limit) {
          return Status::invalid_argument(
              fmt::format("{}: field '{}': layer {} lists an index outside [0, {})", source, field, key, limit));
        }
        out[layer].push_back(v.get<std::int64_t>());
      }
    }
    return Status::ok();
  };
  if (Status s = pruned("pruned_heads", c.num_heads, c.pruned_heads); !s.is_ok()) return s;
  if (Status s = pruned("pruned_intermediate", c.intermediate_size, c.pruned_intermediate); !s.is_ok()) return s;
  return c;
}

}  // namespace rapidqa::model

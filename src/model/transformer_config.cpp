#include "model/transformer_config.h"

#include <cmath>
#include <cstdint>
#include <limits>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/bounded_file.h"
#include "common/bounded_json.h"

namespace rapidqa::model {
namespace {

using json = nlohmann::json;

// Bounds on config.json's sizes: far above any BERT-family model (BERT-large
// has hidden 1024, 24 layers, intermediate 4096, 512 positions; the largest
// WordPiece vocabularies hold ~250k tokens), far below what would make an
// allocation or a loop by them explode.
constexpr std::int64_t kMaxVocabSize = std::int64_t{1} << 24;
constexpr std::int64_t kMaxHiddenSize = std::int64_t{1} << 16;
constexpr std::int64_t kMaxLayers = 1024;
constexpr std::int64_t kMaxIntermediateSize = std::int64_t{1} << 18;
constexpr std::int64_t kMaxPositions = std::int64_t{1} << 20;
constexpr std::int64_t kMaxTypeVocabSize = 1024;
constexpr double kMaxLayerNormEps = 1.0;
constexpr std::uint64_t kMaxInteger = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
// A real config.json is a few kilobytes (with label maps, a few hundred).
constexpr std::size_t kMaxConfigBytes = 16u << 20;

// An optional string field: absent or null gives the default; anything but
// a string is refused with the field named.
Result<std::string> optional_string(const json& j, const char* field, const char* fallback,
                                    const std::string& source) {
  const auto it = j.find(field);
  if (it == j.end() || it->is_null()) return std::string(fallback);
  if (!it->is_string()) return Status::invalid_argument(fmt::format("{}: field '{}': expected a string", source, field));
  return it->get<std::string>();
}

Result<Activation> parse_activation(const std::string& name, const std::string& source) {
  if (name == "gelu") return Activation::kGelu;
  if (name == "gelu_new" || name == "gelu_pytorch_tanh" || name == "gelu_fast") return Activation::kGeluTanh;
  if (name == "relu") return Activation::kRelu;
  return Status::invalid_argument(
      fmt::format("{}: hidden_act '{}' is not supported (gelu, gelu_new, gelu_pytorch_tanh, relu)", source,
                  detail::clip_for_message(name)));
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
  auto text = detail::read_file_bounded(path, kMaxConfigBytes, "config.json");
  if (!text) {
    if (text.status().code() == StatusCode::kNotFound) {
      return Status::not_found(fmt::format("{}: cannot open (a model directory needs config.json)", path));
    }
    return text.status();
  }
  return from_json_text(text.value(), path);
}

Result<TransformerConfig> TransformerConfig::from_json_text(const std::string& text, const std::string& source) {
  auto parsed = detail::parse_json_bounded(text);
  if (!parsed) return Status::invalid_argument(fmt::format("{}: {}", source, parsed.status().message()));
  const json& j = parsed.value();
  if (!j.is_object()) return Status::invalid_argument(fmt::format("{}: expected a JSON object", source));
  TransformerConfig c;
  auto model_type = optional_string(j, "model_type", "bert", source);
  if (!model_type) return model_type.status();
  // Field names differ between the two families; read each from its own.
  const std::string& type = model_type.value();
  const bool distil = type == "distilbert";
  // RoBERTa's family: BERT's tensor names, positions past the padding index.
  const bool mpnet = type == "mpnet";
  const bool roberta = type == "roberta" || type == "xlm-roberta" || type == "camembert" || mpnet;
  const bool electra = type == "electra";
  if (!distil && !roberta && !electra && type != "bert") {
    return Status::invalid_argument(fmt::format(
        "{}: model_type '{}' is not supported (bert and models sharing its layout, roberta, xlm-roberta, "
        "camembert, mpnet, electra, distilbert)",
        source, detail::clip_for_message(type)));
  }
  c.architecture = distil ? Architecture::kDistilBert : mpnet ? Architecture::kMPNet : Architecture::kBert;
  c.model_type = type;
  if (roberta) c.pad_token_id = 1;  // the family's default, when config.json does not say
  if (mpnet) {
    c.type_vocab_size = 0;  // MPNet has no segment embeddings
    c.relative_attention_buckets = 32;
  }
  // Every size is bounded: the loader allocates and loops by them before
  // any tensor is compared with them, so a hostile config.json must not be
  // able to ask for 2^62 of anything.
  std::string problem;
  auto integer = [&](const char* field, std::int64_t& out, bool required, std::int64_t min, std::int64_t max) {
    if (!problem.empty()) return;
    const auto it = j.find(field);
    if (it == j.end() || (!required && it->is_null())) {
      if (required) problem = fmt::format("field '{}' is missing", field);
      return;
    }
    if (!it->is_number_integer() || (it->is_number_unsigned() && it->get<std::uint64_t>() > kMaxInteger) ||
        it->get<std::int64_t>() < min || it->get<std::int64_t>() > max) {
      problem = fmt::format("field '{}': expected an integer in [{}, {}]", field, min, max);
      return;
    }
    out = it->get<std::int64_t>();
  };
  integer("vocab_size", c.vocab_size, true, 1, kMaxVocabSize);
  integer(distil ? "dim" : "hidden_size", c.hidden_size, true, 1, kMaxHiddenSize);
  integer(distil ? "n_layers" : "num_hidden_layers", c.num_layers, true, 1, kMaxLayers);
  integer(distil ? "n_heads" : "num_attention_heads", c.num_heads, true, 1, kMaxHiddenSize);
  integer(distil ? "hidden_dim" : "intermediate_size", c.intermediate_size, true, 1, kMaxIntermediateSize);
  integer("max_position_embeddings", c.max_position_embeddings, false, 1, kMaxPositions);
  if (distil) {
    c.type_vocab_size = 0;
  } else if (!mpnet) {
    integer("type_vocab_size", c.type_vocab_size, false, 0, kMaxTypeVocabSize);
  }
  if (electra) integer("embedding_size", c.embedding_size, false, 1, kMaxHiddenSize);
  // At least 4: the bias splits them by direction, then into exact and
  // logarithmic halves.
  if (mpnet) integer("relative_attention_num_buckets", c.relative_attention_buckets, false, 4, 1024);
  integer("pad_token_id", c.pad_token_id, false, 0, c.vocab_size - 1);
  if (!problem.empty()) return Status::invalid_argument(fmt::format("{}: {}", source, problem));
  if (roberta) {
    c.position_offset = c.pad_token_id + 1;
    if (c.max_position_embeddings <= c.position_offset) {
      return Status::invalid_argument(fmt::format(
          "{}: max_position_embeddings {} leaves no position past the padding index {} ({} positions start there)",
          source, c.max_position_embeddings, c.pad_token_id, type));
    }
  }
  if (!distil) {
    const auto eps = j.find("layer_norm_eps");
    if (eps != j.end() && !eps->is_null()) {
      // The JSON parser already refuses NaN and Infinity literals, but a huge
      // exponent still overflows to inf; a zero or negative epsilon makes
      // layer norm divide by zero or take the root of a negative number.
      if (!eps->is_number() || !std::isfinite(eps->get<double>()) || eps->get<double>() <= 0.0 ||
          eps->get<double>() > kMaxLayerNormEps) {
        return Status::invalid_argument(fmt::format(
            "{}: field 'layer_norm_eps': expected a finite number in (0, {}]", source, kMaxLayerNormEps));
      }
      c.layer_norm_eps = eps->get<double>();
    }
  }
  auto act = optional_string(j, distil ? "activation" : "hidden_act", "gelu", source);
  if (!act) return act.status();
  auto activation = parse_activation(act.value(), source);
  if (!activation) return activation.status();
  c.hidden_act = activation.value();
  if (c.num_heads > c.hidden_size || c.hidden_size % c.num_heads != 0) {
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
            fmt::format("{}: field '{}': '{}' must be a layer below {} with a list of indices", source, field,
                        detail::clip_for_message(key), c.num_layers));
      }
      for (const auto& v : value) {
        if (!v.is_number_integer() || v.get<std::int64_t>() < 0 || v.get<std::int64_t>() >= limit) {
          return Status::invalid_argument(
              fmt::format("{}: field '{}': layer {} lists an index outside [0, {})", source, field, layer, limit));
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

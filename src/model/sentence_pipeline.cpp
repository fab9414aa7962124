#include "model/sentence_pipeline.h"

#include <ATen/ATen.h>

#include <filesystem>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "common/bounded_file.h"
#include "common/bounded_json.h"
#include "model/checkpoint_files.h"

namespace rapidqa::model {
namespace fs = std::filesystem;
namespace {

using json = nlohmann::json;

// Each of these files is a few hundred bytes.
constexpr std::size_t kMaxLayoutFileBytes = 1u << 20;
constexpr std::size_t kMaxModules = 64;
constexpr std::size_t kMaxPromptBytes = 4096;
constexpr std::int64_t kMaxDenseFeatures = std::int64_t{1} << 16;
constexpr std::int64_t kMaxSequenceLength = std::int64_t{1} << 20;

// The file's JSON object, nullopt when the file is absent.
Result<std::optional<json>> read_object(const fs::path& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return std::optional<json>();
  auto text = detail::read_file_bounded(path.string(), kMaxLayoutFileBytes, path.filename().string().c_str());
  if (!text) return text.status();
  auto parsed = detail::parse_json_bounded(text.value());
  if (!parsed) return Status::invalid_argument(fmt::format("{}: {}", path.string(), parsed.status().message()));
  if (!parsed->is_object() && !parsed->is_array()) {
    return Status::invalid_argument(fmt::format("{}: expected a JSON object", path.string()));
  }
  return std::optional<json>(std::move(parsed).value());
}

Status field_error(const fs::path& file, const std::string& field, const std::string& expected) {
  return Status::invalid_argument(fmt::format("{}: field '{}': expected {}", file.string(), field, expected));
}

// An optional boolean field (absent: fallback).
Result<bool> boolean(const json& j, const fs::path& file, const char* field, bool fallback) {
  const auto it = j.find(field);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) return field_error(file, field, "true or false");
  return it->get<bool>();
}

Result<std::int64_t> integer(const json& j, const fs::path& file, const char* field, std::int64_t min,
                             std::int64_t max) {
  const auto it = j.find(field);
  if (it == j.end() || !it->is_number_integer() || (it->is_number_unsigned() && it->get<std::uint64_t>() > 1u << 30) ||
      it->get<std::int64_t>() < min || it->get<std::int64_t>() > max) {
    return field_error(file, field, fmt::format("an integer in [{}, {}]", min, max));
  }
  return it->get<std::int64_t>();
}

// A module's folder as modules.json names it: inside the model directory.
Result<fs::path> module_dir(const fs::path& root, const std::string& path, const fs::path& modules) {
  const fs::path relative(path);
  bool escapes = relative.is_absolute() || path.find('\0') != std::string::npos;
  for (const auto& part : relative) escapes = escapes || part == "..";
  if (escapes) {
    return Status::invalid_argument(fmt::format("{}: module path '{}' is not a folder inside the model directory",
                                                modules.string(), detail::clip_for_message(path)));
  }
  const fs::path dir = path.empty() ? root : root / relative;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return Status::not_found(fmt::format("{}: module folder '{}' is missing", modules.string(),
                                         detail::clip_for_message(path)));
  }
  return dir;
}

// A module folder's config.json, which the module needs.
Result<json> module_config(const fs::path& file, const char* module) {
  auto config = read_object(file);
  if (!config) return config.status();
  if (!config->has_value() || !(*config)->is_object()) {
    return Status::invalid_argument(
        fmt::format("{}: a {} module needs its config.json (an object)", file.string(), module));
  }
  return std::move(**config);
}

Result<std::vector<Pooling>> read_pooling(const fs::path& dir, bool& include_prompt) {
  const fs::path file = dir / "config.json";
  auto config = module_config(file, "Pooling");
  if (!config) return config.status();
  const json& j = config.value();
  if (const auto mode = j.find("pooling_mode"); mode != j.end() && !mode->is_null()) {
    // Written by no sentence-transformers version as a saved field, but
    // accepted by its constructor: refuse rather than ignore it.
    return Status::invalid_argument(
        fmt::format("{}: 'pooling_mode' is not read; name the modes with the pooling_mode_*_tokens fields",
                    file.string()));
  }
  // sentence-transformers concatenates in this order.
  const std::pair<const char*, Pooling> fields[] = {
      {"pooling_mode_cls_token", Pooling::kCls},
      {"pooling_mode_max_tokens", Pooling::kMax},
      {"pooling_mode_mean_tokens", Pooling::kMean},
      {"pooling_mode_mean_sqrt_len_tokens", Pooling::kMeanSqrtLength},
      {"pooling_mode_weightedmean_tokens", Pooling::kWeightedMean},
      {"pooling_mode_lasttoken", Pooling::kLastToken},
  };
  std::vector<Pooling> modes;
  for (const auto& [field, mode] : fields) {
    auto on = boolean(j, file, field, false);
    if (!on) return on.status();
    if (on.value()) modes.push_back(mode);
  }
  if (modes.empty()) return Status::invalid_argument(fmt::format("{}: names no pooling mode", file.string()));
  auto include = boolean(j, file, "include_prompt", true);
  if (!include) return include.status();
  include_prompt = include.value();
  return modes;
}

Result<std::string> activation_of(const std::string& name, const fs::path& file) {
  static const std::pair<const char*, const char*> known[] = {
      {"torch.nn.modules.activation.Tanh", "tanh"},       {"torch.nn.modules.linear.Identity", "identity"},
      {"torch.nn.modules.activation.ReLU", "relu"},       {"torch.nn.modules.activation.Sigmoid", "sigmoid"},
      {"torch.nn.modules.activation.GELU", "gelu"},
  };
  for (const auto& [full, shortname] : known) {
    if (name == full) return std::string(shortname);
  }
  return Status::invalid_argument(fmt::format(
      "{}: activation_function '{}' is not supported (Tanh, Identity, ReLU, Sigmoid, GELU from torch.nn)",
      file.string(), detail::clip_for_message(name)));
}

Result<DenseStage> read_dense(const fs::path& dir) {
  const fs::path file = dir / "config.json";
  auto config = module_config(file, "Dense");
  if (!config) return config.status();
  const json& j = config.value();
  auto in = integer(j, file, "in_features", 1, kMaxDenseFeatures);
  if (!in) return in.status();
  auto out = integer(j, file, "out_features", 1, kMaxDenseFeatures);
  if (!out) return out.status();
  auto has_bias = boolean(j, file, "bias", true);
  if (!has_bias) return has_bias.status();
  const auto act = j.find("activation_function");
  std::string activation = "tanh";  // the Dense module's default
  if (act != j.end() && !act->is_null()) {
    if (!act->is_string()) return field_error(file, "activation_function", "a class name");
    auto a = activation_of(act->get<std::string>(), file);
    if (!a) return a.status();
    activation = a.value();
  }
  auto weights = read_checkpoint_tensors(dir.string());
  if (!weights) return weights.status();
  DenseStage stage;
  stage.activation = activation;
  stage.source = dir.string();
  auto tensor = [&](const char* name, std::vector<std::int64_t> shape) -> Result<at::Tensor> {
    const auto it = weights->tensors.find(name);
    if (it == weights->tensors.end()) {
      return Status::invalid_argument(fmt::format("{}: tensor '{}' is missing", weights->source, name));
    }
    at::Tensor t = it->second.to(at::kFloat).contiguous();
    if (t.sizes().vec() != shape) {
      return Status::invalid_argument(fmt::format("{}: tensor '{}' has shape [{}], config.json says [{}]",
                                                  weights->source, name, fmt::join(t.sizes().vec(), ", "),
                                                  fmt::join(shape, ", ")));
    }
    if (!at::isfinite(t).all().item<bool>()) {
      return Status::invalid_argument(fmt::format("{}: tensor '{}' holds NaN or infinity", weights->source, name));
    }
    return t;
  };
  auto weight = tensor("linear.weight", {out.value(), in.value()});
  if (!weight) return weight.status();
  stage.weight = weight.value();
  if (has_bias.value()) {
    auto bias = tensor("linear.bias", {out.value()});
    if (!bias) return bias.status();
    stage.bias = bias.value();
  }
  return stage;
}

// An optional settings file: its object (nullopt when absent), recorded
// among the files that change the vectors.
Result<std::optional<json>> read_settings(const fs::path& file, SentencePipeline& pipeline) {
  auto config = read_object(file);
  if (!config) return config.status();
  if (!config->has_value()) return config;
  if (!(*config)->is_object()) return Status::invalid_argument(fmt::format("{}: expected a JSON object", file.string()));
  pipeline.files.push_back(file.string());
  return config;
}

Status read_prompts(const fs::path& root, SentencePipeline& pipeline) {
  const fs::path file = root / "config_sentence_transformers.json";
  auto config = read_settings(file, pipeline);
  if (!config) return config.status();
  if (!config->has_value()) return Status::ok();
  const json& j = **config;
  if (const auto prompts = j.find("prompts"); prompts != j.end() && !prompts->is_null()) {
    if (!prompts->is_object()) return field_error(file, "prompts", "an object of name -> text");
    for (const auto& [name, text] : prompts->items()) {
      if (!text.is_string() || text.get<std::string>().size() > kMaxPromptBytes) {
        return field_error(file, "prompts." + detail::clip_for_message(name),
                           fmt::format("a text of at most {} bytes", kMaxPromptBytes));
      }
      pipeline.prompts[name] = text.get<std::string>();
    }
  }
  if (const auto name = j.find("default_prompt_name"); name != j.end() && !name->is_null()) {
    if (!name->is_string() || !pipeline.prompts.count(name->get<std::string>())) {
      return field_error(file, "default_prompt_name", "null or the name of one of its prompts");
    }
    pipeline.default_prompt_name = name->get<std::string>();
  }
  return Status::ok();
}

Status read_transformer_settings(const fs::path& dir, SentencePipeline& pipeline) {
  const fs::path file = dir / "sentence_bert_config.json";
  auto config = read_settings(file, pipeline);
  if (!config) return config.status();
  if (!config->has_value()) return Status::ok();
  const json& j = **config;
  if (const auto it = j.find("max_seq_length"); it != j.end() && !it->is_null()) {
    auto length = integer(j, file, "max_seq_length", 3, kMaxSequenceLength);
    if (!length) return length.status();
    pipeline.max_seq_length = static_cast<std::size_t>(length.value());
  }
  auto lower = boolean(j, file, "do_lower_case", false);
  if (!lower) return lower.status();
  pipeline.lower_case_input = lower.value();
  return Status::ok();
}

}  // namespace

Result<SentencePipeline> read_sentence_pipeline(const std::string& model_dir) {
  const fs::path root(model_dir);
  SentencePipeline pipeline;
  pipeline.transformer_dir = model_dir;
  if (Status s = read_prompts(root, pipeline); !s.is_ok()) return s;
  const fs::path modules_file = root / "modules.json";
  auto modules = read_object(modules_file);
  if (!modules) return modules.status();
  if (!modules->has_value()) {
    if (Status s = read_transformer_settings(root, pipeline); !s.is_ok()) return s;
    return pipeline;
  }
  const json& list = **modules;
  if (!list.is_array() || list.empty() || list.size() > kMaxModules) {
    return Status::invalid_argument(
        fmt::format("{}: expected a list of 1 to {} modules", modules_file.string(), kMaxModules));
  }
  pipeline.has_modules = true;
  pipeline.files.push_back(modules_file.string());
  bool pooled = false;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const json& m = list[i];
    const auto type = m.is_object() ? m.find("type") : m.end();
    const auto path = m.is_object() ? m.find("path") : m.end();
    if (!m.is_object() || type == m.end() || !type->is_string() || path == m.end() || !path->is_string()) {
      return Status::invalid_argument(
          fmt::format("{}: module {} needs a 'type' and a 'path' (strings)", modules_file.string(), i));
    }
    const std::string kind = type->get<std::string>();
    auto dir = module_dir(root, path->get<std::string>(), modules_file);
    if (!dir) return dir.status();
    const auto misplaced = [&](const char* rule) {
      return Status::invalid_argument(fmt::format("{}: module {} ({}): {}", modules_file.string(), i,
                                                  detail::clip_for_message(kind), rule));
    };
    if (kind == "sentence_transformers.models.Transformer") {
      if (i != 0) return misplaced("the Transformer must be the first module");
      pipeline.transformer_dir = dir->string();
      if (Status s = read_transformer_settings(*dir, pipeline); !s.is_ok()) return s;
    } else if (i == 0) {
      return misplaced("the first module must be a sentence_transformers.models.Transformer");
    } else if (kind == "sentence_transformers.models.Pooling") {
      if (pooled) return misplaced("a second Pooling module");
      auto modes = read_pooling(*dir, pipeline.include_prompt);
      if (!modes) return modes.status();
      pipeline.pooling = std::move(modes).value();
      pipeline.files.push_back((*dir / "config.json").string());
      pooled = true;
    } else if (kind == "sentence_transformers.models.Dense" || kind == "sentence_transformers.models.Normalize") {
      if (!pooled) return misplaced("comes before the Pooling module");
      SentenceStage stage;
      if (kind == "sentence_transformers.models.Dense") {
        auto dense = read_dense(*dir);
        if (!dense) return dense.status();
        stage.kind = SentenceStage::Kind::kDense;
        stage.dense = std::move(dense).value();
        std::error_code ec;
        for (const auto& entry : fs::directory_iterator(*dir, ec)) {
          if (entry.is_regular_file(ec)) pipeline.files.push_back(entry.path().string());
        }
      }
      pipeline.stages.push_back(std::move(stage));
    } else {
      return Status::invalid_argument(fmt::format(
          "{}: module {} is '{}', which rapidqa does not run (it runs sentence_transformers.models "
          "Transformer, Pooling, Dense and Normalize)",
          modules_file.string(), i, detail::clip_for_message(kind)));
    }
  }
  if (!pooled) {
    return Status::invalid_argument(
        fmt::format("{}: no Pooling module: how the sentence vector is made is not said", modules_file.string()));
  }
  return pipeline;
}

Result<std::size_t> pipeline_dimension(const std::vector<Pooling>& modes, std::size_t hidden,
                                       const std::vector<SentenceStage>& stages) {
  std::size_t width = modes.size() * hidden;
  for (const SentenceStage& stage : stages) {
    if (stage.kind != SentenceStage::Kind::kDense) continue;
    const auto in = static_cast<std::size_t>(stage.dense.weight.size(1));
    if (in != width) {
      return Status::invalid_argument(fmt::format(
          "{}: the Dense module takes {} values but pooling ({}) gives {}", stage.dense.source, in,
          fmt::join([&] {
            std::vector<std::string> names;
            for (Pooling m : modes) names.push_back(pooling_name(m));
            return names;
          }(), "+"),
          width));
    }
    width = static_cast<std::size_t>(stage.dense.weight.size(0));
  }
  return width;
}

at::Tensor run_stages(at::Tensor pooled, const std::vector<SentenceStage>& stages) {
  for (const SentenceStage& stage : stages) {
    if (stage.kind == SentenceStage::Kind::kNormalize) {
      pooled = pooled / pooled.norm(2, -1, true).clamp_min(1e-12);
      continue;
    }
    const DenseStage& d = stage.dense;
    pooled = at::linear(pooled, d.weight, d.bias.defined() ? c10::optional<at::Tensor>(d.bias) : c10::nullopt);
    if (d.activation == "tanh") pooled = at::tanh(pooled);
    else if (d.activation == "relu") pooled = at::relu(pooled);
    else if (d.activation == "sigmoid") pooled = at::sigmoid(pooled);
    else if (d.activation == "gelu") pooled = at::gelu(pooled);
  }
  return pooled;
}

}  // namespace rapidqa::model

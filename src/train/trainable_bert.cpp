#include "train/trainable_bert.h"

#include <torch/torch.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/guard.h"
#include "model/checkpoint_files.h"
#include "model/model_bundle.h"
#include "model/pooling.h"
#include "model/safetensors_file.h"

namespace rapidqa::train {
namespace fs = std::filesystem;
namespace {

constexpr double kInitStd = 0.02;  // BERT's initializer_range

// A plain node of the module tree: it only gives its children their place
// in the Hugging Face names (attention.self.query, ...).
std::shared_ptr<torch::nn::Module> node(torch::nn::Module& parent, const std::string& name) {
  return parent.register_module(name, std::make_shared<torch::nn::Module>());
}

torch::nn::Linear linear(torch::nn::Module& parent, const std::string& name, std::int64_t in, std::int64_t out) {
  auto l = parent.register_module(name, torch::nn::Linear(in, out));
  torch::NoGradGuard no_grad;
  l->weight.normal_(0.0, kInitStd);
  l->bias.zero_();
  return l;
}

torch::nn::LayerNorm layer_norm(torch::nn::Module& parent, std::int64_t width, double eps) {
  return parent.register_module("LayerNorm",
                                torch::nn::LayerNorm(torch::nn::LayerNormOptions({width}).eps(eps)));
}

torch::nn::Embedding embedding(torch::nn::Module& parent, const std::string& name, std::int64_t rows,
                               std::int64_t width) {
  auto e = parent.register_module(name, torch::nn::Embedding(rows, width));
  torch::NoGradGuard no_grad;
  e->weight.normal_(0.0, kInitStd);
  return e;
}

std::string shape_string(at::IntArrayRef shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

Status check_config(const model::TransformerConfig& c) {
  if (c.architecture != model::Architecture::kBert || c.position_offset != 0 || c.embedding_size != 0) {
    return Status::invalid_argument(
        fmt::format("only BERT models can be trained, not model_type '{}'", c.model_type));
  }
  if (c.vocab_size <= 0 || c.hidden_size <= 0 || c.num_layers <= 0 || c.num_heads <= 0 ||
      c.intermediate_size <= 0 || c.max_position_embeddings <= 0 || c.type_vocab_size <= 0) {
    return Status::invalid_argument(fmt::format(
        "every size must be positive (vocab {}, hidden {}, layers {}, heads {}, intermediate {}, positions {}, "
        "token types {})",
        c.vocab_size, c.hidden_size, c.num_layers, c.num_heads, c.intermediate_size, c.max_position_embeddings,
        c.type_vocab_size));
  }
  if (c.hidden_size % c.num_heads != 0) {
    return Status::invalid_argument(
        fmt::format("hidden size {} is not a multiple of the {} attention heads", c.hidden_size, c.num_heads));
  }
  if (c.hidden_act != model::Activation::kGelu) {
    return Status::invalid_argument(fmt::format("hidden_act '{}': only gelu (erf) is trained",
                                                model::activation_name(c.hidden_act)));
  }
  return Status::ok();
}

}  // namespace

BertLayer::BertLayer(std::int64_t hidden, const BertLayerShape& shape, double eps, double dropout)
    : head_dim_(shape.head_dim), dropout_(dropout) {
  if (hidden <= 0 || shape.num_heads <= 0 || shape.head_dim <= 0 || shape.intermediate_size <= 0) {
    throw std::invalid_argument(fmt::format("layer sizes must be positive (hidden {}, heads {} x {}, intermediate {})",
                                            hidden, shape.num_heads, shape.head_dim, shape.intermediate_size));
  }
  const std::int64_t width = shape.num_heads * shape.head_dim;
  auto attention = node(*this, "attention");
  auto self = node(*attention, "self");
  query = linear(*self, "query", hidden, width);
  key = linear(*self, "key", hidden, width);
  value = linear(*self, "value", hidden, width);
  auto attention_out = node(*attention, "output");
  attention_output = linear(*attention_out, "dense", width, hidden);
  attention_norm = layer_norm(*attention_out, hidden, eps);
  intermediate = linear(*node(*this, "intermediate"), "dense", hidden, shape.intermediate_size);
  auto out = node(*this, "output");
  output = linear(*out, "dense", shape.intermediate_size, hidden);
  output_norm = layer_norm(*out, hidden, eps);
}

BertLayerShape BertLayer::shape() const {
  return {query->weight.size(0) / head_dim_, head_dim_, intermediate->weight.size(0)};
}

at::Tensor BertLayer::forward(const at::Tensor& x, const at::Tensor& additive_mask) {
  const std::int64_t batch = x.size(0), seq = x.size(1);
  const std::int64_t heads = query->weight.size(0) / head_dim_;
  // [B, S, A * D] -> [B, A, S, D]
  auto split_heads = [&](const at::Tensor& t) { return t.view({batch, seq, heads, head_dim_}).transpose(1, 2); };
  const at::Tensor q = split_heads(query->forward(x));
  const at::Tensor k = split_heads(key->forward(x));
  const at::Tensor v = split_heads(value->forward(x));
  at::Tensor scores = at::matmul(q, k.transpose(-1, -2)) / std::sqrt(static_cast<double>(head_dim_));
  if (additive_mask.defined()) scores = scores + additive_mask;
  at::Tensor probs = torch::dropout(at::softmax(scores, -1), dropout_, is_training());
  const at::Tensor context = at::matmul(probs, v).transpose(1, 2).reshape({batch, seq, heads * head_dim_});
  at::Tensor attended = torch::dropout(attention_output->forward(context), dropout_, is_training());
  attended = attention_norm->forward(attended + x);
  at::Tensor ffn = at::gelu(intermediate->forward(attended));  // erf form, as config "gelu"
  ffn = torch::dropout(output->forward(ffn), dropout_, is_training());
  return output_norm->forward(ffn + attended);
}

TrainableBert::TrainableBert(const model::TransformerConfig& config, const std::vector<BertLayerShape>& layers,
                             const TrainableBertOptions& options)
    : config_(config), dropout_(options.dropout) {
  if (Status s = check_config(config); !s) throw std::invalid_argument(s.message());
  if (static_cast<std::int64_t>(layers.size()) != config.num_layers) {
    throw std::invalid_argument(
        fmt::format("{} layer shapes given for a config of {} layers", layers.size(), config.num_layers));
  }
  auto embeddings = node(*this, "embeddings");
  const std::int64_t h = config.hidden_size;
  word_embeddings = embedding(*embeddings, "word_embeddings", config.vocab_size, h);
  position_embeddings = embedding(*embeddings, "position_embeddings", config.max_position_embeddings, h);
  token_type_embeddings = embedding(*embeddings, "token_type_embeddings", config.type_vocab_size, h);
  embedding_norm = layer_norm(*embeddings, h, config.layer_norm_eps);
  auto list = node(*this, "encoder")->register_module("layer", torch::nn::ModuleList());
  for (const BertLayerShape& shape : layers) {
    layers_.push_back(std::make_shared<BertLayer>(h, shape, config.layer_norm_eps, dropout_));
    list->push_back(layers_.back());
  }
}

Result<std::shared_ptr<TrainableBert>> TrainableBert::create(const model::TransformerConfig& config,
                                                             const TrainableBertOptions& options) {
  if (Status s = check_config(config); !s) return s;
  return detail::guarded("creating the model", [&]() -> Result<std::shared_ptr<TrainableBert>> {
    torch::manual_seed(options.seed);
    const BertLayerShape shape{config.num_heads, config.head_dim(), config.intermediate_size};
    return std::make_shared<TrainableBert>(
        config, std::vector<BertLayerShape>(static_cast<std::size_t>(config.num_layers), shape), options);
  });
}

Status TrainableBert::can_train(const model::TransformerConfig& config) { return check_config(config); }

Result<std::shared_ptr<TrainableBert>> TrainableBert::from_tensors(const model::TransformerConfig& config,
                                                                   const std::map<std::string, at::Tensor>& tensors,
                                                                   const std::string& source,
                                                                   const TrainableBertOptions& options) {
  if (Status s = check_config(config); !s) return Status::invalid_argument(source + ": " + s.message());
  return detail::guarded("building the model", [&]() -> Result<std::shared_ptr<TrainableBert>> {
    std::string prefix;
    if (!tensors.count("embeddings.word_embeddings.weight")) prefix = "bert.";
    auto find = [&](const std::string& name) -> const at::Tensor* {
      const auto it = tensors.find(prefix + name);
      return it == tensors.end() ? nullptr : &it->second;
    };
    // Layer sizes from the weights: heads from the query rows, the
    // feed-forward width from the intermediate rows.
    std::vector<BertLayerShape> shapes;
    const std::int64_t head_dim = config.head_dim();
    for (std::int64_t i = 0; i < config.num_layers; ++i) {
      const std::string p = fmt::format("encoder.layer.{}.", i);
      const at::Tensor* q = find(p + "attention.self.query.weight");
      const at::Tensor* ffn = find(p + "intermediate.dense.weight");
      for (const auto& [tensor, name] : {std::pair{q, "attention.self.query.weight"},
                                         std::pair{ffn, "intermediate.dense.weight"}}) {
        if (!tensor) return Status::invalid_argument(fmt::format("{}: tensor '{}{}{}' is missing", source, prefix, p, name));
        if (tensor->dim() != 2) {
          return Status::invalid_argument(fmt::format("{}: tensor '{}{}{}' has shape {}, expected a matrix", source,
                                                      prefix, p, name, shape_string(tensor->sizes())));
        }
      }
      if (q->size(0) == 0 || q->size(0) % head_dim != 0) {
        return Status::invalid_argument(fmt::format(
            "{}: tensor '{}{}attention.self.query.weight' has {} rows, not a positive multiple of the head width {}",
            source, prefix, p, q->size(0), head_dim));
      }
      shapes.push_back({q->size(0) / head_dim, head_dim, ffn->size(0)});
    }
    if (find(fmt::format("encoder.layer.{}.attention.self.query.weight", config.num_layers))) {
      return Status::invalid_argument(fmt::format("{}: the tensors have more layers than the {} the config declares",
                                                  source, config.num_layers));
    }
    auto model = std::make_shared<TrainableBert>(config, shapes, options);
    torch::NoGradGuard no_grad;
    for (auto& item : model->named_parameters()) {
      const at::Tensor* t = find(item.key());
      if (!t) {
        return Status::invalid_argument(fmt::format("{}: tensor '{}{}' is missing (expected shape {})", source, prefix,
                                                    item.key(), shape_string(item.value().sizes())));
      }
      if (t->sizes() != item.value().sizes()) {
        return Status::invalid_argument(fmt::format("{}: tensor '{}{}' has shape {}, expected {}", source, prefix,
                                                    item.key(), shape_string(t->sizes()),
                                                    shape_string(item.value().sizes())));
      }
      item.value().copy_(t->to(at::kFloat));
    }
    return model;
  });
}

Result<std::shared_ptr<TrainableBert>> TrainableBert::load(const std::string& model_dir,
                                                           const TrainableBertOptions& options) {
  return detail::guarded("loading the model for training", [&]() -> Result<std::shared_ptr<TrainableBert>> {
    if (!fs::is_directory(model_dir)) {
      return Status::not_found(fmt::format("model directory '{}' does not exist", model_dir));
    }
    auto config = model::TransformerConfig::from_json_file((fs::path(model_dir) / "config.json").string());
    if (!config) return config.status();
    auto checkpoint = model::read_checkpoint_tensors(model_dir);
    if (!checkpoint) return checkpoint.status();
    return from_tensors(config.value(), checkpoint->tensors, checkpoint->source, options);
  });
}

at::Tensor TrainableBert::forward(const model::ModelInputs& inputs) {
  const at::Tensor& ids = inputs.input_ids;
  const std::int64_t batch = ids.size(0), seq = ids.size(1);
  if (seq > config_.max_position_embeddings) {
    throw std::invalid_argument(fmt::format("sequence of {} tokens is longer than the model's {} positions", seq,
                                            config_.max_position_embeddings));
  }
  const at::Tensor positions = at::arange(seq, ids.options());
  at::Tensor x = word_embeddings->forward(ids) + position_embeddings->forward(positions);
  x = x + token_type_embeddings->forward(inputs.token_type_ids.defined() ? inputs.token_type_ids
                                                                        : at::zeros_like(ids));
  x = torch::dropout(embedding_norm->forward(x), dropout_, is_training());
  // Padding gets the most negative float before the softmax, as in the
  // runtime (and Hugging Face), so both see the same probabilities.
  at::Tensor additive_mask;
  if (inputs.attention_mask.defined()) {
    additive_mask = (1.0 - inputs.attention_mask.to(at::kFloat)) * std::numeric_limits<float>::lowest();
    additive_mask = additive_mask.view({batch, 1, 1, seq});
  }
  for (const auto& layer : layers_) x = layer->forward(x, additive_mask);
  return x;
}

at::Tensor TrainableBert::embed(const model::ModelInputs& inputs) {
  return model::pool_hidden(forward(inputs), inputs.attention_mask, Pooling::kMean, /*normalize=*/true);
}

std::map<std::string, at::Tensor> TrainableBert::export_tensors() const {
  std::map<std::string, at::Tensor> out;
  for (const auto& item : named_parameters()) out.emplace(item.key(), item.value().detach().to(at::kFloat).contiguous().clone());
  return out;
}

std::int64_t TrainableBert::parameter_count() const {
  std::int64_t n = 0;
  for (const auto& p : parameters()) n += p.numel();
  return n;
}

Status TrainableBert::save(const std::string& model_dir, const text::WordPieceTokenizer& tokenizer) const {
  if (static_cast<std::int64_t>(tokenizer.vocab_size()) > config_.vocab_size) {
    return Status::invalid_argument(fmt::format("the tokenizer has {} tokens but the model embeds only {}",
                                                tokenizer.vocab_size(), config_.vocab_size));
  }
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    const BertLayerShape s = layers_[i]->shape();
    if (s.num_heads != config_.num_heads || s.intermediate_size != config_.intermediate_size) {
      return Status::failed_precondition(fmt::format(
          "layer {} has {} heads and {} intermediate neurons, the config {} and {}: config.json cannot describe "
          "layers of different sizes",
          i, s.num_heads, s.intermediate_size, config_.num_heads, config_.intermediate_size));
    }
  }
  return detail::guarded("saving the model", [&]() -> Status {
    std::error_code ec;
    fs::create_directories(model_dir, ec);
    if (ec) return Status::io_error(fmt::format("cannot create '{}': {}", model_dir, ec.message()));
    auto write_text = [&](const char* name, const std::string& text) -> Status {
      const fs::path path = fs::path(model_dir) / name;
      std::ofstream out(path, std::ios::binary | std::ios::trunc);
      out << text;
      out.close();
      if (!out) return Status::io_error(fmt::format("cannot write '{}'", path.string()));
      return Status::ok();
    };
    const nlohmann::json config = {
        {"architectures", {"BertModel"}},
        {"model_type", "bert"},
        {"vocab_size", config_.vocab_size},
        {"hidden_size", config_.hidden_size},
        {"num_hidden_layers", config_.num_layers},
        {"num_attention_heads", config_.num_heads},
        {"intermediate_size", config_.intermediate_size},
        {"hidden_act", "gelu"},
        {"hidden_dropout_prob", dropout_},
        {"attention_probs_dropout_prob", dropout_},
        {"max_position_embeddings", config_.max_position_embeddings},
        {"type_vocab_size", config_.type_vocab_size},
        {"initializer_range", kInitStd},
        {"layer_norm_eps", config_.layer_norm_eps},
        {"pad_token_id", tokenizer.pad_id()},
        {"position_embedding_type", "absolute"},
        {"torch_dtype", "float32"},
    };
    if (Status s = write_text("config.json", config.dump(2) + "\n"); !s) return s;
    std::string vocab;
    for (std::size_t id = 0; id < tokenizer.vocab_size(); ++id) {
      vocab += tokenizer.id_to_token(static_cast<std::int32_t>(id));
      vocab += '\n';
    }
    if (Status s = write_text("vocab.txt", vocab); !s) return s;
    const auto& o = tokenizer.options();
    const nlohmann::json tokenizer_config = {
        {"tokenizer_class", "BertTokenizer"},
        {"do_lower_case", o.lower_case},
        {"tokenize_chinese_chars", o.tokenize_chinese_chars},
        {"strip_accents", o.strip_accents ? nlohmann::json(*o.strip_accents) : nlohmann::json(nullptr)},
        {"model_max_length", config_.max_position_embeddings},
        {"unk_token", o.unk_token},
        {"cls_token", o.cls_token},
        {"sep_token", o.sep_token},
        {"pad_token", o.pad_token},
        {"mask_token", o.mask_token},
    };
    if (Status s = write_text("tokenizer_config.json", tokenizer_config.dump(2) + "\n"); !s) return s;
    return model::write_safetensors((fs::path(model_dir) / "model.safetensors").string(), export_tensors(),
                                    {{"format", "pt"}});
  });
}

Result<model::ModelInputs> make_inputs(const text::WordPieceTokenizer& tokenizer,
                                       const std::vector<std::string>& texts, std::size_t max_sequence_length) {
  std::vector<text::TokenizedText> tokenized;
  tokenized.reserve(texts.size());
  for (std::size_t i = 0; i < texts.size(); ++i) {
    auto t = tokenizer.encode(texts[i], max_sequence_length);
    if (!t) return Status(t.status().code(), fmt::format("text {}: {}", i, t.status().message()));
    tokenized.push_back(std::move(t).value());
  }
  std::vector<const text::TokenizedText*> batch;
  batch.reserve(tokenized.size());
  for (const auto& t : tokenized) batch.push_back(&t);
  return model::make_batch(batch, tokenizer.pad_id());
}

Status encode_texts(TrainableBert& model, const text::WordPieceTokenizer& tokenizer,
                    const std::vector<std::string>& texts, std::size_t max_sequence_length, std::size_t batch_size,
                    std::vector<float>& out) {
  batch_size = std::max<std::size_t>(1, batch_size);
  return detail::guarded("encoding with the training model", [&]() -> Status {
    // Back to the caller's mode however this ends (a trainer measures
    // between epochs and goes on training).
    struct RestoreMode {
      TrainableBert& model;
      bool training;
      ~RestoreMode() { model.train(training); }
    } restore{model, model.is_training()};
    model.eval();
    torch::NoGradGuard no_grad;
    const auto width = static_cast<std::size_t>(model.config().hidden_size);
    out.assign(texts.size() * width, 0.0f);
    for (std::size_t start = 0; start < texts.size(); start += batch_size) {
      const std::size_t stop = std::min(texts.size(), start + batch_size);
      const std::vector<std::string> chunk(texts.begin() + static_cast<std::ptrdiff_t>(start),
                                           texts.begin() + static_cast<std::ptrdiff_t>(stop));
      auto inputs = make_inputs(tokenizer, chunk, max_sequence_length);
      if (!inputs) {
        return Status(inputs.status().code(),
                      fmt::format("texts {}..{}: {}", start, stop - 1, inputs.status().message()));
      }
      const at::Tensor vectors = model.embed(inputs.value()).contiguous();
      std::copy(vectors.data_ptr<float>(), vectors.data_ptr<float>() + vectors.numel(),
                out.begin() + static_cast<std::ptrdiff_t>(start * width));
    }
    return Status::ok();
  });
}

EncodeFn encode_fn(std::shared_ptr<TrainableBert> model, std::shared_ptr<const text::WordPieceTokenizer> tokenizer,
                   std::size_t max_sequence_length, std::size_t batch_size) {
  return [model = std::move(model), tokenizer = std::move(tokenizer), max_sequence_length, batch_size](
             const std::vector<std::string>& texts, std::vector<float>& out) {
    return encode_texts(*model, *tokenizer, texts, max_sequence_length, batch_size, out);
  };
}

}  // namespace rapidqa::train

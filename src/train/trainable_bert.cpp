#include "train/trainable_bert.h"

#include <torch/torch.h>

#include <algorithm>
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

// The module at a dotted path below root ("attention.attn"), made on the
// way where missing: the layers of each family keep their own names.
torch::nn::Module& child_at(torch::nn::Module& root, const std::string& path) {
  torch::nn::Module* m = &root;
  std::size_t begin = 0;
  while (begin < path.size()) {
    const std::size_t dot = std::min(path.find('.', begin), path.size());
    const std::string name = path.substr(begin, dot - begin);
    auto children = m->named_children();
    const auto* existing = children.find(name);
    m = existing ? existing->get() : node(*m, name).get();
    begin = dot + 1;
  }
  return *m;
}

// The parent path and last name of a dotted name: "attention.attn.q" ->
// ("attention.attn", "q").
std::pair<std::string, std::string> split_leaf(const std::string& dotted) {
  const std::size_t dot = dotted.rfind('.');
  if (dot == std::string::npos) return {"", dotted};
  return {dotted.substr(0, dot), dotted.substr(dot + 1)};
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
  if (c.architecture == model::Architecture::kDistilBert) {
    return Status::invalid_argument(fmt::format("model_type '{}' cannot be trained (BERT, the RoBERTa family, ELECTRA "
                                                "and MPNet can)", c.model_type));
  }
  if (c.vocab_size <= 0 || c.hidden_size <= 0 || c.num_layers <= 0 || c.num_heads <= 0 ||
      c.intermediate_size <= 0 || c.max_position_embeddings <= c.position_offset ||
      (c.architecture == model::Architecture::kBert && c.type_vocab_size <= 0)) {
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

BertLayer::BertLayer(std::int64_t hidden, const BertLayerShape& shape, double eps, double dropout,
                     const model::LayerNames& names, const std::vector<std::int64_t>& head_ids)
    : head_dim_(shape.head_dim), dropout_(dropout) {
  if (hidden <= 0 || shape.num_heads <= 0 || shape.head_dim <= 0 || shape.intermediate_size <= 0) {
    throw std::invalid_argument(fmt::format("layer sizes must be positive (hidden {}, heads {} x {}, intermediate {})",
                                            hidden, shape.num_heads, shape.head_dim, shape.intermediate_size));
  }
  if (!head_ids.empty() && static_cast<std::int64_t>(head_ids.size()) != shape.num_heads) {
    throw std::invalid_argument(
        fmt::format("{} head ids given for a layer of {} heads", head_ids.size(), shape.num_heads));
  }
  if (!head_ids.empty()) head_ids_ = at::tensor(head_ids, at::kLong);
  const std::int64_t width = shape.num_heads * shape.head_dim;
  auto place = [&](const std::string& dotted, std::int64_t in, std::int64_t out) {
    const auto [parent, leaf] = split_leaf(dotted);
    return linear(child_at(*this, parent), leaf, in, out);
  };
  auto norm_at = [&](const std::string& dotted) {
    // layer_norm() names its module "LayerNorm", as every family does.
    return layer_norm(child_at(*this, split_leaf(dotted).first), hidden, eps);
  };
  query = place(names.query, hidden, width);
  key = place(names.key, hidden, width);
  value = place(names.value, hidden, width);
  attention_output = place(names.attention_output, width, hidden);
  attention_norm = norm_at(names.attention_norm);
  intermediate = place(names.intermediate, hidden, shape.intermediate_size);
  output = place(names.output, shape.intermediate_size, hidden);
  output_norm = norm_at(names.output_norm);
}

BertLayerShape BertLayer::shape() const {
  return {query->weight.size(0) / head_dim_, head_dim_, intermediate->weight.size(0)};
}

at::Tensor BertLayer::forward(const at::Tensor& x, const at::Tensor& additive_mask, const at::Tensor& position_bias) {
  const std::int64_t batch = x.size(0), seq = x.size(1);
  const std::int64_t heads = query->weight.size(0) / head_dim_;
  // [B, S, A * D] -> [B, A, S, D]
  auto split_heads = [&](const at::Tensor& t) { return t.view({batch, seq, heads, head_dim_}).transpose(1, 2); };
  const at::Tensor q = split_heads(query->forward(x));
  const at::Tensor k = split_heads(key->forward(x));
  const at::Tensor v = split_heads(value->forward(x));
  at::Tensor scores = at::matmul(q, k.transpose(-1, -2)) / std::sqrt(static_cast<double>(head_dim_));
  // MPNet: this layer's heads' rows of the bias every layer shares.
  if (position_bias.defined()) {
    scores = scores + (head_ids_.defined() ? position_bias.index_select(1, head_ids_) : position_bias.narrow(1, 0, heads));
  }
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
  const std::int64_t h = config.hidden_size, e = config.embedding_width();
  word_embeddings = embedding(*embeddings, "word_embeddings", config.vocab_size, e);
  position_embeddings = embedding(*embeddings, "position_embeddings", config.max_position_embeddings, e);
  if (config.architecture == model::Architecture::kBert) {
    token_type_embeddings = embedding(*embeddings, "token_type_embeddings", config.type_vocab_size, e);
  }
  embedding_norm = layer_norm(*embeddings, e, config.layer_norm_eps);
  // ELECTRA: embeddings narrower than the layers, projected up.
  if (e != h) embedding_projection = linear(*this, "embeddings_project", e, h);
  auto encoder = node(*this, "encoder");
  auto list = encoder->register_module("layer", torch::nn::ModuleList());
  const model::LayerNames names = model::names_for(config.architecture);
  const bool mpnet = config.architecture == model::Architecture::kMPNet;
  if (mpnet) {
    relative_attention_bias =
        embedding(*encoder, "relative_attention_bias", config.relative_attention_buckets, config.num_heads);
  }
  for (std::size_t l = 0; l < layers.size(); ++l) {
    // Which of the config's heads a layer kept: MPNet's shared bias has a
    // column per original head.
    std::vector<std::int64_t> head_ids;
    if (mpnet) {
      const auto pruned = config.pruned_heads.find(static_cast<std::int64_t>(l));
      for (std::int64_t i = 0; i < config.num_heads; ++i) {
        if (pruned == config.pruned_heads.end() ||
            std::find(pruned->second.begin(), pruned->second.end(), i) == pruned->second.end()) {
          head_ids.push_back(i);
        }
      }
    }
    layers_.push_back(
        std::make_shared<BertLayer>(h, layers[l], config.layer_norm_eps, dropout_, names, head_ids));
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
    // Unprefixed names, or under the family's own prefix (as a model with a
    // head saves them).
    std::string prefix;
    for (const char* p : {"bert.", "roberta.", "electra.", "mpnet."}) {
      if (!tensors.count("embeddings.word_embeddings.weight") &&
          tensors.count(std::string(p) + "embeddings.word_embeddings.weight")) {
        prefix = p;
      }
    }
    auto find = [&](const std::string& name) -> const at::Tensor* {
      const auto it = tensors.find(prefix + name);
      return it == tensors.end() ? nullptr : &it->second;
    };
    // Layer sizes from the weights: heads from the query rows, the
    // feed-forward width from the intermediate rows.
    const model::LayerNames names = model::names_for(config.architecture);
    std::vector<BertLayerShape> shapes;
    const std::int64_t head_dim = config.head_dim();
    for (std::int64_t i = 0; i < config.num_layers; ++i) {
      const std::string p = fmt::format("{}{}.", names.layer_prefix, i);
      const std::string query_name = names.query + ".weight", inner_name = names.intermediate + ".weight";
      const at::Tensor* q = find(p + query_name);
      const at::Tensor* ffn = find(p + inner_name);
      for (const auto& [tensor, name] : {std::pair{q, query_name}, std::pair{ffn, inner_name}}) {
        if (!tensor) return Status::invalid_argument(fmt::format("{}: tensor '{}{}{}' is missing", source, prefix, p, name));
        if (tensor->dim() != 2) {
          return Status::invalid_argument(fmt::format("{}: tensor '{}{}{}' has shape {}, expected a matrix", source,
                                                      prefix, p, name, shape_string(tensor->sizes())));
        }
      }
      if (q->size(0) == 0 || q->size(0) % head_dim != 0) {
        return Status::invalid_argument(fmt::format(
            "{}: tensor '{}{}{}' has {} rows, not a positive multiple of the head width {}",
            source, prefix, p, query_name, q->size(0), head_dim));
      }
      shapes.push_back({q->size(0) / head_dim, head_dim, ffn->size(0)});
    }
    if (find(fmt::format("{}{}.{}.weight", names.layer_prefix, config.num_layers, names.query))) {
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
  if (seq > config_.max_sequence_length()) {
    throw std::invalid_argument(fmt::format("sequence of {} tokens is longer than the model's {} positions", seq,
                                            config_.max_sequence_length()));
  }
  // The RoBERTa family and MPNet count positions from past the padding
  // index (the runtime and Hugging Face agree on every real token).
  const at::Tensor positions = at::arange(seq, ids.options()) + config_.position_offset;
  at::Tensor x = word_embeddings->forward(ids) + position_embeddings->forward(positions);
  if (token_type_embeddings) {
    // One token type (the RoBERTa family): every token reads row 0, as in the runtime.
    const bool typed = inputs.token_type_ids.defined() && config_.type_vocab_size > 1;
    x = x + token_type_embeddings->forward(typed ? inputs.token_type_ids : at::zeros_like(ids));
  }
  x = torch::dropout(embedding_norm->forward(x), dropout_, is_training());
  if (embedding_projection) x = embedding_projection->forward(x);
  // Padding gets the most negative float before the softmax, as in the
  // runtime (and Hugging Face), so both see the same probabilities.
  at::Tensor additive_mask;
  if (inputs.attention_mask.defined()) {
    additive_mask = (1.0 - inputs.attention_mask.to(at::kFloat)) * std::numeric_limits<float>::lowest();
    additive_mask = additive_mask.view({batch, 1, 1, seq});
  }
  // MPNet: the bias of every original head by relative position (key
  // minus query), [1, heads, S, S].
  at::Tensor position_bias;
  if (relative_attention_bias) {
    std::vector<std::int64_t> buckets(static_cast<std::size_t>(seq * seq));
    for (std::int64_t i = 0; i < seq; ++i) {
      for (std::int64_t j = 0; j < seq; ++j) {
        buckets[static_cast<std::size_t>(i * seq + j)] =
            model::relative_position_bucket(j - i, config_.relative_attention_buckets);
      }
    }
    const at::Tensor index = at::tensor(buckets, at::kLong).to(ids.device());
    position_bias = relative_attention_bias->forward(index).view({seq, seq, -1}).permute({2, 0, 1}).unsqueeze(0);
  }
  for (const auto& layer : layers_) x = layer->forward(x, additive_mask, position_bias);
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
  if (config_.architecture != model::Architecture::kBert || config_.position_offset != 0 || embedding_projection) {
    return Status::failed_precondition(fmt::format(
        "save writes BERT checkpoints with a vocab.txt, not model_type '{}' (the pruner saves the others)",
        config_.model_type));
  }
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

Result<model::ModelInputs> make_inputs(const text::Tokenizer& tokenizer,
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

Status encode_texts(TrainableBert& model, const text::Tokenizer& tokenizer,
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

EncodeFn encode_fn(std::shared_ptr<TrainableBert> model, std::shared_ptr<const text::Tokenizer> tokenizer,
                   std::size_t max_sequence_length, std::size_t batch_size) {
  return [model = std::move(model), tokenizer = std::move(tokenizer), max_sequence_length, batch_size](
             const std::vector<std::string>& texts, std::vector<float>& out) {
    return encode_texts(*model, *tokenizer, texts, max_sequence_length, batch_size, out);
  };
}

}  // namespace rapidqa::train

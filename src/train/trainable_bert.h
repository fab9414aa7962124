// TrainableBert: a BERT-family encoder as a LibTorch module, for training
// with autograd (the runtime in model/ is inference only): BERT, the
// RoBERTa family (positions past the padding index, one token type),
// ELECTRA (narrow embeddings projected up) and MPNet (its own layer names and
// a relative position bias). Its parameter names are the Hugging Face names
// of the family (embeddings.word_embeddings.weight,
// encoder.layer.N.attention.self.query.weight or MPNet's
// encoder.layer.N.attention.attn.q.weight, ...), so what it exports loads
// unchanged in our runtime and in Hugging Face.
//
// Each layer reads its head count and intermediate width from its own
// weights, so layers may differ in size (the Pruner removes heads and
// neurons per layer and fine-tunes the result with this module).
//
// Thread safety: thread-compatible, like any torch::nn::Module: forward
// passes may run concurrently in eval mode without gradients; training and
// anything that changes parameters needs the caller's exclusion.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "model/transformer_config.h"
#include "model/transformer_model.h"
#include "rapidqa/status.h"
#include "text/wordpiece_tokenizer.h"
#include "train/faq_split.h"

namespace rapidqa::train {

struct TrainableBertOptions {
  double dropout = 0.1;    // hidden and attention-probability dropout in training mode (BERT's 0.1)
  std::uint64_t seed = 0;  // create(): seeds LibTorch's generator before the weights are drawn
};

// The sizes of one encoder layer.
struct BertLayerShape {
  std::int64_t num_heads = 0;          // attention heads
  std::int64_t head_dim = 0;           // width of one head
  std::int64_t intermediate_size = 0;  // feed-forward neurons
};

// One encoder layer, in Hugging Face's module tree for its family (names):
//   attention.self.{query,key,value}, attention.output.{dense,LayerNorm},
//   intermediate.dense, output.{dense,LayerNorm} for BERT's layout.
class BertLayer : public torch::nn::Module {
 public:
  // head_ids: the original index of each head the layer has (MPNet reads
  // its column of the shared position bias by it); empty for 0, 1, ...
  BertLayer(std::int64_t hidden_size, const BertLayerShape& shape, double layer_norm_eps, double dropout,
            const model::LayerNames& names = model::names_for(model::Architecture::kBert),
            const std::vector<std::int64_t>& head_ids = {});

  // x [B, S, hidden]; additive_mask [B, 1, 1, S] (0 for tokens, very
  // negative for padding) or undefined for a batch without padding;
  // position_bias [1, all heads, S, S] (MPNet) or undefined.
  at::Tensor forward(const at::Tensor& x, const at::Tensor& additive_mask, const at::Tensor& position_bias = {});

  // Read from the weights, so a layer whose linears were swapped for
  // smaller ones reports (and runs with) its new sizes.
  BertLayerShape shape() const;

  torch::nn::Linear query{nullptr}, key{nullptr}, value{nullptr};
  torch::nn::Linear attention_output{nullptr};
  torch::nn::LayerNorm attention_norm{nullptr};
  torch::nn::Linear intermediate{nullptr};
  torch::nn::Linear output{nullptr};
  torch::nn::LayerNorm output_norm{nullptr};

 private:
  std::int64_t head_dim_;  // fixed by the model; heads are what a pruner removes
  double dropout_;
  at::Tensor head_ids_;  // long [heads], or undefined: 0, 1, ...
};

class TrainableBert : public torch::nn::Module {
 public:
  // Fresh weights in BERT's initialisation (normal(0, 0.02) weights and
  // embeddings, zero biases, LayerNorm 1 and 0), drawn from LibTorch's
  // process-wide generator after seeding it with options.seed, so one seed
  // gives one model; every layer of the config's size. kInvalidArgument for a config that cannot be trained
  // (DistilBERT, a BERT layout without segment embeddings, sizes that do not divide).
  static Result<std::shared_ptr<TrainableBert>> create(const model::TransformerConfig& config,
                                                       const TrainableBertOptions& options = {});

  // Whether a model of this configuration can be trained: OK, or
  // kInvalidArgument saying why not (DistilBERT's layout is not trained;
  // every family needs gelu).
  static Status can_train(const model::TransformerConfig& config);

  // From Hugging Face tensors (unprefixed or under the family's "bert.",
  // "roberta.", "electra." or "mpnet."; heads and the pooler are ignored).
  // Layer sizes come from the tensors; for MPNet, which heads each layer
  // kept from config.pruned_heads. Every
  // parameter must be present with a consistent shape; an error names the
  // tensor and what was expected.
  static Result<std::shared_ptr<TrainableBert>> from_tensors(const model::TransformerConfig& config,
                                                             const std::map<std::string, at::Tensor>& tensors,
                                                             const std::string& source,
                                                             const TrainableBertOptions& options = {});

  // A Hugging Face directory: config.json and model.safetensors.
  // kNotFound for a missing directory or file; errors as from_tensors.
  static Result<std::shared_ptr<TrainableBert>> load(const std::string& model_dir,
                                                     const TrainableBertOptions& options = {});

  // Use create(), from_tensors() or load(); public for std::make_shared.
  // Throws std::invalid_argument for shapes that do not fit together.
  TrainableBert(const model::TransformerConfig& config, const std::vector<BertLayerShape>& layers,
                const TrainableBertOptions& options);

  // The last hidden state [B, S, hidden]. Dropout is active in train().
  at::Tensor forward(const model::ModelInputs& inputs);
  // Sentence vectors [B, hidden]: the mean over real tokens, L2-normalised
  // (the runtime's Pooling::kMean with normalize).
  at::Tensor embed(const model::ModelInputs& inputs);

  // Every parameter under its Hugging Face name, as detached contiguous
  // float32 copies the caller owns.
  std::map<std::string, at::Tensor> export_tensors() const;

  // Writes a Hugging Face directory (created when missing): config.json
  // (BertModel), vocab.txt and tokenizer_config.json (do_lower_case) from
  // tokenizer, model.safetensors. kInvalidArgument when the tokenizer has
  // more tokens than the embeddings; kFailedPrecondition when layers differ
  // in size (config.json cannot say so yet); kIoError when a file cannot be
  // written. Files already written stay when a later one fails.
  Status save(const std::string& model_dir, const text::WordPieceTokenizer& tokenizer) const;

  const model::TransformerConfig& config() const { return config_; }
  std::size_t layer_count() const { return layers_.size(); }
  BertLayer& layer(std::size_t i) { return *layers_.at(i); }
  std::int64_t parameter_count() const;

 private:
  model::TransformerConfig config_;
  double dropout_;
  torch::nn::Embedding word_embeddings{nullptr};
  torch::nn::Embedding position_embeddings{nullptr};
  torch::nn::Embedding token_type_embeddings{nullptr};  // BERT layout only
  torch::nn::LayerNorm embedding_norm{nullptr};
  torch::nn::Linear embedding_projection{nullptr};      // ELECTRA: embedding_size -> hidden
  torch::nn::Embedding relative_attention_bias{nullptr};  // MPNet: [buckets, heads]
  std::vector<std::shared_ptr<BertLayer>> layers_;  // also registered under encoder.layer
};

// Model inputs for texts as our runtime builds them: tokenizer.encode (the
// text between the tokenizer's specials, cut to max_sequence_length),
// padded with its padding id to the longest.
// kInvalidArgument naming the text for invalid UTF-8.
Result<model::ModelInputs> make_inputs(const text::Tokenizer& tokenizer,
                                       const std::vector<std::string>& texts, std::size_t max_sequence_length);

// Sentence vectors of texts into out (texts.size() rows of hidden_size,
// row-major): eval mode, no gradients, batch_size texts per model call, the
// model's previous mode restored afterwards. Errors as make_inputs; a
// LibTorch failure is kInternal.
Status encode_texts(TrainableBert& model, const text::Tokenizer& tokenizer,
                    const std::vector<std::string>& texts, std::size_t max_sequence_length, std::size_t batch_size,
                    std::vector<float>& out);

// encode_texts as an EncodeFn (for top1_accuracy); it shares ownership of
// both.
EncodeFn encode_fn(std::shared_ptr<TrainableBert> model, std::shared_ptr<const text::Tokenizer> tokenizer,
                   std::size_t max_sequence_length, std::size_t batch_size = 64);

}  // namespace rapidqa::train

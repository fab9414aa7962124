// TransformerConfig: the architecture of a BERT-family encoder, read from a
// Hugging Face config.json (BERT, MiniLM and sentence-transformers BERT
// models use the BERT names, as RoBERTa, XLM-RoBERTa and CamemBERT do with
// their positions offset; DistilBERT its own).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "rapidqa/status.h"

namespace rapidqa::model {

// Which tensor names the layers carry: BERT's (also RoBERTa's and ELECTRA's),
// DistilBERT's, or MPNet's (whose attention adds a relative position bias).
enum class Architecture { kBert, kDistilBert, kMPNet };
enum class Activation { kNone, kGelu, kGeluTanh, kRelu, kTanh };

struct TransformerConfig {
  Architecture architecture = Architecture::kBert;
  std::int64_t vocab_size = 0;
  std::int64_t hidden_size = 0;
  std::int64_t num_layers = 0;
  std::int64_t num_heads = 0;
  std::int64_t intermediate_size = 0;
  std::int64_t max_position_embeddings = 512;
  std::int64_t type_vocab_size = 2;   // 0 for DistilBERT (no segment embeddings)
  double layer_norm_eps = 1e-12;
  Activation hidden_act = Activation::kGelu;
  std::int64_t pad_token_id = 0;
  // model_type as config.json names it ("bert", "roberta", "xlm-roberta", ...).
  std::string model_type = "bert";
  // Where a sequence's first position reads the position table: 0 for
  // BERT; pad_token_id + 1 for the RoBERTa family, whose positions start
  // past the padding index (so its longest input is
  // max_position_embeddings - position_offset tokens).
  std::int64_t position_offset = 0;
  // ELECTRA: the width of the embeddings when it differs from hidden_size
  // (a linear "embeddings_project" maps them up); 0 = hidden_size.
  std::int64_t embedding_size = 0;
  // MPNet: buckets of its relative position bias (0 elsewhere); the bias
  // reaches 128 positions, as Hugging Face fixes it.
  std::int64_t relative_attention_buckets = 0;
  // Structured pruning: the original indices of the heads ("pruned_heads",
  // as Hugging Face writes it) and of the FFN neurons ("pruned_intermediate")
  // removed from each layer. The tensors then have fewer rows; the loader
  // takes each layer's sizes from its tensors and checks them against these.
  std::map<std::int64_t, std::vector<std::int64_t>> pruned_heads;
  std::map<std::int64_t, std::vector<std::int64_t>> pruned_intermediate;

  std::int64_t head_dim() const { return hidden_size / num_heads; }
  std::int64_t embedding_width() const { return embedding_size > 0 ? embedding_size : hidden_size; }
  // The longest input the position table allows.
  std::int64_t max_sequence_length() const { return max_position_embeddings - position_offset; }
  // kInvalidArgument naming the field for a missing or inconsistent value,
  // including sizes outside sane bounds (they size allocations and loops
  // before any tensor is checked against them), a layer_norm_eps that is
  // not finite and in (0, 1], duplicate keys or deep nesting. The file is
  // read only up to 16 MB.
  static Result<TransformerConfig> from_json_file(const std::string& path);
  static Result<TransformerConfig> from_json_text(const std::string& text, const std::string& source);
};

const char* activation_name(Activation a);

}  // namespace rapidqa::model

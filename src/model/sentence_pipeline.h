// What a sentence-transformers model directory says about turning hidden
// states into a sentence vector, read rather than guessed:
//
//   modules.json                         the modules, in order: Transformer, Pooling, Dense..., Normalize
//   <transformer path>/sentence_bert_config.json   max_seq_length, do_lower_case
//   1_Pooling/config.json                which pooling modes (several are concatenated)
//   2_Dense/config.json + weights        a linear layer with its activation
//   config_sentence_transformers.json    named prompts ("query: ", "passage: ")
//
// A plain Hugging Face directory (no modules.json) reads as a pipeline
// that says nothing: the transformer in the directory itself, no pooling
// named, no prompts. A module type rapidqa does not run is refused by
// name, as is anything malformed: a directory that loaded with the wrong
// pooling would give plausible but wrong vectors.
//
// Thread safety: free functions; the result is plain data.
#pragma once

#include <ATen/Tensor.h>

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "rapidqa/status.h"
#include "rapidqa/transformer_encoder.h"

namespace rapidqa::model {

// One sentence-transformers Dense module: activation(weight * x + bias).
struct DenseStage {
  at::Tensor weight;  // [out_features, in_features]
  at::Tensor bias;    // [out_features], or undefined
  std::string activation;  // "tanh", "identity", "relu", "sigmoid", "gelu"
  std::string source;      // its directory, for messages
};

// A step after pooling, in the order modules.json lists them.
struct SentenceStage {
  enum class Kind { kDense, kNormalize } kind = Kind::kNormalize;
  DenseStage dense;  // kDense only
};

struct SentencePipeline {
  bool has_modules = false;               // modules.json was there
  std::string transformer_dir;            // config.json, weights and tokenizer
  std::vector<Pooling> pooling;           // empty: not named; else concatenated in this order
  bool include_prompt = true;             // false: prompt tokens are left out of pooling
  std::vector<SentenceStage> stages;      // after pooling
  std::map<std::string, std::string> prompts;  // name -> text
  std::string default_prompt_name;       // config_sentence_transformers.json's, "" when none
  std::optional<std::size_t> max_seq_length;
  bool lower_case_input = false;          // sentence_bert_config.json do_lower_case

  // Files besides the transformer's own that change the vectors (module
  // configurations and Dense weights), for fingerprints.
  std::vector<std::string> files;
};

// Reads the directory's layout. kInvalidArgument naming the file and field
// for anything malformed or unsupported; kNotFound for a module directory
// modules.json names but the directory lacks.
Result<SentencePipeline> read_sentence_pipeline(const std::string& model_dir);

// The vector width after pooling `modes` over hidden states of `hidden`
// values and running `stages`; kInvalidArgument when a Dense module's
// input does not match what comes before it.
Result<std::size_t> pipeline_dimension(const std::vector<Pooling>& modes, std::size_t hidden,
                                       const std::vector<SentenceStage>& stages);

// Runs the stages over pooled rows [B, D].
at::Tensor run_stages(at::Tensor pooled, const std::vector<SentenceStage>& stages);

}  // namespace rapidqa::model

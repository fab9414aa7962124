// TransformerEncoder: the user's own transformer sentence encoder (BERT,
// MiniLM, DistilBERT, RoBERTa, XLM-R, MPNet, ELECTRA; sentence-transformers
// models of them), loaded from a Hugging Face model directory (config.json;
// model.safetensors, pytorch_model.bin, either sharded, or a TorchScript .pt
// with Hugging Face parameter names; vocab.txt or tokenizer.json: WordPiece
// or byte-level BPE) or a sentence-transformers directory (modules.json:
// pooling, Dense and Normalize modules, prompts), and run in-process on
// LibTorch and OpenBLAS. It implements Encoder, so QAEngine retrieves and
// caches with it instead of
// the HashingEncoder.
//
// Model files are checked as they load: sizes in config.json are bounded,
// every weight must be finite, INT8 scales positive, and every byte range
// of model.safetensors inside the file. A pytorch_model.bin or TorchScript
// .pt file is a pickle, which is a program as much as a checkpoint: rapidqa
// reads only its tensors (a pickle naming anything but tensors and plain
// containers is refused, and no code in it is compiled or run), but its
// format is far less constrained than safetensors, so prefer
// model.safetensors for models from anyone else.
//
// Thread safety: thread-safe. A lone model call uses every intra-op
// thread; calls at once (up to one per intra-op thread, more wait) each run
// on their caller's thread, so two batches keep two cores busy without
// fighting over them. The engine's encoder batcher runs two at once
// (default_encoder_batching in qa_engine.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "rapidqa/encoder.h"
#include "rapidqa/export.h"
#include "rapidqa/status.h"

namespace rapidqa {

// How token states become one sentence vector: the modes
// sentence-transformers' Pooling module has.
enum class Pooling {
  kCls,             // the [CLS] token's hidden state
  kMean,            // mean over real tokens (padding excluded)
  kMax,             // per value, the largest over real tokens
  kMeanSqrtLength,  // the sum over real tokens over the square root of their count
  kWeightedMean,    // mean weighted by position 1, 2, 3, ... (SGPT)
  kLastToken,       // the last real token's state
  kFromModel,       // what the model directory says (sentence-transformers' 1_Pooling/config.json), else kMean
};

// sentence-transformers' names for the modes: "cls", "mean", "max",
// "mean_sqrt_len", "weightedmean", "lasttoken"; "model" for kFromModel.
RAPIDQA_EXPORT const char* pooling_name(Pooling mode);
// The mode of a name above; kInvalidArgument listing them for any other.
RAPIDQA_EXPORT Result<Pooling> pooling_from_name(const std::string& name);

struct TransformerEncoderOptions {
  // A Hugging Face model directory, or a sentence-transformers one
  // (modules.json; its Pooling, Dense and Normalize modules and prompts
  // are read from it and run as written).
  std::string model_dir;
  // An explicit mode wins over the directory's.
  Pooling pooling = Pooling::kFromModel;
  bool normalize = true;               // L2-normalise vectors (needed for cosine retrieval)
  // Tokens per text, [CLS] and [SEP] included; longer text is truncated.
  // 0: the directory's sentence_bert_config.json max_seq_length, else 128.
  std::size_t max_sequence_length = 0;
  std::size_t max_batch_size = 32;     // texts per model call; larger inputs are split
  std::size_t max_batch_tokens = 8192; // padded tokens per model call
  // The text put before every text encoded, as sentence-transformers
  // prompts are (E5's "query: "). Unset: the prompt named prompt_name in
  // config_sentence_transformers.json, none when the directory has none.
  // Set (even to ""): this text, whatever the directory says.
  std::optional<std::string> prompt;
  // Which of the directory's prompts: "" means "query" (questions and
  // their phrasings are matched question to question); "passage" (or the
  // directory's name for it) for passages. A name the directory lacks is
  // refused unless it is the default "".
  std::string prompt_name;
  // Lower-case input for the tokenizer. -1: decide from the vocabulary
  // (uncased when it holds no upper-case word), 0: keep case, 1: lower-case.
  int lower_case = -1;
  // Run the model's FP32 layers in bfloat16: up to twice as fast and half
  // the weight memory, vectors within about 1e-2 of FP32's
  // (docs/performance.md). Needs a CPU with AVX512-BF16 or AMX; elsewhere load()
  // fails with kFailedPrecondition.
  bool bf16 = false;
};

class RAPIDQA_EXPORT TransformerEncoder final : public Encoder {
 public:
  // kNotFound for a missing directory or file; kInvalidArgument naming the
  // tensor, field or token for anything inconsistent. Nothing is half-loaded.
  static Result<std::shared_ptr<TransformerEncoder>> load(TransformerEncoderOptions options);
  ~TransformerEncoder() override;

  std::size_t dimension() const override;
  std::string name() const override;
  // Texts are tokenised by the model's own tokenizer (WordPiece or byte-level
  // BPE), sorted by length and run in buckets of similar length, so little
  // work is spent on padding; results come back in input order.
  Status encode(const std::vector<std::string>& texts, std::vector<float>& out) const override;
  bool wants_normalized_text() const override { return false; }
  // The shape, pooling, options that change vectors, and a hash of every
  // file in the model directory (computed on the first call: it reads the
  // files once more).
  std::string fingerprint() const override;

  // The pooling modes in use, joined with '+' ("mean", "cls", "cls+mean").
  std::string pooling() const;
  // The prompt put before every text ("" for none).
  const std::string& prompt() const;

  // The model input ids of each text ([CLS] ... [SEP]), as the model sees them
  // (prompt included).
  Result<std::vector<std::vector<std::int32_t>>> token_ids(const std::vector<std::string>& texts) const;

  std::size_t layer_count() const;
  std::int64_t parameter_count() const;

 private:
  TransformerEncoder();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace rapidqa

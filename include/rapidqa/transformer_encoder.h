// TransformerEncoder: the user's own BERT-family sentence encoder (BERT,
// MiniLM, sentence-transformers BERT models, DistilBERT), loaded from a
// Hugging Face model directory (config.json, model.safetensors or a
// TorchScript .pt with Hugging Face parameter names, vocab.txt or
// tokenizer.json) and run in-process on LibTorch and OpenBLAS. It
// implements Encoder, so QAEngine retrieves and caches with it instead of
// the HashingEncoder.
//
// Model files are checked as they load: sizes in config.json are bounded,
// every weight must be finite, INT8 scales positive, and every byte range
// of model.safetensors inside the file. A TorchScript .pt file is a program
// as much as a checkpoint: rapidqa reads only its tensors (no code in it is
// compiled or run), but its archive format is far less constrained than
// safetensors, so take .pt files only from a trusted source and prefer
// model.safetensors for models from anyone else.
//
// Thread safety: thread-safe. Model calls are serialised internally: one
// call uses every intra-op thread, and two at once would only fight over
// the cores.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "rapidqa/encoder.h"
#include "rapidqa/export.h"
#include "rapidqa/status.h"

namespace rapidqa {

enum class Pooling {
  kCls,   // the [CLS] token's hidden state
  kMean,  // mean over real tokens (padding excluded), as sentence-transformers do
};

struct TransformerEncoderOptions {
  std::string model_dir;               // Hugging Face style model directory
  Pooling pooling = Pooling::kMean;
  bool normalize = true;               // L2-normalise vectors (needed for cosine retrieval)
  std::size_t max_sequence_length = 128;  // tokens per text, [CLS] and [SEP] included; longer text is truncated
  std::size_t max_batch_size = 32;     // texts per model call; larger inputs are split
  std::size_t max_batch_tokens = 8192; // padded tokens per model call
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
  // Texts are tokenised by the model's own WordPiece vocabulary, sorted by
  // length and run in buckets of similar length, so little work is spent on
  // padding; results come back in input order.
  Status encode(const std::vector<std::string>& texts, std::vector<float>& out) const override;
  bool wants_normalized_text() const override { return false; }
  // The shape, pooling, options that change vectors, and a hash of every
  // file in the model directory (computed on the first call: it reads the
  // files once more).
  std::string fingerprint() const override;

  // The model input ids of each text ([CLS] ... [SEP]), as the model sees them.
  Result<std::vector<std::vector<std::int32_t>>> token_ids(const std::vector<std::string>& texts) const;

  std::size_t layer_count() const;
  std::int64_t parameter_count() const;

 private:
  TransformerEncoder();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace rapidqa

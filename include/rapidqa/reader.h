// Reader: finds the answer to a question inside passages (the `context` of
// the retrieved knowledge entries) and returns it as a span of a passage.
// ExtractiveReader runs a BERT question-answering model (start and end
// logits per token) over each (question, passage) pair.
//
// Thread safety: implementations are thread-safe.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "rapidqa/export.h"
#include "rapidqa/status.h"

namespace rapidqa {

struct AnswerSpan {
  std::string text;            // cut from the original passage by character offsets
  std::size_t passage = 0;     // index into the passages given
  std::size_t begin = 0;       // byte offsets of text in that passage
  std::size_t end = 0;
  float score = 0;             // start logit + end logit
  float probability = 0;       // softmax of score over every candidate considered
};

class RAPIDQA_EXPORT Reader {
 public:
  virtual ~Reader() = default;
  // The n best spans over all passages, best first; empty when no passage
  // holds a valid span. kInvalidArgument for invalid UTF-8.
  virtual Result<std::vector<AnswerSpan>> read(const std::string& question, const std::vector<std::string>& passages,
                                               std::size_t n_best) const = 0;
};

struct ExtractiveReaderOptions {
  // A BertForQuestionAnswering checkpoint (qa_outputs head), loaded and
  // checked as TransformerEncoder loads one: a TorchScript .pt file in it
  // must come from a trusted source (see transformer_encoder.h).
  std::string model_dir;
  std::size_t max_sequence_length = 384;  // question + passage tokens per pair; the passage is truncated first
  std::size_t max_answer_tokens = 30;     // longest span considered
  std::size_t candidates_per_end = 20;    // top start and end positions combined per passage
  int lower_case = -1;                    // as TransformerEncoderOptions::lower_case
};

class RAPIDQA_EXPORT ExtractiveReader final : public Reader {
 public:
  // kInvalidArgument when the checkpoint has no question-answering head.
  static Result<std::shared_ptr<ExtractiveReader>> load(ExtractiveReaderOptions options);
  ~ExtractiveReader() override;
  Result<std::vector<AnswerSpan>> read(const std::string& question, const std::vector<std::string>& passages,
                                       std::size_t n_best) const override;

 private:
  ExtractiveReader();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace rapidqa

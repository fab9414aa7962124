// What TransformerEncoder and ExtractiveReader share: a model directory's
// network and tokenizer loaded together, and padded batches built from
// tokenised texts.
#pragma once

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "model/transformer_model.h"
#include "rapidqa/status.h"
#include "text/tokenizer.h"

namespace rapidqa::model {

struct ModelBundle {
  std::shared_ptr<const TransformerModel> model;
  // WordPiece (vocab.txt, or a WordPiece tokenizer.json) or byte-level BPE
  // (a BPE tokenizer.json).
  std::shared_ptr<const text::Tokenizer> tokenizer;

  // The longest input the model can take, no more than `wanted` tokens.
  std::size_t usable_sequence_length(std::size_t wanted) const {
    return std::min(wanted, static_cast<std::size_t>(model->config.max_sequence_length()));
  }
};

// lower_case (WordPiece only): -1 decides from tokenizer.json,
// tokenizer_config.json, or the vocabulary itself (uncased when no ordinary
// token has an upper-case letter).
Result<ModelBundle> load_model_bundle(const std::string& model_dir, int lower_case);

// Pads the given tokenised texts to the longest of them ([PAD] ids, mask 0).
ModelInputs make_batch(const std::vector<const text::TokenizedText*>& texts, std::int32_t pad_id);

}  // namespace rapidqa::model

// Tokenizer: what a transformer model reads its text through. The models
// (encoder, reader, quantizer) see only this; WordPieceTokenizer (BERT's
// vocab.txt or a WordPiece tokenizer.json) and ByteLevelBpeTokenizer
// (RoBERTa and GPT-2's byte-level BPE in a tokenizer.json) implement it.
//
// Thread safety: implementations are immutable after construction; every
// method is const and thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "rapidqa/status.h"

namespace rapidqa::text {

// Model inputs for one sequence or a pair. No padding: batching pads later.
struct TokenizedText {
  std::vector<std::int32_t> input_ids;
  std::vector<std::int32_t> token_type_ids;   // 0 for the first text and its specials; 1 for the second's (BERT)
  std::vector<std::int32_t> attention_mask;   // all 1
  std::vector<std::pair<std::size_t, std::size_t>> offsets;  // [begin,end) bytes of the token's own text; (0,0) for specials
  std::vector<std::int8_t> sequence_ids;      // 0 or 1: which text the token came from; -1 for specials
  std::size_t truncated_tokens = 0;           // text tokens dropped to fit max_length (0: nothing lost)
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // The text with the model's special tokens around it, cut from the end
  // to fit max_length (which counts the specials). kInvalidArgument for
  // invalid UTF-8 (byte offset named) or a max_length below the specials.
  virtual Result<TokenizedText> encode(std::string_view text, std::size_t max_length) const = 0;
  // Two texts as the model reads a pair; over max_length, one token at a
  // time is dropped from the end of the longer text, from the second on a
  // tie (Hugging Face's longest_first).
  virtual Result<TokenizedText> encode_pair(std::string_view first, std::string_view second,
                                            std::size_t max_length) const = 0;

  virtual std::size_t vocab_size() const = 0;
  virtual std::int32_t pad_id() const = 0;
  virtual std::int32_t token_to_id(std::string_view token) const = 0;  // -1 when absent
  // The token of id (the unknown token, or "" where there is none, for an
  // id outside the vocabulary). The reference lives as long as the tokenizer.
  virtual const std::string& id_to_token(std::int32_t id) const = 0;
};

}  // namespace rapidqa::text

// The models of a Hugging Face tokenizer.json, each turning one
// pre-tokenized piece into tokens exactly as the tokenizers library does:
//
//   WordPiece  greedy longest match, the continuing-subword prefix after the
//              first, the whole piece unknown when any part is
//   BPE        merges lowest rank first (leftmost on a tie); continuing-
//              subword prefix and end-of-word suffix; unknown characters
//              fused or not; sentencepiece's byte fallback (<0xNN> tokens)
//   Unigram    the Viterbi path of highest total score over the pieces'
//              log probabilities, unknown characters at the lowest score
//              minus 10 and fused; byte fallback
//   WordLevel  the piece's own id, or the unknown token's
//
// Thread safety: immutable after reading; tokenize is const.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "rapidqa/status.h"
#include "text/normalized_string.h"

namespace rapidqa::text {

// A token of a piece: its id, its text (a vocabulary entry, or the piece's
// own text for an unknown stretch Unigram fused), and its bytes in the piece.
struct PieceToken {
  std::int32_t id = 0;
  std::string value;
  Offsets offsets;
};

class SubwordModel {
 public:
  virtual ~SubwordModel() = default;
  // The tokens of one piece, appended to out. kInvalidArgument where the
  // piece needs an unknown token the model does not have.
  virtual Status tokenize(std::string_view piece, std::vector<PieceToken>& out) const = 0;

  std::size_t vocab_size() const { return id_to_token_.size(); }
  std::int32_t token_to_id(std::string_view token) const;  // -1 when absent
  const std::string* id_to_token(std::int32_t id) const;   // null when absent
  // Makes room for ids past the vocabulary (added tokens).
  void name_id(std::int32_t id, const std::string& token);

 protected:
  std::vector<std::string> id_to_token_;
  std::unordered_map<std::string, std::int32_t> token_to_id_;
};

// tokenizer.json's "model". kInvalidArgument naming the field for anything
// malformed, inconsistent (a merge of tokens not in the vocabulary), or
// outside the above (BPE dropout, which is random).
Result<std::unique_ptr<SubwordModel>> read_subword_model(const nlohmann::json& model);

}  // namespace rapidqa::text

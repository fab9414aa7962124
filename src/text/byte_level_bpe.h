// Byte-level BPE as RoBERTa, GPT-2 and their descendants tokenize, read
// from a Hugging Face tokenizer.json, giving the ids and offsets Hugging
// Face's tokenizers library gives:
//
//   added tokens    cut out of the text first, leftmost and longest, with
//                   their lstrip / rstrip taking the white space beside them
//   ByteLevel       a space put before each remaining piece (add_prefix_space),
//                   GPT-2's split into words, numbers, other runs and spaces
//                   (use_regex), every byte of UTF-8 then one symbol
//   BPE             merges applied lowest rank first; ignore_merges
//   post-processor  RobertaProcessing (<s> A </s>, </s></s> between a pair),
//                   TemplateProcessing, ByteLevel, a Sequence of ByteLevel and
//                   one of the others, or none; RobertaProcessing and
//                   ByteLevel trim the spaces from offsets when trim_offsets
//                   says so
//
// A tokenizer.json with any other normalizer, pre-tokenizer, model option or
// post-processor is refused with the field named: a tokenizer that quietly
// differs from the model's would give it text it never saw.
//
// Thread safety: immutable after construction; every method is const.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "rapidqa/status.h"
#include "text/special_layout.h"
#include "text/tokenizer.h"

namespace rapidqa::text {

class ByteLevelBpeTokenizer final : public LaidOutTokenizer {
 public:
  // kNotFound for a missing file; kInvalidArgument naming the field for
  // anything malformed or outside what is described above, for a file over
  // 128 MiB, JSON nested more than 64 deep or naming a key twice.
  static Result<ByteLevelBpeTokenizer> from_tokenizer_json(const std::string& path);
  static Result<ByteLevelBpeTokenizer> from_json_text(std::string_view json, const std::string& source);
  // The same from a tokenizer.json already parsed (bounded, as
  // detail::parse_json_bounded parses); `source` names it in messages.
  static Result<ByteLevelBpeTokenizer> from_json(const nlohmann::json& root, const std::string& source);
  // RoBERTa's files without a tokenizer.json: vocab.json (token -> id) and
  // merges.txt (one "a b" per line after a "#version" line), set up as
  // Hugging Face converts them (RobertaTokenizerFast): <s> text </s>, a
  // <mask> that takes the space before it, trimmed offsets, and a prefix
  // space when tokenizer_config_json (its text, or "") says add_prefix_space.
  static Result<ByteLevelBpeTokenizer> from_vocab_and_merges(const std::string& vocab_json_path,
                                                             const std::string& merges_path,
                                                             std::string_view tokenizer_config_json);
  // Whether a parsed tokenizer.json's model is BPE (to pick the reader).
  static bool is_bpe(const nlohmann::json& root);

  using Piece = TextPiece;
  // The tokens of text without the post-processor's specials, offsets
  // trimmed as the post-processor trims them. kInvalidArgument for invalid
  // UTF-8, naming the byte offset.
  Result<std::vector<Piece>> pieces(std::string_view text) const override;

  std::size_t vocab_size() const override { return id_to_token_.size(); }
  std::int32_t pad_id() const override { return pad_id_; }
  std::int32_t token_to_id(std::string_view token) const override;
  const std::string& id_to_token(std::int32_t id) const override;

 private:
  struct AddedToken {
    std::string content;
    std::int32_t id = 0;
    bool lstrip = false, rstrip = false, normalized = true;
  };

  // A stretch of text: an added token (its id) or text for BPE (-1).
  struct Segment {
    std::int32_t added_id = -1;
    std::size_t begin = 0, end = 0;  // the added token's own text, or the stretch
  };

  ByteLevelBpeTokenizer() = default;
  // Parts of from_json, each for one section of tokenizer.json.
  Status read_model(const nlohmann::json& model);
  Status read_pre_tokenizer(const nlohmann::json& root);
  Status read_post_processor(const nlohmann::json& post);
  Status read_added_tokens(const nlohmann::json& added);
  void split_added(std::string_view text, std::size_t from, std::size_t to, bool normalized_pass,
                   std::vector<Segment>& out) const;
  void bpe_piece(std::string_view text, std::size_t begin, std::size_t end, std::vector<Piece>& out) const;
  void bpe_word(const std::vector<std::int32_t>& symbols, const std::vector<std::pair<std::size_t, std::size_t>>& spans,
                std::vector<Piece>& out) const;

  std::vector<std::string> id_to_token_;
  std::unordered_map<std::string, std::int32_t> token_to_id_;
  std::unordered_map<std::uint64_t, std::pair<std::int32_t, std::int32_t>> merges_;  // (left, right) -> (rank, merged)
  std::vector<std::int32_t> byte_ids_;  // byte -> id of its byte-level symbol, -1 when not in the vocabulary
  std::vector<AddedToken> added_;
  // Per id, the 'Ġ' and white space characters its token starts and ends
  // with: what trim_offsets takes off its offsets.
  std::vector<std::pair<std::uint32_t, std::uint32_t>> space_ends_;
  std::int32_t unk_id_ = -1;
  bool fuse_unk_ = false;
  bool ignore_merges_ = false;
  bool add_prefix_space_ = false;
  bool use_regex_ = true;
  bool trim_offsets_ = false;
  bool post_add_prefix_space_ = false;  // the post-processor's own add_prefix_space (trimming)
  std::int32_t pad_id_ = 0;
  std::string empty_;
};

}  // namespace rapidqa::text

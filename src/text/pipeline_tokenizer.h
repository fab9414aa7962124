// PipelineTokenizer: any Hugging Face tokenizer.json built from the parts
// real checkpoints use, run part by part as the tokenizers library runs it,
// with the same ids and offsets:
//
//   added tokens     cut out first: those marked normalized=false from the
//                    original text, the others from each normalized stretch
//                    (leftmost, longest; lstrip, rstrip, single_word)
//   normalizer       BertNormalizer, NFC, NFD, NFKC, NFKD, Lowercase,
//                    StripAccents, Strip, Replace (string or regex), Prepend,
//                    Precompiled (sentencepiece's character map), Sequence
//   pre-tokenizer    BertPreTokenizer, Whitespace, WhitespaceSplit,
//                    ByteLevel, Metaspace, Split (string or regex; every
//                    behavior; invert), Punctuation, Digits, CharDelimiterSplit,
//                    Sequence
//   model            WordPiece, BPE (byte-level or with byte fallback),
//                    Unigram, WordLevel (subword_models.h)
//   post-processor   BertProcessing, RobertaProcessing, TemplateProcessing,
//                    ByteLevel (offset trimming), Sequence
//
// Anything else is refused with its field named: a tokenizer that quietly
// differs from the model's would give it text it never saw. Offsets are
// bytes of the original text (the reader cuts answer spans with them).
//
// Thread safety: immutable after construction; every method is const.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "rapidqa/status.h"
#include "text/normalized_string.h"
#include "text/special_layout.h"
#include "text/subword_models.h"
#include "text/tokenizer.h"

namespace rapidqa::text {

class PipelineTokenizer final : public LaidOutTokenizer {
 public:
  // kNotFound for a missing file; kInvalidArgument naming the field for
  // anything malformed or unsupported, a file over 128 MiB, JSON nested more
  // than 64 deep or naming a key twice.
  static Result<PipelineTokenizer> from_tokenizer_json(const std::string& path);
  static Result<PipelineTokenizer> from_json_text(std::string_view json, const std::string& source);
  static Result<PipelineTokenizer> from_json(const nlohmann::json& root, const std::string& source);

  using Piece = TextPiece;
  // The tokens of text without the post-processor's specials, offsets as
  // the post-processor leaves them. kInvalidArgument for invalid UTF-8
  // (byte offset named) or a character the model cannot represent.
  Result<std::vector<Piece>> pieces(std::string_view text) const override;

  std::size_t vocab_size() const override { return model_->vocab_size(); }
  std::int32_t pad_id() const override { return pad_id_; }
  std::int32_t token_to_id(std::string_view token) const override { return model_->token_to_id(token); }
  const std::string& id_to_token(std::int32_t id) const override;

  // A split of the text on its way through the pipeline: a stretch of
  // (normalized) text, or an added token already decided.
  struct Split {
    NormalizedString text;
    bool added = false;
    std::int32_t added_id = -1;
  };
  using NormalizeStep = std::function<void(NormalizedString&)>;
  using PreTokenizeStep = std::function<void(std::vector<Split>&)>;

 private:
  struct AddedToken {
    std::string content;          // as written
    std::string normalized_form;  // what is matched in normalized text
    std::int32_t id = 0;
    bool lstrip = false, rstrip = false, single_word = false, normalized = true;
  };
  struct Trim {
    bool add_prefix_space = true;
  };

  // Without a post-processor: the texts alone, B with type id 1.
  PipelineTokenizer() : LaidOutTokenizer(SpecialLayout(1)) {}
  Status read_added_tokens(const nlohmann::json& added);
  Status read_post_processor(const nlohmann::json& post);
  Status read_processor(const nlohmann::json& step, bool& laid_out);
  void split_added(std::vector<Split>& splits, bool normalized_pass) const;

  std::shared_ptr<SubwordModel> model_;
  std::vector<NormalizeStep> normalizer_;       // empty: none
  std::vector<PreTokenizeStep> pre_tokenizer_;  // empty: none
  std::vector<AddedToken> added_;
  std::vector<Trim> trims_;  // the post-processors' offset trimming, in order
  std::int32_t pad_id_ = 0;
  std::string empty_;
};

}  // namespace rapidqa::text

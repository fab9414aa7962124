// SentencePieceTokenizer: a sentencepiece model file, for checkpoints that
// ship `sentencepiece.bpe.model` or `spiece.model` and no tokenizer.json.
// SentencePieceModel runs the file as libsentencepiece does (normalisation,
// Unigram or BPE segmentation, byte fallback); this class numbers the
// pieces as the checkpoint's embedding table does and lays out the specials:
//
//   kFairseq  XLM-RoBERTa's numbering (its sentencepiece.bpe.model): <s> 0,
//             <pad> 1, </s> 2, <unk> 3, the model's own pieces one up,
//             <mask> last; <s> A </s>, a pair <s> A </s></s> B </s>
//   kModel    the model's own ids; [CLS] A [SEP] and [CLS] A [SEP] B [SEP]
//             (B's part with type id 1, as ALBERT) when the model has both
//             pieces, otherwise its <s> and </s> where it defines them:
//             [<s>] A [</s>], a pair [<s>] A [</s>] B [</s>]
//
// Offsets are bytes of the original text, as libsentencepiece reports them.
//
// Thread safety: immutable after construction; every method is const.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "rapidqa/status.h"
#include "text/special_layout.h"
#include "text/tokenizer.h"

namespace rapidqa::text {

class SentencePieceModel;

class SentencePieceTokenizer final : public LaidOutTokenizer {
 public:
  enum class Numbering { kModel, kFairseq };

  // kNotFound for a missing file; kInvalidArgument for a file over 64 MiB
  // or one that is not a Unigram or BPE model (SentencePieceModel::parse).
  static Result<SentencePieceTokenizer> from_model_file(const std::string& path, Numbering numbering);
  static Result<SentencePieceTokenizer> from_serialized(std::string_view bytes, Numbering numbering,
                                                        const std::string& source);

  // The text's pieces, numbered as above, without specials.
  // kInvalidArgument for invalid UTF-8 (byte offset named).
  Result<std::vector<TextPiece>> pieces(std::string_view text) const override;

  std::size_t vocab_size() const override { return id_to_token_.size(); }
  std::int32_t pad_id() const override { return pad_id_; }
  std::int32_t token_to_id(std::string_view token) const override;
  const std::string& id_to_token(std::int32_t id) const override;

 private:
  SentencePieceTokenizer() = default;

  std::shared_ptr<const SentencePieceModel> model_;
  Numbering numbering_ = Numbering::kModel;
  std::vector<std::string> id_to_token_;
  std::unordered_map<std::string, std::int32_t> token_to_id_;
  std::int32_t unk_id_ = 0;
  std::int32_t pad_id_ = 0;
  std::string empty_;
};

}  // namespace rapidqa::text

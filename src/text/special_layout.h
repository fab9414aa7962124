// SpecialLayout: where a model's special tokens go around one text or a
// pair (<s> A </s>, [CLS] A [SEP] B [SEP], a TemplateProcessing template),
// and how a text too long for max_length is cut to fit. Every tokenizer
// that reads a post-processor or knows its model's layout shares it, so the
// models see specials, type ids, offsets and truncation done one way.
//
// Thread safety: immutable after construction; every method is const.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "rapidqa/status.h"
#include "text/tokenizer.h"

namespace rapidqa::text {

// One token of a text: its id and the [begin, end) bytes of the original
// text it came from.
struct TextPiece {
  std::int32_t id = 0;
  std::size_t begin = 0;
  std::size_t end = 0;
};

class SpecialLayout {
 public:
  // One step of a layout: a text (sequence 0 for A, 1 for B) or special ids.
  struct Item {
    int sequence = -1;
    std::vector<std::int32_t> ids;
    std::int32_t type_id = 0;
  };

  // The text alone; a pair as A then B, B with second_type_id.
  explicit SpecialLayout(std::int32_t second_type_id = 0);
  SpecialLayout(std::vector<Item> single, std::vector<Item> pair);

  // RoBERTa's (RobertaProcessing, XLM-R's fairseq numbering): cls A sep,
  // and cls A sep sep B sep, one type id.
  static SpecialLayout roberta(std::int32_t cls, std::int32_t sep);
  // BERT's (BertProcessing): cls A sep, and cls A sep B sep with B and its
  // sep of type 1.
  static SpecialLayout bert(std::int32_t cls, std::int32_t sep);

  // A TemplateProcessing layout: post_processor.<field> ("single" with
  // texts 1, "pair" with texts 2) and its special_tokens. kInvalidArgument
  // naming the field for an item that is neither a SpecialToken nor a
  // Sequence, a special without ids, or a text missing or repeated.
  static Result<std::vector<Item>> read_template(const nlohmann::json& step, const char* field, int texts);
  // Both of a TemplateProcessing step's layouts, "single" and "pair".
  static Result<SpecialLayout> from_template(const nlohmann::json& step);

  std::size_t specials(bool pair) const;
  const std::vector<Item>& single() const { return single_; }
  const std::vector<Item>& pair() const { return pair_; }

  // The text's pieces with the specials around them, cut from the end to
  // fit max_length (which counts the specials). kInvalidArgument when
  // max_length leaves no room for a token.
  Result<TokenizedText> fit(std::vector<TextPiece> text, std::size_t max_length) const;
  // A pair: over max_length, one piece at a time is dropped from the end of
  // the longer text, from the second on a tie (Hugging Face's
  // longest_first). kInvalidArgument when there is no room for one of each.
  Result<TokenizedText> fit_pair(std::vector<TextPiece> first, std::vector<TextPiece> second,
                                 std::size_t max_length) const;

 private:
  TokenizedText assemble(const std::vector<TextPiece>& first, const std::vector<TextPiece>* second,
                         std::size_t truncated) const;

  std::vector<Item> single_;
  std::vector<Item> pair_;
};

// A tokenizer that cuts a text into TextPieces and lays them out with a
// SpecialLayout: encode and encode_pair are the same for all of them.
class LaidOutTokenizer : public Tokenizer {
 public:
  // The tokens of text without specials. kInvalidArgument for invalid
  // UTF-8 (byte offset named) or a character the model cannot represent.
  virtual Result<std::vector<TextPiece>> pieces(std::string_view text) const = 0;

  Result<TokenizedText> encode(std::string_view text, std::size_t max_length) const final;
  Result<TokenizedText> encode_pair(std::string_view first, std::string_view second,
                                    std::size_t max_length) const final;

 protected:
  explicit LaidOutTokenizer(SpecialLayout layout = SpecialLayout()) : layout_(std::move(layout)) {}
  SpecialLayout layout_;
};

}  // namespace rapidqa::text

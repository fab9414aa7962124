// WordPiece tokenisation that gives the same ids as Hugging Face's slow
// BertTokenizer (PreTrainedTokenizer.tokenize + BasicTokenizer +
// WordpieceTokenizer), so a BERT-family reader fed by rapidqa sees exactly
// what it saw in training. On top of HF, every word piece carries the byte
// range of the original text it came from, so an answer span predicted over
// word pieces can be cut out of the passage as the user wrote it.
//
// Thread safety: immutable after construction; thread-safe (every method is
// const and touches no shared mutable state).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "rapidqa/status.h"
#include "text/tokenizer.h"

namespace rapidqa::text {

struct WordPieceOptions {
  bool lower_case = true;                // BERT uncased; also strips accents unless strip_accents says otherwise
  std::optional<bool> strip_accents;     // NFD then drop Mn; unset: follows lower_case (as HF)
  bool tokenize_chinese_chars = true;    // split CJK ideographs one per token
  bool clean_text = true;                // drop control characters, map white space to ' ' (HF always does)
  std::size_t max_input_chars_per_word = 100;  // code points; longer words become unk_token
  std::string continuing_subword_prefix = "##";  // marks a piece that continues a word
  std::string unk_token = "[UNK]";       // required in the vocabulary
  std::string cls_token = "[CLS]";       // required; opens every encoding
  std::string sep_token = "[SEP]";       // required; closes each segment
  std::string pad_token = "[PAD]";       // required; batching pads with it
  std::string mask_token = "[MASK]";     // optional; kept whole in input text when in the vocabulary
};

// One word piece of a text and where it came from.
struct WordPiece {
  std::int32_t id = 0;
  std::size_t begin = 0;  // byte offset in the original text
  std::size_t end = 0;    // one past the last byte; a word that became unk covers the whole word
};

class WordPieceTokenizer final : public Tokenizer {
 public:
  // vocab.txt as BERT ships it: one token per line, the line number (from 0)
  // is the id. Lines end in \n, \r\n or \r (as Python's text mode reads them).
  // Errors: kNotFound when the file cannot be opened; kInvalidArgument for an
  // empty file, invalid UTF-8 or a duplicate token (with its line), a
  // missing unk/cls/sep/pad token (naming it), or a file over 64 MiB (read
  // no further). Tokens quoted in messages are clipped to 64 bytes.
  static Result<WordPieceTokenizer> from_vocab_file(const std::string& vocab_txt_path,
                                                    WordPieceOptions options = {});

  // A Hugging Face tokenizer.json whose model is WordPiece. Reads model.vocab,
  // model.unk_token, model.max_input_chars_per_word,
  // model.continuing_subword_prefix, the BertNormalizer settings (lowercase,
  // strip_accents, handle_chinese_chars, clean_text), the [CLS]/[SEP] names
  // from a BERT-shaped post_processor, padding.pad_token and the special
  // added_tokens (which are kept whole in input text).
  // Errors: kNotFound for a missing file; kInvalidArgument naming the field
  // for anything that is not a BERT WordPiece set-up, for JSON nested more
  // than 64 deep or naming a key twice, and for a file over 128 MiB.
  static Result<WordPieceTokenizer> from_tokenizer_json(const std::string& path);
  // The same from a tokenizer.json already parsed (bounded, as
  // detail::parse_json_bounded parses); `path` names it in messages.
  static Result<WordPieceTokenizer> from_tokenizer_json(const nlohmann::json& root, const std::string& path);

  // vocab[i] gets id i. Errors as from_vocab_file, with "index" for "line".
  static Result<WordPieceTokenizer> from_tokens(std::vector<std::string> vocab,
                                                WordPieceOptions options = {});

  // Word pieces of text, no [CLS]/[SEP]. Bytes that are not valid UTF-8 are
  // read as U+FFFD (which clean_text drops); encode() refuses them instead.
  std::vector<std::string> tokenize(std::string_view text) const;

  // Ids and original byte ranges of the word pieces of text, no specials.
  // Error: kInvalidArgument for invalid UTF-8, naming the byte offset.
  Result<std::vector<WordPiece>> word_pieces(std::string_view text) const;

  // The words BERT's BasicTokenizer makes of text before WordPiece splits
  // them: cleaned, lower-cased and accent-stripped as configured, cut at
  // white space and punctuation, one CJK ideograph per word; special tokens
  // written in the text stay whole. A vocabulary that holds all of them
  // encodes the text without sub-words (the vocabulary builder relies on it).
  // Error: kInvalidArgument for invalid UTF-8, naming the byte offset.
  Result<std::vector<std::string>> basic_tokens(std::string_view text) const;

  // [CLS] text [SEP], the text cut from the end to fit max_length (which
  // counts the two specials). Errors: kInvalidArgument for invalid UTF-8
  // (byte offset named) or max_length < 2.
  Result<TokenizedText> encode(std::string_view text, std::size_t max_length) const override;

  // [CLS] first [SEP] second [SEP]. Over max_length (specials included), one
  // token at a time is dropped from the end of the longer text, from the
  // second on a tie (HF's longest_first). Errors: kInvalidArgument for
  // invalid UTF-8 (which text, byte offset) or max_length < 3.
  Result<TokenizedText> encode_pair(std::string_view first, std::string_view second,
                                    std::size_t max_length) const override;

  std::int32_t token_to_id(std::string_view token) const override;  // -1 when absent
  // The token of id; unk_token for an id outside the vocabulary (as HF).
  // The reference lives as long as the tokenizer.
  const std::string& id_to_token(std::int32_t id) const override;
  std::size_t vocab_size() const override { return id_to_token_.size(); }
  std::int32_t pad_id() const override { return pad_id_; }
  std::int32_t cls_id() const { return cls_id_; }
  std::int32_t sep_id() const { return sep_id_; }
  std::int32_t unk_id() const { return unk_id_; }
  const WordPieceOptions& options() const { return options_; }

 private:
  // A normalised code point and the original bytes it stands for.
  struct AlignedChar {
    std::int32_t code_point;
    std::size_t begin;
    std::size_t end;
  };
  using Word = std::vector<AlignedChar>;

  WordPieceTokenizer() = default;
  static Result<WordPieceTokenizer> build(std::vector<std::string> vocab, WordPieceOptions options,
                                          std::vector<std::string> never_split,
                                          const std::string& source, const char* position_word);

  // Calls on_word(const Word&) for every basic word of text and
  // on_special(id, begin, end) for every special token cut out of it.
  template <typename OnWord, typename OnSpecial>
  void split_words(std::string_view text, OnWord&& on_word, OnSpecial&& on_special) const;
  template <typename OnWord>
  void basic_tokenize(std::string_view text, std::size_t begin, std::size_t end, OnWord&& on_word) const;
  void pieces_of(std::string_view text, std::vector<WordPiece>& out) const;
  void normalize_word(Word& word, std::vector<Word>& tokens) const;
  void word_piece(const Word& word, std::vector<WordPiece>& out) const;
  bool is_never_split(const Word& word) const;
  TokenizedText assemble(const std::vector<WordPiece>& first, const std::vector<WordPiece>* second,
                         std::size_t truncated) const;

  WordPieceOptions options_;
  bool strip_accents_ = true;  // options_.strip_accents resolved against lower_case
  std::vector<std::string> id_to_token_;
  std::unordered_map<std::string, std::int32_t> token_to_id_;
  std::vector<std::string> never_split_;  // special tokens kept whole in input text
  std::int32_t unk_id_ = 0;
  std::int32_t cls_id_ = 0;
  std::int32_t sep_id_ = 0;
  std::int32_t pad_id_ = 0;
};

}  // namespace rapidqa::text

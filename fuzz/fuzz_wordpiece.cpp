// Feeds the WordPiece tokenizer three ways: the input as a vocab.txt
// (WordPieceTokenizer::from_vocab_file), as a Hugging Face tokenizer.json
// (from_tokenizer_json), and as text for a fixed tokenizer built from the
// tiny BERT's vocabulary (tokenize, word_pieces, basic_tokens, encode,
// encode_pair: user questions and passages, invalid UTF-8 included). A
// tokenizer that loads tokenizes a fixed mixed-script sample; every piece's
// byte range must lie inside the text it came from.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_support.h"
#include "text/wordpiece_tokenizer.h"

namespace {

using rapidqa::text::WordPieceTokenizer;
using rapidqa::fuzz::check;

void exercise(const WordPieceTokenizer& tokenizer, std::string_view text) {
  (void)tokenizer.tokenize(text);
  (void)tokenizer.basic_tokens(text);
  if (auto pieces = tokenizer.word_pieces(text); pieces.is_ok()) {
    for (const auto& p : pieces.value()) {
      check(p.begin <= p.end && p.end <= text.size(), "a word piece's byte range lies outside its text");
      check(p.id >= 0 && static_cast<std::size_t>(p.id) < tokenizer.vocab_size(), "a word piece id is out of range");
    }
  }
  for (const std::size_t max_length : {std::size_t{0}, std::size_t{2}, std::size_t{3}, std::size_t{16}}) {
    if (auto e = tokenizer.encode(text, max_length); e.is_ok()) {
      check(e->input_ids.size() <= max_length, "encode is longer than max_length");
      check(e->offsets.size() == e->input_ids.size() && e->token_type_ids.size() == e->input_ids.size(),
            "encode's parallel arrays differ in length");
      for (const auto& [begin, end] : e->offsets) check(begin <= end && end <= text.size(), "an offset lies outside the text");
    }
    const std::size_t half = text.size() / 2;
    (void)tokenizer.encode_pair(text.substr(0, half), text.substr(half), max_length);
  }
  (void)tokenizer.id_to_token(-1);
  (void)tokenizer.id_to_token(static_cast<std::int32_t>(tokenizer.vocab_size()));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::string dir = rapidqa::fuzz::scratch_dir("wordpiece");
  static const WordPieceTokenizer fixed = [] {
    auto t = WordPieceTokenizer::from_tokens(rapidqa::fuzz::tiny_vocab());
    check(t.is_ok(), "the tiny vocabulary does not load");
    return std::move(t).value();
  }();
  static const std::string sample = "How do I reset my PASSWORD?  Résumé 我忘记密码了，怎么重置？ [MASK] naïve\t\x01 end";

  const std::string_view text(reinterpret_cast<const char*>(data), size);
  exercise(fixed, text);

  const std::string vocab = dir + "/vocab.txt";
  rapidqa::fuzz::write_file(vocab, data, size);
  if (auto t = WordPieceTokenizer::from_vocab_file(vocab); t.is_ok()) exercise(t.value(), sample);

  const std::string json = dir + "/tokenizer.json";
  rapidqa::fuzz::write_file(json, data, size);
  if (auto t = WordPieceTokenizer::from_tokenizer_json(json); t.is_ok()) exercise(t.value(), sample);
  return 0;
}

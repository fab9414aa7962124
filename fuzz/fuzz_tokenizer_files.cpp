// Feeds the readers of a model directory's tokenizer files: the input as a
// Hugging Face tokenizer.json of any model type (PipelineTokenizer, with its
// normalizers, pre-tokenizers, post-processor and added tokens) and as a
// sentencepiece model file (SentencePieceModel's protobuf reader, in both
// numberings). A tokenizer that loads tokenizes a fixed mixed-script sample
// and the input itself as text (invalid UTF-8 included), alone and as a
// pair: every token's byte range must lie inside the text it came from, the
// laid-out arrays must agree in length, and max_length must hold.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_support.h"
#include "text/pipeline_tokenizer.h"
#include "text/sentencepiece_tokenizer.h"

namespace {

using rapidqa::fuzz::check;
using rapidqa::text::LaidOutTokenizer;

void exercise(const LaidOutTokenizer& tokenizer, std::string_view text) {
  if (auto pieces = tokenizer.pieces(text); pieces.is_ok()) {
    for (const auto& p : pieces.value()) {
      check(p.begin <= p.end && p.end <= text.size(), "a piece's byte range lies outside its text");
      check(p.id >= 0, "a piece has a negative id");
    }
  }
  for (const std::size_t max_length : {std::size_t{0}, std::size_t{3}, std::size_t{24}, std::size_t{512}}) {
    if (auto e = tokenizer.encode(text, max_length); e.is_ok()) {
      check(e->input_ids.size() <= max_length, "encode is longer than max_length");
      check(e->offsets.size() == e->input_ids.size() && e->token_type_ids.size() == e->input_ids.size() &&
                e->sequence_ids.size() == e->input_ids.size(),
            "encode's parallel arrays differ in length");
      for (const auto& [begin, end] : e->offsets) check(begin <= end && end <= text.size(), "an offset lies outside the text");
    }
    const std::size_t half = text.size() / 2;
    const std::string_view first = text.substr(0, half), second = text.substr(half);
    if (auto e = tokenizer.encode_pair(first, second, max_length); e.is_ok()) {
      check(e->input_ids.size() <= max_length, "encode_pair is longer than max_length");
      for (std::size_t i = 0; i < e->offsets.size(); ++i) {
        const auto [begin, end] = e->offsets[i];
        const std::size_t limit = e->sequence_ids[i] == 1 ? second.size() : first.size();
        check(begin <= end && end <= limit, "a pair offset lies outside its text");
      }
    }
  }
  (void)tokenizer.id_to_token(-1);
  (void)tokenizer.id_to_token(static_cast<std::int32_t>(tokenizer.vocab_size()));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::string sample =
      "How do I reset my PASSWORD?  Résumé 我忘记密码了，怎么重置？ <mask> naïve\t\x01 e\xcc\x81nd 👍🏽 ١٢٣";
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);

  if (auto t = rapidqa::text::PipelineTokenizer::from_json_text(bytes, "fuzz/tokenizer.json"); t.is_ok()) {
    exercise(t.value(), sample);
    exercise(t.value(), bytes);
  }
  using Numbering = rapidqa::text::SentencePieceTokenizer::Numbering;
  for (const auto numbering : {Numbering::kModel, Numbering::kFairseq}) {
    if (auto t = rapidqa::text::SentencePieceTokenizer::from_serialized(bytes, numbering, "fuzz/spiece.model");
        t.is_ok()) {
      exercise(t.value(), sample);
      exercise(t.value(), bytes);
    }
  }
  return 0;
}

#include "text/sentencepiece_tokenizer.h"

#include <utility>

#include <fmt/format.h>

#include "common/bounded_file.h"
#include "text/sentencepiece_model.h"
#include "text/utf8.h"

namespace rapidqa::text {

namespace {

// Real models are a few megabytes (XLM-RoBERTa's 250k pieces: 5 MB).
constexpr std::size_t kMaxModelBytes = std::size_t{64} << 20;

// XLM-RoBERTa's fixed ids before the model's own pieces.
constexpr std::int32_t kFairseqBos = 0, kFairseqPad = 1, kFairseqEos = 2, kFairseqUnk = 3;

}  // namespace

Result<SentencePieceTokenizer> SentencePieceTokenizer::from_model_file(const std::string& path, Numbering numbering) {
  auto bytes = detail::read_file_bounded(path, kMaxModelBytes, "sentencepiece model");
  if (!bytes) return bytes.status();
  return from_serialized(*bytes, numbering, path);
}

Result<SentencePieceTokenizer> SentencePieceTokenizer::from_serialized(std::string_view bytes, Numbering numbering,
                                                                       const std::string& source) {
  auto parsed = SentencePieceModel::parse(bytes, source);
  if (!parsed) return parsed.status();
  auto model = std::make_shared<const SentencePieceModel>(std::move(parsed).value());
  const auto& entries = model->entries();
  SentencePieceTokenizer t;
  t.numbering_ = numbering;
  if (numbering == Numbering::kFairseq) {
    // The model's pieces one up past the fixed four, which replace its own
    // <unk> <s> </s> (ids 0-2 in every model fairseq trained).
    if (model->unk_id() != 0 || model->bos_id() != 1 || model->eos_id() != 2) {
      return Status::invalid_argument(fmt::format(
          "sentencepiece model '{}' does not number <unk> <s> </s> 0, 1, 2 as XLM-RoBERTa's does", source));
    }
    t.id_to_token_ = {"<s>", "<pad>", "</s>", "<unk>"};
    for (std::size_t id = 3; id < entries.size(); ++id) t.id_to_token_.push_back(entries[id].piece);
    t.id_to_token_.push_back("<mask>");
    t.unk_id_ = kFairseqUnk;
    t.pad_id_ = kFairseqPad;
    t.layout_ = SpecialLayout::roberta(kFairseqBos, kFairseqEos);
  } else {
    for (const auto& entry : entries) t.id_to_token_.push_back(entry.piece);
    t.unk_id_ = model->unk_id();
    t.pad_id_ = model->pad_id() >= 0 ? model->pad_id() : 0;
    const int cls = model->find("[CLS]"), sep = model->find("[SEP]");
    if (cls >= 0 && sep >= 0) {
      t.layout_ = SpecialLayout::bert(cls, sep);
    } else {
      const auto specials = [](int id) { return id >= 0 ? std::vector<std::int32_t>{id} : std::vector<std::int32_t>{}; };
      const std::vector<std::int32_t> bos = specials(model->bos_id()), eos = specials(model->eos_id());
      t.layout_ = SpecialLayout({{-1, bos, 0}, {0, {}, 0}, {-1, eos, 0}},
                                {{-1, bos, 0}, {0, {}, 0}, {-1, eos, 0}, {1, {}, 0}, {-1, eos, 0}});
    }
  }
  for (std::size_t id = 0; id < t.id_to_token_.size(); ++id) {
    t.token_to_id_.emplace(t.id_to_token_[id], static_cast<std::int32_t>(id));
  }
  t.model_ = std::move(model);
  return t;
}

Result<std::vector<TextPiece>> SentencePieceTokenizer::pieces(std::string_view text) const {
  if (const std::size_t bad = find_invalid_utf8(text); bad != std::string_view::npos) {
    return Status::invalid_argument(fmt::format("text is not valid UTF-8 at byte {}", bad));
  }
  std::vector<TextPiece> out = model_->encode(text);
  if (numbering_ == Numbering::kFairseq) {
    for (TextPiece& piece : out) piece.id = piece.id == model_->unk_id() ? kFairseqUnk : piece.id + 1;
  }
  return out;
}

std::int32_t SentencePieceTokenizer::token_to_id(std::string_view token) const {
  const auto it = token_to_id_.find(std::string(token));
  return it == token_to_id_.end() ? -1 : it->second;
}

const std::string& SentencePieceTokenizer::id_to_token(std::int32_t id) const {
  if (id < 0 || static_cast<std::size_t>(id) >= id_to_token_.size()) {
    return static_cast<std::size_t>(unk_id_) < id_to_token_.size() ? id_to_token_[unk_id_] : empty_;
  }
  return id_to_token_[id];
}

}  // namespace rapidqa::text

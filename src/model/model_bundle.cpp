#include "model/model_bundle.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cctype>
#include <filesystem>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/bounded_file.h"
#include "common/bounded_json.h"
#include "model/model_runtime.h"
#include "text/byte_level_bpe.h"
#include "text/pipeline_tokenizer.h"
#include "text/sentencepiece_tokenizer.h"
#include "text/wordpiece_tokenizer.h"

namespace rapidqa::model {
namespace fs = std::filesystem;
namespace {

// tokenizer_config.json holds a few settings; real ones are a few kilobytes.
constexpr std::size_t kMaxTokenizerConfigBytes = 16u << 20;
constexpr std::size_t kMaxTokenizerJsonBytes = 128u << 20;

// True unless tokenizer_config.json says do_lower_case false, or (without
// it) the vocabulary holds cased words.
bool vocabulary_looks_uncased(const std::string& model_dir, const text::WordPieceTokenizer& tokenizer) {
  // An unreadable, oversized or malformed tokenizer_config.json is not
  // fatal: the vocabulary decides instead. Bounded like every model file.
  const auto text = detail::read_file_bounded((fs::path(model_dir) / "tokenizer_config.json").string(),
                                              kMaxTokenizerConfigBytes, "tokenizer_config.json");
  if (text) {
    const auto j = detail::parse_json_bounded(text.value());
    if (j && j->is_object()) {
      const auto lower = j->find("do_lower_case");
      if (lower != j->end() && lower->is_boolean()) return lower->get<bool>();
    }
  }
  for (std::size_t id = 0; id < tokenizer.vocab_size(); ++id) {
    const std::string& token = tokenizer.id_to_token(static_cast<std::int32_t>(id));
    if (!token.empty() && token.front() == '[' && token.back() == ']') continue;  // [CLS], [unused3]
    if (std::any_of(token.begin(), token.end(), [](unsigned char c) { return std::isupper(c); })) return false;
  }
  return true;
}

// BERT's WordPiece: tokenizer.json (parsed already, or null when it is
// absent or did not parse) when the case is not forced, vocab.txt (with the
// case decided from tokenizer_config.json or the vocabulary) otherwise or
// without one.
Result<text::WordPieceTokenizer> load_wordpiece(const std::string& model_dir, const fs::path& tokenizer_json,
                                                const nlohmann::json* parsed_json, const fs::path& vocab,
                                                int lower_case) {
  // A tokenizer file that is not enough alone (vocab.json without
  // merges.txt) is named, so the refusal says what the directory has rather
  // than only what it lacks.
  std::string others;
  for (const char* file : {"vocab.json", "merges.txt"}) {
    if (fs::exists(fs::path(model_dir) / file)) others += others.empty() ? file : std::string(", ") + file;
  }
  auto from_json = [&] {
    return parsed_json ? text::WordPieceTokenizer::from_tokenizer_json(*parsed_json, tokenizer_json.string())
                       : text::WordPieceTokenizer::from_tokenizer_json(tokenizer_json.string());
  };
  if (fs::exists(tokenizer_json) && lower_case < 0) return from_json();
  if (fs::exists(vocab)) {
    text::WordPieceOptions options;
    if (lower_case >= 0) {
      options.lower_case = lower_case == 1;
    } else {
      auto probe = text::WordPieceTokenizer::from_vocab_file(vocab.string(), options);
      if (!probe) return probe.status();
      options.lower_case = vocabulary_looks_uncased(model_dir, probe.value());
    }
    return text::WordPieceTokenizer::from_vocab_file(vocab.string(), options);
  }
  if (fs::exists(tokenizer_json)) return from_json();
  return Status::not_found(fmt::format(
      "{}: no vocab.txt or tokenizer.json (a WordPiece vocabulary is needed){}", model_dir,
      others.empty() ? "" : fmt::format("; it has {}, but not both of vocab.json and merges.txt", others)));
}

}  // namespace

Result<ModelBundle> load_model_bundle(const std::string& model_dir, int lower_case) {
  use_single_threaded_libraries();
  auto model = load_transformer(model_dir);
  if (!model) return model.status();
  const fs::path vocab = fs::path(model_dir) / "vocab.txt";
  const fs::path tokenizer_json = fs::path(model_dir) / "tokenizer.json";
  std::shared_ptr<const text::Tokenizer> tokenizer;
  // tokenizer.json is read and parsed once, where it would be used (not
  // when the case is forced onto a vocab.txt); its model decides the
  // reader: byte-level BPE (RoBERTa, GPT-2) or WordPiece. One that cannot
  // be read or parsed is left to the WordPiece reader, whose error names it.
  Result<nlohmann::json> parsed_json = Status::not_found("no tokenizer.json");
  if (fs::exists(tokenizer_json) && (lower_case < 0 || !fs::exists(vocab))) {
    auto text = detail::read_file_bounded(tokenizer_json.string(), kMaxTokenizerJsonBytes, "tokenizer.json");
    if (text) parsed_json = detail::parse_json_bounded(text.value());
  }
  if (parsed_json) {
    // The readers made for BERT's WordPiece and byte-level BPE first (they
    // are the fastest); any other tokenizer.json, or one with parts they do
    // not take, goes through the general pipeline, whose refusal names the
    // part it does not run.
    const nlohmann::json& root = parsed_json.value();
    const std::string source = fmt::format("tokenizer.json '{}'", tokenizer_json.string());
    const bool is_bpe = text::ByteLevelBpeTokenizer::is_bpe(root);
    const bool is_wordpiece = root.contains("model") && root["model"].is_object() &&
                              root["model"].value("type", "") == "WordPiece";
    if (lower_case >= 0 && !is_wordpiece) {
      return Status::invalid_argument(fmt::format(
          "{}: lower_case applies to WordPiece vocabularies, not to this tokenizer.json", model_dir));
    }
    if (is_bpe) {
      if (auto bpe = text::ByteLevelBpeTokenizer::from_json(root, source)) {
        tokenizer = std::make_shared<const text::ByteLevelBpeTokenizer>(std::move(bpe).value());
      }
    } else if (is_wordpiece && lower_case < 0) {
      if (auto wordpiece = text::WordPieceTokenizer::from_tokenizer_json(root, tokenizer_json.string())) {
        tokenizer = std::make_shared<const text::WordPieceTokenizer>(std::move(wordpiece).value());
      }
    }
    if (!tokenizer && !(is_wordpiece && lower_case >= 0)) {
      auto general = text::PipelineTokenizer::from_json(root, tokenizer_json.string());
      if (!general) return general.status();
      tokenizer = std::make_shared<const text::PipelineTokenizer>(std::move(general).value());
    }
  }
  const fs::path vocab_json = fs::path(model_dir) / "vocab.json", merges = fs::path(model_dir) / "merges.txt";
  if (!tokenizer && !fs::exists(vocab) && fs::exists(vocab_json) && fs::exists(merges)) {
    // RoBERTa's files without a tokenizer.json, set up as its fast tokenizer is.
    auto config = detail::read_file_bounded((fs::path(model_dir) / "tokenizer_config.json").string(),
                                            kMaxTokenizerConfigBytes, "tokenizer_config.json");
    auto bpe = text::ByteLevelBpeTokenizer::from_vocab_and_merges(vocab_json.string(), merges.string(),
                                                                  config ? config.value() : std::string());
    if (!bpe) return bpe.status();
    tokenizer = std::make_shared<const text::ByteLevelBpeTokenizer>(std::move(bpe).value());
  }
  if (!tokenizer && !fs::exists(vocab)) {
    // A sentencepiece model file without a tokenizer.json: XLM-RoBERTa's
    // sentencepiece.bpe.model numbered as fairseq numbers it, a spiece.model
    // with its own ids.
    for (const auto& [file, numbering] :
         {std::pair{"sentencepiece.bpe.model", text::SentencePieceTokenizer::Numbering::kFairseq},
          std::pair{"spiece.model", text::SentencePieceTokenizer::Numbering::kModel}}) {
      const fs::path path = fs::path(model_dir) / file;
      if (!fs::exists(path)) continue;
      if (lower_case >= 0) {
        return Status::invalid_argument(fmt::format(
            "{}: lower_case applies to WordPiece vocabularies, not to a sentencepiece model", model_dir));
      }
      auto spm = text::SentencePieceTokenizer::from_model_file(path.string(), numbering);
      if (!spm) return spm.status();
      tokenizer = std::make_shared<const text::SentencePieceTokenizer>(std::move(spm).value());
      break;
    }
  }
  if (!tokenizer) {
    auto wordpiece =
        load_wordpiece(model_dir, tokenizer_json, parsed_json ? &parsed_json.value() : nullptr, vocab, lower_case);
    if (!wordpiece) return wordpiece.status();
    tokenizer = std::make_shared<const text::WordPieceTokenizer>(std::move(wordpiece).value());
  }
  const auto vocab_size = static_cast<std::int64_t>(tokenizer->vocab_size());
  if (vocab_size > (*model)->config.vocab_size) {
    return Status::invalid_argument(fmt::format(
        "{}: the tokenizer has {} tokens but the model's embeddings only {} (config vocab_size)", model_dir,
        vocab_size, (*model)->config.vocab_size));
  }
  return ModelBundle{std::move(model).value(), std::move(tokenizer)};
}

ModelInputs make_batch(const std::vector<const text::TokenizedText*>& texts, std::int32_t pad_id) {
  std::int64_t longest = 0;
  for (const auto* t : texts) longest = std::max<std::int64_t>(longest, static_cast<std::int64_t>(t->input_ids.size()));
  const auto batch = static_cast<std::int64_t>(texts.size());
  ModelInputs inputs;
  inputs.input_ids = at::full({batch, longest}, pad_id, at::kLong);
  inputs.attention_mask = at::zeros({batch, longest}, at::kLong);
  inputs.token_type_ids = at::zeros({batch, longest}, at::kLong);
  auto ids = inputs.input_ids.accessor<std::int64_t, 2>();
  auto mask = inputs.attention_mask.accessor<std::int64_t, 2>();
  auto types = inputs.token_type_ids.accessor<std::int64_t, 2>();
  for (std::int64_t b = 0; b < batch; ++b) {
    const auto& t = *texts[static_cast<std::size_t>(b)];
    for (std::size_t i = 0; i < t.input_ids.size(); ++i) {
      ids[b][static_cast<std::int64_t>(i)] = t.input_ids[i];
      mask[b][static_cast<std::int64_t>(i)] = 1;
      types[b][static_cast<std::int64_t>(i)] = t.token_type_ids[i];
    }
  }
  return inputs;
}

}  // namespace rapidqa::model

// The transformer runtime against an independent PyTorch reference: the
// tiny checkpoints and reference.json are written by
// tests/reference/make_tiny_models.py (a ctest fixture runs it into
// RAPIDQA_TINY_MODELS before these tests).
// LibTorch first: it pulls in glog, whose CHECK macro Catch must override.
#include <ATen/ATen.h>
#undef CHECK
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "model/bf16_linear.h"
#include "model/pooling.h"
#include "model/checkpoint_files.h"
#include "model/safetensors_file.h"
#include "model/transformer_model.h"
#include "rapidqa/qa_engine.h"
#include "rapidqa/quantizer.h"
#include "rapidqa/reader.h"
#include "rapidqa/transformer_encoder.h"
#include "text/pipeline_tokenizer.h"
#include "text/sentencepiece_tokenizer.h"
#include "text/wordpiece_tokenizer.h"
#include "support/engine_check.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const std::string kModels = RAPIDQA_TINY_MODELS;
const std::string kTokenizers = RAPIDQA_TOKENIZER_PARITY;

const json& reference() {
  static const json r = [] {
    std::ifstream in(kModels + "/reference.json");
    REQUIRE(in);
    return json::parse(in);
  }();
  return r;
}

at::Tensor tensor_from(const json& j, at::ScalarType type) {
  // Nested JSON arrays -> tensor of their shape.
  std::vector<std::int64_t> shape;
  const json* level = &j;
  while (level->is_array()) {
    shape.push_back(static_cast<std::int64_t>(level->size()));
    if (level->empty()) break;
    level = &(*level)[0];
  }
  std::vector<double> flat;
  std::function<void(const json&)> walk = [&](const json& v) {
    if (v.is_array()) {
      for (const auto& x : v) walk(x);
    } else {
      flat.push_back(v.get<double>());
    }
  };
  walk(j);
  return at::tensor(flat, at::kDouble).reshape(shape).to(type);
}

double max_abs_diff(const at::Tensor& a, const at::Tensor& b) {
  REQUIRE(a.sizes() == b.sizes());
  return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>();
}

rapidqa::model::ModelInputs inputs_of(const json& c) {
  rapidqa::model::ModelInputs in;
  in.input_ids = tensor_from(c.at("input_ids"), at::kLong);
  in.attention_mask = tensor_from(c.at("attention_mask"), at::kLong);
  in.token_type_ids = tensor_from(c.at("token_type_ids"), at::kLong);
  return in;
}

// Writes a model directory from bert-tiny with one tensor changed, for the
// error tests. `edit` may erase or replace tensors.
std::string broken_copy(const std::string& name, const std::function<void(std::map<std::string, at::Tensor>&)>& edit) {
  const fs::path dir = fs::temp_directory_path() / ("rapidqa-broken-" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::copy_file(kModels + "/bert-tiny/config.json", dir / "config.json");
  fs::copy_file(kModels + "/bert-tiny/vocab.txt", dir / "vocab.txt");
  auto file = rapidqa::model::SafetensorsFile::open(kModels + "/bert-tiny/model.safetensors");
  REQUIRE(file.is_ok());
  std::map<std::string, at::Tensor> tensors;
  for (const auto& [n, info] : file->tensors()) tensors[n] = file->tensor(n).value().clone();
  edit(tensors);
  REQUIRE(rapidqa::model::write_safetensors((dir / "model.safetensors").string(), tensors).is_ok());
  return dir.string();
}

}  // namespace

TEST_CASE("Every reference checkpoint loads and matches PyTorch within 1e-4", "[model]") {
  const double tolerance = 1e-4;
  for (const auto& m : reference().at("models")) {
    const std::string name = m.at("model");
    INFO("model " << name);
    auto model = rapidqa::model::load_transformer(kModels + "/" + name);
    REQUIRE(model.is_ok());
    for (const auto& c : m.at("cases")) {
      INFO("case " << c.at("name").get<std::string>());
      const auto in = inputs_of(c);
      const at::Tensor hidden = (*model)->forward(in);
      // The runtime packs tokens and spends no work on padding: its hidden
      // states there are zero, where PyTorch's are of no use to anyone.
      const at::Tensor token = in.attention_mask.to(at::kFloat).unsqueeze(-1);
      CHECK(max_abs_diff(hidden, tensor_from(c.at("last_hidden_state"), at::kFloat) * token) < tolerance);
      CHECK(max_abs_diff(hidden * (1 - token), at::zeros_like(hidden)) == 0);
      using rapidqa::Pooling;
      CHECK(max_abs_diff(rapidqa::model::pool_hidden(hidden, in.attention_mask, Pooling::kMean, false),
                         tensor_from(c.at("mean_pooled"), at::kFloat)) < tolerance);
      CHECK(max_abs_diff(rapidqa::model::pool_hidden(hidden, in.attention_mask, Pooling::kCls, false),
                         tensor_from(c.at("cls_pooled"), at::kFloat)) < tolerance);
      if (c.contains("pooler_output")) {
        REQUIRE((*model)->pooler);
        const at::Tensor pooled = (*model)->pooler->forward(hidden.select(1, 0).contiguous());
        CHECK(max_abs_diff(pooled, tensor_from(c.at("pooler_output"), at::kFloat)) < tolerance);
      }
      if (c.contains("start_logits")) {
        REQUIRE((*model)->qa_head);
        const at::Tensor logits = (*model)->qa_head->forward(hidden) * token;
        const at::Tensor mask = token.squeeze(-1);
        CHECK(max_abs_diff(logits.select(2, 0), tensor_from(c.at("start_logits"), at::kFloat) * mask) < tolerance);
        CHECK(max_abs_diff(logits.select(2, 1), tensor_from(c.at("end_logits"), at::kFloat) * mask) < tolerance);
      }
    }
  }
}

TEST_CASE("The model's tokenizer gives the reference ids", "[model]") {
  const auto& tok = reference().at("tokenize");
  rapidqa::TransformerEncoderOptions options;
  options.model_dir = kModels + "/bert-tiny";
  auto encoder = rapidqa::TransformerEncoder::load(options);
  REQUIRE(encoder.is_ok());
  auto tokenizer = rapidqa::text::WordPieceTokenizer::from_vocab_file(kModels + "/bert-tiny/vocab.txt");
  REQUIRE(tokenizer.is_ok());
  for (const auto& c : tok.at("cases")) {
    INFO(c.at("text").get<std::string>());
    const auto expected = c.at("input_ids").get<std::vector<std::int32_t>>();
    if (c.contains("text_pair")) {
      auto pair = tokenizer->encode_pair(c.at("text").get<std::string>(), c.at("text_pair").get<std::string>(), 128);
      REQUIRE(pair.is_ok());
      CHECK(pair->input_ids == expected);
      CHECK(pair->token_type_ids == c.at("token_type_ids").get<std::vector<std::int32_t>>());
    } else {
      auto ids = (*encoder)->token_ids({c.at("text").get<std::string>()});
      REQUIRE(ids.is_ok());
      CHECK(ids->front() == expected);
    }
  }
}

TEST_CASE("TransformerEncoder pools normalised vectors and batching does not change them", "[model]") {
  rapidqa::TransformerEncoderOptions options;
  options.model_dir = kModels + "/bert-tiny";
  options.max_batch_size = 3;  // forces several length buckets
  auto encoder = rapidqa::TransformerEncoder::load(options);
  REQUIRE(encoder.is_ok());
  CHECK((*encoder)->dimension() == 32);
  CHECK((*encoder)->layer_count() == 2);
  CHECK_FALSE((*encoder)->wants_normalized_text());
  const std::vector<std::string> texts = {"how do i reset my password", "如何重置密码", "where is my order",
                                          "my order", "password", "我的订单在哪里 please reset it now"};
  std::vector<float> together;
  REQUIRE((*encoder)->encode(texts, together).is_ok());
  REQUIRE(together.size() == texts.size() * 32);
  for (std::size_t i = 0; i < texts.size(); ++i) {
    std::vector<float> alone;
    REQUIRE((*encoder)->encode({texts[i]}, alone).is_ok());
    double diff = 0, norm = 0;
    for (std::size_t d = 0; d < 32; ++d) {
      diff = std::max(diff, static_cast<double>(std::abs(alone[d] - together[i * 32 + d])));
      norm += static_cast<double>(alone[d]) * alone[d];
    }
    CHECK(diff < 1e-5);
    CHECK(std::sqrt(norm) == Approx(1.0).epsilon(1e-5));
  }
  std::vector<float> out;
  const auto bad = (*encoder)->encode({"fine", std::string("bad \xff")}, out);
  CHECK(bad.code() == rapidqa::StatusCode::kInvalidArgument);
  CHECK(bad.message().find("text 1") != std::string::npos);
}

namespace {

// Encodes from four threads at once, one text or all of them per call: each
// vector must be the one the same call gives alone (calls at once each run
// on a thread of their own, with buffers of their own).
void check_encoding_from_threads(const rapidqa::TransformerEncoder& encoder) {
  const std::vector<std::string> texts = {"how do i reset my password", "如何重置密码", "where is my order",
                                          "我的订单在哪里 please reset it now and tell me when"};
  const std::size_t dim = encoder.dimension();
  std::vector<float> alone, together;
  for (const auto& t : texts) {
    std::vector<float> v;
    REQUIRE(encoder.encode({t}, v).is_ok());
    alone.insert(alone.end(), v.begin(), v.end());
  }
  REQUIRE(encoder.encode(texts, together).is_ok());
  std::atomic<int> failed{0}, differ{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 40; ++round) {
        const bool all = (round + t) % 3 == 0;
        const std::size_t first = all ? 0 : static_cast<std::size_t>(round + t) % texts.size();
        const std::vector<std::string> call =
            all ? texts : std::vector<std::string>{texts[first]};
        std::vector<float> v;
        if (!encoder.encode(call, v).is_ok()) {
          ++failed;
          continue;
        }
        for (std::size_t i = 0; i < v.size(); ++i) {
          const float expected = all ? together[i] : alone[first * dim + i];
          if (std::abs(v[i] - expected) > 1e-6f) {
            ++differ;
            break;
          }
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  CHECK(failed.load() == 0);
  CHECK(differ.load() == 0);
}

}  // namespace

TEST_CASE("TransformerEncoder calls from several threads at once give the vectors of a call alone", "[model]") {
  rapidqa::TransformerEncoderOptions options;
  options.model_dir = kModels + "/bert-tiny";
  check_encoding_from_threads(*rapidqa::TransformerEncoder::load(options).value());
  // INT8 keeps its quantized inputs in per-thread buffers: the same holds.
  const fs::path int8 = fs::temp_directory_path() / "rapidqa-model-test-int8-threads";
  fs::remove_all(int8);
  rapidqa::QuantizerOptions quantize;
  quantize.precision_table = "int8";
  quantize.latency_rows = {16};
  quantize.calibration_texts = {"where is my order", "how do i reset my password", "the quick brown fox"};
  REQUIRE(rapidqa::quantize_model(options.model_dir, int8.string(), quantize).is_ok());
  options.model_dir = int8.string();
  check_encoding_from_threads(*rapidqa::TransformerEncoder::load(options).value());
  fs::remove_all(int8);
}

TEST_CASE("sentence-transformers directories give the vectors their modules make", "[model][layout]") {
  for (const auto& m : reference().at("sentence_transformers")) {
    const std::string name = m.at("model");
    for (const auto& c : m.at("cases")) {
      INFO(name << ": " << c.at("name").get<std::string>());
      rapidqa::TransformerEncoderOptions options;
      options.model_dir = kModels + "/" + name;
      options.normalize = false;  // the modules' own Normalize, if any, still runs
      const json& o = c.at("options");
      if (o.contains("prompt_name")) options.prompt_name = o.at("prompt_name");
      if (o.contains("prompt")) options.prompt = o.at("prompt").get<std::string>();
      if (o.contains("pooling")) options.pooling = rapidqa::pooling_from_name(o.at("pooling")).value();
      if (o.contains("max_sequence_length")) options.max_sequence_length = o.at("max_sequence_length");
      auto encoder = rapidqa::TransformerEncoder::load(options);
      REQUIRE(encoder.is_ok());
      CHECK((*encoder)->prompt() == c.at("prompt").get<std::string>());
      const auto texts = c.at("texts").get<std::vector<std::string>>();
      auto ids = (*encoder)->token_ids(texts);
      REQUIRE(ids.is_ok());
      CHECK(ids.value() == c.at("token_ids").get<std::vector<std::vector<std::int32_t>>>());
      std::vector<float> vectors;
      REQUIRE((*encoder)->encode(texts, vectors).is_ok());
      const at::Tensor expected = tensor_from(c.at("vectors"), at::kFloat);
      REQUIRE((*encoder)->dimension() == static_cast<std::size_t>(expected.size(1)));
      const at::Tensor got = at::from_blob(vectors.data(), expected.sizes(), at::kFloat).clone();
      CHECK(max_abs_diff(got, expected) < 1e-4);
    }
  }
  // The directory decides only where the caller does not.
  rapidqa::TransformerEncoderOptions options;
  options.model_dir = kModels + "/st-dense-legacy-layout";
  auto from_model = rapidqa::TransformerEncoder::load(options);
  REQUIRE(from_model.is_ok());
  CHECK((*from_model)->pooling() == "cls+max");
  CHECK((*from_model)->dimension() == 24);
  CHECK((*from_model)->name().find("dense24") != std::string::npos);
  options.pooling = rapidqa::Pooling::kMean;
  auto explicit_mean = rapidqa::TransformerEncoder::load(options);
  REQUIRE_FALSE(explicit_mean.is_ok());  // its Dense module takes cls+max's 64 values
  CHECK(explicit_mean.status().message().find("the Dense module takes 64 values but pooling (mean) gives 32") !=
        std::string::npos);
  options = {};
  options.model_dir = kModels + "/st-mean-prompts";
  options.prompt_name = "instruction";
  auto unknown_prompt = rapidqa::TransformerEncoder::load(options);
  REQUIRE_FALSE(unknown_prompt.is_ok());
  CHECK(unknown_prompt.status().message().find("no prompt named 'instruction' (config_sentence_transformers.json "
                                               "has 'passage', 'query')") != std::string::npos);
  // A plain Hugging Face directory: mean pooling and no prompt, as before.
  options = {};
  options.model_dir = kModels + "/bert-tiny";
  auto plain = rapidqa::TransformerEncoder::load(options);
  REQUIRE(plain.is_ok());
  CHECK((*plain)->pooling() == "mean");
  CHECK((*plain)->prompt().empty());
}

// The tokenizer files a model directory of each family ships (built by
// Hugging Face's library or sentencepiece in the tokenizer fixture).
enum class TokenizerFiles {
  kByteLevelJson,       // RoBERTa: byte-level BPE tokenizer.json
  kVocabAndMerges,      // older RoBERTa checkpoints: vocab.json + merges.txt
  kSentencepieceModel,  // XLM-R: sentencepiece.bpe.model alone
  kUnigramJson,         // XLM-R: Unigram tokenizer.json with its Precompiled charsmap
  kWordPieceRobertaJson,  // MPNet: WordPiece with <s> </s> around it
  kWordPieceBertJson,     // ELECTRA: WordPiece with [CLS] [SEP]
};

// The tokenizer fixture's directory for `files`, whose expected.jsonl holds
// the library's ids (none for the files without a tokenizer.json).
std::string tokenizer_source(TokenizerFiles files) {
  switch (files) {
    case TokenizerFiles::kByteLevelJson:
    case TokenizerFiles::kVocabAndMerges: return kTokenizers + "/roberta";
    case TokenizerFiles::kSentencepieceModel:
    case TokenizerFiles::kUnigramJson: return kTokenizers + "/spm-unigram";
    case TokenizerFiles::kWordPieceRobertaJson: return kTokenizers + "/wordpiece-bert";
    case TokenizerFiles::kWordPieceBertJson: return kTokenizers + "/wordpiece";
  }
  return {};
}

// A model directory as users have it: `network`'s weights with its word
// embeddings resized to the tokenizer's vocabulary, and the tokenizer files.
std::string directory_with_tokenizer(const std::string& tag, const std::string& network, TokenizerFiles files) {
  const std::string source = tokenizer_source(files);
  std::size_t vocab_size = 0;
  if (files == TokenizerFiles::kSentencepieceModel) {
    auto spm = rapidqa::text::SentencePieceTokenizer::from_model_file(
        source + "/sentencepiece.bpe.model", rapidqa::text::SentencePieceTokenizer::Numbering::kFairseq);
    REQUIRE(spm.is_ok());
    vocab_size = spm->vocab_size();
  } else {
    auto tokenizer = rapidqa::text::PipelineTokenizer::from_tokenizer_json(source + "/tokenizer.json");
    REQUIRE(tokenizer.is_ok());
    vocab_size = tokenizer->vocab_size();
  }
  const auto vocab = static_cast<std::int64_t>(vocab_size);
  const fs::path dir = fs::temp_directory_path() / ("rapidqa-tokenizer-" + tag);
  fs::remove_all(dir);
  fs::create_directories(dir);
  switch (files) {
    case TokenizerFiles::kSentencepieceModel:
      fs::copy_file(source + "/sentencepiece.bpe.model", dir / "sentencepiece.bpe.model");
      break;
    case TokenizerFiles::kVocabAndMerges:
      fs::copy_file(source + "/vocab.json", dir / "vocab.json");
      fs::copy_file(source + "/merges.txt", dir / "merges.txt");
      break;
    default: fs::copy_file(source + "/tokenizer.json", dir / "tokenizer.json");
  }
  std::ifstream config_in(kModels + "/" + network + "/config.json");
  json config = json::parse(config_in);
  config["vocab_size"] = vocab;
  std::ofstream(dir / "config.json") << config.dump(2);
  auto weights = rapidqa::model::read_checkpoint_tensors(kModels + "/" + network);
  REQUIRE(weights.is_ok());
  std::map<std::string, at::Tensor> tensors;
  for (const auto& [name, t] : weights->tensors) tensors[name] = t.to(at::kFloat).contiguous();
  const std::string suffix = "embeddings.word_embeddings.weight";
  std::string word;
  for (const auto& [name, t] : tensors) {
    if (name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
      word = name;
    }
  }
  REQUIRE_FALSE(word.empty());
  at::manual_seed(7);
  tensors[word] = at::randn({vocab, tensors.at(word).size(1)}) * 0.5;
  REQUIRE(rapidqa::model::write_safetensors((dir / "model.safetensors").string(), tensors).is_ok());
  return dir.string();
}

// The first line of a tokenizer fixture's expected ids.
json first_expected(TokenizerFiles files) {
  std::ifstream expected(tokenizer_source(files) + "/expected.jsonl");
  std::string line;
  REQUIRE(std::getline(expected, line));
  return json::parse(line);
}

TEST_CASE("An XLM-RoBERTa directory with only its sentencepiece.bpe.model encodes", "[model][tokenizer]") {
  rapidqa::TransformerEncoderOptions options;
  options.model_dir = directory_with_tokenizer("sentencepiece", "roberta-tiny", TokenizerFiles::kSentencepieceModel);
  auto encoder = rapidqa::TransformerEncoder::load(options);
  INFO((encoder.is_ok() ? "" : encoder.status().message()));
  REQUIRE(encoder.is_ok());
  // fairseq's numbering: <s> the model's pieces one up </s>.
  auto spm = rapidqa::text::SentencePieceTokenizer::from_model_file(
      kTokenizers + "/spm-unigram/sentencepiece.bpe.model", rapidqa::text::SentencePieceTokenizer::Numbering::kModel);
  REQUIRE(spm.is_ok());
  const std::string question = "How do I reset my password?";
  auto pieces = spm->pieces(question);
  REQUIRE(pieces.is_ok());
  std::vector<std::int32_t> expected{0};
  for (const auto& p : *pieces) expected.push_back(p.id + 1);
  expected.push_back(2);
  auto ids = (*encoder)->token_ids({question});
  REQUIRE(ids.is_ok());
  CHECK(ids->front() == expected);
  std::vector<float> vectors;
  REQUIRE((*encoder)->encode({question, "reset password"}, vectors).is_ok());
  CHECK(vectors.size() == 2 * (*encoder)->dimension());
  CHECK(std::all_of(vectors.begin(), vectors.end(), [](float v) { return std::isfinite(v); }));
}

TEST_CASE("A RoBERTa directory with its byte-level BPE tokenizer.json encodes and answers", "[model][tokenizer]") {
  rapidqa::TransformerEncoderOptions options;
  options.model_dir = directory_with_tokenizer("encoder", "roberta-tiny", TokenizerFiles::kByteLevelJson);
  auto encoder = rapidqa::TransformerEncoder::load(options);
  REQUIRE(encoder.is_ok());
  // The ids are the library's, RoBERTa's specials around them.
  const json first = first_expected(TokenizerFiles::kByteLevelJson);
  auto ids = (*encoder)->token_ids({first.at("text").get<std::string>()});
  REQUIRE(ids.is_ok());
  CHECK(ids->front() == first.at("ids").get<std::vector<std::int32_t>>());
  rapidqa::TransformerEncoderOptions older;
  older.model_dir = directory_with_tokenizer("older-files", "roberta-tiny", TokenizerFiles::kVocabAndMerges);
  auto from_older = rapidqa::TransformerEncoder::load(older);
  REQUIRE(from_older.is_ok());
  auto older_ids = (*from_older)->token_ids({first.at("text").get<std::string>()});
  REQUIRE(older_ids.is_ok());
  CHECK(older_ids->front() == first.at("ids").get<std::vector<std::int32_t>>());
  CHECK(rapidqa::testing::password_entry_answered(*encoder));

  // An XLM-R question-answering head cuts its span with the BPE offsets.
  rapidqa::ExtractiveReaderOptions reader_options;
  reader_options.model_dir =
      directory_with_tokenizer("reader", "xlm-roberta-tiny-qa-sharded", TokenizerFiles::kByteLevelJson);
  auto reader = rapidqa::ExtractiveReader::load(reader_options);
  REQUIRE(reader.is_ok());
  const std::string passage = "Your order shipped yesterday and will arrive soon. Track it in the app.";
  auto spans = (*reader)->read("Where is my order?", {passage}, 3);
  REQUIRE(spans.is_ok());
  REQUIRE_FALSE(spans->empty());
  for (const auto& span : *spans) CHECK(passage.substr(span.begin, span.end - span.begin) == span.text);
}

TEST_CASE("XLM-R, MPNet and ELECTRA directories with their own tokenizer.json encode and answer", "[model][tokenizer]") {
  struct Family {
    std::string network;
    TokenizerFiles files;
  };
  const std::vector<Family> families{{"xlm-roberta-tiny", TokenizerFiles::kUnigramJson},
                                     {"mpnet-tiny-bin", TokenizerFiles::kWordPieceRobertaJson},
                                     {"electra-tiny-sharded", TokenizerFiles::kWordPieceBertJson}};
  for (const auto& family : families) {
    INFO(family.network);
    rapidqa::TransformerEncoderOptions options;
    options.model_dir = directory_with_tokenizer(family.network, family.network, family.files);
    auto encoder = rapidqa::TransformerEncoder::load(options);
    INFO((encoder.is_ok() ? "" : encoder.status().message()));
    REQUIRE(encoder.is_ok());
    const json first = first_expected(family.files);
    auto ids = (*encoder)->token_ids({first.at("text").get<std::string>()});
    REQUIRE(ids.is_ok());
    CHECK(ids->front() == first.at("ids").get<std::vector<std::int32_t>>());
    CHECK(rapidqa::testing::password_entry_answered(*encoder));
  }
}

TEST_CASE("Malformed sentence-transformers files are refused with the file named", "[model][layout]") {
  const fs::path source = kModels + "/st-mean-prompts";
  auto copy_with = [&](const std::string& tag, const std::string& file, const std::string& content) {
    const fs::path dir = fs::temp_directory_path() / ("rapidqa-st-" + tag);
    fs::remove_all(dir);
    fs::copy(source, dir, fs::copy_options::recursive);
    fs::create_directories((dir / file).parent_path());
    std::ofstream(dir / file, std::ios::trunc) << content;
    rapidqa::TransformerEncoderOptions options;
    options.model_dir = dir.string();
    return rapidqa::TransformerEncoder::load(options);
  };
  const std::string transformer = R"({"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"})";
  const std::string pooling = R"({"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"})";
  const struct {
    std::string tag, file, content, message;
  } cases[] = {
      {"unknown-module", "modules.json",
       "[" + transformer + R"(, {"path": "1_Pooling", "type": "sentence_transformers.models.LSTM"}])",
       "module 1 is 'sentence_transformers.models.LSTM', which rapidqa does not run"},
      {"no-pooling", "modules.json", "[" + transformer + "]", "no Pooling module"},
      {"escaping-path", "modules.json",
       "[" + transformer + R"(, {"path": "../elsewhere", "type": "sentence_transformers.models.Pooling"}])",
       "module path '../elsewhere' is not a folder inside the model directory"},
      {"missing-folder", "modules.json",
       "[" + transformer + ", " + pooling + R"(, {"path": "2_Dense", "type": "sentence_transformers.models.Dense"}])",
       "module folder '2_Dense' is missing"},
      {"no-mode", "1_Pooling/config.json", R"({"pooling_mode_mean_tokens": false})", "names no pooling mode"},
      {"mode-not-boolean", "1_Pooling/config.json", R"({"pooling_mode_mean_tokens": "yes"})",
       "field 'pooling_mode_mean_tokens': expected true or false"},
      {"bad-length", "sentence_bert_config.json", R"({"max_seq_length": -4})", "field 'max_seq_length'"},
      {"bad-prompts", "config_sentence_transformers.json", R"({"prompts": {"query": 7}})", "field 'prompts.query'"},
      {"bad-default-prompt", "config_sentence_transformers.json",
       R"({"prompts": {"query": "q: "}, "default_prompt_name": "passage"})", "field 'default_prompt_name'"},
  };
  for (const auto& c : cases) {
    INFO(c.tag);
    auto encoder = copy_with(c.tag, c.file, c.content);
    REQUIRE_FALSE(encoder.is_ok());
    CHECK(encoder.status().message().find(c.message) != std::string::npos);
  }
  // A Dense module whose weights do not match its config.json.
  const fs::path dense = fs::temp_directory_path() / "rapidqa-st-dense-shape";
  fs::remove_all(dense);
  fs::copy(kModels + "/st-dense-legacy-layout", dense, fs::copy_options::recursive);
  std::ofstream(dense / "2_Dense" / "config.json", std::ios::trunc)
      << R"({"in_features": 64, "out_features": 20, "bias": true, "activation_function": "torch.nn.modules.activation.Tanh"})";
  rapidqa::TransformerEncoderOptions options;
  options.model_dir = dense.string();
  auto mismatch = rapidqa::TransformerEncoder::load(options);
  REQUIRE_FALSE(mismatch.is_ok());
  CHECK(mismatch.status().message().find("tensor 'linear.weight' has shape [24, 64], config.json says [20, 64]") !=
        std::string::npos);
  std::ofstream(dense / "2_Dense" / "config.json", std::ios::trunc)
      << R"({"in_features": 64, "out_features": 24, "activation_function": "torch.nn.modules.activation.Softmax"})";
  auto activation = rapidqa::TransformerEncoder::load(options);
  REQUIRE_FALSE(activation.is_ok());
  CHECK(activation.status().message().find("activation_function 'torch.nn.modules.activation.Softmax' is not "
                                           "supported") != std::string::npos);
}

TEST_CASE("Sharded checkpoints are read shard by shard and their indexes checked", "[model][layout]") {
  const fs::path source = kModels + "/bert-tiny-sharded";
  auto with_index = [&](const std::string& tag, const std::string& index) {
    const fs::path dir = fs::temp_directory_path() / ("rapidqa-shards-" + tag);
    fs::remove_all(dir);
    fs::copy(source, dir, fs::copy_options::recursive);
    std::ofstream(dir / "model.safetensors.index.json", std::ios::trunc) << index;
    return rapidqa::model::load_transformer(dir.string());
  };
  std::ifstream in(source / "model.safetensors.index.json");
  const json good = json::parse(in);
  const std::string first_shard = good.at("weight_map").begin().value();
  auto moved = good;
  moved["weight_map"]["embeddings.word_embeddings.weight"] =
      first_shard == "model-00001-of-00002.safetensors" ? "model-00002-of-00002.safetensors"
                                                        : "model-00001-of-00002.safetensors";
  auto escaping = good;
  escaping["weight_map"]["embeddings.word_embeddings.weight"] = "../bert-tiny/model.safetensors";
  auto absent = good;
  absent["weight_map"]["embeddings.word_embeddings.weight"] = "model-00003-of-00002.safetensors";
  auto foreign = good;
  foreign["weight_map"]["embeddings.word_embeddings.weight"] = "pytorch_model.bin";
  const struct {
    std::string tag, index, message;
  } cases[] = {
      {"not-json", "{", "model.safetensors.index.json"},
      {"no-map", R"({"metadata": {}})", "expected an object with a non-empty 'weight_map'"},
      {"moved", moved.dump(), "is not in shard"},
      {"escaping", escaping.dump(), "shard '../bert-tiny/model.safetensors' is not a plain file name"},
      {"absent", absent.dump(), "shard 'model-00003-of-00002.safetensors' is missing"},
      {"foreign", foreign.dump(), "shard 'pytorch_model.bin' is missing"},
  };
  for (const auto& c : cases) {
    INFO(c.tag);
    auto model = with_index(c.tag, c.index);
    REQUIRE_FALSE(model.is_ok());
    CHECK(model.status().message().find(c.message) != std::string::npos);
  }
  // The same tensor in both shards.
  const fs::path twice = fs::temp_directory_path() / "rapidqa-shards-twice";
  fs::remove_all(twice);
  fs::copy(source, twice, fs::copy_options::recursive);
  auto shard = rapidqa::model::SafetensorsFile::open((twice / "model-00002-of-00002.safetensors").string());
  REQUIRE(shard.is_ok());
  std::map<std::string, at::Tensor> tensors;
  for (const auto& [n, info] : shard->tensors()) tensors[n] = shard->tensor(n).value().clone();
  auto other = rapidqa::model::SafetensorsFile::open((twice / "model-00001-of-00002.safetensors").string());
  const std::string stolen = other->tensors().begin()->first;
  tensors[stolen] = other->tensor(stolen).value().clone();
  REQUIRE(rapidqa::model::write_safetensors((twice / "model-00002-of-00002.safetensors").string(), tensors).is_ok());
  auto repeated = rapidqa::model::load_transformer(twice.string());
  REQUIRE_FALSE(repeated.is_ok());
  CHECK(repeated.status().message().find("is in two shards") != std::string::npos);
}

TEST_CASE("A pytorch_model.bin whose pickle calls os.system is refused and nothing runs", "[model][hostile]") {
  const json& malicious = reference().at("malicious");
  const std::string marker = malicious.at("marker");
  fs::remove(marker);
  for (const std::string name : malicious.at("models")) {  // the zip format and the legacy one
    INFO(name);
    auto model = rapidqa::model::load_transformer(kModels + "/" + name);
    REQUIRE_FALSE(model.is_ok());
    CHECK(model.status().code() == rapidqa::StatusCode::kInvalidArgument);
    CHECK(model.status().message().find("global 'posix.system' is not supported") != std::string::npos);
    CHECK_FALSE(fs::exists(marker));
    rapidqa::TransformerEncoderOptions options;
    options.model_dir = kModels + "/" + name;
    CHECK(rapidqa::TransformerEncoder::load(options).status().code() == rapidqa::StatusCode::kInvalidArgument);
    CHECK_FALSE(fs::exists(marker));
  }
}

TEST_CASE("A damaged legacy pytorch_model.bin gives a Status naming the problem and never a crash", "[model][hostile]") {
  const fs::path source = kModels + "/bert-tiny-legacy-bin";
  std::ifstream in(source / "pytorch_model.bin", std::ios::binary);
  const std::string good((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const fs::path dir = fs::temp_directory_path() / "rapidqa-legacy-damaged";
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::copy_file(source / "config.json", dir / "config.json");
  fs::copy_file(source / "vocab.txt", dir / "vocab.txt");
  auto load = [&](const std::string& bytes) {
    std::ofstream(dir / "pytorch_model.bin", std::ios::binary | std::ios::trunc) << bytes;
    return rapidqa::model::load_transformer(dir.string());
  };
  REQUIRE(load(good).is_ok());
  auto extra = load(good + "x");
  REQUIRE_FALSE(extra.is_ok());
  CHECK(extra.status().message().find("1 bytes follow the last storage") != std::string::npos);
  auto short_file = load(good.substr(0, good.size() - 1));
  REQUIRE_FALSE(short_file.is_ok());
  CHECK(short_file.status().message().find("runs past the end of the file") != std::string::npos);
  // Every prefix of the file, and single bytes flipped through its pickles:
  // a Status each time, whatever it says.
  for (std::size_t cut = 0; cut < good.size(); cut += 1 + cut / 7) CHECK_FALSE(load(good.substr(0, cut)).is_ok());
  std::size_t loaded = 0;
  for (std::size_t at = 0; at < 2000 && at < good.size(); at += 3) {
    std::string flipped = good;
    flipped[at] = static_cast<char>(flipped[at] ^ 0x5a);
    loaded += load(flipped).is_ok();  // a flip inside a weight or a name may still load
  }
  CHECK(loaded < 400);
}

TEST_CASE("BF16: the encoder's vectors stay within bfloat16's precision of FP32, or the CPU is named", "[model][bf16]") {
  rapidqa::TransformerEncoderOptions options;
  options.model_dir = kModels + "/bert-tiny";
  auto fp32 = rapidqa::TransformerEncoder::load(options);
  REQUIRE(fp32.is_ok());
  options.bf16 = true;
  auto bf16 = rapidqa::TransformerEncoder::load(options);
  if (!rapidqa::model::bf16_native()) {
    REQUIRE_FALSE(bf16.is_ok());
    CHECK(bf16.status().code() == rapidqa::StatusCode::kFailedPrecondition);
    CHECK(bf16.status().message().find("BF16") != std::string::npos);
    return;
  }
  REQUIRE(bf16.is_ok());
  const std::vector<std::string> texts = {"how do i reset my password", "如何重置密码", "where is my order", "my order"};
  std::vector<float> a, b;
  REQUIRE((*fp32)->encode(texts, a).is_ok());
  REQUIRE((*bf16)->encode(texts, b).is_ok());
  for (std::size_t i = 0; i < texts.size(); ++i) {
    double dot = 0;
    for (std::size_t d = 0; d < 32; ++d) dot += static_cast<double>(a[i * 32 + d]) * b[i * 32 + d];
    CHECK(dot > 0.999);  // both unit length
    CHECK(dot < 1.0 + 1e-6);
  }
  CHECK(a != b);  // it really ran in BF16
}

TEST_CASE("Bf16Linear rounds weights to nearest even and multiplies within bfloat16 error", "[model][bf16]") {
  const float values[] = {1.0f, 1.00390625f /* 1 + 2^-8: a tie, rounds to even (1.0) */, 1.01171875f /* tie, rounds up */,
                          -3.14159f, 0.0f};
  std::uint16_t rounded[5];
  rapidqa::model::round_to_bf16(values, 5, rounded);
  CHECK(rounded[0] == 0x3F80);
  CHECK(rounded[1] == 0x3F80);
  CHECK(rounded[2] == 0x3F82);
  CHECK(rounded[3] == 0xC049);
  CHECK(rounded[4] == 0x0000);
  if (!rapidqa::model::bf16_native()) return;
  at::manual_seed(5);
  const at::Tensor w = at::randn({200, 96}), bias = at::randn({200}), x = at::randn({37, 96});
  rapidqa::model::Bf16Linear linear(w, bias, rapidqa::model::Activation::kGelu);
  CHECK(linear.kind() == "bf16");
  CHECK(linear.weight_bytes() < static_cast<std::size_t>(w.numel()) * 4 * 6 / 10);
  const at::Tensor expected = at::gelu(at::addmm(bias, x, w.t()));
  const at::Tensor got = linear.forward(x);
  CHECK((got - expected).abs().max().item<double>() < 0.1);
  CHECK((got - expected).abs().mean().item<double>() < 0.02);
  CHECK(linear.dense_weight().sub(w).abs().max().item<double>() <= w.abs().max().item<double>() / 256);
}

TEST_CASE("Broken checkpoints are refused with the tensor named", "[model]") {
  using rapidqa::model::load_transformer;
  auto missing = load_transformer(broken_copy("missing", [](auto& t) { t.erase("encoder.layer.1.output.dense.weight"); }));
  REQUIRE_FALSE(missing.is_ok());
  CHECK(missing.status().message().find("'encoder.layer.1.output.dense.weight' is missing (expected shape [32, 64])") !=
        std::string::npos);

  auto shape = load_transformer(broken_copy("shape", [](auto& t) {
    t["encoder.layer.0.attention.self.key.weight"] = at::zeros({32, 16});
  }));
  REQUIRE_FALSE(shape.is_ok());
  CHECK(shape.status().message().find("'encoder.layer.0.attention.self.key.weight' has shape [32, 16], expected [32, 32]") !=
        std::string::npos);

  auto extra_layer = load_transformer(broken_copy("extra", [](auto& t) {
    t["encoder.layer.2.output.dense.weight"] = at::zeros({32, 64});
  }));
  REQUIRE_FALSE(extra_layer.is_ok());
  CHECK(extra_layer.status().message().find("more layers") != std::string::npos);

  auto not_bert = load_transformer(broken_copy("foreign", [](auto& t) {
    t["gpt.wte.weight"] = t.at("embeddings.word_embeddings.weight");
    t.erase("embeddings.word_embeddings.weight");
  }));
  REQUIRE_FALSE(not_bert.is_ok());
  CHECK(not_bert.status().message().find("embeddings.word_embeddings.weight") != std::string::npos);

  CHECK(load_transformer("/no/such/model").status().code() == rapidqa::StatusCode::kNotFound);
}

TEST_CASE("Corrupt safetensors files and unsupported dtypes are named", "[model]") {
  const fs::path dir = fs::temp_directory_path() / "rapidqa-safetensors";
  fs::create_directories(dir);
  // A truncated copy of a real checkpoint.
  const fs::path truncated = dir / "truncated.safetensors";
  {
    std::ifstream in(kModels + "/bert-tiny/model.safetensors", std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), {});
    std::ofstream(truncated, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size() / 2));
  }
  auto t = rapidqa::model::SafetensorsFile::open(truncated.string());
  REQUIRE_FALSE(t.is_ok());
  CHECK(t.status().code() == rapidqa::StatusCode::kDataLoss);
  CHECK(t.status().message().find("outside") != std::string::npos);

  // A U8 tensor: readable header, dtype the runtime does not take.
  const fs::path int8 = dir / "u8.safetensors";
  {
    const std::string header = R"({"w":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}})";
    std::string bytes(8, '\0');
    bytes[0] = static_cast<char>(header.size());
    bytes += header;
    bytes += std::string("\x01\x02", 2);
    std::ofstream(int8, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  auto f = rapidqa::model::SafetensorsFile::open(int8.string());
  REQUIRE(f.is_ok());
  const auto w = f->tensor("w");
  CHECK(w.status().code() == rapidqa::StatusCode::kInvalidArgument);
  CHECK(w.status().message().find("'w' has dtype U8") != std::string::npos);
  CHECK(f->tensor("nope").status().code() == rapidqa::StatusCode::kNotFound);

  const fs::path garbage = dir / "garbage.safetensors";
  std::ofstream(garbage, std::ios::binary) << "\x10\0\0\0\0\0\0\0not json at all!";
  CHECK(rapidqa::model::SafetensorsFile::open(garbage.string()).status().code() == rapidqa::StatusCode::kDataLoss);
}

TEST_CASE("Config mismatches and a missing vocabulary are refused", "[model]") {
  const fs::path dir = fs::temp_directory_path() / "rapidqa-bad-config";
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::copy_file(kModels + "/bert-tiny/model.safetensors", dir / "model.safetensors");
  std::ofstream(dir / "config.json") << R"({"model_type":"bert","vocab_size":200,"hidden_size":30,
      "num_hidden_layers":2,"num_attention_heads":4,"intermediate_size":64})";
  auto r = rapidqa::model::load_transformer(dir.string());
  CHECK(r.status().message().find("not a multiple of the 4 attention heads") != std::string::npos);
  std::ofstream(dir / "config.json") << R"({"model_type":"gpt2"})";
  CHECK(rapidqa::model::load_transformer(dir.string()).status().message().find("gpt2") != std::string::npos);
  fs::copy_file(kModels + "/bert-tiny/config.json", dir / "config.json", fs::copy_options::overwrite_existing);
  rapidqa::TransformerEncoderOptions options;
  options.model_dir = dir.string();
  const auto no_vocab = rapidqa::TransformerEncoder::load(options);
  CHECK(no_vocab.status().message().find("vocab.txt") != std::string::npos);
}

TEST_CASE("The extractive reader cuts the best span out of the passage, from several threads at once too", "[model][reader]") {
  rapidqa::ExtractiveReaderOptions options;
  options.model_dir = kModels + "/bert-tiny-qa";
  auto reader = rapidqa::ExtractiveReader::load(options);
  REQUIRE(reader.is_ok());
  const std::string question = "Where is my order?";
  const std::vector<std::string> passages = {"Your order shipped yesterday and will arrive soon.",
                                             "订单在仓库里。 Your password reset link is valid."};
  auto spans = (*reader)->read(question, passages, 5);
  REQUIRE(spans.is_ok());
  REQUIRE_FALSE(spans->empty());
  float previous = spans->front().score;
  for (const auto& s : *spans) {
    CHECK(s.text == passages[s.passage].substr(s.begin, s.end - s.begin));
    CHECK(s.score <= previous);
    previous = s.score;
  }
  // Reads from four threads at once give the spans of a read alone.
  std::atomic<int> differ{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int round = 0; round < 20; ++round) {
        auto again = (*reader)->read(question, passages, 5);
        if (!again.is_ok() || again->size() != spans->size()) {
          ++differ;
          continue;
        }
        for (std::size_t i = 0; i < spans->size(); ++i) {
          const auto& a = (*again)[i];
          const auto& b = (*spans)[i];
          if (a.passage != b.passage || a.begin != b.begin || a.end != b.end || std::abs(a.score - b.score) > 1e-5f) {
            ++differ;
            break;
          }
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  CHECK(differ.load() == 0);

  // The best span is the argmax of start + end logits over valid pairs,
  // computed here from the model's own logits for passage 0 alone.
  auto single = (*reader)->read(question, {passages[0]}, 1);
  REQUIRE(single.is_ok());
  REQUIRE(single->size() == 1);
  auto model = rapidqa::model::load_transformer(options.model_dir);
  auto tokenizer = rapidqa::text::WordPieceTokenizer::from_vocab_file(options.model_dir + "/vocab.txt");
  const auto pair = tokenizer->encode_pair(question, passages[0], 384).value();
  rapidqa::model::ModelInputs in;
  const auto n = static_cast<std::int64_t>(pair.input_ids.size());
  in.input_ids = at::tensor(std::vector<std::int64_t>(pair.input_ids.begin(), pair.input_ids.end())).view({1, n});
  in.token_type_ids =
      at::tensor(std::vector<std::int64_t>(pair.token_type_ids.begin(), pair.token_type_ids.end())).view({1, n});
  in.attention_mask = at::ones({1, n}, at::kLong);
  const at::Tensor logits = (*model)->qa_head->forward((*model)->forward(in));
  float best = -1e30f;
  std::size_t best_begin = 0, best_end = 0;
  for (std::int64_t s = 0; s < n; ++s) {
    for (std::int64_t e = s; e < n && e - s < 30; ++e) {
      if (pair.sequence_ids[s] != 1 || pair.sequence_ids[e] != 1) continue;
      const float score = logits[0][s][0].item<float>() + logits[0][e][1].item<float>();
      if (score > best) {
        best = score;
        best_begin = pair.offsets[s].first;
        best_end = pair.offsets[e].second;
      }
    }
  }
  CHECK(single->front().begin == best_begin);
  CHECK(single->front().end == best_end);
  CHECK(single->front().score == Approx(best).epsilon(1e-4));

  rapidqa::ExtractiveReaderOptions no_head;
  no_head.model_dir = kModels + "/bert-tiny";
  CHECK(rapidqa::ExtractiveReader::load(no_head).status().message().find("qa_outputs") != std::string::npos);
}

TEST_CASE("The engine answers with a transformer encoder and a reader", "[model][engine]") {
  rapidqa::TransformerEncoderOptions eo;
  eo.model_dir = kModels + "/bert-tiny";
  rapidqa::ExtractiveReaderOptions ro;
  ro.model_dir = kModels + "/bert-tiny-qa";
  rapidqa::EngineOptions options;
  options.encoder = rapidqa::TransformerEncoder::load(eo).value();
  options.reader = rapidqa::ExtractiveReader::load(ro).value();
  options.min_answer_score = -1.0f;  // random weights: accept any match
  auto engine = rapidqa::QAEngine::create(options);
  REQUIRE(engine.is_ok());
  rapidqa::KnowledgeEntry shipping{"ship", "where is my order", {}, "It ships in 2 days.",
                                   "Your order shipped yesterday and will arrive soon.", {}, 0};
  rapidqa::KnowledgeEntry password{"pw", "how do i reset my password", {}, "Use the reset link.", "", {}, 0};
  REQUIRE((*engine)->load_entries({shipping, password}).is_ok());
  // An exact phrasing retrieves its own entry even with random weights. The
  // caches are bypassed: a random model maps every text close together, so
  // the semantic tier would answer the second question from the first.
  rapidqa::AskOptions fresh;
  fresh.use_cache = false;
  auto a = (*engine)->ask("where is my order", fresh);
  REQUIRE(a.is_ok());
  CHECK(a->entry_id() == "ship");
  REQUIRE(a->extracted.has_value());
  CHECK(a->extracted->entry_id == "ship");
  CHECK(a->text == shipping.context.substr(a->extracted->begin, a->extracted->end - a->extracted->begin));
  CHECK(a->timings[rapidqa::Stage::kInfer].count() > 0);
  // An entry without context keeps its FAQ answer.
  auto b = (*engine)->ask("how do i reset my password", fresh);
  REQUIRE(b.is_ok());
  CHECK(b->entry_id() == "pw");
  CHECK(b->text == "Use the reset link.");
  CHECK_FALSE(b->extracted.has_value());
}

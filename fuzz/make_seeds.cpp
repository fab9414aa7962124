// Writes the seed corpora of the fuzz targets into fuzz/corpus/<target>/:
// a few small valid inputs, made with the library's own writers where it
// has them (snapshots, change messages, knowledge entries, TorchScript via
// torch::jit), and near-valid ones that each break one thing. The corpora
// are checked in; rerun after a format change:
//
//   build-asan/fuzz/rapidqa-fuzz-seeds fuzz/corpus
//
// Every valid seed is loaded back through the entry point it seeds, so a
// seed that silently stopped being valid fails here.
#include <torch/script.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cache/change_message.h"
#include "fuzz_support.h"
#include "index/vector_index.h"
#include "model/safetensors_file.h"
#include "model/transformer_config.h"
#include "model/transformer_model.h"
#include "rapidqa/clock.h"
#include "rapidqa/knowledge_file.h"
#include "rapidqa/semantic_cache.h"
#include "text/pipeline_tokenizer.h"
#include "text/sentencepiece_tokenizer.h"
#include "text/wordpiece_tokenizer.h"

namespace fs = std::filesystem;
using rapidqa::fuzz::check;
using rapidqa::fuzz::write_file;

namespace {

fs::path root;

void seed(const std::string& target, const std::string& name, const std::string& bytes) {
  const fs::path dir = root / target;
  fs::create_directories(dir);
  write_file((dir / name).string(), bytes);
}

std::string read(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

// ---- knowledge_jsonl ----
void knowledge_seeds() {
  rapidqa::KnowledgeEntry e;
  e.id = "shop-en-reset-password";
  e.question = "How do I reset my password?";
  e.alternates = {"I forgot my password", "reset password"};
  e.answer = "Click \"Forgot password?\" on the sign-in page.";
  e.tags = {"account", "password"};
  rapidqa::KnowledgeEntry zh;
  zh.id = "shop-zh-reset-password";
  zh.question = "我忘记密码了，怎么重置？";
  zh.answer = "请在登录页点击“忘记密码”。";
  zh.context = "如果忘记密码，请使用登录页上的“忘记密码”链接。";
  zh.cache_ttl = std::chrono::milliseconds(90000);
  const std::string a = rapidqa::knowledge_entry_to_json(e), b = rapidqa::knowledge_entry_to_json(zh);
  seed("knowledge_jsonl", "entry.json", a);
  seed("knowledge_jsonl", "two-lines.jsonl", "# comment\n" + a + "\n\n" + b + "\n");
  seed("knowledge_jsonl", "crlf.jsonl", a + "\r\n" + b + "\r\n");
  seed("knowledge_jsonl", "near-missing-answer.jsonl", "{\"id\": \"x\", \"question\": \"q?\"}\n" + a + "\n");
  seed("knowledge_jsonl", "near-wrong-types.jsonl",
       "{\"id\": 7, \"question\": [\"q\"], \"answer\": \"a\", \"alternates\": \"x\", \"cache_ttl_seconds\": -1}\n");
  seed("knowledge_jsonl", "near-duplicate-id.jsonl", a + "\n" + a + "\n");
  seed("knowledge_jsonl", "near-bad-utf8.jsonl", "{\"id\": \"x\", \"question\": \"\xff\xfe\", \"answer\": \"a\"}\n");
  seed("knowledge_jsonl", "near-deep.jsonl", std::string(64, '[') + std::string(64, ']') + "\n");
  std::istringstream in(read(root / "knowledge_jsonl" / "two-lines.jsonl"));
  auto parsed = rapidqa::parse_knowledge_jsonl(in, "seed");
  check(parsed.is_ok() && parsed->entries.size() == 2, "the knowledge seed does not parse");
}

// ---- safetensors ----
std::string safetensors(const std::vector<std::tuple<std::string, std::string, std::vector<std::int64_t>, std::string>>& tensors,
                        const std::string& metadata = "{\"format\":\"pt\"}") {
  std::string header = "{", data;
  for (const auto& [name, dtype, shape, bytes] : tensors) {
    std::string dims;
    for (auto d : shape) dims += (dims.empty() ? "" : ",") + std::to_string(d);
    if (header.size() > 1) header += ",";
    header += "\"" + name + "\":{\"dtype\":\"" + dtype + "\",\"shape\":[" + dims + "],\"data_offsets\":[" +
              std::to_string(data.size()) + "," + std::to_string(data.size() + bytes.size()) + "]}";
    data += bytes;
  }
  if (!metadata.empty()) header += std::string(header.size() > 1 ? "," : "") + "\"__metadata__\":" + metadata;
  header += "}";
  while (header.size() % 8 != 0) header += ' ';
  std::string file;
  for (int i = 0; i < 8; ++i) file.push_back(static_cast<char>((static_cast<std::uint64_t>(header.size()) >> (8 * i)) & 0xff));
  return file + header + data;
}

std::string raw_safetensors(std::string header, const std::string& data) {
  while (header.size() % 8 != 0) header += ' ';
  std::string file;
  for (int i = 0; i < 8; ++i) file.push_back(static_cast<char>((static_cast<std::uint64_t>(header.size()) >> (8 * i)) & 0xff));
  return file + header + data;
}

void safetensors_seeds() {
  const std::string tiny = rapidqa::fuzz::tiny_bert_safetensors();
  seed("safetensors", "tiny-bert.safetensors", tiny);
  const std::string f16 = std::string("\x00\x3c\x00\xc0\x00\x00\xff\x7b", 8);  // 1, -2, 0, 65504
  const std::string bf16 = std::string("\x80\x3f\x00\xc0\x80\x7f", 6);          // 1, -2, inf
  seed("safetensors", "f16.safetensors", safetensors({{"x", "F16", {2, 2}, f16}}));
  seed("safetensors", "bf16.safetensors", safetensors({{"x", "BF16", {3}, bf16}}));
  float scale[2] = {0.5f, 0.25f};
  seed("safetensors", "i8-with-scale.safetensors",
       safetensors({{"w.weight", "I8", {2, 2}, std::string("\x01\xff\x7f\x80", 4)},
                    {"w.weight_scale", "F32", {2}, std::string(reinterpret_cast<const char*>(scale), 8)}}));
  seed("safetensors", "empty-shape.safetensors", safetensors({{"x", "F32", {0, 4}, ""}, {"s", "F32", {}, std::string(4, '\0')}}));
  seed("safetensors", "metadata-only.safetensors", safetensors({}, "{\"a\":\"b\"}"));
  seed("safetensors", "near-truncated.safetensors", tiny.substr(0, tiny.size() / 2));
  seed("safetensors", "near-wrong-dtype.safetensors", safetensors({{"x", "F64", {1}, std::string(8, '\0')}}));
  seed("safetensors", "near-overlap.safetensors",
       raw_safetensors(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                       std::string(12, '\0')));
  seed("safetensors", "near-offsets-reversed.safetensors",
       raw_safetensors(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,0]}})", std::string(4, '\0')));
  std::string huge = safetensors({{"x", "F32", {2}, std::string(8, '\0')}});
  const auto at = huge.find("[2]");
  huge.replace(at, 3, "[4611686018427387904,4]");
  seed("safetensors", "near-huge-shape.safetensors", huge);
  const fs::path dir = root.parent_path() / "seed-check-safetensors";
  rapidqa::fuzz::write_tiny_model(dir.string(), true);
  check(rapidqa::model::load_transformer(dir.string()).is_ok(), "the tiny BERT safetensors does not load");
  fs::remove_all(dir);
}

// ---- model_config ----
void model_config_seeds() {
  seed("model_config", "tiny-bert.json", rapidqa::fuzz::tiny_config_json());
  seed("model_config", "distilbert.json",
       R"({"model_type": "distilbert", "vocab_size": 30, "dim": 8, "n_layers": 1, "n_heads": 2, "hidden_dim": 16,
 "max_position_embeddings": 16, "activation": "gelu", "pad_token_id": 0})");
  seed("model_config", "pruned.json",
       R"({"model_type": "bert", "vocab_size": 73, "hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2,
 "intermediate_size": 16, "pruned_heads": {"0": [1]}, "pruned_intermediate": {"0": [0, 3]}, "do_lower_case": false})");
  seed("model_config", "near-zero-heads.json",
       R"({"model_type": "bert", "vocab_size": 73, "hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 0, "intermediate_size": 16})");
  seed("model_config", "near-big-numbers.json",
       R"({"vocab_size": 9223372036854775807, "hidden_size": 1e300, "num_hidden_layers": -1, "num_attention_heads": 3, "intermediate_size": 16, "layer_norm_eps": "x", "hidden_act": "swish"})");
  seed("model_config", "near-roberta.json", R"({"model_type": "roberta", "vocab_size": 50265})");
  auto config = rapidqa::model::TransformerConfig::from_json_text(rapidqa::fuzz::tiny_config_json(), "seed");
  check(config.is_ok(), "the tiny config does not parse", config.is_ok() ? "" : config.status().message());
}

// ---- torchscript ----
at::Tensor tensor_of(const std::vector<std::int64_t>& shape, float fill_from) {
  auto t = torch::empty(shape, torch::kFloat32);
  auto* p = t.data_ptr<float>();
  for (std::int64_t i = 0; i < t.numel(); ++i) p[i] = fill_from + 0.001f * static_cast<float>(i % 97);
  return t;
}

// A module tree in which every tensor sits under its dotted Hugging Face
// name (parameters, or buffers), as torch.jit.save writes a scripted model.
torch::jit::Module module_with(const std::vector<std::pair<std::string, at::Tensor>>& tensors, bool as_buffers) {
  auto parent_of = [](const std::string& path) {
    const auto dot = path.rfind('.');
    return dot == std::string::npos ? std::string() : path.substr(0, dot);
  };
  auto leaf_of = [](const std::string& path) {
    const auto dot = path.rfind('.');
    return dot == std::string::npos ? path : path.substr(dot + 1);
  };
  std::set<std::string> paths = {""};
  for (const auto& [name, value] : tensors) {
    for (std::string p = parent_of(name); !p.empty(); p = parent_of(p)) paths.insert(p);
  }
  std::map<std::string, torch::jit::Module> modules;
  int counter = 0;
  for (const auto& path : paths) {
    modules.emplace(path, torch::jit::Module(c10::QualifiedName("__torch__.Seed" + std::to_string(counter++))));
  }
  for (const auto& [name, value] : tensors) modules.at(parent_of(name)).register_parameter(leaf_of(name), value, as_buffers);
  // Children are attached deepest first, so each is complete when registered.
  std::vector<std::string> order(paths.begin(), paths.end());
  std::sort(order.begin(), order.end(), [](const std::string& a, const std::string& b) {
    return std::count(a.begin(), a.end(), '.') > std::count(b.begin(), b.end(), '.');
  });
  for (const auto& path : order) {
    if (!path.empty()) modules.at(parent_of(path)).register_module(leaf_of(path), modules.at(path));
  }
  return modules.at("");
}

void torchscript_seeds() {
  std::vector<std::pair<std::string, at::Tensor>> tensors;
  for (const auto& [name, shape] : rapidqa::fuzz::tiny_bert_shapes()) {
    const bool norm = name.find("LayerNorm") != std::string::npos;
    at::Tensor t = tensor_of(shape, -0.05f);
    if (norm) t = name.size() > 7 && name.substr(name.size() - 7) == ".weight" ? torch::ones(shape) : torch::zeros(shape);
    tensors.emplace_back(name, t);
  }
  const fs::path dir = root / "torchscript";
  fs::create_directories(dir);
  module_with(tensors, false).save((dir / "tiny-bert.pt").string());
  module_with({{"embeddings.word_embeddings.weight", torch::arange(8, torch::kInt64).reshape({2, 4})},
               {"bias", torch::zeros({4}, torch::kFloat16)}},
              true)
      .save((dir / "int64-and-half-buffers.pt").string());
  torch::jit::Module empty(c10::QualifiedName("__torch__.Empty"));
  empty.save((dir / "near-no-parameters.pt").string());
  const std::string tiny = read(dir / "tiny-bert.pt");
  seed("torchscript", "near-truncated.pt", tiny.substr(0, tiny.size() * 2 / 3));

  const fs::path check_dir = root.parent_path() / "seed-check-torchscript";
  rapidqa::fuzz::write_tiny_model(check_dir.string(), false);
  fs::copy_file(dir / "tiny-bert.pt", check_dir / "model.pt", fs::copy_options::overwrite_existing);
  auto model = rapidqa::model::load_transformer(check_dir.string());
  check(model.is_ok(), "the tiny BERT TorchScript does not load", model.is_ok() ? "" : model.status().message());
  fs::remove_all(check_dir);
}

// ---- wordpiece ----
void wordpiece_seeds() {
  seed("wordpiece", "vocab.txt", rapidqa::fuzz::tiny_vocab_txt());
  std::string crlf;
  for (const auto& t : rapidqa::fuzz::tiny_vocab()) crlf += t + "\r\n";
  seed("wordpiece", "vocab-crlf.txt", crlf);
  seed("wordpiece", "text-mixed.txt", "How do I reset my PASSWORD?  Résumé 我忘记密码了，怎么重置？ [MASK] naïve");
  seed("wordpiece", "text-bad-utf8.txt", "reset \xe5\xaf my \xff password \xc3");
  std::string vocab_json;
  const auto vocab = rapidqa::fuzz::tiny_vocab();
  for (std::size_t i = 0; i < vocab.size(); ++i) {
    vocab_json += (i ? "," : "") + nlohmann::json(vocab[i]).dump() + ":" + std::to_string(i);
  }
  const std::string tokenizer_json =
      R"({"version": "1.0", "truncation": null, "padding": null,
 "added_tokens": [{"id": 0, "content": "[PAD]", "single_word": false, "special": true},
                  {"id": 4, "content": "[MASK]", "single_word": false, "special": true}],
 "normalizer": {"type": "BertNormalizer", "clean_text": true, "handle_chinese_chars": true, "strip_accents": null, "lowercase": true},
 "pre_tokenizer": {"type": "BertPreTokenizer"},
 "post_processor": {"type": "TemplateProcessing",
   "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": "[SEP]", "type_id": 0}}],
   "pair": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": "[SEP]", "type_id": 0}},
            {"Sequence": {"id": "B", "type_id": 1}}, {"SpecialToken": {"id": "[SEP]", "type_id": 1}}]},
 "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##", "max_input_chars_per_word": 100,
   "vocab": {)" + vocab_json + "}}}";
  seed("wordpiece", "tokenizer.json", tokenizer_json);
  seed("wordpiece", "tokenizer-bert-processing.json",
       R"({"normalizer": {"type": "BertNormalizer", "lowercase": false}, "post_processor": {"type": "BertProcessing", "cls": ["[CLS]", 2], "sep": ["[SEP]", 3]},
 "model": {"type": "WordPiece", "unk_token": "[UNK]", "vocab": {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, "a": 4, "##b": 5}}})");
  seed("wordpiece", "near-duplicate-id.json",
       R"({"normalizer": {"type": "BertNormalizer"}, "model": {"type": "WordPiece", "vocab": {"[PAD]": 0, "[UNK]": 0}}})");
  seed("wordpiece", "near-missing-specials.txt", "[PAD]\nhello\n##lo\n");
  auto t = rapidqa::text::WordPieceTokenizer::from_tokenizer_json((root / "wordpiece" / "tokenizer.json").string());
  check(t.is_ok(), "the tokenizer.json seed does not load", t.is_ok() ? "" : t.status().message());
}

// ---- tokenizer_files ----
// A protobuf field of a sentencepiece ModelProto, written by hand: the
// library has no sentencepiece writer, and the seeds need only a few fields.
std::string varint(std::uint64_t v) {
  std::string out;
  do {
    out += static_cast<char>((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
    v >>= 7;
  } while (v != 0);
  return out;
}
std::string field_varint(int field, std::uint64_t v) { return varint(static_cast<std::uint64_t>(field) << 3) + varint(v); }
std::string field_bytes(int field, const std::string& b) {
  return varint((static_cast<std::uint64_t>(field) << 3) | 2) + varint(b.size()) + b;
}
std::string field_float(int field, float x) {
  std::string out = varint((static_cast<std::uint64_t>(field) << 3) | 5);
  char raw[4];
  std::memcpy(raw, &x, 4);  // little-endian, as protobuf's fixed32
  return out + std::string(raw, 4);
}

// model_type 1 Unigram, 2 BPE. Piece types: 1 normal, 2 unknown, 3 control,
// 4 user-defined, 6 byte.
std::string sentencepiece_model(int model_type, bool byte_fallback) {
  std::string model;
  auto piece = [&](const std::string& text, float score, int type) {
    model += field_bytes(1, field_bytes(1, text) + field_float(2, score) + field_varint(3, static_cast<std::uint64_t>(type)));
  };
  piece("<unk>", 0, 2);
  piece("<s>", 0, 3);
  piece("</s>", 0, 3);
  piece("<mask>", 0, 4);
  const std::vector<std::string> words{"▁", "▁how", "▁do", "▁I", "▁re", "set", "▁my", "pass", "word", "?", "密", "码"};
  float score = -2;
  for (const auto& w : words) piece(w, score -= 0.25f, 1);
  for (char c = 'a'; c <= 'z'; ++c) piece(std::string(1, c), score -= 0.1f, 1);
  if (byte_fallback) {
    for (int b = 0; b < 256; ++b) piece(fmt::format("<0x{:02X}>", b), 0, 6);
  }
  model += field_bytes(2, field_varint(3, static_cast<std::uint64_t>(model_type)) + field_varint(35, byte_fallback ? 1 : 0));
  model += field_bytes(3, field_bytes(1, "identity") + field_varint(3, 1) + field_varint(4, 1) + field_varint(5, 1));
  return model;
}

void tokenizer_files_seeds() {
  const std::string unigram = sentencepiece_model(1, false);
  seed("tokenizer_files", "unigram.model", unigram);
  seed("tokenizer_files", "bpe-byte-fallback.model", sentencepiece_model(2, true));
  seed("tokenizer_files", "near-truncated.model", unigram.substr(0, unigram.size() - 3));
  seed("tokenizer_files", "unigram-metaspace.json",
       R"({"added_tokens": [{"id": 3, "content": "<mask>", "single_word": false, "lstrip": true, "rstrip": false, "normalized": false, "special": true}],
 "normalizer": {"type": "Sequence", "normalizers": [{"type": "NFKC"}, {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "}, {"type": "Strip", "strip_left": true, "strip_right": true}]},
 "pre_tokenizer": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": true},
 "post_processor": {"type": "TemplateProcessing",
   "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": "</s>", "type_id": 0}}],
   "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": "</s>", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 0}}, {"SpecialToken": {"id": "</s>", "type_id": 0}}],
   "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}, "</s>": {"id": "</s>", "ids": [2], "tokens": ["</s>"]}}},
 "model": {"type": "Unigram", "unk_id": 0, "byte_fallback": false,
   "vocab": [["<unk>", 0.0], ["<s>", 0.0], ["</s>", 0.0], ["<mask>", 0.0], ["▁", -2.0], ["▁how", -3.0], ["▁re", -3.5], ["set", -3.6], ["pass", -4.0], ["word", -4.0], ["a", -5.0], ["e", -5.0], ["o", -5.0], ["s", -5.0], ["密", -6.0]]}})");
  seed("tokenizer_files", "bpe-byte-level.json",
       R"({"added_tokens": [{"id": 0, "content": "<s>", "special": true}, {"id": 1, "content": "<pad>", "special": true}, {"id": 2, "content": "</s>", "special": true}],
 "normalizer": null,
 "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
 "post_processor": {"type": "RobertaProcessing", "sep": ["</s>", 2], "cls": ["<s>", 0], "trim_offsets": true, "add_prefix_space": false},
 "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null, "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false,
   "vocab": {"<s>": 0, "<pad>": 1, "</s>": 2, "h": 3, "o": 4, "w": 5, "Ġ": 6, "r": 7, "e": 8, "s": 9, "t": 10, "ho": 11, "how": 12, "Ġr": 13, "re": 14, "es": 15},
   "merges": ["h o", "ho w", "Ġ r", "r e", "e s"]}})");
  seed("tokenizer_files", "bpe-byte-fallback.json",
       R"({"normalizer": {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "▁"}, {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]},
 "pre_tokenizer": null,
 "post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}], "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
   "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
 "model": {"type": "BPE", "unk_token": "<unk>", "fuse_unk": true, "byte_fallback": true,
   "vocab": {"<unk>": 0, "<s>": 1, "<0x41>": 2, "<0xC3>": 3, "<0xA9>": 4, "▁": 5, "a": 6, "b": 7, "▁a": 8, "ab": 9},
   "merges": [["▁", "a"], ["a", "b"]]}})");
  seed("tokenizer_files", "wordlevel-pretokenizers.json",
       R"({"normalizer": {"type": "Sequence", "normalizers": [{"type": "NFD"}, {"type": "StripAccents"}, {"type": "Lowercase"}]},
 "pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "WhitespaceSplit"}, {"type": "Punctuation", "behavior": "Isolated"}, {"type": "Digits", "individual_digits": true}, {"type": "Split", "pattern": {"Regex": "[a-z]+"}, "behavior": "Isolated", "invert": false}]},
 "post_processor": {"type": "BertProcessing", "sep": ["[SEP]", 1], "cls": ["[CLS]", 2]},
 "model": {"type": "WordLevel", "unk_token": "[UNK]", "vocab": {"[UNK]": 0, "[SEP]": 1, "[CLS]": 2, "how": 3, "do": 4, "i": 5, "?": 6, "1": 7}}})");
  seed("tokenizer_files", "near-merge-unknown.json",
       R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": ["a c"]}})");
  const fs::path dir = root / "tokenizer_files";
  for (const char* name : {"unigram-metaspace.json", "bpe-byte-level.json", "bpe-byte-fallback.json",
                           "wordlevel-pretokenizers.json"}) {
    auto t = rapidqa::text::PipelineTokenizer::from_tokenizer_json((dir / name).string());
    check(t.is_ok(), "a tokenizer.json seed does not load", t.is_ok() ? name : t.status().message());
    check(t->encode("How do I reset my password? Émile 12", 64).is_ok(), "a tokenizer.json seed does not encode", name);
  }
  for (const char* name : {"unigram.model", "bpe-byte-fallback.model"}) {
    auto t = rapidqa::text::SentencePieceTokenizer::from_model_file(
        (dir / name).string(), rapidqa::text::SentencePieceTokenizer::Numbering::kModel);
    check(t.is_ok(), "a sentencepiece seed does not load", t.is_ok() ? name : t.status().message());
    check(t->encode("How do I reset my password? 密码", 64).is_ok(), "a sentencepiece seed does not encode", name);
  }
}

// ---- cache_snapshot ----
void cache_snapshot_seeds() {
  rapidqa::SemanticCacheOptions options;
  options.dimension = 4;
  options.clock = std::make_shared<rapidqa::ManualClock>();
  auto cache = std::move(rapidqa::SemanticCache::create(options)).value();
  const float a[4] = {1, 0, 0, 0}, b[4] = {0, 0.6f, 0.8f, 0};
  rapidqa::Answer answer;
  answer.text = "Click \"Forgot password?\".";
  answer.score = 0.93f;
  answer.tier = rapidqa::AnswerTier::kKnowledge;
  answer.matches = {{"shop-en-reset-password", 0.93f, 3}, {"shop-en-change-password", 0.41f, 1}};
  cache->insert(a, "how do i reset my password", answer);
  answer.extracted = rapidqa::ExtractedSpan{"shop-en-reset-password", 3, 12, 7.5f, 0.8f};
  answer.text = "忘记密码";
  cache->insert(b, "我忘记密码了", answer, "tenant-a", std::chrono::milliseconds(60000));
  const fs::path dir = root / "cache_snapshot";
  fs::create_directories(dir);
  check(cache->save_snapshot((dir / "two-entries.snap").string()).is_ok(), "cannot save the seed snapshot");
  const std::string framed = read(dir / "two-entries.snap");
  seed("cache_snapshot", "two-entries-payload.cbor", framed.substr(28));  // what the target frames itself
  cache->clear();
  check(cache->save_snapshot((dir / "empty.snap").string()).is_ok(), "cannot save the empty snapshot");
  std::string other_version = framed;
  other_version[8] = 2;
  seed("cache_snapshot", "near-version-2.snap", other_version);
  std::string bad_sum = framed;
  bad_sum[20] ^= 1;
  seed("cache_snapshot", "near-bad-checksum.snap", bad_sum);
  seed("cache_snapshot", "near-truncated.snap", framed.substr(0, framed.size() - 5));
  auto loaded = cache->load_snapshot((dir / "two-entries.snap").string());
  check(loaded.is_ok() && loaded.value() == 2, "the seed snapshot does not load back");
  // A keyed (version 2, HMAC) snapshot: a cache without a key reads it.
  options.snapshot_key = "seed key";
  auto keyed = std::move(rapidqa::SemanticCache::create(options)).value();
  check(keyed->load_snapshot((dir / "two-entries.snap").string()).is_ok() == false,
        "a keyed cache loaded an unkeyed snapshot");
  keyed->insert(a, "how do i reset my password", answer);
  check(keyed->save_snapshot((dir / "keyed.snap").string()).is_ok(), "cannot save the keyed snapshot");
  auto unkeyed = cache->load_snapshot((dir / "keyed.snap").string());
  check(unkeyed.is_ok() && unkeyed.value() == 1, "a cache without a key does not read a keyed snapshot",
        unkeyed.is_ok() ? "" : unkeyed.status().message());
}

// ---- index_snapshot (options as fuzz_index_snapshot.cpp) ----
void index_snapshot_seeds() {
  using rapidqa::index::VectorIndex;
  rapidqa::index::VectorIndexOptions options;
  options.dimension = 4;
  options.exact_limit = 8;
  options.hnsw_neighbors = 4;
  options.hnsw_build_breadth = 16;
  options.hnsw_search_breadth = 16;
  // 20 unit vectors spread over the sphere, the same on every machine.
  std::vector<float> vectors;
  for (int i = 0; i < 20; ++i) {
    const float v[4] = {std::cos(0.7f * i), std::sin(0.7f * i), std::cos(1.3f * i + 0.5f), std::sin(1.3f * i + 0.5f)};
    for (const float x : v) vectors.push_back(x / std::sqrt(2.0f));
  }
  const fs::path dir = root / "index_snapshot";
  fs::create_directories(dir);
  const auto save = [&dir](const VectorIndex& index, const char* name) {
    const auto s = index.save((dir / name).string());
    check(s.is_ok(), "cannot save an index seed", s.message());
  };
  save(VectorIndex(options), "empty.snap");
  VectorIndex exact(options);
  for (std::int64_t label = 0; label < 5; ++label) exact.upsert(label, vectors.data() + label * 4);
  exact.remove(2);
  save(exact, "exact-with-removed.snap");
  VectorIndex graph(options);  // 20 vectors over a limit of 8: HNSW
  std::vector<std::int64_t> labels;
  for (std::int64_t label = 0; label < 20; ++label) labels.push_back(100 + label);
  graph.add_batch(labels, vectors.data());
  graph.remove(103);
  graph.remove(111);
  check(graph.is_approximate(), "the graph seed is not an HNSW index");
  save(graph, "graph-with-removed.snap");
  const std::string framed = read(dir / "graph-with-removed.snap");
  seed("index_snapshot", "graph-body.bin", framed.substr(32));  // what the target frames itself
  std::string other_version = framed;
  other_version[8] = 3;
  seed("index_snapshot", "near-version-3.snap", other_version);
  std::string bad_sum = framed;
  bad_sum[24] ^= 1;
  seed("index_snapshot", "near-bad-checksum.snap", bad_sum);
  seed("index_snapshot", "near-truncated.snap", framed.substr(0, framed.size() - 5));
  for (const char* name : {"empty.snap", "exact-with-removed.snap", "graph-with-removed.snap"}) {
    auto loaded = VectorIndex::load((dir / name).string(), options);
    check(loaded.is_ok(), "an index seed does not load back", loaded.is_ok() ? "" : loaded.status().message());
  }
}

// ---- change_message ----
void change_message_seeds() {
  using rapidqa::cache::KnowledgeChange;
  KnowledgeChange change;
  change.origin = "4f1c2a9e";
  change.kind = KnowledgeChange::Kind::kUpsert;
  change.entry_id = "faq-1";
  change.version = 3;
  rapidqa::KnowledgeEntry e;
  e.id = "faq-1";
  e.question = "How do I reset my password?";
  e.answer = "Use the link.";
  e.alternates = {"reset password"};
  e.version = 3;
  change.entry = e;
  seed("change_message", "upsert.json", rapidqa::cache::encode_change_message(change));
  change.entry.reset();
  change.kind = KnowledgeChange::Kind::kRemove;
  change.version = 0;
  seed("change_message", "remove.json", rapidqa::cache::encode_change_message(change));
  change.kind = KnowledgeChange::Kind::kInvalidate;
  change.version = 4;
  seed("change_message", "invalidate.json", rapidqa::cache::encode_change_message(change));
  change.kind = KnowledgeChange::Kind::kReload;
  change.entry_id.clear();
  change.version = 0;
  seed("change_message", "reload.json", rapidqa::cache::encode_change_message(change));
  seed("change_message", "gap.json", rapidqa::cache::encode_gap_message("4f1c2a9e"));
  seed("change_message", "channel-with-stream-id.json",
       R"({"stream_id":"1700000000000-0","v":1,"origin":"b7","kind":"invalidate","entry_id":"faq-2","version":2})");
  seed("change_message", "near-version-2.json", R"({"v":2,"origin":"b7","kind":"invalidate","entry_id":"x","version":1})");
  seed("change_message", "near-upsert-without-entry.json", R"({"v":1,"origin":"b7","kind":"upsert","entry_id":"x","version":1})");
  seed("change_message", "near-negative-version.json", R"({"v":1,"origin":"b7","kind":"remove","entry_id":"x","version":-1})");
  auto parsed = rapidqa::cache::parse_change_message(read(root / "change_message" / "upsert.json"));
  check(parsed.is_ok() && parsed->change.entry.has_value(), "the upsert seed does not parse");
}

// ---- capi_ask (layout in fuzz_capi_ask.cpp) ----
std::string ask(std::uint8_t flags, float threshold, double timeout_ms, const std::string& tenant, const std::string& question) {
  std::string out(13, '\0');
  out[0] = static_cast<char>(flags);
  std::memcpy(&out[1], &threshold, sizeof threshold);
  std::memcpy(&out[5], &timeout_ms, sizeof timeout_ms);
  return out + tenant + "\n" + question;
}

void capi_ask_seeds() {
  seed("capi_ask", "plain.txt", "How do I reset my password?");
  seed("capi_ask", "cached-normal.bin", ask(1 | 2, 0, 0, "", "I forgot my password, how can I reset it?"));
  seed("capi_ask", "tenant-threshold.bin", ask(1 | 8, 0.8f, 0, "acme", "我忘记密码了，怎么重置？"));
  seed("capi_ask", "no-cache-timeout.bin", ask(16 | 4, 0, 0.5, "", "Where is my order?"));
  seed("capi_ask", "null-options.bin", ask(32, 0, 0, "t", "how do i return an item"));
  seed("capi_ask", "near-bad-priority.bin", ask(1 | 6, 0, 0, "", "reset password"));
  seed("capi_ask", "near-nan-threshold.bin", ask(1 | 8, std::nanf(""), -1.0, "acme", "reset password"));
  seed("capi_ask", "near-bad-utf8.bin", ask(1, 0, 0, "\xff", "reset \xc3 password"));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && (std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0)) {
    std::printf("usage: %s CORPUS_DIR   (normally fuzz/corpus)\n  writes the fuzz targets' seed inputs under "
                "CORPUS_DIR, one folder per target\n", argv[0]);
    return 0;
  }
  // A leading "-" is a mistyped option, not a folder to fill with seeds.
  if (argc == 2 && argv[1][0] == '-') {
    std::fprintf(stderr, "rapidqa-fuzz-seeds: unknown option '%s'\nusage: %s CORPUS_DIR\n", argv[1], argv[0]);
    return 2;
  }
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR   (normally fuzz/corpus)\n", argv[0]);
    return 2;
  }
  root = fs::absolute(argv[1]);
  knowledge_seeds();
  safetensors_seeds();
  model_config_seeds();
  torchscript_seeds();
  wordpiece_seeds();
  tokenizer_files_seeds();
  cache_snapshot_seeds();
  index_snapshot_seeds();
  change_message_seeds();
  capi_ask_seeds();
  std::printf("seeds written under %s\n", root.string().c_str());
  return 0;
}

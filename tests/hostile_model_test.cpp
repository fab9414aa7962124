// Hostile model directories: every file of a model (config.json,
// model.safetensors, a TorchScript .pt, vocab.txt, tokenizer.json) may come
// from someone else. Each test writes a tiny checkpoint itself (no LibTorch
// in this file, no Python fixture) and breaks one thing in it; the load must
// fail with a Status that names the file and the field or tensor, quoting
// at most a short piece of the file, and must never crash, hang or read
// past the data.
#include <catch2/catch.hpp>

#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include <sys/resource.h>

#include <nlohmann/json.hpp>

#include "model/torchscript_pickle.h"
#include "model/transformer_config.h"
#include "rapidqa/compute_runtime.h"
#include "rapidqa/transformer_encoder.h"
#include "text/wordpiece_tokenizer.h"

namespace fs = std::filesystem;
using nlohmann::json;
using rapidqa::StatusCode;
using namespace std::string_literals;

namespace {

// ---------------------------------------------------------------------------
// A tiny BERT written by hand: hidden 8, 2 heads, 1 layer, FFN 16.

const std::vector<std::string> kVocab = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
                                         "hello", "world", "reset", "password", "order"};

json tiny_config() {
  return {{"model_type", "bert"},          {"vocab_size", kVocab.size()}, {"hidden_size", 8},
          {"num_hidden_layers", 1},        {"num_attention_heads", 2},    {"intermediate_size", 16},
          {"max_position_embeddings", 16}, {"type_vocab_size", 2},        {"layer_norm_eps", 1e-12}};
}

struct RawTensor {
  std::string dtype = "F32";
  std::vector<std::int64_t> shape;
  std::string bytes;  // little-endian, as safetensors stores them
};
using RawTensors = std::map<std::string, RawTensor>;

std::int64_t element_count(const std::vector<std::int64_t>& shape) {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

RawTensor f32(std::vector<std::int64_t> shape, const std::function<float(std::int64_t)>& value) {
  RawTensor t;
  t.shape = std::move(shape);
  const std::int64_t n = element_count(t.shape);
  t.bytes.resize(static_cast<std::size_t>(n) * 4);
  for (std::int64_t i = 0; i < n; ++i) {
    const float v = value(i);
    std::memcpy(&t.bytes[static_cast<std::size_t>(i) * 4], &v, 4);
  }
  return t;
}

RawTensor i8(std::vector<std::int64_t> shape, const std::function<std::int8_t(std::int64_t)>& value) {
  RawTensor t;
  t.dtype = "I8";
  t.shape = std::move(shape);
  const std::int64_t n = element_count(t.shape);
  for (std::int64_t i = 0; i < n; ++i) t.bytes.push_back(static_cast<char>(value(i)));
  return t;
}

void set_f32(RawTensor& t, std::int64_t index, float v) { std::memcpy(&t.bytes[static_cast<std::size_t>(index) * 4], &v, 4); }

// Deterministic small weights, different per tensor.
std::function<float(std::int64_t)> noise(std::uint32_t seed, float scale = 0.2f) {
  return [seed, scale](std::int64_t i) {
    std::uint32_t x = seed * 2654435761u + static_cast<std::uint32_t>(i) * 40503u + 12345u;
    x ^= x >> 13;
    x *= 0x5bd1e995u;
    x ^= x >> 15;
    return scale * (static_cast<float>(x % 2001u) / 1000.0f - 1.0f);
  };
}

RawTensors tiny_bert() {
  RawTensors t;
  std::uint32_t seed = 1;
  auto matrix = [&](const std::string& name, std::int64_t rows, std::int64_t cols) {
    t[name + ".weight"] = f32({rows, cols}, noise(seed++));
    t[name + ".bias"] = f32({rows}, noise(seed++, 0.05f));
  };
  auto norm = [&](const std::string& name) {
    t[name + ".weight"] = f32({8}, [](std::int64_t) { return 1.0f; });
    t[name + ".bias"] = f32({8}, noise(seed++, 0.05f));
  };
  const auto vocab = static_cast<std::int64_t>(kVocab.size());
  t["embeddings.word_embeddings.weight"] = f32({vocab, 8}, noise(seed++, 1.0f));
  t["embeddings.position_embeddings.weight"] = f32({16, 8}, noise(seed++, 0.5f));
  t["embeddings.token_type_embeddings.weight"] = f32({2, 8}, noise(seed++, 0.5f));
  norm("embeddings.LayerNorm");
  const std::string p = "encoder.layer.0.";
  matrix(p + "attention.self.query", 8, 8);
  matrix(p + "attention.self.key", 8, 8);
  matrix(p + "attention.self.value", 8, 8);
  matrix(p + "attention.output.dense", 8, 8);
  norm(p + "attention.output.LayerNorm");
  matrix(p + "intermediate.dense", 16, 8);
  matrix(p + "output.dense", 8, 16);
  norm(p + "output.LayerNorm");
  return t;
}

// The intermediate layer and the word embeddings as INT8, as the Quantizer
// writes them (docs/quantized-format.md).
RawTensors tiny_int8_bert() {
  RawTensors t = tiny_bert();
  const std::string layer = "encoder.layer.0.intermediate.dense";
  t[layer + ".weight"] = i8({16, 8}, [](std::int64_t i) { return static_cast<std::int8_t>(i % 255 - 127); });
  t[layer + ".weight_scale"] = f32({16}, [](std::int64_t i) { return 0.001f * static_cast<float>(i + 1); });
  t[layer + ".input_range"] = f32({2}, [](std::int64_t i) { return i == 0 ? -3.0f : 3.0f; });
  const auto vocab = static_cast<std::int64_t>(kVocab.size());
  t["embeddings.word_embeddings.weight"] = i8({vocab, 8}, [](std::int64_t i) { return static_cast<std::int8_t>(i % 200 - 100); });
  t["embeddings.word_embeddings.weight_scale"] = f32({vocab}, [](std::int64_t) { return 0.01f; });
  return t;
}

void write_file(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(out);
}

std::string le64(std::uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[static_cast<std::size_t>(i)] = static_cast<char>((v >> (8 * i)) & 0xff);
  return s;
}

// A safetensors file from a header text and a data section, as given.
std::string safetensors_bytes(std::string header, const std::string& data) {
  while ((header.size() + 8) % 8 != 0) header.push_back(' ');
  return le64(header.size()) + header + data;
}

std::string safetensors_bytes(const RawTensors& tensors) {
  json header = json::object();
  std::string data;
  for (const auto& [name, t] : tensors) {
    header[name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {data.size(), data.size() + t.bytes.size()}}};
    data += t.bytes;
  }
  return safetensors_bytes(header.dump(), data);
}

// A fresh model directory: config.json, vocab.txt and the given weight file.
fs::path model_dir(const std::string& name, const json& config = tiny_config()) {
  const fs::path dir = fs::temp_directory_path() / ("rapidqa-hostile-model-" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  write_file(dir / "config.json", config.dump());
  std::string vocab;
  for (const auto& token : kVocab) vocab += token + "\n";
  write_file(dir / "vocab.txt", vocab);
  return dir;
}

fs::path safetensors_dir(const std::string& name, const RawTensors& tensors, const json& config = tiny_config()) {
  const fs::path dir = model_dir(name, config);
  write_file(dir / "model.safetensors", safetensors_bytes(tensors));
  return dir;
}

rapidqa::Result<std::shared_ptr<rapidqa::TransformerEncoder>> load(const fs::path& dir) {
  rapidqa::TransformerEncoderOptions options;
  options.model_dir = dir.string();
  options.lower_case = 1;
  return rapidqa::TransformerEncoder::load(options);
}

// The load failed with `code` and a message holding every one of `parts`,
// and it quoted no long run of the file.
void check_refused(const rapidqa::Status& status, StatusCode code, const std::vector<std::string>& parts) {
  INFO(status.to_string());
  CHECK_FALSE(status.is_ok());
  CHECK(status.code() == code);
  for (const auto& part : parts) CHECK(status.message().find(part) != std::string::npos);
  CHECK(status.message().size() < 600);
}

// ---------------------------------------------------------------------------
// TorchScript archives written by hand: a stored (uncompressed) zip whose
// data.pkl is a pickle of the module tree, as torch.jit.save lays it out.

std::uint32_t crc32(const std::string& data) {
  std::uint32_t crc = 0xffffffffu;
  for (unsigned char c : data) {
    crc ^= c;
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xedb88320u & (0u - (crc & 1u)));
  }
  return ~crc;
}

std::string le(std::uint64_t v, int bytes) {
  std::string s;
  for (int i = 0; i < bytes; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  return s;
}

// One zip entry, optionally lying: a declared size other than its data's,
// a method other than "stored", or its directory entry pointing at an
// earlier entry's data.
struct ZipEntry {
  std::string name;
  std::string data;
  std::uint16_t method = 0;             // 0 stored, 8 deflate
  std::int64_t declared_size = -1;      // uncompressed size in the headers; -1: data.size()
  std::int64_t shares_data_of = -1;     // index of an earlier entry whose local header and data this one uses
};

std::string zip_entries(const std::vector<ZipEntry>& entries) {
  std::string out, directory;
  std::vector<std::size_t> local_at;
  std::vector<std::uint32_t> crcs;
  for (const ZipEntry& e : entries) {
    const bool shared = e.shares_data_of >= 0;
    const auto source = static_cast<std::size_t>(shared ? e.shares_data_of : 0);
    const std::string& data = shared ? entries[source].data : e.data;
    const std::uint32_t crc = shared ? crcs[source] : crc32(data);
    const std::uint64_t declared = e.declared_size < 0 ? data.size() : static_cast<std::uint64_t>(e.declared_size);
    const std::string sizes = le(crc, 4) + le(data.size(), 4) + le(declared, 4);
    const std::size_t at = shared ? local_at[source] : out.size();
    if (!shared) {
      out += le(0x04034b50, 4) + le(20, 2) + le(0, 2) + le(e.method, 2) + le(0, 4) + sizes + le(e.name.size(), 2) +
             le(0, 2) + e.name + e.data;
    }
    local_at.push_back(at);
    crcs.push_back(crc);
    directory += le(0x02014b50, 4) + le(20, 2) + le(20, 2) + le(0, 2) + le(e.method, 2) + le(0, 4) + sizes +
                 le(e.name.size(), 2) + le(0, 2) + le(0, 2) + le(0, 2) + le(0, 2) + le(0, 4) + le(at, 4) + e.name;
  }
  const std::size_t directory_at = out.size();
  return out + directory + le(0x06054b50, 4) + le(0, 2) + le(0, 2) + le(entries.size(), 2) + le(entries.size(), 2) +
         le(directory.size(), 4) + le(directory_at, 4) + le(0, 2);
}

std::string zip_archive(const std::vector<std::pair<std::string, std::string>>& files) {
  std::vector<ZipEntry> entries;
  for (const auto& [name, data] : files) entries.push_back({name, data});
  return zip_entries(entries);
}

// Pickle opcodes, protocol 2, as PyTorch's pickler writes them.
std::string p_string(const std::string& s) { return "X" + le(s.size(), 4) + s; }
std::string p_int(std::int64_t v) {
  if (v >= INT32_MIN && v <= INT32_MAX) return "J" + le(static_cast<std::uint32_t>(v), 4);
  return "\x8a\x08" + le(static_cast<std::uint64_t>(v), 8);  // LONG1
}
std::string p_global(const std::string& module, const std::string& name) { return "c" + module + "\n" + name + "\n"; }
std::string p_ints(const std::vector<std::int64_t>& v) {
  std::string s = "(";
  for (auto x : v) s += p_int(x);
  return s + "t";
}

std::string p_tensor(const std::string& key, std::int64_t storage_numel, const std::vector<std::int64_t>& sizes,
                     std::int64_t offset = 0, const std::string& storage_type = "FloatStorage") {
  std::vector<std::int64_t> strides(sizes.size(), 1);
  for (std::size_t d = sizes.size(); d-- > 1;) strides[d - 1] = strides[d] * sizes[d];
  return p_global("torch._utils", "_rebuild_tensor_v2") + "((" + p_string("storage") +
         p_global("torch", storage_type) + p_string(key) + p_string("cpu") + p_int(storage_numel) + "tQ" +
         p_int(offset) + p_ints(sizes) + p_ints(strides) + "\x89" + p_global("collections", "OrderedDict") + ")R" +
         "tR";
}

// A module object: its attributes, then BUILD.
struct PickleModule {
  std::map<std::string, std::string> tensors;  // attribute -> pickled tensor
  std::map<std::string, PickleModule> children;
  std::string pickle(const std::string& class_name) const {
    std::string s = p_global("__torch__", class_name) + ")\x81}(" + p_string("training") + "\x88";
    for (const auto& [name, t] : tensors) s += p_string(name) + t;
    for (const auto& [name, child] : children) s += p_string(name) + child.pickle("Module");
    return s + "ub";
  }
};

// data.pkl for the tensors, with storage keys "0", "1", ... in name order.
std::string module_pickle(const RawTensors& tensors) {
  PickleModule root;
  int key = 0;
  for (const auto& [name, t] : tensors) {
    REQUIRE(t.dtype == "F32");
    PickleModule* node = &root;
    std::string rest = name;
    for (std::size_t dot; (dot = rest.find('.')) != std::string::npos; rest = rest.substr(dot + 1)) {
      node = &node->children[rest.substr(0, dot)];
    }
    node->tensors[rest] = p_tensor(std::to_string(key++), element_count(t.shape), t.shape);
  }
  return "\x80\x02" + root.pickle("Model") + ".";
}

// data.pkl as torch.save(model.state_dict()) writes it: an OrderedDict of
// name -> tensor, then BUILD with {'_metadata': {module: {'version': 1}}}.
std::string state_dict_pickle(const RawTensors& tensors) {
  std::string s = "\x80\x02" + p_global("collections", "OrderedDict") + "q\x00)Rq\x01("s;
  int key = 0;
  for (const auto& [name, t] : tensors) {
    s += p_string(name) + p_tensor(std::to_string(key++), element_count(t.shape), t.shape);
  }
  return s + "u}" + p_string("_metadata") + "h\x00)R("s + p_string("") + "}" + p_string("version") + "K\x01su" +
         "sb.";
}

// A TorchScript archive of the tensors: one storage record per tensor.
// `code` goes in as code/__torch__.py, never to be compiled.
std::string torchscript_bytes(const RawTensors& tensors, const std::string& code) {
  std::vector<std::pair<std::string, std::string>> files = {{"archive/data.pkl", module_pickle(tensors)}};
  int key = 0;
  for (const auto& entry : tensors) files.emplace_back("archive/data/" + std::to_string(key++), entry.second.bytes);
  files.emplace_back("archive/code/__torch__.py", code);
  files.emplace_back("archive/version", "3\n");
  return zip_archive(files);
}

fs::path torchscript_dir(const std::string& name, const std::string& archive) {
  const fs::path dir = model_dir(name);
  write_file(dir / "model.pt", archive);
  return dir;
}

// The process's peak resident memory so far. A hostile case that
// allocated what the file asked for would have pushed it to gigabytes.
std::size_t peak_rss_mib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<std::size_t>(usage.ru_maxrss) / 1024;  // ru_maxrss is in KiB on Linux
}
constexpr std::size_t kPeakRssLimitMib = 2048;

// A pickled module object with the given attribute entries (pickled key,
// value pairs).
std::string p_object(const std::string& entries) { return p_global("__torch__", "M") + ")\x81}(" + entries + "ub"; }
std::string p_get(std::uint32_t index) { return "j" + le(index, 4); }  // LONG_BINGET
std::string p_put(std::uint32_t index) { return "r" + le(index, 4); }  // LONG_BINPUT

std::vector<float> encode(const rapidqa::TransformerEncoder& encoder) {
  std::vector<float> out;
  REQUIRE(encoder.encode({"hello world", "reset password order"}, out).is_ok());
  return out;
}

// A hand-made data.pkl is refused, for the given reason, in a short message.
void pickle_refused(const std::string& pickle, const std::string& why) {
  INFO(why);
  const auto r = rapidqa::model::read_pickled_tensors(pickle);
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.status().message().find(why) != std::string::npos);
  CHECK(r.status().message().size() < 400);
}

}  // namespace

TEST_CASE("Hostile model files: the hand-written tiny checkpoints load", "[hostile]") {
  auto fp32 = load(safetensors_dir("fp32", tiny_bert()));
  REQUIRE(fp32.is_ok());
  for (float v : encode(**fp32)) CHECK(std::isfinite(v));
  auto int8 = load(safetensors_dir("int8", tiny_int8_bert()));
  REQUIRE(int8.is_ok());
  for (float v : encode(**int8)) CHECK(std::isfinite(v));
}

TEST_CASE("Hostile model files: a NaN or infinite weight is refused with the tensor named", "[hostile]") {
  struct Case {
    const char* tensor;
    float value;
  };
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  for (const Case& c : {Case{"encoder.layer.0.intermediate.dense.weight", nan},
                        Case{"encoder.layer.0.attention.self.key.bias", -inf},
                        Case{"embeddings.LayerNorm.weight", inf},
                        Case{"embeddings.word_embeddings.weight", nan}}) {
    INFO(c.tensor << " = " << c.value);
    RawTensors t = tiny_bert();
    set_f32(t.at(c.tensor), 5, c.value);
    check_refused(load(safetensors_dir("nan", t)).status(), StatusCode::kInvalidArgument,
                  {"model.safetensors", std::string("'") + c.tensor + "'", "NaN or infinite", "element 5"});
  }
  // The same through a TorchScript file.
  RawTensors t = tiny_bert();
  set_f32(t.at("encoder.layer.0.output.dense.weight"), 0, nan);
  check_refused(load(torchscript_dir("nan-pt", torchscript_bytes(t, ""))).status(), StatusCode::kInvalidArgument,
                {"model.pt", "'encoder.layer.0.output.dense.weight'", "NaN or infinite"});
}

TEST_CASE("Hostile model files: INT8 scales and input ranges must be finite, positive and ordered", "[hostile]") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const std::string layer = "encoder.layer.0.intermediate.dense";
  for (const float bad : {nan, 0.0f, -0.5f, inf, -0.0f}) {
    INFO("weight_scale " << bad);
    RawTensors t = tiny_int8_bert();
    set_f32(t.at(layer + ".weight_scale"), 3, bad);
    check_refused(load(safetensors_dir("scale", t)).status(), StatusCode::kInvalidArgument,
                  {"'" + layer + ".weight_scale'"});
    RawTensors e = tiny_int8_bert();
    set_f32(e.at("embeddings.word_embeddings.weight_scale"), 2, bad);
    check_refused(load(safetensors_dir("embedding-scale", e)).status(), StatusCode::kInvalidArgument,
                  {"'embeddings.word_embeddings.weight_scale'"});
  }
  for (const auto& range : std::vector<std::array<float, 2>>{{2.0f, -2.0f}, {nan, 1.0f}, {-1.0f, inf}}) {
    INFO("input_range [" << range[0] << ", " << range[1] << "]");
    RawTensors t = tiny_int8_bert();
    set_f32(t.at(layer + ".input_range"), 0, range[0]);
    set_f32(t.at(layer + ".input_range"), 1, range[1]);
    check_refused(load(safetensors_dir("range", t)).status(), StatusCode::kInvalidArgument,
                  {"'" + layer + ".input_range'"});
  }
  // A one-point range (a constant input) is a range.
  RawTensors point = tiny_int8_bert();
  set_f32(point.at(layer + ".input_range"), 0, 1.5f);
  set_f32(point.at(layer + ".input_range"), 1, 1.5f);
  CHECK(load(safetensors_dir("point-range", point)).is_ok());
}

TEST_CASE("Hostile model files: every config.json size and layer_norm_eps is bounded, with the field named",
          "[hostile]") {
  using rapidqa::model::TransformerConfig;
  auto refused = [](const json& config, const std::string& field) {
    INFO(config.dump());
    const auto r = TransformerConfig::from_json_text(config.dump(), "config.json");
    check_refused(r.status(), StatusCode::kInvalidArgument, {"config.json", field});
  };
  auto with = [](const char* field, const json& value) {
    json c = tiny_config();
    c[field] = value;
    return c;
  };
  REQUIRE(TransformerConfig::from_json_text(tiny_config().dump(), "config.json").is_ok());
  for (const json& eps : {json(-1e-12), json(0.0), json(5.0), json("1e-12"), json(true)}) {
    refused(with("layer_norm_eps", eps), "'layer_norm_eps'");
  }
  // 1e400 parses to infinity.
  auto huge_eps = TransformerConfig::from_json_text(R"({"vocab_size":10,"hidden_size":8,"num_hidden_layers":1,
      "num_attention_heads":2,"intermediate_size":16,"layer_norm_eps":1e400})", "config.json");
  CHECK_FALSE(huge_eps.is_ok());
  for (const char* field : {"vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                            "intermediate_size", "max_position_embeddings"}) {
    for (const json& bad : {json(0), json(-4), json(std::int64_t{1} << 40), json(std::uint64_t(-1)), json(8.5),
                            json("8")}) {
      refused(with(field, bad), std::string("'") + field + "'");
    }
  }
  refused(with("type_vocab_size", 1 << 20), "'type_vocab_size'");
  refused(with("pad_token_id", 10), "'pad_token_id'");
  refused(with("num_attention_heads", 3), "not a multiple of the 3 attention heads");
  refused(with("num_attention_heads", 16), "not a multiple of the 16 attention heads");
  refused(with("model_type", 7), "'model_type'");
  refused(with("hidden_act", json::array()), "'hidden_act'");
  refused(with("pruned_heads", {{"0", {5}}}), "'pruned_heads'");
  // A model_type that quotes the file is clipped.
  const auto long_type = TransformerConfig::from_json_text(with("model_type", std::string(5000, 'x')).dump(), "c");
  CHECK(long_type.status().message().size() < 300);
  // Duplicate keys and absurd nesting are refused by the parser.
  check_refused(TransformerConfig::from_json_text(R"({"vocab_size":10,"vocab_size":20})", "config.json").status(),
                StatusCode::kInvalidArgument, {"duplicate key 'vocab_size'"});
  check_refused(TransformerConfig::from_json_text(std::string(100000, '[') + std::string(100000, ']'), "config.json")
                    .status(),
                StatusCode::kInvalidArgument, {"nested deeper"});

  // Through the loader, and from a config.json that never ends.
  check_refused(load(safetensors_dir("eps", tiny_bert(), with("layer_norm_eps", -1.0))).status(),
                StatusCode::kInvalidArgument, {"config.json", "'layer_norm_eps'"});
  const fs::path endless = model_dir("endless-config");
  fs::remove(endless / "config.json");
  fs::create_symlink("/dev/zero", endless / "config.json");
  check_refused(TransformerConfig::from_json_file((endless / "config.json").string()).status(),
                StatusCode::kInvalidArgument, {"config.json", "larger than"});
}

TEST_CASE("Hostile model files: safetensors headers are checked for overflow, order and bounds", "[hostile]") {
  const std::string name = "embeddings.word_embeddings.weight";
  auto refused_header = [&](const std::string& header, const std::string& data, const std::string& why) {
    INFO(header);
    const fs::path dir = model_dir("safetensors");
    write_file(dir / "model.safetensors", safetensors_bytes(header, data));
    check_refused(load(dir).status(), StatusCode::kDataLoss, {"model.safetensors", why});
  };
  auto entry = [&](const std::string& dtype, const std::string& shape, const std::string& offsets) {
    return R"({")" + name + R"(":{"dtype":")" + dtype + R"(","shape":)" + shape + R"(,"data_offsets":)" + offsets + "}}";
  };
  // 2^32 x 2^32 x 16 elements wrap to 0, which the old check took for the
  // empty byte range [0, 0).
  refused_header(entry("F32", "[4294967296,4294967296,16]", "[0,0]"), "", "overflows 64 bits");
  refused_header(entry("F32", "[4611686018427387904]", "[0,0]"), "", "overflows 64 bits");  // 2^62 x 4 bytes
  refused_header(entry("F32", "[2]", "[8,0]"), std::string(8, '\0'), "end before they begin");
  refused_header(entry("F32", "[2]", "[0,8]"), std::string(4, '\0'), "outside");
  refused_header(entry("F32", "[3]", "[0,8]"), std::string(8, '\0'), "need 12");
  refused_header(entry("F32", "[-2]", "[0,8]"), std::string(8, '\0'), "dimension");
  refused_header(entry("F32", "[2.0]", "[0,8]"), std::string(8, '\0'), "dimension");
  refused_header(entry("F32", "[2]", "[0]"), std::string(8, '\0'), "data_offsets");
  refused_header(entry("F32", "[2]", "[0,-8]"), std::string(8, '\0'), "data_offsets");
  refused_header(entry("Q4", "[2]", "[0,1]"), std::string(8, '\0'), "unknown dtype 'Q4'");
  refused_header(entry("F32", json(std::vector<int>(40, 1)).dump(), "[0,4]"), std::string(8, '\0'), "dimensions");
  refused_header(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
                 std::string(8, '\0'), "duplicate key");
  refused_header(R"({"__metadata__":)" + std::string(50000, '[') + std::string(50000, ']') + "}", "", "nested deeper");
  // A long tensor name is clipped in the message.
  refused_header(R"({")" + std::string(10000, 'A') + R"(":{"dtype":"Q4","shape":[1],"data_offsets":[0,1]}})",
                 std::string(8, '\0'), "bytes in all");

  // Header lengths beyond the file or the format's 100 MB limit.
  for (const std::uint64_t length : {std::uint64_t{1000}, std::uint64_t{1} << 40, ~std::uint64_t{0}}) {
    INFO("header length " << length);
    const fs::path dir = model_dir("header-length");
    write_file(dir / "model.safetensors", le64(length) + "{}      ");
    check_refused(load(dir).status(), StatusCode::kDataLoss, {"model.safetensors", "header length"});
  }
}

TEST_CASE("Hostile model files: vocab.txt and tokenizer.json are bounded and parsed strictly", "[hostile]") {
  using rapidqa::text::WordPieceTokenizer;
  const fs::path dir = fs::temp_directory_path() / "rapidqa-hostile-tokenizer";
  fs::remove_all(dir);
  fs::create_directories(dir);
  // One endless line: refused after a bounded read, not read until memory runs out.
  fs::create_symlink("/dev/zero", dir / "vocab.txt");
  check_refused(WordPieceTokenizer::from_vocab_file((dir / "vocab.txt").string()).status(),
                StatusCode::kInvalidArgument, {"vocab.txt", "larger than"});
  fs::create_symlink("/dev/zero", dir / "zero.json");
  check_refused(WordPieceTokenizer::from_tokenizer_json((dir / "zero.json").string()).status(),
                StatusCode::kInvalidArgument, {"zero.json", "larger than"});

  const json valid = {{"model", {{"type", "WordPiece"}, {"vocab", {{"[PAD]", 0}, {"[UNK]", 1}, {"[CLS]", 2}, {"[SEP]", 3}}}}},
                      {"normalizer", {{"type", "BertNormalizer"}}}};
  write_file(dir / "tokenizer.json", valid.dump());
  REQUIRE(WordPieceTokenizer::from_tokenizer_json((dir / "tokenizer.json").string()).is_ok());
  std::string duplicate = valid.dump();
  duplicate.insert(1, R"("model":{},)");
  write_file(dir / "duplicate.json", duplicate);
  check_refused(WordPieceTokenizer::from_tokenizer_json((dir / "duplicate.json").string()).status(),
                StatusCode::kInvalidArgument, {"duplicate.json", "duplicate key 'model'"});
  write_file(dir / "deep.json", std::string(200000, '[') + std::string(200000, ']'));
  check_refused(WordPieceTokenizer::from_tokenizer_json((dir / "deep.json").string()).status(),
                StatusCode::kInvalidArgument, {"deep.json", "nested deeper"});
  json long_type = valid;
  long_type["model"]["type"] = std::string(20000, 'W');
  write_file(dir / "long.json", long_type.dump());
  const auto long_status = WordPieceTokenizer::from_tokenizer_json((dir / "long.json").string()).status();
  check_refused(long_status, StatusCode::kInvalidArgument, {"model.type", "bytes in all"});
}

TEST_CASE("Hostile model files: thread counts beyond the machine are refused, naming the field and limit",
          "[hostile]") {
  const int limit = rapidqa::max_compute_threads();
  CHECK(limit >= 4);
  const std::string limit_text = std::to_string(limit);
  check_refused(rapidqa::configure_compute_threads({100000, 1}), StatusCode::kInvalidArgument, {"intra_op", limit_text});
  check_refused(rapidqa::configure_compute_threads({limit + 1, 1}), StatusCode::kInvalidArgument, {"intra_op"});
  check_refused(rapidqa::configure_compute_threads({0, 1000}), StatusCode::kInvalidArgument, {"search", limit_text});
  check_refused(rapidqa::configure_compute_threads({-1, 1}), StatusCode::kInvalidArgument, {"intra_op"});
  check_refused(rapidqa::configure_compute_threads({1, -1}), StatusCode::kInvalidArgument, {"search"});
  // Refused before any pool is touched, so at once: a hang would show as
  // this test never ending (no timing is asserted).
  CHECK(rapidqa::configure_compute_threads({1, 1}).is_ok());
  CHECK(rapidqa::configure_compute_threads({0, 0}).is_ok());
}

TEST_CASE("Hostile model files: a TorchScript file is read for its tensors and none of its code runs", "[hostile]") {
  const RawTensors weights = tiny_bert();
  // code/ holds what torch::jit::load would compile and run; here it is
  // not even valid TorchScript, and must not matter.
  const std::string code = "class Model(Module):\n  def __setstate__(self, state):\n    raise Exception(\"ran\")\n";
  auto from_script = load(torchscript_dir("script", torchscript_bytes(weights, code)));
  REQUIRE(from_script.is_ok());
  auto from_safetensors = load(safetensors_dir("script-reference", weights));
  REQUIRE(from_safetensors.is_ok());
  const auto a = encode(**from_script), b = encode(**from_safetensors);
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) CHECK(a[i] == Approx(b[i]).margin(1e-6));
}

TEST_CASE("Hostile model files: malformed TorchScript archives give a Status, never a crash", "[hostile]") {
  const RawTensors weights = tiny_bert();
  std::string good = torchscript_bytes(weights, "");
  // Files that are not archives, or only part of one.
  for (const std::string& bytes : {std::string(), std::string("PK\x03\x04", 4), std::string(4096, '\x7f'),
                                   good.substr(0, good.size() / 2), good.substr(0, good.size() - 10),
                                   zip_archive({{"archive/version", "3\n"}}),
                                   zip_archive({{"archive/data.pkl", "\x80\x02N."}, {"archive/version", "junk"}}),
                                   zip_archive({{"archive/data.pkl", "\x80\x02N."}, {"archive/version", "3\n"}})}) {
    INFO("archive of " << bytes.size() << " bytes");
    const auto status = load(torchscript_dir("broken-archive", bytes)).status();
    CHECK_FALSE(status.is_ok());
    CHECK(status.message().find("model.pt") != std::string::npos);
    CHECK(status.message().size() < 600);
  }
  // A storage record shorter than the storage the pickle declares: the
  // tensor would be read past its data.
  {
    const std::string pickle = "\x80\x02" + p_global("__torch__", "M") + ")\x81}(" + p_string("w") +
                               p_tensor("0", 1000, {1000}) + "ub.";
    const std::string archive = zip_archive({{"archive/data.pkl", pickle},
                                             {"archive/data/0", std::string(40, '\0')},
                                             {"archive/version", "3\n"}});
    check_refused(load(torchscript_dir("short-record", archive)).status(), StatusCode::kDataLoss,
                  {"model.pt", "'w'", "holds 40 bytes", "declares 4000"});
  }
}

TEST_CASE("Hostile model files: hostile pickles in data.pkl are refused without running anything", "[hostile]") {
  using rapidqa::model::read_pickled_tensors;
  const auto refused = pickle_refused;
  const std::string object = p_global("__torch__", "M") + ")\x81";
  refused("", "ends before STOP");
  refused("\x80\x02", "ends before STOP");
  refused(".", "stack underflow");
  refused("b.", "stack underflow");
  refused("(b.", "stack underflow");  // a pop never crosses a mark
  refused("N)b.", "BUILD on something that is not a new object");
  refused("h\x05.", "memo entry 5 is not defined");
  refused("\x80\x09N.", "protocol 9");
  refused("S'ls'\n.", "opcode 0x53");
  // A call of anything outside PyTorch's own rebuild functions is refused by name.
  refused(p_global("os", "system") + p_string("touch /tmp/pwned") + "\x85R.", "global 'os.system' is not supported");
  refused(p_global("builtins", "eval") + p_string("1") + "\x85R.", "'builtins.eval'");
  refused(p_global("__torch__", "M") + ")R.", "'__torch__.M'");
  refused(std::string(70000, '('), "too many marks");
  std::string deep_stack = "Nq\x00"s;
  for (int i = 0; i < 1100000; ++i) deep_stack += "h\x00"s;
  refused(deep_stack, "stack too deep");
  refused(std::string(1100000, 'N'), "values");
  refused(object + "}(" + p_string("w") + p_tensor("0", 10, {100}) + "ub.", "reaches element 99 of a 10-element");
  refused(object + "}(" + p_string("w") + p_tensor("0", 10, {2}, 9) + "ub.", "reaches element 10");
  refused(object + "}(" + p_string("w") + p_tensor("0", 10, {std::int64_t{1} << 31, std::int64_t{1} << 31}) + "ub.",
          "reaches element");
  refused(object + "}(" + p_string("w") + p_tensor("0", 10, {2}, 0, "QInt8Storage") + "ub.",
          "storage type 'torch.QInt8Storage' is not supported");
  // An object whose attribute is itself: a cycle, walked once.
  const auto self = read_pickled_tensors(object + "q\x00}("s + p_string("self") + "h\x00ub."s);
  REQUIRE(self.is_ok());
  CHECK(self->empty());
  std::string deep = p_string("w") + p_tensor("0", 1, {1});
  for (int level = 0; level < 70; ++level) deep = p_string("m") + p_object(deep);
  refused(p_object(deep) + ".", "nested deeper than 64");
  // A list appended to itself holds no tensors and leaks nothing.
  const auto cycle = read_pickled_tensors("]q\x00h\x00" "a."s);
  REQUIRE(cycle.is_ok());
  CHECK(cycle->empty());

  // What PyTorch writes is read, views and names included.
  const std::string pickle = "\x80\x02" + object + "}(" + p_string("training") + "\x88" + p_string("w") +
                             p_tensor("0", 12, {2, 3}, 6) + p_string("sub") + object + "}(" + p_string("b") +
                             p_tensor("1", 4, {4}) + "ubub.";
  const auto read = read_pickled_tensors(pickle);
  REQUIRE(read.is_ok());
  REQUIRE(read->size() == 2);
  CHECK(read->at("w").storage_key == "0");
  CHECK(read->at("w").offset == 6);
  CHECK(read->at("w").sizes == std::vector<std::int64_t>{2, 3});
  CHECK(read->at("w").strides == std::vector<std::int64_t>{3, 1});
  CHECK(read->at("sub.b").storage_type == "FloatStorage");
}

TEST_CASE("Hostile model files: every one-byte change or truncation of a data.pkl is read or refused, never a crash",
          "[hostile]") {
  using rapidqa::model::read_pickled_tensors;
  const std::string pickle = module_pickle(tiny_bert());
  const auto intact = read_pickled_tensors(pickle);
  REQUIRE(intact.is_ok());
  CHECK(intact->size() == tiny_bert().size());
  std::size_t refused = 0;
  for (std::size_t i = 0; i < pickle.size(); ++i) {
    for (const char replacement : {'\0', '\x7f', '\xff', '(', '.', 'b', 'h'}) {
      std::string changed = pickle;
      changed[i] = replacement;
      if (!read_pickled_tensors(changed).is_ok()) ++refused;
    }
    if (!read_pickled_tensors(pickle.substr(0, i)).is_ok()) ++refused;
  }
  CHECK(refused > pickle.size());  // most changes break it; none crashed
}

// The cases below are each built so that a reader which copied, walked or
// extracted what the file asked for would need gigabytes or hours; each
// must be refused at once. A hang would show as the test never ending, and
// memory is checked as the process's peak (no timing is asserted).

TEST_CASE("Hostile model files: strings in data.pkl are copied within a budget, never once per reference",
          "[hostile]") {
  using rapidqa::model::read_pickled_tensors;
  auto refused = [](const std::string& pickle, const std::string& why) {
    INFO(why);
    const auto r = read_pickled_tensors(pickle);
    REQUIRE_FALSE(r.is_ok());
    CHECK(r.status().code() == StatusCode::kDataLoss);
    CHECK(r.status().message().find(why) != std::string::npos);
    CHECK(r.status().message().size() < 400);
  };
  const std::string mib(1u << 20, 'a');
  // One 1 MiB string, joined with itself by a 5-byte STACK_GLOBAL 2000
  // times: 4 GB of names if each join were made.
  std::string joins = "\x80\x04" + p_string(mib) + p_put(0);
  for (int i = 0; i < 2000; ++i) joins += "h\x00h\x00\x93"s + "0";
  refused(joins + "N.", "STACK_GLOBAL name longer than 1024 bytes");
  // Short enough to join, but 1000 bytes joined 900,000 times: refused once
  // the copies outgrow a small multiple of the pickle.
  std::string many_joins = "\x80\x04" + p_string(std::string(1000, 'a')) + p_put(0);
  for (int i = 0; i < 900000; ++i) many_joins += "h\x00h\x00\x93"s + "0";
  refused(many_joins + "N.", "bytes of strings, shapes and names");

  // A 1 MiB storage key named by 4000 persistent ids: 4 GB of key copies.
  auto storage_id = [](const std::string& key_op, const std::string& location_op) {
    return "(" + p_string("storage") + p_global("torch", "FloatStorage") + key_op + location_op + "K\x01tQ0";
  };
  std::string long_key = p_string(mib) + p_put(0) + "0";
  for (int i = 0; i < 4000; ++i) long_key += storage_id(p_get(0), p_string("cpu"));
  refused(long_key + "N.", "storage key");
  refused(storage_id(p_string("../../etc/passwd"), p_string("cpu")) + "N.", "storage key '../../etc/passwd'");
  refused(storage_id(p_string(""), p_string("cpu")) + "N.", "storage key");
  refused(storage_id(p_string("0"), p_string(std::string(100, 'c'))) + "N.", "storage location longer than 64");
  // One key, two element counts: the view would be checked against one and
  // read from the other.
  const std::string object = p_global("__torch__", "M") + ")\x81";
  refused(object + "}(" + p_string("a") + p_tensor("0", 10, {10}) + p_string("b") + p_tensor("0", 1000, {1000}) +
              "ub.",
          "storage '0' is declared as 10 elements of FloatStorage and as 1000 elements of FloatStorage");
  refused(object + "}(" + p_string("a") + p_tensor("0", 10, {10}) + p_string("b") +
              p_tensor("0", 10, {10}, 0, "HalfStorage") + "ub.",
          "and as 10 elements of HalfStorage");
  // The same key declared alike is one storage.
  const auto twice = read_pickled_tensors(object + "}(" + p_string("a") + p_tensor("0", 10, {10}) + p_string("b") +
                                          p_tensor("0", 10, {5}, 5) + "ub.");
  REQUIRE(twice.is_ok());
  CHECK(twice->at("b").storage_key == "0");
  CHECK(peak_rss_mib() < kPeakRssLimitMib);
}

TEST_CASE("Hostile model files: naming tensors walks each module once, with bounded names", "[hostile]") {
  using rapidqa::model::read_pickled_tensors;
  const auto refused = pickle_refused;
  // 20 modules, each with two attributes naming the next, the last holding
  // a tensor and 2 million other entries: 2^20 paths, so 2^20 walks of 2
  // million entries if each path were walked. named_modules() names a
  // shared module once, by its first path; so does this reader.
  std::string chain = "\x80\x02K\x07" + p_put(0);
  chain += p_global("__torch__", "M") + ")\x81}(" + p_string("w") + p_tensor("0", 4, {4}) + "u";
  for (int batch = 0; batch < 5; ++batch) {  // SETITEMS of 400,000 pairs each, within the stack bound
    chain += "(";
    for (int i = 0; i < 400000; ++i) chain += "h\x00h\x00"s;
    chain += "u";
  }
  chain += "b" + p_put(1);
  for (std::uint32_t level = 1; level <= 20; ++level) {
    chain += p_object(p_string("a") + p_get(level) + p_string("b") + p_get(level)) + p_put(level + 1);
  }
  const auto shared = read_pickled_tensors(chain + ".");
  REQUIRE(shared.is_ok());
  REQUIRE(shared->size() == 1);
  std::string first_path;
  for (int level = 0; level < 20; ++level) first_path += "a.";
  CHECK(shared->begin()->first == first_path + "w");

  // A 1 MiB attribute name at 60 levels: names of up to 60 MiB, 1.8 GB in
  // all if each level's name were built.
  std::string long_names = p_string(std::string(1u << 20, 'n')) + p_put(0) + "0";
  std::string nested = p_string("w") + p_tensor("0", 1, {1});
  for (int level = 0; level < 60; ++level) nested = p_get(0) + p_object(nested);
  refused(long_names + p_object(nested) + ".", "attribute name of 1048576 bytes");
  // Names within the per-attribute bound, but a path past 4 KiB.
  std::string long_path = p_string(std::string(200, 'p')) + p_put(0) + "0";
  nested = p_string("w") + p_tensor("0", 1, {1});
  for (int level = 0; level < 30; ++level) nested = p_get(0) + p_object(nested);
  refused(long_path + p_object(nested) + ".", "longer than 4096 bytes");
  // 15 levels of 256-byte names over 500,000 distinct short attributes of one
  // memoized tensor: 500,000 names of 3.9 KB, 2 GB if built. Refused once the
  // names outgrow a small multiple of the pickle.
  std::string wide = "\x80\x02" + p_string(std::string(256, 'k')) + p_put(0) + "0" + p_tensor("0", 1, {1}) +
                     p_put(1) + "0";
  std::string leaf;
  for (int batch = 0; batch < 2; ++batch) {
    leaf += "(";
    for (int i = 0; i < 250000; ++i) leaf += p_string("k" + std::to_string(batch * 250000 + i)) + "h\x01"s;
    leaf += "u";
  }
  std::string tree = p_global("__torch__", "M") + ")\x81}" + leaf + "b";
  for (int level = 0; level < 15; ++level) tree = p_object(p_get(0) + tree);
  refused(wide + tree + ".", "bytes of strings, shapes and names");
  CHECK(peak_rss_mib() < kPeakRssLimitMib);
}

TEST_CASE("Hostile model files: data.pkl's memo is bounded", "[hostile]") {
  using rapidqa::model::read_pickled_tensors;
  // 60 MB of MEMOIZE, one byte per memo entry: 60 million entries.
  const auto memoize = read_pickled_tensors("N" + std::string(60u << 20, '\x94') + ".");
  REQUIRE_FALSE(memoize.is_ok());
  CHECK(memoize.status().code() == StatusCode::kDataLoss);
  CHECK(memoize.status().message().find("more than 1048576 memo entries") != std::string::npos);
  // LONG_BINPUT at distinct indices, likewise.
  std::string puts = "N";
  for (std::uint32_t i = 0; i < 1100000; ++i) puts += p_put(i * 7);
  const auto put = read_pickled_tensors(puts + ".");
  REQUIRE_FALSE(put.is_ok());
  CHECK(put.status().message().find("memo entries") != std::string::npos);
  // Re-using one index is not growth.
  std::string reput = "N";
  for (int i = 0; i < 1100000; ++i) reput += "q\x05";
  CHECK(read_pickled_tensors(reput + "0}.").is_ok());
  CHECK(peak_rss_mib() < kPeakRssLimitMib);
}

TEST_CASE("Hostile model files: a TorchScript archive is never extracted or copied beyond what the file holds",
          "[hostile]") {
  const std::string version = "3\n";
  auto refused_archive = [](const std::string& name, const std::string& archive, const std::vector<std::string>& why) {
    check_refused(load(torchscript_dir(name, archive)).status(), StatusCode::kDataLoss, why);
  };
  // data.pkl as a state dict of `count` tensors t0, t1, ..., each made by `tensor(i)`.
  auto dict_pickle = [](int count, const std::function<std::string(int)>& tensor) {
    std::string s = "\x80\x02}(";
    for (int i = 0; i < count; ++i) s += p_string("t" + std::to_string(i)) + tensor(i);
    return s + "u.";
  };

  // Declared sizes LibTorch would allocate before inflating: data.pkl, the
  // version record its reader opens first, a storage record. Each is a few
  // bytes of "deflate" data declaring 3 GB.
  const std::string pickle = dict_pickle(1, [](int) { return p_tensor("0", 4, {4}); });
  const std::int64_t three_gb = 3000000000;
  refused_archive("bomb-pickle",
                  zip_entries({{"archive/data.pkl", "xxxxxxxx", 8, three_gb}, {"archive/version", version}}),
                  {"model.pt", "data.pkl declares 3000000000 bytes"});
  refused_archive("bomb-version",
                  zip_entries({{"archive/data.pkl", pickle}, {"archive/version", "xxxxxxxx", 8, three_gb}}),
                  {"model.pt", "'version' record declares 3000000000 bytes"});
  refused_archive("bomb-storage",
                  zip_entries({{"archive/data.pkl", pickle},
                               {"archive/data/0", "xxxxxxxx", 8, three_gb},
                               {"archive/version", version}}),
                  {"model.pt", "'t0'", "storage records declare more than"});

  // 4000 directory entries sharing one 1 MiB stored record, each a storage
  // of the pickle: 4000 extractions of 1 MiB (and 4000 copies) if each were
  // made.
  {
    constexpr int kStorages = 4000;
    auto whole = [](int i) { return p_tensor(std::to_string(i), 1 << 18, {1 << 18}); };
    std::vector<ZipEntry> entries = {
        {"archive/data.pkl", dict_pickle(kStorages, whole)},
        {"archive/version", version},
        {"archive/data/0", std::string(1u << 20, '\0')}};
    for (int i = 1; i < kStorages; ++i) {
      entries.push_back({"archive/data/" + std::to_string(i), "", 0, -1, 2});
    }
    refused_archive("shared-records", zip_entries(entries), {"model.pt", "storage records declare more than"});
  }

  // 1000 partial views of one 4 MiB storage: 4 GB of copies if each were
  // copied out.
  {
    const std::string view = p_tensor("0", 1 << 20, {(1 << 20) - 1}, 1) + p_put(0);
    const std::string views = dict_pickle(1000, [&](int i) { return i == 0 ? view : p_get(0); });
    refused_archive("copied-views",
                    zip_archive({{"archive/data.pkl", views},
                                 {"archive/data/0", std::string(4u << 20, '\0')},
                                 {"archive/version", version}}),
                    {"model.pt", "copies of partial views would exceed the 4194304 bytes"});
  }

  // Two records whose names differ only in case: miniz finds either, so the
  // sizes read first could be the other one's.
  refused_archive("case-twins",
                  zip_archive({{"archive/data.pkl", pickle},
                               {"archive/data/0", std::string(16, '\0')},
                               {"archive/DATA/0", std::string(16, '\0')},
                               {"archive/version", version}}),
                  {"model.pt", "two records named 'archive/DATA/0'"});

  // What stays accepted: tied weights (whole-storage views under several
  // names) and a partial view, as torch.jit.save writes them.
  {
    const RawTensors weights = tiny_bert();
    PickleModule root;
    int key = 0, embeddings_key = -1;
    for (const auto& [name, t] : weights) {
      if (name == "embeddings.word_embeddings.weight") embeddings_key = key;
      PickleModule* node = &root;
      std::string rest = name;
      for (std::size_t dot; (dot = rest.find('.')) != std::string::npos; rest = rest.substr(dot + 1)) {
        node = &node->children[rest.substr(0, dot)];
      }
      node->tensors[rest] = p_tensor(std::to_string(key++), element_count(t.shape), t.shape);
    }
    const std::int64_t vocab = static_cast<std::int64_t>(kVocab.size());
    for (const char* alias : {"tied_a", "tied_b", "tied_c"}) {
      root.children["decoder"].tensors[alias] = p_tensor(std::to_string(embeddings_key), vocab * 8, {vocab, 8});
    }
    root.children["decoder"].tensors["row_3"] = p_tensor(std::to_string(embeddings_key), vocab * 8, {8}, 24);
    std::vector<std::pair<std::string, std::string>> files = {
        {"archive/data.pkl", "\x80\x02" + root.pickle("Model") + "."}};
    key = 0;
    for (const auto& entry : weights) files.emplace_back("archive/data/" + std::to_string(key++), entry.second.bytes);
    files.emplace_back("archive/version", version);
    auto tied = load(torchscript_dir("tied", zip_archive(files)));
    REQUIRE(tied.is_ok());
    auto reference = load(safetensors_dir("tied-reference", weights));
    REQUIRE(reference.is_ok());
    const auto a = encode(**tied), b = encode(**reference);
    REQUIRE(a.size() == b.size());
    for (std::size_t i = 0; i < a.size(); ++i) CHECK(a[i] == Approx(b[i]).margin(1e-6));
  }
  CHECK(peak_rss_mib() < kPeakRssLimitMib);
}

TEST_CASE("Hostile model files: a torch.save'd state dict is read as PyTorch writes it", "[hostile]") {
  using rapidqa::model::read_pickled_tensors;
  // data.pkl of torch.save(nn.Sequential(nn.Linear(3, 2), nn.LayerNorm(2)).state_dict())
  // from PyTorch 1.13: an OrderedDict, then BUILD setting its _metadata.
  const std::string written =
      "\x80\x02" "ccollections\x0aOrderedDict\x0aq\x00)Rq\x01(X\x08\x00\x00\x00" "0.weightq\x02" "ctorch._ut"
      "ils\x0a_rebuild_tensor_v2\x0aq\x03((X\x07\x00\x00\x00storageq\x04" "ctorch\x0a" "FloatStorage\x0aq\x05X"
      "\x01\x00\x00\x00" "0q\x06X\x03\x00\x00\x00" "cpuq\x07K\x06tq\x08QK\x00K\x02K\x03\x86q\x09K\x03K\x01\x86q"
      "\x0a\x89h\x00)Rq\x0btq\x0cRq\x0dX\x06\x00\x00\x00" "0.biasq\x0eh\x03((h\x04h\x05X\x01\x00\x00\x00" "1"
      "q\x0fh\x07K\x02tq\x10QK\x00K\x02\x85q\x11K\x01\x85q\x12\x89h\x00)Rq\x13tq\x14Rq\x15X\x08\x00\x00\x00" "1"
      ".weightq\x16h\x03((h\x04h\x05X\x01\x00\x00\x00" "2q\x17h\x07K\x02tq\x18QK\x00K\x02\x85q\x19K\x01\x85q"
      "\x1a\x89h\x00)Rq\x1btq\x1cRq\x1dX\x06\x00\x00\x00" "1.biasq\x1eh\x03((h\x04h\x05X\x01\x00\x00\x00" "3"
      "q\x1fh\x07K\x02tq QK\x00K\x02\x85q!K\x01\x85q\"\x89h\x00)Rq#tq$Rq%u}q&X\x09\x00\x00\x00_metadataq\x27h"
      "\x00)Rq((X\x00\x00\x00\x00q)}q*X\x07\x00\x00\x00versionq+K\x01sX\x01\x00\x00\x00" "0q,}q-h+K\x01s"
      "X\x01\x00\x00\x00" "1"
      "q.}q/h+K\x01susb."s;
  REQUIRE(written.size() == 453);
  const auto read = read_pickled_tensors(written);
  REQUIRE(read.is_ok());
  REQUIRE(read->size() == 4);
  CHECK(read->at("0.weight").sizes == std::vector<std::int64_t>{2, 3});
  CHECK(read->at("0.weight").strides == std::vector<std::int64_t>{3, 1});
  CHECK(read->at("0.weight").storage_numel == 6);
  CHECK(read->at("1.bias").storage_key == "3");
  // BUILD stays refused on anything else: a dict's state must be a dict.
  const auto none_state = read_pickled_tensors("}Nb.");
  CHECK_FALSE(none_state.is_ok());

  // The same layout for the tiny BERT loads and encodes as its safetensors.
  const RawTensors weights = tiny_bert();
  std::vector<std::pair<std::string, std::string>> files = {{"archive/data.pkl", state_dict_pickle(weights)}};
  int key = 0;
  for (const auto& entry : weights) files.emplace_back("archive/data/" + std::to_string(key++), entry.second.bytes);
  files.emplace_back("archive/version", "3\n");
  auto from_state_dict = load(torchscript_dir("state-dict", zip_archive(files)));
  INFO(from_state_dict.status().to_string());
  REQUIRE(from_state_dict.is_ok());
  auto reference = load(safetensors_dir("state-dict-reference", weights));
  REQUIRE(reference.is_ok());
  const auto a = encode(**from_state_dict), b = encode(**reference);
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) CHECK(a[i] == Approx(b[i]).margin(1e-6));
}

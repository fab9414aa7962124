// What the fuzz targets share: a scratch directory for the entry points that
// only read files, a check that stops the run with a message, and the tiny
// BERT model (vocabulary, config.json, model.safetensors) that the model
// targets put around the fuzzed file. Header-only: each target is one
// translation unit, and none of this includes LibTorch.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

namespace rapidqa::fuzz {

// Stops the run as a finding (libFuzzer saves the input) when `ok` is false.
inline void check(bool ok, const char* what, const std::string& detail = {}) {
  if (ok) return;
  std::fprintf(stderr, "fuzz check failed: %s%s%s\n", what, detail.empty() ? "" : ": ", detail.c_str());
  std::abort();
}

// A directory private to this process, under /dev/shm when there is one (no
// disk writes per input), removed at a normal exit. A crashed run leaves it
// behind; its name says which target and process made it.
inline const std::string& scratch_dir(const char* target) {
  // Never destroyed: the exit handler that removes the directory runs after
  // the destructors of statics constructed later than its registration.
  static const std::string* const dir = [target] {
    namespace fs = std::filesystem;
    const fs::path base = fs::is_directory("/dev/shm") ? fs::path("/dev/shm") : fs::temp_directory_path();
    const fs::path d = base / (std::string("rapidqa-fuzz-") + target + "-" + std::to_string(::getpid()));
    fs::create_directories(d);
    auto* path = new std::string(d.string());
    std::atexit([] {
      std::error_code ec;
      fs::remove_all(scratch_dir(nullptr), ec);
    });
    return path;
  }();
  return *dir;
}

inline void write_file(const std::string& path, const void* data, std::size_t size) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(size));
  check(static_cast<bool>(out), "cannot write a scratch file", path);
}
inline void write_file(const std::string& path, const std::string& text) { write_file(path, text.data(), text.size()); }

// ---- the tiny BERT: hidden 8, one layer, two heads, FFN 16, 16 positions ----

inline std::vector<std::string> tiny_vocab() {
  std::vector<std::string> v = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
  for (char c = 'a'; c <= 'z'; ++c) v.emplace_back(1, c);
  for (char c = 'a'; c <= 'z'; ++c) v.push_back(std::string("##") + c);
  for (const char* w : {"how", "do", "reset", "my", "password", "order", "##ing", "?", ",", ".",
                        "密", "码", "重", "置", "##密", "##码"}) {
    v.emplace_back(w);
  }
  return v;
}

inline std::string tiny_vocab_txt() {
  std::string out;
  for (const auto& token : tiny_vocab()) out += token + "\n";
  return out;
}

inline constexpr int kTinyHidden = 8;
inline constexpr int kTinyIntermediate = 16;
inline constexpr int kTinyPositions = 16;

inline std::string tiny_config_json() {
  return "{\"model_type\": \"bert\", \"vocab_size\": " + std::to_string(tiny_vocab().size()) +
         ", \"hidden_size\": 8, \"num_hidden_layers\": 1, \"num_attention_heads\": 2,"
         " \"intermediate_size\": 16, \"max_position_embeddings\": 16, \"type_vocab_size\": 2,"
         " \"layer_norm_eps\": 1e-12, \"hidden_act\": \"gelu\", \"pad_token_id\": 0}\n";
}

// Every tensor of the tiny BERT under its Hugging Face name, with its shape.
inline std::vector<std::pair<std::string, std::vector<std::int64_t>>> tiny_bert_shapes() {
  const std::int64_t h = kTinyHidden, inner = kTinyIntermediate;
  const auto v = static_cast<std::int64_t>(tiny_vocab().size());
  std::vector<std::pair<std::string, std::vector<std::int64_t>>> s = {
      {"embeddings.word_embeddings.weight", {v, h}},
      {"embeddings.position_embeddings.weight", {kTinyPositions, h}},
      {"embeddings.token_type_embeddings.weight", {2, h}},
      {"embeddings.LayerNorm.weight", {h}},
      {"embeddings.LayerNorm.bias", {h}},
  };
  const std::string p = "encoder.layer.0.";
  for (const char* square : {"attention.self.query", "attention.self.key", "attention.self.value",
                             "attention.output.dense"}) {
    s.push_back({p + square + ".weight", {h, h}});
    s.push_back({p + square + ".bias", {h}});
  }
  for (const char* norm : {"attention.output.LayerNorm", "output.LayerNorm"}) {
    s.push_back({p + norm + ".weight", {h}});
    s.push_back({p + norm + ".bias", {h}});
  }
  s.push_back({p + "intermediate.dense.weight", {inner, h}});
  s.push_back({p + "intermediate.dense.bias", {inner}});
  s.push_back({p + "output.dense.weight", {h, inner}});
  s.push_back({p + "output.dense.bias", {h}});
  s.push_back({"pooler.dense.weight", {h, h}});
  s.push_back({"pooler.dense.bias", {h}});
  return s;
}

// The tiny BERT as safetensors bytes (F32, fixed pseudo-random weights;
// LayerNorm weights 1 and biases 0), written here byte by byte so that the
// targets need no LibTorch to make their fixtures.
inline std::string tiny_bert_safetensors() {
  std::string header = "{";
  std::string data;
  std::uint32_t state = 12345;
  for (const auto& [name, shape] : tiny_bert_shapes()) {
    std::int64_t count = 1;
    std::string dims;
    for (auto d : shape) {
      count *= d;
      dims += (dims.empty() ? "" : ",") + std::to_string(d);
    }
    const bool norm = name.find("LayerNorm") != std::string::npos;
    const std::size_t begin = data.size();
    for (std::int64_t i = 0; i < count; ++i) {
      state = state * 1664525u + 1013904223u;
      float value = (static_cast<float>(state >> 8) / 16777216.0f - 0.5f) * 0.2f;
      if (norm) value = name.size() > 7 && name.compare(name.size() - 7, 7, ".weight") == 0 ? 1.0f : 0.0f;
      char bytes[4];
      std::memcpy(bytes, &value, 4);  // x86-64 and every target here is little-endian
      data.append(bytes, 4);
    }
    if (header.size() > 1) header += ",";
    header += "\"" + name + "\":{\"dtype\":\"F32\",\"shape\":[" + dims + "],\"data_offsets\":[" +
              std::to_string(begin) + "," + std::to_string(data.size()) + "]}";
  }
  header += ",\"__metadata__\":{\"format\":\"pt\"}}";
  while (header.size() % 8 != 0) header += ' ';
  std::string file;
  const std::uint64_t length = header.size();
  for (int i = 0; i < 8; ++i) file.push_back(static_cast<char>((length >> (8 * i)) & 0xff));
  return file + header + data;
}

// Writes config.json and vocab.txt, and model.safetensors unless told not
// to (the target then supplies the weights).
inline void write_tiny_model(const std::string& dir, bool with_weights) {
  std::filesystem::create_directories(dir);
  write_file(dir + "/config.json", tiny_config_json());
  write_file(dir + "/vocab.txt", tiny_vocab_txt());
  if (with_weights) write_file(dir + "/model.safetensors", tiny_bert_safetensors());
}

}  // namespace rapidqa::fuzz

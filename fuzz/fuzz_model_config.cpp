// Feeds a model directory's JSON: the input is config.json
// (TransformerConfig::from_json_text) and also tokenizer_config.json, in a
// directory holding the tiny BERT's vocab.txt and model.safetensors
// (load_model_bundle: the config against the tensors and the vocabulary).
// A bundle that loads must encode a short text, so a config that passes
// the checks but breaks the model (pad id, heads, pruning lists) shows.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_support.h"
#include "model/model_bundle.h"
#include "model/transformer_config.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::string dir = [] {
    const std::string d = rapidqa::fuzz::scratch_dir("model_config") + "/model";
    rapidqa::fuzz::write_tiny_model(d, /*with_weights=*/true);
    return d;
  }();
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto config = rapidqa::model::TransformerConfig::from_json_text(text, "config.json");
  if (!config.is_ok()) return 0;  // load_model_bundle would stop at the same place

  rapidqa::fuzz::write_file(dir + "/config.json", text);
  rapidqa::fuzz::write_file(dir + "/tokenizer_config.json", text);
  auto bundle = rapidqa::model::load_model_bundle(dir, -1);
  if (!bundle.is_ok()) return 0;
  auto tokens = bundle->tokenizer->encode("how do i reset my password? 密码", bundle->usable_sequence_length(16));
  if (!tokens.is_ok()) return 0;
  const auto inputs = rapidqa::model::make_batch({&tokens.value()}, bundle->tokenizer->pad_id());
  (void)bundle->model->forward(inputs);
  return 0;
}

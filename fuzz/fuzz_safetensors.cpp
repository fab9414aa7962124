// Feeds the safetensors loader: the input is a model.safetensors file
// (SafetensorsFile::open, then every tensor it lists read with tensor()),
// and, beside the tiny BERT's config.json and vocab.txt, the weights of a
// model directory (load_transformer: names, dtypes and shapes checked
// against the config). Seeds are the tiny BERT and dtype variants of it
// (fuzz/make_seeds.cpp).
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_support.h"
#include "model/safetensors_file.h"
#include "model/transformer_model.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::string dir = [] {
    const std::string d = rapidqa::fuzz::scratch_dir("safetensors") + "/model";
    rapidqa::fuzz::write_tiny_model(d, /*with_weights=*/false);
    return d;
  }();
  const std::string path = dir + "/model.safetensors";
  rapidqa::fuzz::write_file(path, data, size);

  auto file = rapidqa::model::SafetensorsFile::open(path);
  if (!file.is_ok()) return 0;
  for (const auto& [name, info] : file->tensors()) {
    auto tensor = file->tensor(name);
    (void)tensor;
  }
  auto model = rapidqa::model::load_transformer(dir);
  (void)model;
  return 0;
}

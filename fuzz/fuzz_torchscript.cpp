// Feeds the PyTorch file loader: the input is a model.pt or
// pytorch_model.bin file (read_pytorch_archive: LibTorch's zip reader, then
// our own pickle reader over data.pkl and the tensor records; or, for
// torch.save's format before PyTorch 1.6, the pickles and storages read
// from a memory map), then the weights of a model
// directory beside the tiny BERT's config.json and vocab.txt
// (load_transformer: whatever names, dtypes and shapes the file holds,
// checked against the config). Loading only: nothing in the file is ever
// compiled or run. Seeds: the tiny BERT saved by torch::jit (make_seeds.cpp)
// and a small state dict in torch.save's legacy format (views and a shared storage).
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_support.h"
#include "model/transformer_model.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::string dir = [] {
    const std::string d = rapidqa::fuzz::scratch_dir("torchscript") + "/model";
    rapidqa::fuzz::write_tiny_model(d, /*with_weights=*/false);
    return d;
  }();
  const std::string path = dir + "/model.pt";
  rapidqa::fuzz::write_file(path, data, size);
  auto tensors = rapidqa::model::read_pytorch_archive(path);
  if (!tensors.is_ok()) return 0;
  auto model = rapidqa::model::load_transformer(dir);
  (void)model;
  return 0;
}

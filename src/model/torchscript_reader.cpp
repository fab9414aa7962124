// The one translation unit that includes the TorchScript loader (it is the
// slowest LibTorch header to compile).
#include <torch/script.h>

#include <fmt/format.h>

#include "model/transformer_model.h"

namespace rapidqa::model {

Result<std::map<std::string, at::Tensor>> read_torchscript_parameters(const std::string& path) {
  torch::jit::script::Module module;
  try {
    module = torch::jit::load(path, torch::kCPU);
  } catch (const std::exception& e) {
    std::string what = e.what();
    if (const auto cut = what.find('\n'); cut != std::string::npos) what.resize(cut);
    return Status::invalid_argument(fmt::format("{}: not a loadable TorchScript file: {}", path, what));
  }
  std::map<std::string, at::Tensor> tensors;
  for (const auto& p : module.named_parameters(/*recurse=*/true)) tensors.emplace(p.name, p.value.detach());
  // Some exports register weights as buffers; take those the parameters lack.
  for (const auto& b : module.named_buffers(/*recurse=*/true)) tensors.emplace(b.name, b.value.detach());
  if (tensors.empty()) return Status::invalid_argument(fmt::format("{}: the TorchScript module has no parameters", path));
  return tensors;
}

}  // namespace rapidqa::model

// Which weight files a model directory holds, and reading their tensors:
// the layouts Hugging Face checkpoints ship in.
//
//   model.safetensors                    one safetensors file
//   model.safetensors.index.json         shards named by a weight map
//   pytorch_model.bin                    torch.save's state dict: its zip archive, or the
//                                        format before PyTorch 1.6
//   pytorch_model.bin.index.json         shards of those
//   *.pt (model.pt first)                a TorchScript file with Hugging Face names
//
// They are tried in that order, as from_pretrained prefers safetensors. A
// pytorch_model.bin or .pt file is read by torchscript_reader.cpp, whose
// pickle interpreter knows a fixed list of globals and calls none of them:
// a pickle naming anything else (os.system, builtins.eval) is refused by
// name before a byte of its storage is read.
//
// Thread safety: free functions, no shared state.
#pragma once

#include <ATen/Tensor.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "rapidqa/status.h"

namespace rapidqa::model {

struct CheckpointTensors {
  std::map<std::string, at::Tensor> tensors;
  std::string source;  // the file (or index) read, for messages
};

// The weight file of `model_dir` that would be read, or kNotFound naming
// every layout looked for.
Result<std::string> find_checkpoint_file(const std::string& model_dir);

// Every tensor of the directory's checkpoint. A sharded one is read shard
// by shard: the index must be a JSON object whose "weight_map" maps each
// tensor name to a shard file in the same directory (a plain file name:
// no folders, no "..", no links out), every name must be in the shard the
// map names, and no name may be in two shards. kNotFound when the
// directory holds no checkpoint; kDataLoss or kInvalidArgument naming the
// file and the tensor otherwise.
Result<CheckpointTensors> read_checkpoint_tensors(const std::string& model_dir);

// The bytes of the directory's weights on disk, every shard its index names
// counted; 0 when there are none (for reports, not checks).
std::uint64_t checkpoint_bytes(const std::string& model_dir);

// Every tensor of one file: .safetensors by its name, anything else as a
// PyTorch zip archive (torch.save or torch.jit.save).
Result<std::map<std::string, at::Tensor>> read_weight_file(const std::string& path);

}  // namespace rapidqa::model

// Writing a TransformerModel back as a model directory: what the Quantizer
// and the Pruner save. The tensors carry the Hugging Face names, so the
// directory loads in load_transformer like any checkpoint; INT8 layers add
// "<name>.weight_scale" and, when calibrated, "<name>.input_range" (the
// format is described in docs/quantized-format.md).
#pragma once

#include <map>
#include <string>

#include <ATen/Tensor.h>

#include "model/transformer_model.h"
#include "rapidqa/status.h"

namespace rapidqa::model {

// Every tensor of the model under its Hugging Face name. Fused query, key
// and value are split back into three.
std::map<std::string, at::Tensor> checkpoint_tensors(const TransformerModel& model);

// Copies every file of source_dir into out_dir (created) except the weight
// files at its top (.safetensors, .pt, .bin, shard indexes, ...): config,
// vocabulary, tokenizer, and sentence-transformers module folders whole.
Status copy_model_files(const std::string& source_dir, const std::string& out_dir);

// Writes out_dir/model.safetensors (with `metadata` in its header) and
// copies every other file of source_dir (config, vocabulary, tokenizer and
// pooling files) except other weight files. config_json, when not empty,
// replaces config.json. out_dir is created; it must not be source_dir.
Status save_transformer(const TransformerModel& model, const std::string& source_dir, const std::string& out_dir,
                        const std::map<std::string, std::string>& metadata, const std::string& config_json = "");

// save_transformer for tensors already gathered (and perhaps rewritten,
// e.g. stored sparsely).
Status save_checkpoint(const std::map<std::string, at::Tensor>& tensors, const std::string& source_dir,
                       const std::string& out_dir, const std::map<std::string, std::string>& metadata,
                       const std::string& config_json = "");

}  // namespace rapidqa::model

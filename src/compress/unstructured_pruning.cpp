#include "compress/unstructured_pruning.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

#include <fmt/format.h>

#include "compress/pruning_masks.h"
#include "model/onednn_linear.h"
#include "model/sparse_weight.h"
#include "model/transformer_checkpoint.h"

namespace rapidqa::compress {

Result<std::shared_ptr<model::TransformerModel>> prune_global_l1(const model::TransformerModel& m, double amount) {
  auto copy = model::build_transformer(m.config, model::checkpoint_tensors(m), "pruning");
  if (!copy) return copy.status();
  std::shared_ptr<model::TransformerModel> out = std::move(copy).value();
  for (std::size_t l = 0; l < m.layers.size(); ++l) {
    out->layers[l].head_ids = m.layers[l].head_ids;
    out->layers[l].neuron_ids = m.layers[l].neuron_ids;
  }
  std::vector<std::unique_ptr<model::LinearOp>*> slots;
  std::vector<PrunableTensor> tensors;
  for (std::size_t l = 0; l < out->layers.size(); ++l) {
    auto& layer = out->layers[l];
    const std::pair<const char*, std::unique_ptr<model::LinearOp>*> named[] = {
        {"attention.qkv", &layer.qkv}, {"attention.output", &layer.attention_output},
        {"intermediate", &layer.intermediate}, {"output", &layer.output}};
    for (const auto& [name, op] : named) {
      if ((*op)->kind().rfind("f32", 0) != 0) {
        return Status::invalid_argument(fmt::format("layer {} is quantized; prune before quantizing", l));
      }
      slots.push_back(op);
      tensors.push_back({fmt::format("encoder.layer.{}.{}", l, name), (*op)->dense_weight().clone(), at::Tensor()});
    }
  }
  if (Status s = global_l1_unstructured(tensors, PruningAmount::fraction(amount)); !s.is_ok()) return s;
  if (Status s = make_permanent(tensors); !s.is_ok()) return s;
  c10::InferenceMode inference;
  for (std::size_t i = 0; i < slots.size(); ++i) {
    model::LinearOp& op = **slots[i];
    *slots[i] = model::make_fp32_linear(tensors[i].weight, op.dense_bias(), op.activation());
  }
  return out;
}

Status save_pruned(const model::TransformerModel& m, const std::string& source_dir, const std::string& out_dir,
                   const std::map<std::string, std::string>& metadata, const std::string& config_json) {
  std::map<std::string, at::Tensor> tensors = model::checkpoint_tensors(m);
  model::store_sparse_weights(tensors);
  return model::save_checkpoint(tensors, source_dir, out_dir, metadata, config_json);
}

}  // namespace rapidqa::compress

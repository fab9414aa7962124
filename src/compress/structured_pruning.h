// Structured pruning: removes whole attention heads and FFN neurons from a
// TransformerModel, physically. The matrices shrink (query, key and value
// lose the head's rows, the attention output its columns; the first FFN
// product loses the neuron's row, the second its column), so the pruned
// model is smaller on disk and does less work in every forward pass.
//
// Each layer remembers the original indices of what it kept (head_ids,
// neuron_ids), so a pruned model saves with Hugging Face's "pruned_heads"
// (and our "pruned_intermediate") in config.json, prunes again, and exports
// back to the original shapes with zeros (dense_checkpoint).
//
// Thread safety: thread-compatible; the model must not be running.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <ATen/Tensor.h>

#include "model/transformer_model.h"
#include "rapidqa/status.h"

namespace rapidqa::compress {

// Per layer, the positions (among the layer's current heads or neurons) to remove.
struct StructuredPlan {
  std::vector<std::vector<std::int64_t>> heads;
  std::vector<std::vector<std::int64_t>> neurons;
  std::int64_t head_count() const;
  std::int64_t neuron_count() const;
};

// Importance by weight magnitude, per layer: a head's L2 norm over its
// query, key and value rows and attention-output columns; a neuron's over
// its row of the first FFN product and its column of the second.
std::vector<at::Tensor> head_magnitude(const model::TransformerModel& m);
std::vector<at::Tensor> neuron_magnitude(const model::TransformerModel& m);

struct StructuredOptions {
  double head_fraction = 0.0;    // of all heads left in the model
  double neuron_fraction = 0.0;  // of all FFN neurons left in the model
  // Heads of the last layers are the first candidates (the practice found
  // them the least important): a head's importance, normalised by its
  // layer's mean, is weighted by 0.5 + 0.5 * (distance from the last layer)
  // / layers before the lowest are chosen. false: importance alone.
  bool last_layers_first = true;
};

// The heads and neurons with the lowest importance (one tensor per layer,
// shaped like head_magnitude's), keeping at least one of each per layer.
// kInvalidArgument for a fraction outside [0, 1) or mis-shaped scores.
Result<StructuredPlan> plan_structured(const model::TransformerModel& m, const std::vector<at::Tensor>& head_importance,
                                       const std::vector<at::Tensor>& neuron_importance,
                                       const StructuredOptions& options);

// Removes what the plan names. The model's layers must be FP32 (prune
// before quantizing); kInvalidArgument otherwise or for a bad position.
Status apply_structured(model::TransformerModel& m, const StructuredPlan& plan);

// config.json text for the pruned model: the source config with
// "pruned_heads" and "pruned_intermediate" naming the removed originals.
Result<std::string> pruned_config_json(const std::string& source_config_path, const model::TransformerModel& m);

// m's config with the heads and neurons its layers no longer have named, by
// their original indices, in pruned_heads and pruned_intermediate (what
// build_transformer and TrainableBert read them from).
model::TransformerConfig pruned_config(const model::TransformerModel& m);

// Every tensor at the original (config) shapes, removed heads and neurons as
// zero rows and columns: a checkpoint plain Hugging Face BertModel loads and
// that computes what the pruned model computes.
std::map<std::string, at::Tensor> dense_checkpoint(const model::TransformerModel& m);

}  // namespace rapidqa::compress

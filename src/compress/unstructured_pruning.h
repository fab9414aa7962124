// Unstructured pruning of a whole TransformerModel: global L1 magnitude
// over every encoder linear weight with one threshold (pruning_masks.h has
// the torch.nn.utils.prune semantics), and saving the result with its
// sparse weights stored compactly (model/sparse_weight.h).
#pragma once

#include <map>
#include <memory>
#include <string>

#include "model/transformer_model.h"
#include "rapidqa/status.h"

namespace rapidqa::compress {

// A copy of m whose query/key/value, attention-output and FFN weights have
// the `amount` fraction of smallest magnitudes (over all of them) zeroed.
Result<std::shared_ptr<model::TransformerModel>> prune_global_l1(const model::TransformerModel& m, double amount);

// save_transformer with every weight whose sparse form is smaller stored sparsely.
Status save_pruned(const model::TransformerModel& m, const std::string& source_dir, const std::string& out_dir,
                   const std::map<std::string, std::string>& metadata, const std::string& config_json);

}  // namespace rapidqa::compress

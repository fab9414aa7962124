// Sentence vectors from a transformer's hidden states.
#pragma once

#include <ATen/Tensor.h>

#include "rapidqa/transformer_encoder.h"

namespace rapidqa::model {

// hidden [B, S, H], mask [B, S] (1 = token) -> [B, H]: the [CLS] state, or
// the mean over real tokens; L2-normalised when asked.
at::Tensor pool_hidden(const at::Tensor& hidden, const at::Tensor& mask, Pooling pooling, bool normalize);

}  // namespace rapidqa::model

// Sentence vectors from a transformer's hidden states.
#pragma once

#include <ATen/Tensor.h>

#include <cstdint>
#include <vector>

#include "rapidqa/transformer_encoder.h"

namespace rapidqa::model {

// hidden [B, S, H], mask [B, S] (1 = token, right-padded) -> [B, H] by
// one mode (kFromModel reads as kMean); L2-normalised when asked.
at::Tensor pool_hidden(const at::Tensor& hidden, const at::Tensor& mask, Pooling pooling, bool normalize);

// Several modes concatenated in order, [B, H * modes.size()], as
// sentence-transformers' Pooling module does. The first skipped_tokens
// positions are left out of every mode that averages or takes a maximum
// (a prompt with include_prompt false); [CLS] and the last token are
// taken as they are.
at::Tensor pool_modes(const at::Tensor& hidden, const at::Tensor& mask, const std::vector<Pooling>& modes,
                      std::int64_t skipped_tokens);

}  // namespace rapidqa::model

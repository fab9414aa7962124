// The Quantizer's work on a model in memory (include/rapidqa/quantizer.h
// wraps it for model directories): replaces the chosen LinearOps and
// embedding tables of a TransformerModel by INT8 ones, measuring each.
#pragma once

#include <vector>

#include "compress/precision_table.h"
#include "model/transformer_model.h"
#include "rapidqa/quantizer.h"

namespace rapidqa::compress {

// A replaceable linear layer of a model and its name in precision tables.
struct LinearSlot {
  std::string name;
  std::unique_ptr<model::LinearOp>* op;
};
std::vector<LinearSlot> linear_slots(model::TransformerModel& model);

// Quantizes `model` in place. calibration: tokenised batches (may be
// empty, see QuantizerOptions::calibration_texts).
Result<QuantizationReport> quantize_transformer(model::TransformerModel& model,
                                                const std::vector<model::ModelInputs>& calibration,
                                                const PrecisionTable& table, const QuantizerOptions& options);

// SQNR in dB of `approx` against `reference` (+inf when equal) and their
// cosine, over all elements.
double sqnr_db(const at::Tensor& reference, const at::Tensor& approx);
double output_cosine(const at::Tensor& reference, const at::Tensor& approx);

}  // namespace rapidqa::compress

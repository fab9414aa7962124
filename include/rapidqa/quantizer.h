// Quantizer: turns a transformer model directory into an INT8 one that
// loads and runs like any model directory (TransformerEncoder, QAEngine,
// rapidqa-encode, rapidqa-demo), and reports what every layer lost.
//
// Weights become INT8 per output channel (symmetric); activations are
// quantized to u8 with a zero point, per call from the batch's own range
// (dynamic) or with ranges calibrated on sample text (static). A precision
// table chooses per layer: INT8, FP32, or auto (INT8 unless the model's
// sentence vectors then drift past the budget, or INT8 is clearly slower
// for the layer's shape).
// Each quantized layer is measured on the calibration inputs against FP32
// (SQNR, cosine, latency before and after); with bias correction the mean
// output shift it showed there is added back to its bias.
//
// The saved format: docs/quantized-format.md.
//
// Thread safety: quantize_model is thread-safe (it shares nothing), but it
// uses every intra-op thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "rapidqa/export.h"
#include "rapidqa/status.h"

namespace rapidqa {

enum class QuantizationMode {
  kDynamic,  // activation ranges measured per call
  kStatic,   // activation ranges calibrated once (needs calibration text)
};

struct QuantizerOptions {
  QuantizationMode mode = QuantizationMode::kDynamic;
  // "default" (the practice's table), "auto", "int8", or the path of a
  // table file (format in docs/quantized-format.md).
  std::string precision_table = "default";
  // Sample text the calibration, the bias correction, the report and the
  // auto mode run on (knowledge-base questions, or a user's file). Static
  // mode needs some; dynamic mode without any measures nothing and skips
  // bias correction (the report says so).
  std::vector<std::string> calibration_texts;
  std::size_t calibration_batch_size = 16;  // texts per calibration forward pass
  std::size_t max_sequence_length = 128;    // tokens per calibration text
  std::size_t sample_rows = 512;            // input rows kept per layer to measure it on
  // auto's accuracy budget: with every auto layer in INT8, the worst
  // calibration text's sentence vector (mean-pooled, normalised) keeps at
  // least this cosine to FP32's. Where a model misses it, layers go back to
  // FP32 lowest SQNR first until it holds; where it holds, auto is as fast
  // as quantizing every layer.
  double min_vector_cosine = 0.99;
  // auto, when the model misses min_vector_cosine: every layer whose INT8
  // output's SQNR is below this (dB) goes back to FP32 first.
  double min_sqnr_db = 25.0;
  // Row counts (tokens per call: batch x sequence) at which each layer's
  // latency is measured (FP32 and INT8 timed side by side, medians); auto
  // keeps FP32 only where INT8 is at least 10% slower at all of them.
  std::vector<std::int64_t> latency_rows = {32, 1024};
  // Called with one line per step ("calibrating 3/20 batches", a layer's
  // result...). May be empty.
  std::function<void(const std::string&)> progress;
};

struct LayerQuantizationReport {
  std::string name;              // e.g. "encoder.layer.3.intermediate"
  std::int64_t in_features = 0, out_features = 0;
  std::string precision;         // "fp32", "int8-dynamic", "int8-static", "int8-rows" (embeddings)
  std::string requested;         // the table's choice: "fp32", "int8", "auto"
  std::string observer;          // static only
  bool bias_corrected = false;
  double sqnr_db = 0;            // INT8 output against FP32 on the calibration inputs (weights for embeddings)
  double cosine = 1;
  std::vector<double> fp32_microseconds;  // one per QuantizerOptions::latency_rows
  std::vector<double> int8_microseconds;
  std::string note;              // why auto kept FP32, or what was not measured
};

struct QuantizationReport {
  std::vector<LayerQuantizationReport> layers;
  std::vector<std::int64_t> latency_rows;
  std::size_t fp32_weight_bytes = 0;       // encoder weights before
  std::size_t quantized_weight_bytes = 0;  // and after
  std::size_t calibration_texts = 0;
  double embedding_cosine_mean = 1;  // sentence vectors of the calibration texts, quantized vs FP32
  double embedding_cosine_min = 1;
  bool reduced_range = false;        // 7-bit activations because this CPU lacks VNNI

  RAPIDQA_EXPORT std::string to_text() const;  // the per-layer table as printed by rapidqa-quantize
};

// Calibration text from a file: a knowledge file (.jsonl: every question
// and alternate) or plain text (one per non-blank line). kNotFound /
// kInvalidArgument (with the line) for a missing, bad or empty file.
RAPIDQA_EXPORT Result<std::vector<std::string>> read_calibration_texts(const std::string& path);

// Quantizes the model in model_dir and writes the result to out_dir (a
// model directory: tokenizer and config files are copied). kNotFound /
// kInvalidArgument for a bad directory, table or options (named in the
// message); nothing is written then.
RAPIDQA_EXPORT Result<QuantizationReport> quantize_model(const std::string& model_dir, const std::string& out_dir,
                                                         const QuantizerOptions& options);

}  // namespace rapidqa

// Pruner: makes a transformer model directory really smaller and faster.
//
// Structured pruning removes whole attention heads and FFN neurons and
// shrinks the matrices, so the saved file is smaller and every forward pass
// does less work. Importance: weight magnitude, Taylor (|w * dL/dw|
// accumulated over calibration batches through LibTorch autograd), or, for
// heads, the head-mask gradient of Michel et al. (2019). The schedule
// prunes, fine-tunes (distilling from the unpruned model: MSE on sentence
// vectors plus KL on in-batch similarity logits at a temperature, added to
// the contrastive loss) and evaluates in rounds, and stops before the
// metric (held-out top-1 retrieval on a knowledge file) falls below a
// threshold.
//
// Unstructured pruning (global L1 magnitude with one threshold over every
// encoder weight, torch.nn.utils.prune.global_unstructured semantics)
// zeroes weights instead, and fine-tuning keeps them zero; the saved file
// stores them compactly.
//
// The output loads like any model directory (engine, rapidqa-encode) and
// can then be quantized.
//
// Thread safety: prune_model shares nothing, but it uses every core.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "rapidqa/export.h"
#include "rapidqa/status.h"

namespace rapidqa {

enum class PruningMethod {
  kSchedule,    // rounds of structured pruning, fine-tuning and evaluation
  kStructured,  // one structured step (head_fraction, neuron_fraction), then fine-tuning
  kGlobalL1,    // one global unstructured step (amount), then fine-tuning with the zeros held
};

enum class ImportanceMethod { kMagnitude, kTaylor, kHeadMask };

struct PrunerOptions {
  PruningMethod method = PruningMethod::kSchedule;
  std::string knowledge_file;  // FAQ (.jsonl) for importance, fine-tuning and the metric; required
  // kStructured: fractions of the heads and FFN neurons left to remove.
  double head_fraction = 0.3;
  double neuron_fraction = 0.3;
  // kGlobalL1: fraction of the encoder's linear weights to zero.
  double amount = 0.4;
  ImportanceMethod head_importance = ImportanceMethod::kHeadMask;
  ImportanceMethod neuron_importance = ImportanceMethod::kTaylor;
  bool last_layers_first = true;           // heads of the last layers are the first candidates
  std::size_t importance_batches = 8;      // calibration batches of phrasing pairs for gradients
  // kSchedule: the first round's rate (of heads and neurons), the target
  // share of encoder parameters removed, and the lowest acceptable metric.
  double start_rate = 0.3;
  double target_reduction = 0.4;
  double max_metric_drop = 0.012;          // stop before top-1 falls more than this below the unpruned model
  std::size_t max_rounds = 10;
  // Fine-tuning after each step (LibTorch AdamW).
  bool fine_tune = true;
  std::size_t fine_tune_epochs = 2;
  double learning_rate = 2e-4;
  double distillation_mse_weight = 1.0;    // MSE between student and teacher sentence vectors
  double distillation_kl_weight = 1.0;     // KL between their in-batch similarity distributions
  double distillation_temperature = 2.0;
  std::uint64_t seed = 1;
  std::size_t latency_batch = 8;           // the shape latency is measured at
  std::size_t latency_sequence = 128;
  std::string export_dense_dir;            // when set: also a plain Hugging Face checkpoint at the original shapes
  std::function<void(const std::string&)> progress;
};

struct LayerPruningReport {
  std::string name;                 // "encoder.layer.3"
  std::int64_t heads_before = 0, heads_after = 0;
  std::int64_t neurons_before = 0, neurons_after = 0;
  std::int64_t parameters_before = 0, parameters_after = 0;
  double sparsity = 0;              // zeros among the layer's linear weights after pruning
};

struct PruningRound {
  double rate = 0;                  // of heads and neurons removed in this round
  double metric = 0;                // top-1 after fine-tuning
  std::int64_t parameters = 0;      // encoder parameters after the round
  bool accepted = false;
};

struct PruningReport {
  std::int64_t parameters_before = 0, parameters_after = 0;  // encoder parameters (embeddings and layers)
  std::size_t file_bytes_before = 0, file_bytes_after = 0;   // model.safetensors on disk
  // One forward pass at the latency shape, of the original and the pruned
  // model, timed side by side in one process after pruning (interleaved
  // samples, medians), so their ratio is the speed-up and nothing else.
  double latency_ms_before = 0, latency_ms_after = 0;
  double metric_before = 0, metric_after = 0;                // held-out top-1 retrieval accuracy
  std::vector<PruningRound> rounds;
  std::vector<LayerPruningReport> layers;

  RAPIDQA_EXPORT std::string to_text() const;
};

// Prunes the model in model_dir into out_dir. kInvalidArgument /
// kNotFound for bad options, directories or knowledge file (named);
// nothing is written then.
RAPIDQA_EXPORT Result<PruningReport> prune_model(const std::string& model_dir, const std::string& out_dir,
                                                 const PrunerOptions& options);

}  // namespace rapidqa

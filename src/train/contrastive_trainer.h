// Contrastive training of a TrainableBert on a FaqSplit: two phrasings of
// one entry are a positive pair, the other entries' phrasings in the same
// batch are its negatives (in-batch InfoNCE, "multiple negatives ranking"),
// so the model learns to put phrasings of the same question close together
// in cosine similarity, which is exactly what retrieval over the knowledge
// base needs. The Pruner reuses it to fine-tune pruned models, and its step
// hook to distil them from the unpruned one.
//
// Thread safety: train_contrastive() uses the model exclusively while it
// runs and calls back on the calling thread; it leaves process-wide thread
// settings as it found them.
#pragma once

#include <ATen/Tensor.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "rapidqa/status.h"
#include "text/wordpiece_tokenizer.h"
#include "train/faq_split.h"

namespace rapidqa::train {

class TrainableBert;

struct ContrastiveOptions {
  std::size_t epochs = 40;              // passes in which every training phrasing is an anchor once
  std::size_t batch_size = 64;          // pairs per step, each from a different entry (at most one per entry)
  double learning_rate = 2e-3;          // AdamW peak, reached after the warm-up (high for BERT: few steps, small model)
  double warmup_fraction = 0.1;         // share of all steps over which the rate rises from 0; then linear decay to 0
  double weight_decay = 0.01;           // AdamW decoupled decay; never on biases or LayerNorm weights
  double temperature = 0.05;            // cosine similarities are divided by it before the softmax
  double max_gradient_norm = 1.0;       // global L2 clip per step; 0 = no clipping
  std::size_t max_sequence_length = 64; // tokens per phrasing, [CLS] and [SEP] included
  std::uint64_t seed = 1;               // pairing, batching and dropout: one seed and one thread count give one run
  std::size_t evaluate_every = 5;       // epochs between held-out measurements (the last epoch always); 0 = never
  bool use_companions = true;           // also pair phrasings with their entry's companions (answers)
  // OpenBLAS threads while training (LibTorch runs one); 0 = all cores, at
  // most max_compute_threads().
  int threads = 0;
};

struct EpochReport {
  std::size_t epoch = 0;                // 1-based
  std::size_t epochs = 0;               // of this run
  std::size_t steps = 0;                // optimiser steps so far
  double mean_loss = 0;                 // mean per-step loss of this epoch (hook terms included)
  std::chrono::milliseconds elapsed{0}; // since training started, measurements included
  std::optional<RetrievalAccuracy> held_out;  // measured after this epoch, when it was
};

struct TrainingReport {
  std::vector<EpochReport> epochs;      // one per epoch, in order
  std::size_t pairs_per_epoch = 0;      // anchor/positive pairs drawn each epoch
};

// Extra loss for each step, added to the contrastive loss (a distillation
// term against a teacher, for one): called with the step's anchor and
// positive texts and the model's embeddings of them ([B, hidden], L2-
// normalised, with gradients), it returns a scalar. Its errors are
// exceptions; they end training with kInternal.
using StepLossHook = std::function<at::Tensor(const std::vector<std::string>& anchors,
                                              const std::vector<std::string>& positives,
                                              const at::Tensor& anchor_embeddings,
                                              const at::Tensor& positive_embeddings)>;
using EpochCallback = std::function<void(const EpochReport&)>;

// Trains model in place with AdamW. on_epoch (optional) is called after
// every epoch. kInvalidArgument for options that cannot train (no epochs,
// batch size below 2, non-positive rate or temperature) or a split in which
// fewer than two entries have a training pair (two phrasings, or a phrasing
// and a companion); a failure inside
// LibTorch is kInternal with its message. The model is left in eval mode.
Result<TrainingReport> train_contrastive(TrainableBert& model, const text::Tokenizer& tokenizer,
                                         const FaqSplit& split, const ContrastiveOptions& options,
                                         const EpochCallback& on_epoch = {}, const StepLossHook& step_hook = {});

// The symmetric in-batch loss: row i of anchors and of positives are a
// pair ([B, D], L2-normalised); the mean of the cross-entropy of each anchor
// against all positives and of each positive against all anchors, over
// similarities divided by temperature.
at::Tensor in_batch_contrastive_loss(const at::Tensor& anchors, const at::Tensor& positives, double temperature);

}  // namespace rapidqa::train

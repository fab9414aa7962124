// TransformerModel: a BERT-family encoder held as plain data (embeddings,
// then a list of layers whose linear parts are replaceable LinearOps), and
// its forward pass over ATen and OpenBLAS. Layers may differ in shape (the
// Pruner removes heads and neurons per layer) and in kind (the Quantizer
// swaps INT8 LinearOps in); the forward code does not care.
//
// The forward pass runs on the runtime's WorkPool (runtime/work_pool.h):
// it packs the batch's tokens (padding costs nothing), splits each product
// into column tiles (tiled_matmul.h) and each attention into (sequence,
// head) tasks, and keeps its activations in per-thread buffers reused
// across calls.
//
// Thread safety: forward() is const and may run from several threads at
// once (its buffers are per thread). Callers bound how many: the
// TransformerEncoder and the ExtractiveReader take a
// runtime::ComputeCallSlot per call (as many calls at once as the pool has
// threads, each then on a thread of its own).
#pragma once

#include <ATen/Tensor.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "model/embedding_table.h"
#include "model/linear_op.h"
#include "model/transformer_config.h"
#include "rapidqa/status.h"

namespace rapidqa::model {

struct LayerNormWeights {
  at::Tensor weight;
  at::Tensor bias;
  double eps = 1e-12;
};

struct TransformerLayer {
  std::int64_t num_heads = 0;                   // heads left in this layer
  std::int64_t head_dim = 0;
  // The original indices of the heads and FFN neurons this layer still has
  // (all of them unless structured pruning removed some), in order.
  std::vector<std::int64_t> head_ids;
  std::vector<std::int64_t> neuron_ids;
  std::unique_ptr<LinearOp> qkv;                // [3 * heads * head_dim, hidden]: query rows, key rows, value rows
  std::unique_ptr<LinearOp> attention_output;   // [hidden, heads * head_dim]
  LayerNormWeights attention_norm;
  std::unique_ptr<LinearOp> intermediate;       // [intermediate, hidden], activation fused
  std::unique_ptr<LinearOp> output;             // [hidden, intermediate]
  LayerNormWeights output_norm;

  // Weights, biases and norms: what structured pruning shrinks.
  std::int64_t parameter_count() const;
};

struct ModelInputs {
  at::Tensor input_ids;       // [batch, seq] int64
  at::Tensor attention_mask;  // [batch, seq] int64, 1 = token, 0 = padding
  at::Tensor token_type_ids;  // [batch, seq] int64, or undefined (all zero)
};

struct TransformerModel {
  TransformerConfig config;
  EmbeddingTable word_embeddings;        // [vocab, hidden]
  EmbeddingTable position_embeddings;    // [max_positions, hidden]
  EmbeddingTable token_type_embeddings;  // [type_vocab, hidden] or undefined (DistilBERT)
  LayerNormWeights embedding_norm;
  // ELECTRA with embeddings narrower than the layers: [hidden, embedding_size].
  std::unique_ptr<LinearOp> embedding_projection;
  // MPNet: [buckets, heads], one learned bias per head and bucket of the
  // key's position relative to the query's, shared by every layer.
  at::Tensor relative_attention_bias;
  std::vector<TransformerLayer> layers;
  std::unique_ptr<LinearOp> pooler;   // dense + tanh on [CLS], when the checkpoint has one
  std::unique_ptr<LinearOp> qa_head;  // [2, hidden] start/end logits, for question answering

  // The last hidden state [batch, seq, hidden]; rows at padding positions
  // (attention_mask 0) are zero. Positions count from each row's start
  // (past the padding index for the RoBERTa family); a model with one
  // token type ignores token_type_ids. Runs in inference mode. Throws
  // std::invalid_argument for token ids or types outside the tables.
  at::Tensor forward(const ModelInputs& inputs) const;
  // Encoder parameters (embeddings and layers, not heads) and their bytes.
  std::int64_t parameter_count() const;
  std::int64_t layer_parameter_count() const;  // the layers' alone
  std::size_t weight_bytes() const;
};

// Runs every FP32 linear layer (encoder layers, pooler, QA head) in
// bfloat16 from now on (Bf16Linear); INT8 layers stay as they are.
// kFailedPrecondition where the CPU has no native BF16 (bf16_linear.h).
Status convert_to_bf16(TransformerModel& model);

// The Hugging Face names of one architecture's per-layer tensors.
struct LayerNames {
  std::string layer_prefix;  // "encoder.layer." or "transformer.layer."
  std::string query, key, value, attention_output, attention_norm, intermediate, output, output_norm;
};
LayerNames names_for(Architecture arch);

// MPNet's bucket (Hugging Face's relative_position_bucket, 128 positions)
// of a key `relative` positions after the query (negative: before it).
std::int64_t relative_position_bucket(std::int64_t relative, std::int64_t buckets);

// Loads a model directory: config.json and the weights in any layout
// checkpoint_files.h reads (model.safetensors, pytorch_model.bin, either
// sharded, or a TorchScript file) under the Hugging Face names. A quantized checkpoint (docs/quantized-format.md: I8 weights with
// a "<name>.weight_scale" beside them) loads into INT8 layers. Accepts the names with a "bert." / "distilbert." / "model." prefix
// and ignores tensors of heads it does not use. Every required tensor is
// checked for presence and shape, every float one it uses for NaN and infinity
// (one pass over the weights), INT8 scales for being positive and input
// ranges for min <= max; an error names the tensor and what it should be.
// A pytorch_model.bin or TorchScript file is read for its tensors only
// (torchscript_pickle.h): none of its code is compiled or run. Nothing half-loaded is ever returned.
Result<std::shared_ptr<const TransformerModel>> load_transformer(const std::string& model_dir);

// The same from tensors already in memory (used by tests and by tools that
// build or rewrite models).
Result<std::shared_ptr<TransformerModel>> build_transformer(const TransformerConfig& config,
                                                           const std::map<std::string, at::Tensor>& tensors,
                                                           const std::string& source);

// Reads every named tensor of a PyTorch file (torchscript_reader.cpp): a
// TorchScript file's parameters by module path, or the entries of the state
// dict torch.save wrote (its zip archive, or the format before PyTorch 1.6),
// without loading anything as a module. kDataLoss for a malformed archive or
// pickle, kInvalidArgument for unsupported content (named).
Result<std::map<std::string, at::Tensor>> read_pytorch_archive(const std::string& path);

}  // namespace rapidqa::model

// Structured pruning on the tiny checkpoints: heads and neurons really
// leave the matrices, the pruned model computes what its dense export
// (zeros at the original shapes) computes, it saves and loads (sparse
// weights compactly), and a pruned model can then be quantized.
// LibTorch first: its module headers pull in glog, whose CHECK macro Catch
// must override.
#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

#include "train/trainable_bert.h"
#undef CHECK
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "compress/structured_pruning.h"
#include "compress/unstructured_pruning.h"
#include "model/sparse_weight.h"
#include "model/transformer_checkpoint.h"
#include "model/transformer_model.h"
#include "rapidqa/pruner.h"
#include "rapidqa/quantizer.h"

namespace fs = std::filesystem;
using rapidqa::model::TransformerModel;

namespace {

const std::string kTiny = std::string(RAPIDQA_TINY_MODELS) + "/bert-tiny";

std::shared_ptr<TransformerModel> fresh_tiny() {
  auto loaded = rapidqa::model::load_transformer(kTiny);
  REQUIRE(loaded.is_ok());
  auto m = rapidqa::model::build_transformer((*loaded)->config, rapidqa::model::checkpoint_tensors(**loaded), "tiny");
  REQUIRE(m.is_ok());
  return m.value();
}

rapidqa::model::ModelInputs sample_inputs() {
  rapidqa::model::ModelInputs in;
  in.input_ids = at::tensor({2, 40, 41, 42, 43, 3, 2, 50, 51, 3, 0, 0}, at::kLong).view({2, 6});
  in.attention_mask = at::tensor({1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0}, at::kLong).view({2, 6});
  return in;
}

at::Tensor pooled(const TransformerModel& m, const rapidqa::model::ModelInputs& in) {
  c10::InferenceMode inference;
  const at::Tensor h = m.forward(in);
  const at::Tensor mask = in.attention_mask.to(at::kFloat).unsqueeze(-1);
  return (h * mask).sum(1) / mask.sum(1);
}

fs::path scratch(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("rapidqa-structured-test-" + name);
  fs::remove_all(dir);
  return dir;
}

}  // namespace

TEST_CASE("Removing heads and neurons shrinks the matrices", "[pruner][structured]") {
  auto m = fresh_tiny();
  const std::int64_t heads = m->layers[0].num_heads, d = m->layers[0].head_dim, h = m->config.hidden_size;
  const std::int64_t inner = m->layers[0].intermediate->out_features();
  const std::int64_t before = m->parameter_count();
  rapidqa::compress::StructuredPlan plan;
  plan.heads = {{1}, {0, heads - 1}};
  plan.neurons = {{0, 5, 7}, {}};
  REQUIRE(rapidqa::compress::apply_structured(*m, plan).is_ok());
  CHECK(m->layers[0].num_heads == heads - 1);
  CHECK(m->layers[0].qkv->out_features() == 3 * (heads - 1) * d);
  CHECK(m->layers[0].attention_output->in_features() == (heads - 1) * d);
  CHECK(m->layers[0].intermediate->out_features() == inner - 3);
  CHECK(m->layers[0].output->in_features() == inner - 3);
  CHECK(m->layers[1].num_heads == heads - 2);
  CHECK(m->layers[1].head_ids == std::vector<std::int64_t>(
                                     [&] { std::vector<std::int64_t> v; for (std::int64_t i = 1; i < heads - 1; ++i) v.push_back(i); return v; }()));
  CHECK(m->layers[0].neuron_ids.front() == 1);
  const std::int64_t removed = 3 * d * (h + 1) * 3 + d * h * 3  // 3 heads: q, k, v rows (+bias) and output columns
                               + 3 * (h + 1) + 3 * h;           // 3 neurons: a row (+bias) and a column
  CHECK(before - m->parameter_count() == removed);
  // Every layer keeps a head; a position past the end is refused.
  rapidqa::compress::StructuredPlan all;
  all.heads = {{0, 1, 2}};
  CHECK_FALSE(rapidqa::compress::apply_structured(*m, all).is_ok());
  rapidqa::compress::StructuredPlan past;
  past.neurons = {{inner}};
  CHECK_FALSE(rapidqa::compress::apply_structured(*m, past).is_ok());
}

TEST_CASE("A pruned model computes what its dense export computes, and saves and loads", "[pruner][structured]") {
  auto original = fresh_tiny();
  auto m = fresh_tiny();
  const auto heads = rapidqa::compress::head_magnitude(*m);
  const auto neurons = rapidqa::compress::neuron_magnitude(*m);
  rapidqa::compress::StructuredOptions options;
  options.head_fraction = 0.25;
  options.neuron_fraction = 0.4;
  auto plan = rapidqa::compress::plan_structured(*m, heads, neurons, options);
  REQUIRE(plan.is_ok());
  CHECK(plan->head_count() == 2);  // 25% of 8 heads
  CHECK(plan->neuron_count() == 51);  // 40% of 128 neurons, rounded
  // The last layer gives up heads first.
  CHECK(plan->heads[1].size() >= plan->heads[0].size());
  REQUIRE(rapidqa::compress::apply_structured(*m, *plan).is_ok());

  const auto in = sample_inputs();
  auto dense = rapidqa::model::build_transformer(m->config, rapidqa::compress::dense_checkpoint(*m), "dense export");
  REQUIRE(dense.is_ok());
  CHECK((*dense)->layers[0].num_heads == original->layers[0].num_heads);  // original shapes
  CHECK(at::allclose(pooled(*m, in), pooled(**dense, in), 1e-5, 1e-5));
  CHECK_FALSE(at::allclose(pooled(*m, in), pooled(*original, in), 1e-3, 1e-3));  // it did change the model

  const fs::path out = scratch("save");
  auto config = rapidqa::compress::pruned_config_json(kTiny + "/config.json", *m);
  REQUIRE(config.is_ok());
  REQUIRE(rapidqa::compress::save_pruned(*m, kTiny, out.string(), {{"format", "pt"}}, config.value()).is_ok());
  CHECK(fs::file_size(out / "model.safetensors") < fs::file_size(fs::path(kTiny) / "model.safetensors"));
  const auto j = nlohmann::json::parse(std::ifstream(out / "config.json"));
  CHECK(j.at("pruned_heads").size() >= 1);
  auto loaded = rapidqa::model::load_transformer(out.string());
  REQUIRE(loaded.is_ok());
  CHECK((*loaded)->layers[1].num_heads == m->layers[1].num_heads);
  CHECK((*loaded)->layers[0].neuron_ids == m->layers[0].neuron_ids);
  CHECK(at::allclose(pooled(**loaded, in), pooled(*m, in), 1e-6, 1e-6));

  // Then INT8: pruning and quantization compose.
  rapidqa::QuantizerOptions q;
  q.precision_table = "int8";
  q.latency_rows = {8};
  q.calibration_texts = {"where is my order", "how do i reset my password"};
  const fs::path quantized = scratch("quantized");
  auto report = rapidqa::quantize_model(out.string(), quantized.string(), q);
  REQUIRE(report.is_ok());
  auto int8 = rapidqa::model::load_transformer(quantized.string());
  REQUIRE(int8.is_ok());
  CHECK((*int8)->layers[1].qkv->kind() == "int8-dynamic");
  CHECK((*int8)->layers[1].num_heads == m->layers[1].num_heads);
  const at::Tensor a = pooled(*m, in), b = pooled(**int8, in);
  CHECK(((a * b).sum(1) / (a.norm(2, 1) * b.norm(2, 1)) > 0.99).all().item<bool>());
  // A quantized model is not pruned further.
  auto qm = std::const_pointer_cast<TransformerModel>(int8.value());
  rapidqa::compress::StructuredPlan more;
  more.neurons = {{0}};
  CHECK(rapidqa::compress::apply_structured(*qm, more).message().find("prune before quantizing") !=
        std::string::npos);
}

TEST_CASE("Global L1 pruning zeroes the smallest weights and stores them compactly", "[pruner][unstructured]") {
  auto m = fresh_tiny();
  auto pruned = rapidqa::compress::prune_global_l1(*m, 0.4);
  REQUIRE(pruned.is_ok());
  double zeros = 0, total = 0, largest_zeroed = 0, smallest_kept = 1e9;
  for (std::size_t l = 0; l < m->layers.size(); ++l) {
    const auto& before = m->layers[l];
    const auto& after = (*pruned)->layers[l];
    const std::pair<const rapidqa::model::LinearOp*, const rapidqa::model::LinearOp*> ops[] = {
        {before.qkv.get(), after.qkv.get()}, {before.attention_output.get(), after.attention_output.get()},
        {before.intermediate.get(), after.intermediate.get()}, {before.output.get(), after.output.get()}};
    for (const auto& [b, a] : ops) {
      const at::Tensor wb = b->dense_weight(), wa = a->dense_weight();
      const at::Tensor zeroed = wa.eq(0);
      zeros += zeroed.sum().item<double>();
      total += static_cast<double>(wa.numel());
      if (zeroed.any().item<bool>()) largest_zeroed = std::max(largest_zeroed, wb.abs().masked_select(zeroed).max().item<double>());
      smallest_kept = std::min(smallest_kept, wb.abs().masked_select(zeroed.logical_not()).min().item<double>());
      CHECK(at::equal(wa.masked_select(zeroed.logical_not()), wb.masked_select(zeroed.logical_not())));
    }
  }
  CHECK(zeros / total == Approx(0.4).margin(0.001));
  CHECK(largest_zeroed <= smallest_kept);  // one threshold across every layer
  const fs::path out = scratch("sparse");
  REQUIRE(rapidqa::compress::save_pruned(**pruned, kTiny, out.string(), {}, "").is_ok());
  CHECK(fs::file_size(out / "model.safetensors") < fs::file_size(fs::path(kTiny) / "model.safetensors"));
  auto loaded = rapidqa::model::load_transformer(out.string());
  REQUIRE(loaded.is_ok());
  const auto in = sample_inputs();
  CHECK(at::equal(pooled(**loaded, in), pooled(**pruned, in)));
}

TEST_CASE("Every family trains and prunes: the trainable copy computes the runtime's states, with heads removed",
          "[pruner][structured][families]") {
  for (const std::string name : {"bert-tiny", "roberta-tiny", "xlm-roberta-tiny-bin", "camembert-tiny",
                                 "electra-tiny-sharded", "mpnet-tiny"}) {
    INFO(name);
    auto loaded = rapidqa::model::load_transformer(std::string(RAPIDQA_TINY_MODELS) + "/" + name);
    REQUIRE(loaded.is_ok());
    auto m = rapidqa::model::build_transformer((*loaded)->config, rapidqa::model::checkpoint_tensors(**loaded), name);
    REQUIRE(m.is_ok());
    // Heads leave both layers (MPNet's shared bias must follow each
    // layer's own heads), and some neurons.
    rapidqa::compress::StructuredPlan plan;
    plan.heads = {{1}, {0, 3}};
    plan.neurons = {{0, 5, 17}, {}};
    REQUIRE(rapidqa::compress::apply_structured(**m, plan).is_ok());
    const auto config = rapidqa::compress::pruned_config(**m);
    CHECK(config.pruned_heads.at(1) == std::vector<std::int64_t>{0, 3});
    auto student = rapidqa::train::TrainableBert::from_tensors(config, rapidqa::model::checkpoint_tensors(**m), name);
    INFO((student.is_ok() ? "" : student.status().message()));
    REQUIRE(student.is_ok());
    (*student)->eval();
    // Real tokens only differ from the runtime in float rounding; the
    // second row is padded (its tail is ignored).
    const auto in = sample_inputs();
    at::Tensor trained;
    {
      at::NoGradGuard no_grad;
      trained = (*student)->forward(in);
    }
    c10::InferenceMode inference;
    const at::Tensor runtime = (*m)->forward(in);
    const at::Tensor mask = in.attention_mask.to(at::kFloat).unsqueeze(-1);
    CHECK(((trained - runtime) * mask).abs().max().item<float>() < 1e-4);
    // And back: the student's tensors build the same runtime model.
    auto back = rapidqa::model::build_transformer(config, (*student)->export_tensors(), name);
    REQUIRE(back.is_ok());
    CHECK(at::allclose(pooled(**back, in), pooled(**m, in), 1e-6, 1e-6));
  }
}

TEST_CASE("prune_model prunes RoBERTa, ELECTRA and MPNet directories and their pruned models load",
          "[pruner][structured][families]") {
  for (const std::string name : {"roberta-tiny", "electra-tiny", "mpnet-tiny"}) {
    INFO(name);
    rapidqa::PrunerOptions options;
    options.knowledge_file = std::string(RAPIDQA_SOURCE_DIR) + "/examples/data/faq.jsonl";
    options.method = rapidqa::PruningMethod::kStructured;
    options.head_fraction = 0.25;
    options.neuron_fraction = 0.25;
    options.fine_tune_epochs = 1;
    options.importance_batches = 2;
    options.latency_sequence = 16;
    const fs::path out = scratch("family-" + name);
    auto report = rapidqa::prune_model(std::string(RAPIDQA_TINY_MODELS) + "/" + name, out.string(), options);
    INFO((report.is_ok() ? "" : report.status().message()));
    REQUIRE(report.is_ok());
    CHECK(report->parameters_after < report->parameters_before);
    auto pruned = rapidqa::model::load_transformer(out.string());
    REQUIRE(pruned.is_ok());
    auto source = rapidqa::model::load_transformer(std::string(RAPIDQA_TINY_MODELS) + "/" + name);
    REQUIRE(source.is_ok());
    CHECK((*pruned)->config.model_type == (*source)->config.model_type);
    std::int64_t heads = 0;
    for (const auto& layer : (*pruned)->layers) heads += layer.num_heads;
    CHECK(heads < (*pruned)->config.num_heads * (*pruned)->config.num_layers);
    CHECK(pooled(**pruned, sample_inputs()).isfinite().all().item<bool>());
  }
}

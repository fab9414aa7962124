// prune_model end to end on the trained model (the trained_model fixture,
// RAPIDQA_TRAINED_MODEL): the schedule's rounds and its stopping rule, one
// structured step, global L1 with fine-tuning that keeps its zeros, and
// what it refuses. Fine-tuning is cut to one epoch: these check behaviour,
// benchmarks/bench_prune.cpp measures the targets.
// LibTorch first: it pulls in glog, whose CHECK macro Catch must override.
#include <torch/torch.h>
#undef CHECK
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <string>

#include "model/model_bundle.h"
#include "model/transformer_model.h"
#include "rapidqa/pruner.h"

namespace fs = std::filesystem;
using rapidqa::ImportanceMethod;
using rapidqa::PrunerOptions;
using rapidqa::PruningMethod;
using rapidqa::PruningReport;
using rapidqa::model::TransformerModel;

namespace {

const std::string kFaq = std::string(RAPIDQA_SOURCE_DIR) + "/examples/data/faq.jsonl";
const std::string kModel = RAPIDQA_TRAINED_MODEL;

fs::path fresh_dir(const std::string& name) {
  const fs::path p = fs::temp_directory_path() / ("rapidqa-prune-model-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(p);
  return p;
}

PrunerOptions quick_options() {
  PrunerOptions o;
  o.knowledge_file = kFaq;
  o.fine_tune_epochs = 1;
  o.importance_batches = 2;
  o.latency_sequence = 32;
  return o;
}

std::shared_ptr<const TransformerModel> load(const fs::path& dir) {
  auto bundle = rapidqa::model::load_model_bundle(dir.string(), -1);
  REQUIRE(bundle.is_ok());
  return bundle->model;
}

// The encoder's linear weights, flattened: what global L1 prunes.
at::Tensor linear_weights(const TransformerModel& m) {
  std::vector<at::Tensor> parts;
  for (const auto& l : m.layers) {
    for (const rapidqa::model::LinearOp* op : {l.qkv.get(), l.attention_output.get(), l.intermediate.get(), l.output.get()}) {
      parts.push_back(op->dense_weight().reshape({-1}));
    }
  }
  return at::cat(parts);
}

rapidqa::Result<PruningReport> prune(const fs::path& out, const PrunerOptions& o) {
  return rapidqa::prune_model(kModel, out.string(), o);
}

}  // namespace

TEST_CASE("The schedule prunes in rounds to the target and keeps only rounds above the floor", "[pruner][schedule]") {
  PrunerOptions o = quick_options();
  o.method = PruningMethod::kSchedule;
  o.target_reduction = 0.3;
  o.max_metric_drop = 0.05;
  std::vector<std::string> progress;
  o.progress = [&](const std::string& line) { progress.push_back(line); };
  const fs::path out = fresh_dir("schedule");
  auto report = prune(out, o);
  REQUIRE(report.is_ok());

  REQUIRE_FALSE(report->rounds.empty());
  CHECK(report->rounds.size() <= o.max_rounds);
  CHECK(report->rounds.front().rate == Approx(o.start_rate));  // 30% of the layers is less than the target needs
  const double floor_metric = report->metric_before - o.max_metric_drop;
  std::int64_t kept_parameters = report->parameters_before;
  double kept_metric = report->metric_before;
  for (const auto& r : report->rounds) {
    CHECK(r.accepted == (r.metric >= floor_metric));
    CHECK(r.rate > 0);
    CHECK(r.rate <= o.start_rate);
    if (r.accepted) {
      CHECK(r.parameters < kept_parameters);
      kept_parameters = r.parameters;
      kept_metric = r.metric;
    }
  }
  // It ends with the last round it kept, at the target unless it ran out of rounds or undid its last.
  CHECK(report->parameters_after == kept_parameters);
  CHECK(report->metric_after == Approx(kept_metric).margin(1e-9));
  const double target = static_cast<double>(report->parameters_before) * (1.0 - o.target_reduction);
  const bool reached = static_cast<double>(report->parameters_after) <= target;
  CHECK((reached || report->rounds.size() == o.max_rounds || !report->rounds.back().accepted));
  // ... and no further than the target: the last round removes only what was still needed.
  CHECK(static_cast<double>(report->parameters_after) > static_cast<double>(report->parameters_before) * 0.65);
  CHECK(report->metric_after >= floor_metric);

  // The report is what was saved.
  const auto pruned = load(out);
  CHECK(pruned->parameter_count() == report->parameters_after);
  CHECK(report->file_bytes_after == fs::file_size(out / "model.safetensors"));
  CHECK(report->file_bytes_after < report->file_bytes_before);
  REQUIRE(report->layers.size() == pruned->layers.size());
  std::int64_t layer_sum = 0;
  for (std::size_t l = 0; l < pruned->layers.size(); ++l) {
    CHECK(report->layers[l].heads_after == pruned->layers[l].num_heads);
    CHECK(report->layers[l].neurons_after == pruned->layers[l].intermediate->out_features());
    CHECK(report->layers[l].parameters_after == pruned->layers[l].parameter_count());
    layer_sum += report->layers[l].parameters_after;
  }
  CHECK(layer_sum == pruned->layer_parameter_count());
  // Heads of the last layers go first.
  CHECK(report->layers.back().heads_after <= report->layers.front().heads_after);
  // Both latencies are measured; which is faster is the benchmarks' to show
  // (BM_PrunedEncoding): one timing on a busy machine, or under a
  // sanitizer, says nothing.
  CHECK(report->latency_ms_after > 0);
  CHECK(report->latency_ms_before > 0);
  // Progress names every round.
  for (std::size_t i = 1; i <= report->rounds.size(); ++i) {
    const std::string prefix = "round " + std::to_string(i) + ": top-1";
    CHECK(std::any_of(progress.begin(), progress.end(),
                      [&](const std::string& line) { return line.rfind(prefix, 0) == 0; }));
  }
  const std::string text = report->to_text();
  CHECK(text.find("round 1: rate 0.300") != std::string::npos);
  fs::remove_all(out);
}

TEST_CASE("A round that falls below the floor is undone and the model stays as it was", "[pruner][schedule]") {
  PrunerOptions o = quick_options();
  o.method = PruningMethod::kSchedule;
  o.start_rate = 0.9;  // nine heads and neurons in ten: no model keeps its accuracy
  o.target_reduction = 0.95;  // so the round takes the whole rate
  o.max_metric_drop = 0;
  o.max_rounds = 1;
  o.fine_tune = false;
  o.head_importance = o.neuron_importance = ImportanceMethod::kMagnitude;
  const fs::path out = fresh_dir("undone");
  auto report = prune(out, o);
  REQUIRE(report.is_ok());
  REQUIRE(report->rounds.size() == 1);
  CHECK_FALSE(report->rounds[0].accepted);
  CHECK(report->rounds[0].metric < report->metric_before);
  const auto original = load(kModel);
  CHECK(static_cast<double>(report->rounds[0].parameters) <
        static_cast<double>(report->parameters_before) - 0.8 * static_cast<double>(original->layer_parameter_count()));
  CHECK(report->parameters_after == report->parameters_before);
  CHECK(report->metric_after == Approx(report->metric_before).margin(1e-9));
  const auto saved = load(out);
  CHECK(saved->parameter_count() == original->parameter_count());
  CHECK(at::equal(linear_weights(*saved), linear_weights(*original)));
  CHECK(report->to_text().find("round 1: rate 0.900") != std::string::npos);
  fs::remove_all(out);
}

TEST_CASE("One structured step removes the requested share of heads and neurons", "[pruner][structured]") {
  PrunerOptions o = quick_options();
  o.method = PruningMethod::kStructured;
  o.head_fraction = 0.25;
  o.neuron_fraction = 0.5;
  const auto original = load(kModel);
  std::int64_t heads = 0, neurons = 0;
  for (const auto& l : original->layers) {
    heads += l.num_heads;
    neurons += l.intermediate->out_features();
  }
  for (ImportanceMethod importance : {ImportanceMethod::kMagnitude, ImportanceMethod::kTaylor, ImportanceMethod::kHeadMask}) {
    DYNAMIC_SECTION("head importance " << static_cast<int>(importance)) {
      o.head_importance = importance;
      const fs::path out = fresh_dir("structured");
      auto report = prune(out, o);
      REQUIRE(report.is_ok());
      CHECK(report->rounds.empty());
      std::int64_t heads_after = 0, neurons_after = 0;
      for (const auto& l : report->layers) {
        heads_after += l.heads_after;
        neurons_after += l.neurons_after;
        CHECK(l.heads_after >= 1);
      }
      CHECK(heads_after == heads - static_cast<std::int64_t>(std::nearbyint(0.25 * static_cast<double>(heads))));
      CHECK(neurons_after == neurons / 2);
      CHECK(report->parameters_after < report->parameters_before);
      CHECK(load(out)->parameter_count() == report->parameters_after);
      fs::remove_all(out);
    }
  }
}

TEST_CASE("Global L1 fine-tuning moves the kept weights and keeps the pruned ones zero", "[pruner][unstructured]") {
  PrunerOptions o = quick_options();
  o.method = PruningMethod::kGlobalL1;
  o.amount = 0.4;
  const fs::path tuned_dir = fresh_dir("l1-tuned"), plain_dir = fresh_dir("l1-plain");
  auto tuned = prune(tuned_dir, o);
  REQUIRE(tuned.is_ok());
  o.fine_tune = false;
  auto plain = prune(plain_dir, o);
  REQUIRE(plain.is_ok());

  const at::Tensor original = linear_weights(*load(kModel));
  const at::Tensor tuned_weights = linear_weights(*load(tuned_dir));
  const at::Tensor plain_weights = linear_weights(*load(plain_dir));
  const auto expected_zeros = static_cast<std::int64_t>(std::nearbyint(0.4 * static_cast<double>(original.numel())));
  CHECK(plain_weights.eq(0).sum().item<std::int64_t>() == expected_zeros);
  // The same entries are zero with and without fine-tuning ...
  CHECK(at::equal(tuned_weights.eq(0), plain_weights.eq(0)));
  // ... the others were fine-tuned, and the report says so.
  const at::Tensor kept = plain_weights.ne(0);
  CHECK(at::equal(plain_weights.masked_select(kept), original.masked_select(kept)));
  CHECK((tuned_weights.masked_select(kept) - original.masked_select(kept)).abs().max().item<float>() > 1e-4f);
  CHECK(tuned->parameters_after == tuned->parameters_before);  // zeros, not removed
  double sparsity = 0;
  for (const auto& l : tuned->layers) sparsity += l.sparsity / static_cast<double>(tuned->layers.size());
  CHECK(sparsity == Approx(0.4).margin(0.1));
  CHECK(tuned->file_bytes_after < tuned->file_bytes_before);
  fs::remove_all(tuned_dir);
  fs::remove_all(plain_dir);
}

TEST_CASE("prune_model refuses bad options and directories and writes nothing", "[pruner]") {
  const fs::path out = fresh_dir("refused");
  auto expect_refusal = [&](const PrunerOptions& o, const std::string& model, rapidqa::StatusCode code,
                            const std::string& words) {
    auto report = rapidqa::prune_model(model, out.string(), o);
    REQUIRE_FALSE(report.is_ok());
    CHECK(report.status().code() == code);
    CHECK_THAT(report.status().message(), Catch::Contains(words));
    CHECK_FALSE(fs::exists(out));
  };
  PrunerOptions o = quick_options();
  o.knowledge_file.clear();
  expect_refusal(o, kModel, rapidqa::StatusCode::kInvalidArgument, "knowledge file");
  o = quick_options();
  o.knowledge_file = "/no/such/faq.jsonl";
  expect_refusal(o, kModel, rapidqa::StatusCode::kNotFound, "/no/such/faq.jsonl");
  o = quick_options();
  o.target_reduction = 1.0;
  expect_refusal(o, kModel, rapidqa::StatusCode::kInvalidArgument, "target_reduction");
  o = quick_options();
  o.distillation_temperature = 0;
  expect_refusal(o, kModel, rapidqa::StatusCode::kInvalidArgument, "distillation_temperature");
  expect_refusal(quick_options(), "/no/such/model", rapidqa::StatusCode::kNotFound, "/no/such/model");
  auto same = rapidqa::prune_model(kModel, kModel, quick_options());
  REQUIRE_FALSE(same.is_ok());
  CHECK_THAT(same.status().message(), Catch::Contains("is the input directory"));
}

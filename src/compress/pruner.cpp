#include "rapidqa/pruner.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <tuple>
#include <utility>

#include <fmt/format.h>

#include "common/guard.h"
#include "common/timing.h"
#include "compress/structured_pruning.h"
#include "compress/unstructured_pruning.h"
#include "model/checkpoint_files.h"
#include "model/model_bundle.h"
#include "model/pooling.h"
#include "model/safetensors_file.h"
#include "model/transformer_checkpoint.h"
#include "rapidqa/knowledge_file.h"
#include "train/contrastive_trainer.h"
#include "train/faq_split.h"
#include "train/trainable_bert.h"

namespace rapidqa {
namespace {

namespace fs = std::filesystem;
using model::TransformerModel;
using train::TrainableBert;

constexpr std::size_t kMaxSequence = 64;  // FAQ phrasings are short
constexpr double kContrastiveTemperature = 0.05;

void say(const PrunerOptions& o, const std::string& line) {
  if (o.progress) o.progress(line);
}

// The runtime model's sentence vectors: what a pruned model is judged by,
// since that is what ships.
train::EncodeFn runtime_encoder(std::shared_ptr<const TransformerModel> m,
                                std::shared_ptr<const text::Tokenizer> tokenizer) {
  return [m, tokenizer](const std::vector<std::string>& texts, std::vector<float>& out) -> Status {
    c10::InferenceMode inference;
    out.clear();
    for (std::size_t start = 0; start < texts.size(); start += 64) {
      const std::vector<std::string> part(texts.begin() + static_cast<std::ptrdiff_t>(start),
                                          texts.begin() + static_cast<std::ptrdiff_t>(std::min(texts.size(), start + 64)));
      auto inputs = train::make_inputs(*tokenizer, part, kMaxSequence);
      if (!inputs) return inputs.status();
      const at::Tensor pooled =
          model::pool_hidden(m->forward(*inputs), inputs->attention_mask, Pooling::kMean, true).contiguous();
      out.insert(out.end(), pooled.data_ptr<float>(), pooled.data_ptr<float>() + pooled.numel());
    }
    return Status::ok();
  };
}

Result<double> metric_of(std::shared_ptr<const TransformerModel> m,
                         const std::shared_ptr<const text::Tokenizer>& tokenizer, const train::FaqSplit& split) {
  auto accuracy = train::top1_accuracy(runtime_encoder(std::move(m), tokenizer), split);
  if (!accuracy) return accuracy.status();
  return accuracy->top1();
}

// One forward pass of the original and of the pruned model at the latency
// shape, on the same input, in milliseconds: timed side by side in this
// process (3 warm-up passes each, then 9 interleaved samples of at least
// 20 ms of passes, medians). Timed apart, before pruning and again after
// fine-tuning, the two saw a different host, and the ratio once read 4.9x
// for an unstructured pruning that cannot be faster.
std::pair<double, double> side_by_side_latency_ms(const TransformerModel& original, const TransformerModel& pruned,
                                                  std::size_t batch, std::size_t sequence) {
  c10::InferenceMode inference;
  const auto seq = static_cast<std::int64_t>(
      std::min<std::size_t>(sequence, static_cast<std::size_t>(original.config.max_sequence_length())));
  model::ModelInputs in;
  at::manual_seed(7);
  in.input_ids = at::randint(5, std::max<std::int64_t>(6, original.config.vocab_size),
                             {static_cast<std::int64_t>(batch), seq}, at::kLong);
  in.attention_mask = at::ones_like(in.input_ids);
  timing::TimingOptions options;
  options.warmup_calls = 3;  // the first passes allocate and pick kernels
  options.samples = 9;
  options.min_sample_time = std::chrono::milliseconds(20);
  const timing::PairedTimes t = timing::interleaved_median_times([&] { (void)original.forward(in); },
                                                                 [&] { (void)pruned.forward(in); }, options);
  using Milliseconds = std::chrono::duration<double, std::milli>;
  return {Milliseconds(t.first).count(), Milliseconds(t.second).count()};
}

// The runtime model of a student's weights, with the layers' original head
// and neuron indices carried over from `like`.
Result<std::shared_ptr<TransformerModel>> runtime_of(const TrainableBert& student, const TransformerModel& like) {
  return model::build_transformer(compress::pruned_config(like), student.export_tensors(), "pruned model");
}

// A trainable copy of m; MPNet's layers keep their original head indices.
Result<std::shared_ptr<TrainableBert>> student_of(const TransformerModel& m, double dropout) {
  train::TrainableBertOptions options;
  options.dropout = dropout;
  return TrainableBert::from_tensors(compress::pruned_config(m), model::checkpoint_tensors(m), "pruned model", options);
}

// Pairs of phrasings of one entry, one pair per entry and batch, for the
// gradients importance is measured with.
std::vector<std::pair<std::vector<std::string>, std::vector<std::string>>> pair_batches(const train::FaqSplit& split,
                                                                                       std::size_t batches) {
  std::vector<std::vector<std::string>> by_entry(split.entry_ids.size());
  for (const auto& p : split.training) by_entry[p.entry].push_back(p.text);
  std::vector<std::pair<std::string, std::string>> pairs;
  for (std::size_t round = 0; round < 4; ++round) {
    for (const auto& texts : by_entry) {
      if (texts.size() >= 2 && round + 1 < texts.size()) pairs.emplace_back(texts[round], texts[round + 1]);
    }
  }
  std::vector<std::pair<std::vector<std::string>, std::vector<std::string>>> out;
  const std::size_t per_batch = 32;
  for (std::size_t start = 0; start + 2 <= pairs.size() && out.size() < batches; start += per_batch) {
    std::pair<std::vector<std::string>, std::vector<std::string>> batch;
    for (std::size_t i = start; i < std::min(pairs.size(), start + per_batch); ++i) {
      batch.first.push_back(pairs[i].first);
      batch.second.push_back(pairs[i].second);
    }
    out.push_back(std::move(batch));
  }
  return out;
}

// Gradient-based importance on the student: Taylor |w * g| summed per
// neuron (and per head), and the head-mask gradient. Scaling head h's
// context by a mask m_h is the same as scaling its columns of the attention
// output matrix, so dL/dm_h at m = 1 is the sum of w * g over those
// columns; Michel et al. accumulate its magnitude over batches.
struct GradientImportance {
  std::vector<at::Tensor> head_mask, head_taylor, neuron_taylor;
};

Result<GradientImportance> gradient_importance(TrainableBert& student, const text::Tokenizer& tokenizer,
                                               const train::FaqSplit& split, std::size_t batches) {
  GradientImportance g;
  const std::size_t layers = student.layer_count();
  for (std::size_t l = 0; l < layers; ++l) {
    const auto shape = student.layer(l).shape();
    g.head_mask.push_back(at::zeros({shape.num_heads}, at::kDouble));
    g.head_taylor.push_back(at::zeros({shape.num_heads}, at::kDouble));
    g.neuron_taylor.push_back(at::zeros({shape.intermediate_size}, at::kDouble));
  }
  student.eval();  // no dropout: the gradients of the model as it runs
  for (const auto& [anchors, positives] : pair_batches(split, batches)) {
    auto a = train::make_inputs(tokenizer, anchors, kMaxSequence);
    auto p = train::make_inputs(tokenizer, positives, kMaxSequence);
    if (!a) return a.status();
    if (!p) return p.status();
    student.zero_grad();
    const at::Tensor loss =
        train::in_batch_contrastive_loss(student.embed(*a), student.embed(*p), kContrastiveTemperature);
    loss.backward();
    torch::NoGradGuard no_grad;
    for (std::size_t l = 0; l < layers; ++l) {
      auto& layer = student.layer(l);
      const auto shape = layer.shape();
      const std::int64_t heads = shape.num_heads, d = shape.head_dim;
      const at::Tensor wo = layer.attention_output->weight, go = layer.attention_output->weight.grad();
      const at::Tensor per_column = (wo * go).sum(0).view({heads, d});
      g.head_mask[l] += per_column.sum(1).abs().to(at::kDouble);
      at::Tensor taylor = (wo * go).abs().sum(0).view({heads, d}).sum(1);
      for (auto* lin : {&layer.query, &layer.key, &layer.value}) {
        const at::Tensor w = (*lin)->weight, gw = (*lin)->weight.grad();
        taylor = taylor + (w * gw).abs().sum(1).view({heads, d}).sum(1);
      }
      g.head_taylor[l] += taylor.to(at::kDouble);
      const at::Tensor w1 = layer.intermediate->weight, w2 = layer.output->weight;
      g.neuron_taylor[l] += ((w1 * w1.grad()).abs().sum(1) + (w2 * w2.grad()).abs().sum(0)).to(at::kDouble);
    }
  }
  student.zero_grad();
  return g;
}

// The distillation term added to each fine-tuning step: the student's
// sentence vectors against the teacher's (MSE), and its in-batch similarity
// distribution against the teacher's at a temperature (KL, scaled by T^2
// so its gradients keep their size as T changes).
train::StepLossHook distillation_hook(std::shared_ptr<TrainableBert> teacher,
                                      std::shared_ptr<const text::Tokenizer> tokenizer,
                                      const PrunerOptions& options) {
  const double mse_weight = options.distillation_mse_weight, kl_weight = options.distillation_kl_weight;
  const double t = options.distillation_temperature;
  return [teacher, tokenizer, mse_weight, kl_weight, t](const std::vector<std::string>& anchors,
                                                        const std::vector<std::string>& positives,
                                                        const at::Tensor& sa, const at::Tensor& sp) {
    at::Tensor ta, tp;
    {
      torch::NoGradGuard no_grad;
      teacher->eval();
      ta = teacher->embed(train::make_inputs(*tokenizer, anchors, kMaxSequence).value());
      tp = teacher->embed(train::make_inputs(*tokenizer, positives, kMaxSequence).value());
    }
    const at::Tensor mse = ((sa - ta).pow(2).sum(1).mean() + (sp - tp).pow(2).sum(1).mean()) * 0.5;
    const at::Tensor student_logits = sa.mm(sp.t()) / (kContrastiveTemperature * t);
    const at::Tensor teacher_logits = ta.mm(tp.t()) / (kContrastiveTemperature * t);
    const at::Tensor kl = torch::kl_div(torch::log_softmax(student_logits, 1), torch::log_softmax(teacher_logits, 1),
                                        at::Reduction::Mean, /*log_target=*/true) *
                          (t * t) * static_cast<double>(sa.size(0));  // batchmean
    return mse * mse_weight + kl * kl_weight;
  };
}

// One structured step on `current`: importance, plan, removal; the
// student that fine-tunes it comes back with it.
struct Step {
  std::shared_ptr<TransformerModel> runtime;
  std::shared_ptr<TrainableBert> student;
};

Result<Step> structured_step(const TransformerModel& current, TrainableBert& current_student,
                             const text::Tokenizer& tokenizer, const train::FaqSplit& split,
                             double head_fraction, double neuron_fraction, const PrunerOptions& options) {
  std::vector<at::Tensor> head_scores = compress::head_magnitude(current);
  std::vector<at::Tensor> neuron_scores = compress::neuron_magnitude(current);
  if (options.head_importance != ImportanceMethod::kMagnitude ||
      options.neuron_importance != ImportanceMethod::kMagnitude) {
    auto g = gradient_importance(current_student, tokenizer, split, options.importance_batches);
    if (!g) return g.status();
    if (options.head_importance == ImportanceMethod::kHeadMask) head_scores = g->head_mask;
    if (options.head_importance == ImportanceMethod::kTaylor) head_scores = g->head_taylor;
    if (options.neuron_importance != ImportanceMethod::kMagnitude) neuron_scores = g->neuron_taylor;
  }
  compress::StructuredOptions so;
  so.head_fraction = head_fraction;
  so.neuron_fraction = neuron_fraction;
  so.last_layers_first = options.last_layers_first;
  auto plan = compress::plan_structured(current, head_scores, neuron_scores, so);
  if (!plan) return plan.status();
  // A copy to cut, so a rejected round leaves `current` as it was.
  auto next = model::build_transformer(current.config, model::checkpoint_tensors(current), "pruning");
  if (!next) return next.status();
  const Status applied = compress::apply_structured(**next, *plan);
  if (!applied.is_ok()) return applied;
  say(options, fmt::format("removed {} heads and {} FFN neurons", plan->head_count(), plan->neuron_count()));
  auto student = student_of(**next, 0.1);
  if (!student) return student.status();
  return Step{std::move(next).value(), std::move(student).value()};
}

// Holds the zeros of unstructured pruning through fine-tuning: each pruned
// weight's gradient is masked, so AdamW never moves it (its moments stay
// zero, and decoupled weight decay keeps zero at zero). The masks are
// applied once more afterwards, so the zeros are exact whatever the
// optimiser does.
class HeldZeros {
 public:
  explicit HeldZeros(TrainableBert& student) {
    for (std::size_t l = 0; l < student.layer_count(); ++l) {
      auto& layer = student.layer(l);
      for (auto* lin : {&layer.query, &layer.key, &layer.value, &layer.attention_output, &layer.intermediate,
                        &layer.output}) {
        at::Tensor weight = (*lin)->weight;
        const at::Tensor mask = weight.detach().ne(0).to(weight.scalar_type());
        weight.register_hook([mask](const at::Tensor& grad) { return grad * mask; });
        held_.emplace_back(weight, mask);
      }
    }
  }
  void reapply() const {
    torch::NoGradGuard no_grad;
    for (const auto& [weight, mask] : held_) weight.mul_(mask);
  }

 private:
  std::vector<std::pair<at::Tensor, at::Tensor>> held_;
};

Status fine_tune(Step& step, const std::shared_ptr<TrainableBert>& teacher,
                 const std::shared_ptr<const text::Tokenizer>& tokenizer, const train::FaqSplit& split,
                 const PrunerOptions& options, const HeldZeros* zeros = nullptr) {
  if (!options.fine_tune || options.fine_tune_epochs == 0) return Status::ok();
  train::ContrastiveOptions co;
  co.epochs = options.fine_tune_epochs;
  co.learning_rate = options.learning_rate;
  co.seed = options.seed;
  co.evaluate_every = 0;
  co.max_sequence_length = kMaxSequence;
  auto report = train::train_contrastive(
      *step.student, *tokenizer, split, co,
      [&](const train::EpochReport& e) {
        say(options, fmt::format("fine-tuning epoch {}/{}: loss {:.4f}", e.epoch, e.epochs, e.mean_loss));
      },
      distillation_hook(teacher, tokenizer, options));
  if (!report) return report.status();
  if (zeros) zeros->reapply();
  auto runtime = runtime_of(*step.student, *step.runtime);
  if (!runtime) return runtime.status();
  step.runtime = std::move(runtime).value();
  return Status::ok();
}

// The smallest rate (of heads and of FFN neurons, in steps of 0.25%) whose
// removal takes away at least `parameters`, or `cap` when none under it
// does: no more than the target needs. Counts are rounded as
// plan_structured rounds them, since a rate that rounds to no head at all
// removes only neurons.
double rate_for(const TransformerModel& m, double parameters, double cap) {
  std::int64_t heads = 0, neurons = 0;
  for (const auto& l : m.layers) {
    heads += l.num_heads;
    neurons += l.intermediate->out_features();
  }
  const auto hidden = static_cast<double>(m.config.hidden_size);
  const auto head_dim = static_cast<double>(m.config.hidden_size / std::max<std::int64_t>(1, m.config.num_heads));
  const double per_head = 4 * hidden * head_dim + 3 * head_dim;  // q, k, v rows and biases; output columns
  const double per_neuron = 2 * hidden + 1;                      // intermediate row and bias; output column
  for (double rate = 0.0025; rate < cap; rate += 0.0025) {
    const double removed = std::nearbyint(rate * static_cast<double>(heads)) * per_head +
                           std::nearbyint(rate * static_cast<double>(neurons)) * per_neuron;
    if (removed >= parameters) return rate;
  }
  return cap;
}

double zero_fraction(const model::TransformerLayer& l) {
  double zeros = 0, total = 0;
  for (const model::LinearOp* op : {l.qkv.get(), l.attention_output.get(), l.intermediate.get(), l.output.get()}) {
    const at::Tensor w = op->dense_weight();
    zeros += static_cast<double>(w.eq(0).sum().item<std::int64_t>());
    total += static_cast<double>(w.numel());
  }
  return total > 0 ? zeros / total : 0.0;
}

std::size_t file_size_or_zero(const fs::path& p) {
  std::error_code ec;
  const auto size = fs::file_size(p, ec);
  return ec ? 0 : static_cast<std::size_t>(size);
}

Status check_options(const PrunerOptions& o) {
  auto fraction = [](double v, const char* name, bool allow_one) -> Status {
    if (!(v >= 0.0 && (allow_one ? v <= 1.0 : v < 1.0))) {
      return Status::invalid_argument(fmt::format("{} must be in [0, {}), not {}", name, allow_one ? "1]" : "1", v));
    }
    return Status::ok();
  };
  for (const Status& s : {fraction(o.head_fraction, "head_fraction", false), fraction(o.neuron_fraction, "neuron_fraction", false),
                          fraction(o.amount, "amount", true), fraction(o.start_rate, "start_rate", false),
                          fraction(o.target_reduction, "target_reduction", false),
                          fraction(o.max_metric_drop, "max_metric_drop", true)}) {
    if (!s.is_ok()) return s;
  }
  if (o.knowledge_file.empty()) {
    return Status::invalid_argument("a knowledge file is needed: pruning is measured and fine-tuned on its questions");
  }
  if (o.latency_batch == 0 || o.latency_sequence < 3) return Status::invalid_argument("latency shape too small");
  if (!(o.distillation_temperature > 0)) return Status::invalid_argument("distillation_temperature must be positive");
  return Status::ok();
}

}  // namespace

std::string PruningReport::to_text() const {
  std::string out = fmt::format("{:<18} {:>13} {:>17} {:>21} {:>9}\n", "layer", "heads", "FFN neurons", "parameters",
                                "sparsity");
  for (const auto& l : layers) {
    out += fmt::format("{:<18} {:>5} -> {:<5} {:>7} -> {:<7} {:>9} -> {:<9} {:>8.1f}%\n", l.name, l.heads_before,
                       l.heads_after, l.neurons_before, l.neurons_after, l.parameters_before, l.parameters_after,
                       100.0 * l.sparsity);
  }
  for (std::size_t i = 0; i < rounds.size(); ++i) {
    out += fmt::format("round {}: rate {:.3f}, top-1 {:.4f}, {} parameters, {}\n", i + 1, rounds[i].rate,
                       rounds[i].metric, rounds[i].parameters, rounds[i].accepted ? "kept" : "undone");
  }
  out += fmt::format("parameters: {} -> {} ({:.1f}% fewer)\n", parameters_before, parameters_after,
                     100.0 * (1.0 - static_cast<double>(parameters_after) / std::max<std::int64_t>(1, parameters_before)));
  out += fmt::format("model.safetensors: {:.2f} MB -> {:.2f} MB\n", file_bytes_before / 1e6, file_bytes_after / 1e6);
  const double speedup = latency_ms_after > 0 ? latency_ms_before / latency_ms_after : 0.0;
  out += fmt::format("latency: {:.2f} ms -> {:.2f} ms ({:.2f}x as fast; both timed side by side in this process, "
                     "medians)\n",
                     latency_ms_before, latency_ms_after, speedup);
  out += fmt::format("held-out top-1: {:.4f} -> {:.4f} ({:+.2f} points)\n", metric_before, metric_after,
                     100.0 * (metric_after - metric_before));
  return out;
}

Result<PruningReport> prune_model(const std::string& model_dir, const std::string& out_dir,
                                  const PrunerOptions& options) {
  return detail::guarded("pruning the model", [&]() -> Result<PruningReport> {
    if (Status s = check_options(options); !s.is_ok()) return s;
    std::error_code ec;
    if (fs::exists(out_dir) && fs::equivalent(model_dir, out_dir, ec)) {
      return Status::invalid_argument(fmt::format("output directory '{}' is the input directory", out_dir));
    }
    auto bundle = model::load_model_bundle(model_dir, -1);
    if (!bundle) return bundle.status();
    // Every method fine-tunes or measures gradients with the trainer.
    if (Status s = TrainableBert::can_train(bundle->model->config); !s.is_ok()) {
      return Status::invalid_argument(fmt::format("{}: the pruner fine-tunes with the trainer, and {}", model_dir,
                                                  s.message()));
    }
    for (const auto& l : bundle->model->layers) {
      if (l.qkv->kind().rfind("int8", 0) == 0 || l.intermediate->kind().rfind("int8", 0) == 0) {
        return Status::invalid_argument(fmt::format("{}: the model is quantized; prune before quantizing", model_dir));
      }
    }
    auto kb = read_knowledge_file(options.knowledge_file);
    if (!kb) return kb.status();
    train::FaqSplitOptions split_options;
    split_options.seed = train::training_split_seed(model_dir, options.seed);
    auto split = train::split_faq(kb->entries, split_options);
    if (!split) return split.status();
    const std::shared_ptr<const text::Tokenizer> tokenizer = bundle->tokenizer;

    PruningReport report;
    std::shared_ptr<TransformerModel> current = std::const_pointer_cast<TransformerModel>(bundle->model);
    report.parameters_before = current->parameter_count();
    report.file_bytes_before = model::checkpoint_bytes(model_dir);
    auto base_metric = metric_of(current, tokenizer, *split);
    if (!base_metric) return base_metric.status();
    report.metric_before = base_metric.value();
    say(options, fmt::format("unpruned: {} parameters, top-1 {:.4f}", report.parameters_before, report.metric_before));
    std::vector<LayerPruningReport> layers;
    for (std::size_t l = 0; l < current->layers.size(); ++l) {
      const auto& layer = current->layers[l];
      layers.push_back({fmt::format("encoder.layer.{}", l), layer.num_heads, 0, layer.intermediate->out_features(), 0,
                        layer.parameter_count(), 0, 0});
    }

    auto teacher = student_of(*current, 0.0);
    if (!teacher) return teacher.status();
    if (options.method == PruningMethod::kGlobalL1) {
      auto pruned = compress::prune_global_l1(*current, options.amount);
      if (!pruned) return pruned.status();
      say(options, fmt::format("zeroed {:.1f}% of the encoder's linear weights", 100 * options.amount));
      auto student = student_of(**pruned, 0.1);
      if (!student) return student.status();
      const HeldZeros zeros(**student);
      Step step{std::move(pruned).value(), std::move(student).value()};
      if (Status s = fine_tune(step, *teacher, tokenizer, *split, options, &zeros); !s.is_ok()) return s;
      current = step.runtime;
    } else {
      auto student = student_of(*current, 0.1);
      if (!student) return student.status();
      if (options.method == PruningMethod::kStructured) {
        auto step = structured_step(*current, **student, *tokenizer, *split, options.head_fraction,
                                    options.neuron_fraction, options);
        if (!step) return step.status();
        if (Status s = fine_tune(*step, *teacher, tokenizer, *split, options); !s.is_ok()) return s;
        current = step->runtime;
      } else {
        const double target = static_cast<double>(report.parameters_before) * (1.0 - options.target_reduction);
        const double floor_metric = report.metric_before - options.max_metric_drop;
        double rate = options.start_rate;
        std::shared_ptr<TrainableBert> current_student = *student;
        for (std::size_t round = 0; round < options.max_rounds && current->parameter_count() > target; ++round) {
          const double this_rate =
              rate_for(*current, static_cast<double>(current->parameter_count()) - target, rate);
          say(options, fmt::format("round {}: removing {:.1f}% of the heads and FFN neurons", round + 1, 100 * this_rate));
          auto step = structured_step(*current, *current_student, *tokenizer, *split, this_rate, this_rate, options);
          if (!step) return step.status();
          if (Status s = fine_tune(*step, *teacher, tokenizer, *split, options); !s.is_ok()) return s;
          auto metric = metric_of(step->runtime, tokenizer, *split);
          if (!metric) return metric.status();
          PruningRound r{this_rate, metric.value(), step->runtime->parameter_count(), metric.value() >= floor_metric};
          report.rounds.push_back(r);
          say(options, fmt::format("round {}: top-1 {:.4f} (floor {:.4f}), {} parameters: {}", round + 1, r.metric,
                                   floor_metric, r.parameters, r.accepted ? "kept" : "undone"));
          if (r.accepted) {
            current = step->runtime;
            current_student = step->student;
            // The metric chooses the next rate: a round that spent more
            // than half the allowed drop halves the next one.
            if (report.metric_before - r.metric > options.max_metric_drop / 2) rate /= 2;
          } else {
            rate = this_rate / 2;
            if (rate < 0.02) break;
          }
        }
      }
    }

    report.parameters_after = current->parameter_count();
    // The pruning steps copy the model; bundle->model is still the original.
    std::tie(report.latency_ms_before, report.latency_ms_after) =
        side_by_side_latency_ms(*bundle->model, *current, options.latency_batch, options.latency_sequence);
    auto metric = metric_of(current, tokenizer, *split);
    if (!metric) return metric.status();
    report.metric_after = metric.value();
    for (std::size_t l = 0; l < current->layers.size(); ++l) {
      const auto& layer = current->layers[l];
      layers[l].heads_after = layer.num_heads;
      layers[l].neurons_after = layer.intermediate->out_features();
      layers[l].parameters_after = layer.parameter_count();
      layers[l].sparsity = zero_fraction(layer);
    }
    report.layers = std::move(layers);

    auto config = compress::pruned_config_json((fs::path(model_dir) / "config.json").string(), *current);
    if (!config) return config.status();
    const std::map<std::string, std::string> metadata{{"format", "pt"}, {"rapidqa.pruned", "true"}};
    if (Status s = compress::save_pruned(*current, model_dir, out_dir, metadata, config.value()); !s.is_ok()) return s;
    report.file_bytes_after = file_size_or_zero(fs::path(out_dir) / "model.safetensors");
    if (!options.export_dense_dir.empty()) {
      if (Status s = model::copy_model_files(model_dir, options.export_dense_dir); !s.is_ok()) return s;
      if (Status s = model::write_safetensors((fs::path(options.export_dense_dir) / "model.safetensors").string(),
                                              compress::dense_checkpoint(*current), {{"format", "pt"}});
          !s.is_ok()) {
        return s;
      }
    }
    return report;
  });
}

}  // namespace rapidqa

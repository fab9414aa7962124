#include "train/contrastive_trainer.h"

#include <torch/torch.h>

#include <algorithm>
#include <random>

#include <fmt/format.h>

#include "common/guard.h"
#include "model/model_bundle.h"
#include "rapidqa/compute_runtime.h"
#include "train/training_threads.h"
#include "train/trainable_bert.h"

namespace rapidqa::train {
namespace {

// Texts are numbered training phrasings first, then companions.
struct Pair {
  std::size_t entry = 0;
  std::size_t anchor = 0;    // a training phrasing
  std::size_t positive = 0;  // another training phrasing of the same entry, or one of its companions
};

// Shuffling and picking with the generator's raw output: std::shuffle and
// the std distributions differ between standard libraries, which would
// make one seed give different runs on different systems.
class Draw {
 public:
  explicit Draw(std::uint64_t seed) : engine_(seed) {}
  std::size_t below(std::size_t n) { return static_cast<std::size_t>(engine_() % n); }
  template <typename T>
  void shuffle(std::vector<T>& v) {
    for (std::size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[below(i)]);
  }

 private:
  std::mt19937_64 engine_;
};

struct EntryTexts {
  std::vector<std::size_t> phrasings;   // training phrasings
  std::vector<std::size_t> companions;  // companions
};

// Deals shuffled pairs into batches that never hold two pairs of one entry
// (they would be scored as each other's negatives). A pair that would
// repeat an entry waits for the next batch; a batch of one pair teaches
// nothing and is dropped (its anchor returns next epoch).
void deal(std::vector<Pair> pairs, std::size_t entries, std::size_t batch_size,
          std::vector<std::vector<Pair>>& batches) {
  std::vector<char> in_batch(entries, 0);
  while (!pairs.empty()) {
    std::vector<Pair> batch, rest;
    for (const Pair& p : pairs) {
      if (batch.size() < batch_size && !in_batch[p.entry]) {
        in_batch[p.entry] = 1;
        batch.push_back(p);
      } else {
        rest.push_back(p);
      }
    }
    for (const Pair& p : batch) in_batch[p.entry] = 0;
    if (batch.size() < 2) break;  // what is left is one entry's pairs
    batches.push_back(std::move(batch));
    pairs = std::move(rest);
  }
}

// One epoch's steps: every training phrasing of an entry with a partner is
// an anchor once, with a random other phrasing of its entry as positive;
// and every entry with companions pairs one random phrasing with one random
// companion. Companion pairs get batches of their own, since a companion
// (an answer) is several times longer than a phrasing and would pad a
// phrasing batch to its length; the batches are then shuffled together.
std::vector<std::vector<Pair>> plan_epoch(const std::vector<EntryTexts>& by_entry, std::size_t batch_size,
                                          Draw& draw) {
  std::vector<Pair> phrasing_pairs, companion_pairs;
  for (std::size_t e = 0; e < by_entry.size(); ++e) {
    const auto& phrasings = by_entry[e].phrasings;
    const auto& companions = by_entry[e].companions;
    if (phrasings.size() >= 2) {
      for (std::size_t i = 0; i < phrasings.size(); ++i) {
        std::size_t j = draw.below(phrasings.size() - 1);
        if (j >= i) ++j;
        phrasing_pairs.push_back({e, phrasings[i], phrasings[j]});
      }
    }
    if (!phrasings.empty() && !companions.empty()) {
      const std::size_t anchor = phrasings[draw.below(phrasings.size())];
      companion_pairs.push_back({e, anchor, companions[draw.below(companions.size())]});
    }
  }
  draw.shuffle(phrasing_pairs);
  draw.shuffle(companion_pairs);
  std::vector<std::vector<Pair>> batches;
  deal(std::move(phrasing_pairs), by_entry.size(), batch_size, batches);
  deal(std::move(companion_pairs), by_entry.size(), batch_size, batches);
  draw.shuffle(batches);
  return batches;
}

std::size_t count_pairs(const std::vector<std::vector<Pair>>& batches) {
  std::size_t n = 0;
  for (const auto& b : batches) n += b.size();
  return n;
}

Status check_options(const ContrastiveOptions& o) {
  if (o.epochs == 0) return Status::invalid_argument("epochs must be at least 1");
  if (o.batch_size < 2) return Status::invalid_argument("batch_size must be at least 2 (a pair needs negatives)");
  if (!(o.learning_rate > 0)) return Status::invalid_argument("learning_rate must be positive");
  if (!(o.temperature > 0)) return Status::invalid_argument("temperature must be positive");
  if (!(o.warmup_fraction >= 0 && o.warmup_fraction < 1)) {
    return Status::invalid_argument("warmup_fraction must be in [0, 1)");
  }
  if (!(o.weight_decay >= 0)) return Status::invalid_argument("weight_decay must not be negative");
  if (!(o.max_gradient_norm >= 0)) return Status::invalid_argument("max_gradient_norm must not be negative");
  if (o.max_sequence_length < 3) return Status::invalid_argument("max_sequence_length must be at least 3");
  // The same bound as configure_compute_threads: far more threads than
  // cores only makes the thread pool's start-up the longest step.
  if (o.threads < 0 || o.threads > max_compute_threads()) {
    return Status::invalid_argument(
        fmt::format("threads = {} is out of range: expected 0 (all cores) to {}", o.threads, max_compute_threads()));
  }
  return Status::ok();
}

// Linear warm-up to the peak, then linear decay to zero at the last step.
double rate_at(std::size_t step, std::size_t total, const ContrastiveOptions& o) {
  const auto warmup = static_cast<std::size_t>(o.warmup_fraction * static_cast<double>(total));
  if (step < warmup) return o.learning_rate * static_cast<double>(step + 1) / static_cast<double>(warmup + 1);
  const double left = static_cast<double>(total - step) / static_cast<double>(std::max<std::size_t>(1, total - warmup));
  return o.learning_rate * std::max(0.0, left);
}

}  // namespace

at::Tensor in_batch_contrastive_loss(const at::Tensor& anchors, const at::Tensor& positives, double temperature) {
  const at::Tensor logits = at::matmul(anchors, positives.t()) / temperature;
  const at::Tensor targets = at::arange(logits.size(0), logits.options().dtype(at::kLong));
  return 0.5 * (torch::nn::functional::cross_entropy(logits, targets) +
                torch::nn::functional::cross_entropy(logits.t(), targets));
}

Result<TrainingReport> train_contrastive(TrainableBert& model, const text::Tokenizer& tokenizer,
                                         const FaqSplit& split, const ContrastiveOptions& options,
                                         const EpochCallback& on_epoch, const StepLossHook& step_hook) {
  if (Status s = check_options(options); !s) return s;
  std::vector<EntryTexts> by_entry(split.entry_ids.size());
  const std::size_t companion_base = split.training.size();
  std::vector<const Phrasing*> texts;  // training phrasings, then companions
  for (const auto* part : {&split.training, &split.companions}) {
    for (const Phrasing& p : *part) {
      if (p.entry >= by_entry.size()) {
        return Status::invalid_argument(fmt::format("the text '{}' names entry {} of {}", p.text, p.entry, by_entry.size()));
      }
      auto& list = part == &split.training ? by_entry[p.entry].phrasings : by_entry[p.entry].companions;
      if (part == &split.training || options.use_companions) list.push_back(texts.size());
      texts.push_back(&p);
    }
  }
  const auto trainable = std::count_if(by_entry.begin(), by_entry.end(), [](const EntryTexts& t) {
    return t.phrasings.size() >= 2 || (!t.phrasings.empty() && !t.companions.empty());
  });
  if (trainable < 2) {
    return Status::invalid_argument(fmt::format(
        "{} entries have a training pair; contrastive training needs at least 2", trainable));
  }
  // Each text is tokenised once, exactly as the runtime will see it.
  std::vector<text::TokenizedText> tokens;
  tokens.reserve(texts.size());
  for (std::size_t i = 0; i < texts.size(); ++i) {
    auto t = tokenizer.encode(texts[i]->text, options.max_sequence_length);
    if (!t) {
      return Status::invalid_argument(fmt::format("{} {}: {}", i < companion_base ? "training phrasing" : "companion",
                                                  i < companion_base ? i : i - companion_base, t.status().message()));
    }
    tokens.push_back(std::move(t).value());
  }
  // Every epoch is planned first, so the rate schedule knows the step count.
  Draw draw(options.seed);
  std::vector<std::vector<std::vector<Pair>>> plan(options.epochs);
  std::size_t total_steps = 0;
  for (auto& epoch : plan) {
    epoch = plan_epoch(by_entry, options.batch_size, draw);
    total_steps += epoch.size();
  }
  TrainingReport report;
  report.pairs_per_epoch = count_pairs(plan.front());

  return detail::guarded("training", [&]() -> Result<TrainingReport> {
    const ScopedTrainingThreads threads(options.threads);
    torch::manual_seed(options.seed);
    // Decay only matrices and embeddings, as BERT does: shrinking a
    // LayerNorm gain or a bias toward zero only fights the normalisation.
    std::vector<at::Tensor> decayed, undecayed;
    for (const auto& item : model.named_parameters()) {
      const std::string& name = item.key();
      const bool no_decay = name.find("LayerNorm") != std::string::npos ||
                            (name.size() >= 5 && name.compare(name.size() - 5, 5, ".bias") == 0);
      (no_decay ? undecayed : decayed).push_back(item.value());
    }
    std::vector<torch::optim::OptimizerParamGroup> groups;
    groups.emplace_back(decayed, std::make_unique<torch::optim::AdamWOptions>(
                                     torch::optim::AdamWOptions(options.learning_rate).weight_decay(options.weight_decay)));
    groups.emplace_back(undecayed, std::make_unique<torch::optim::AdamWOptions>(
                                       torch::optim::AdamWOptions(options.learning_rate).weight_decay(0.0)));
    torch::optim::AdamW optimizer(std::move(groups));

    const auto start = std::chrono::steady_clock::now();
    std::size_t step = 0;
    const std::int32_t pad = tokenizer.pad_id();
    for (std::size_t e = 0; e < plan.size(); ++e) {
      model.train();
      double loss_sum = 0;
      for (const std::vector<Pair>& batch : plan[e]) {
        // Anchors and positives in separate passes, each padded only to its
        // own longest text.
        std::vector<const text::TokenizedText*> anchor_tokens, positive_tokens;
        for (const Pair& p : batch) {
          anchor_tokens.push_back(&tokens[p.anchor]);
          positive_tokens.push_back(&tokens[p.positive]);
        }
        const at::Tensor anchors = model.embed(model::make_batch(anchor_tokens, pad));
        const at::Tensor positives = model.embed(model::make_batch(positive_tokens, pad));
        at::Tensor loss = in_batch_contrastive_loss(anchors, positives, options.temperature);
        if (step_hook) {
          std::vector<std::string> anchor_texts, positive_texts;
          for (const Pair& p : batch) {
            anchor_texts.push_back(texts[p.anchor]->text);
            positive_texts.push_back(texts[p.positive]->text);
          }
          loss = loss + step_hook(anchor_texts, positive_texts, anchors, positives);
        }
        const double rate = rate_at(step, total_steps, options);
        for (auto& group : optimizer.param_groups()) {
          static_cast<torch::optim::AdamWOptions&>(group.options()).lr(rate);
        }
        optimizer.zero_grad();
        loss.backward();
        if (options.max_gradient_norm > 0) {
          torch::nn::utils::clip_grad_norm_(model.parameters(), options.max_gradient_norm);
        }
        optimizer.step();
        loss_sum += loss.item<double>();
        ++step;
      }
      EpochReport epoch;
      epoch.epoch = e + 1;
      epoch.epochs = plan.size();
      epoch.steps = step;
      epoch.mean_loss = plan[e].empty() ? 0.0 : loss_sum / static_cast<double>(plan[e].size());
      const bool measure = options.evaluate_every > 0 && !split.held_back.empty() &&
                           ((e + 1) % options.evaluate_every == 0 || e + 1 == plan.size());
      if (measure) {
        auto accuracy = top1_accuracy(
            [&](const std::vector<std::string>& texts, std::vector<float>& out) {
              return encode_texts(model, tokenizer, texts, options.max_sequence_length, 64, out);
            },
            split);
        if (!accuracy) return accuracy.status();
        epoch.held_out = accuracy.value();
      }
      epoch.elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
      report.epochs.push_back(epoch);
      if (on_epoch) on_epoch(epoch);
    }
    model.eval();
    return report;
  });
}

}  // namespace rapidqa::train

// rapidqa-train: trains a compact BERT-shaped sentence encoder from scratch
// on a FAQ (phrasings of one entry are positives, the other entries in a
// batch negatives), saves it as a Hugging Face model directory, and reports
// top-1 retrieval accuracy on phrasings held back from training, measured
// with the training model and again with the saved directory loaded by our
// runtime: the two must agree, which checks the saved model.
//
//   rapidqa-train --out DIR [--kb FILE] [--epochs N] [--hidden H] [--layers L]
//                 [--heads A] [--intermediate I] [--positions N] [--seed S] [--quick]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "rapidqa/compute_runtime.h"
#include "rapidqa/hashing_encoder.h"
#include "rapidqa/knowledge_file.h"
#include "rapidqa/transformer_encoder.h"
#include "train/contrastive_trainer.h"
#include "train/faq_split.h"
#include "train/trainable_bert.h"
#include "train/vocabulary_builder.h"
#include "tool_support.h"

#ifndef RAPIDQA_DEFAULT_KB
#define RAPIDQA_DEFAULT_KB "examples/data/faq.jsonl"
#endif

namespace {

namespace train = rapidqa::train;

// The default shape and the --quick one. The default trains in a few
// minutes on two cores; --quick is for tests and fixtures that need a real
// trained model fast, not a good one.
struct Shape {
  std::int64_t hidden = 256;
  std::int64_t layers = 4;
  std::int64_t heads = 4;
  std::int64_t intermediate = 1024;
  std::size_t epochs = 40;
};
constexpr Shape kQuickShape{128, 2, 4, 512, 12};
// FAQ phrasings are far shorter; --positions widens the table so the model
// can also be measured (or used) at BERT's usual 128-token sequences.
constexpr std::int64_t kDefaultPositions = 64;

struct Args {
  std::string out;
  std::string kb = RAPIDQA_DEFAULT_KB;
  bool quick = false;
  std::optional<std::int64_t> hidden, layers, heads, intermediate;
  std::int64_t positions = kDefaultPositions;
  std::optional<std::size_t> epochs;
  std::optional<std::size_t> batch;
  std::optional<double> learning_rate, temperature, dropout;
  bool answers = true;
  std::size_t subwords = 2000;
  std::uint64_t seed = 1;
  int threads = 0;
};

void usage(std::FILE* to) {
  std::fprintf(to,
               "usage: rapidqa-train --out DIR [--kb FILE] [--epochs N] [--hidden H] [--layers L] [--heads A]\n"
               "                     [--intermediate I] [--seed S] [--threads N] [--batch N] [--lr X]\n"
               "                     [--temperature X] [--dropout X] [--subwords N] [--positions N]\n"
               "                     [--no-answers] [--quick]\n"
               "  --out DIR          where the model directory is written (created when missing)\n"
               "  --kb FILE          knowledge base JSONL to train on (default: the bundled FAQ)\n"
               "  --epochs N         passes over the training phrasings (default 40; 12 with --quick)\n"
               "  --hidden H         hidden size (default 256; 128 with --quick)\n"
               "  --layers L         encoder layers (default 4; 2 with --quick)\n"
               "  --heads A          attention heads per layer, dividing H (default 4)\n"
               "  --intermediate I   feed-forward width (default 1024; 512 with --quick)\n"
               "  --seed S           weights, held-back phrasings, batches and dropout (default 1)\n"
               "  --threads N        threads for training and encoding (default: all cores)\n"
               "  --batch N          pairs per step, each of a different entry (default 64)\n"
               "  --lr X             peak AdamW learning rate (default 2e-3)\n"
               "  --temperature X    softmax temperature of the contrastive loss (default 0.05)\n"
               "  --dropout X        dropout while training (default 0.1)\n"
               "  --subwords N       sub-word pieces to learn; 0: whole words (default 2000, in effect every pair\n"
               "                     of pieces the FAQ's words share twice)\n"
               "  --positions N      longest sequence the model accepts (default 64)\n"
               "  --no-answers       train on phrasing pairs only, not also phrasing/answer pairs\n"
               "  --quick            a small model and few epochs: well under a minute, for tests\n");
}

bool parse_positive_real(const char* text, double& out) {
  try {
    std::size_t used = 0;
    out = std::stod(text, &used);
    return used == std::string(text).size() && out > 0 && std::isfinite(out);
  } catch (const std::exception&) {
    return false;
  }
}

template <typename T>
bool parse_positive(const char* text, T& out) {
  try {
    std::size_t used = 0;
    const long long v = std::stoll(text, &used);
    if (used != std::string(text).size() || v <= 0) return false;
    out = static_cast<T>(v);
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

// Checked before the value, so a misspelt last option is named as unknown
// rather than as one that lacks its value.
bool takes_value(const std::string& option) {
  static const char* const kValueOptions[] = {
      "--out", "--kb", "--epochs", "--hidden", "--layers", "--heads", "--intermediate", "--positions",
      "--threads", "--subwords", "--batch", "--lr", "--temperature", "--dropout", "--seed"};
  for (const char* known : kValueOptions) {
    if (option == known) return true;
  }
  return false;
}

// 0 to go on, or an exit code.
int parse_args(int argc, char** argv, Args& a) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      usage(stdout);
      return -1;
    }
    if (arg == "--quick") {
      a.quick = true;
      continue;
    }
    if (arg == "--no-answers") {
      a.answers = false;
      continue;
    }
    if (!takes_value(arg)) {
      std::fprintf(stderr, "rapidqa-train: unknown option '%s'\n", arg.c_str());
      usage(stderr);
      return 2;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "rapidqa-train: %s needs a value\n", arg.c_str());
      usage(stderr);
      return 2;
    }
    const char* v = argv[++i];
    bool ok = true;
    if (arg == "--out") {
      a.out = v;
    } else if (arg == "--kb") {
      a.kb = v;
    } else if (arg == "--epochs") {
      ok = parse_positive(v, a.epochs.emplace());
    } else if (arg == "--hidden") {
      ok = parse_positive(v, a.hidden.emplace());
    } else if (arg == "--layers") {
      ok = parse_positive(v, a.layers.emplace());
    } else if (arg == "--heads") {
      ok = parse_positive(v, a.heads.emplace());
    } else if (arg == "--intermediate") {
      ok = parse_positive(v, a.intermediate.emplace());
    } else if (arg == "--positions") {
      ok = parse_positive(v, a.positions);
    } else if (arg == "--threads") {
      ok = parse_positive(v, a.threads);
    } else if (arg == "--subwords") {
      try {
        std::size_t used = 0;
        a.subwords = static_cast<std::size_t>(std::stoull(v, &used));
        ok = used == std::string(v).size() && v[0] != '-';
      } catch (const std::exception&) {
        ok = false;
      }
    } else if (arg == "--batch") {
      ok = parse_positive(v, a.batch.emplace()) && *a.batch >= 2;
    } else if (arg == "--lr" || arg == "--temperature") {
      ok = parse_positive_real(v, (arg == "--lr" ? a.learning_rate : a.temperature).emplace());
    } else if (arg == "--dropout") {
      ok = parse_positive_real(v, a.dropout.emplace()) && *a.dropout < 1;
    } else if (arg == "--seed") {
      try {
        std::size_t used = 0;
        a.seed = std::stoull(v, &used);
        ok = used == std::string(v).size() && v[0] != '-';
      } catch (const std::exception&) {
        ok = false;
      }
    } else {
      std::fprintf(stderr, "rapidqa-train: unknown option '%s'\n", arg.c_str());
      usage(stderr);
      return 2;
    }
    if (!ok) {
      const char* expected = arg == "--seed" || arg == "--subwords" ? "a non-negative integer"
                             : arg == "--batch"         ? "an integer of at least 2"
                             : arg == "--dropout"       ? "a number in (0, 1)"
                             : arg == "--lr" || arg == "--temperature" ? "a positive number"
                                                        : "a positive integer";
      std::fprintf(stderr, "rapidqa-train: %s needs %s, not '%s'\n", arg.c_str(), expected, v);
      return 2;
    }
  }
  if (a.out.empty()) {
    std::fprintf(stderr, "rapidqa-train: --out DIR is required\n");
    usage(stderr);
    return 2;
  }
  return 0;
}

int fail(const std::string& what, const rapidqa::Status& s) {
  std::fprintf(stderr, "rapidqa-train: %s: %s\n", what.c_str(), s.to_string().c_str());
  return 1;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int tool_main(int argc, char** argv) {
  Args args;
  if (int rc = parse_args(argc, argv, args); rc != 0) return rc < 0 ? 0 : rc;
  const Shape base = args.quick ? kQuickShape : Shape{};
  const std::int64_t hidden = args.hidden.value_or(base.hidden);
  const std::int64_t heads = args.heads.value_or(base.heads);
  if (hidden % heads != 0) {
    std::fprintf(stderr, "rapidqa-train: --hidden %lld is not a multiple of --heads %lld\n",
                 static_cast<long long>(hidden), static_cast<long long>(heads));
    return 2;
  }
  const auto started = std::chrono::steady_clock::now();

  auto kb = rapidqa::read_knowledge_file(args.kb);
  if (!kb) return fail("reading " + args.kb, kb.status());
  train::FaqSplitOptions split_options;
  split_options.seed = args.seed;
  split_options.answers_as_companions = args.answers;
  auto split = train::split_faq(kb->entries, split_options);
  if (!split) return fail("splitting " + args.kb, split.status());

  // Words from every text of the FAQ, answers included, so the vocabulary
  // does not depend on which phrasings were held back.
  std::vector<std::string> corpus;
  for (const auto& e : kb->entries) {
    corpus.push_back(e.question);
    corpus.insert(corpus.end(), e.alternates.begin(), e.alternates.end());
    corpus.push_back(e.answer);
  }
  train::VocabularyOptions vocabulary_options;
  // Sub-word pieces, so forms of a word the training phrasings never use
  // ("returns" when they say "return") still share pieces with it: 0.55
  // held-out top-1 against 0.48 with whole words, on the default shape.
  vocabulary_options.subword_merges = args.subwords;
  auto vocabulary = train::build_wordpiece_vocabulary(corpus, vocabulary_options);
  if (!vocabulary) return fail("building the vocabulary", vocabulary.status());
  const auto vocab_size = static_cast<std::int64_t>(vocabulary->size());
  auto tokenizer = train::tokenizer_for(std::move(vocabulary).value(), vocabulary_options.lower_case);
  if (!tokenizer) return fail("building the tokenizer", tokenizer.status());
  const auto shared_tokenizer = std::make_shared<const rapidqa::text::WordPieceTokenizer>(std::move(tokenizer).value());

  rapidqa::model::TransformerConfig config;
  config.vocab_size = vocab_size;
  config.hidden_size = hidden;
  config.num_layers = args.layers.value_or(base.layers);
  config.num_heads = heads;
  config.intermediate_size = args.intermediate.value_or(base.intermediate);
  config.max_position_embeddings = args.positions;
  config.type_vocab_size = 2;
  config.pad_token_id = shared_tokenizer->pad_id();
  train::TrainableBertOptions model_options;
  model_options.seed = args.seed;
  if (args.dropout) model_options.dropout = *args.dropout;
  auto created = train::TrainableBert::create(config, model_options);
  if (!created) return fail("creating the model", created.status());
  const std::shared_ptr<train::TrainableBert> model = created.value();

  train::ContrastiveOptions options;
  options.epochs = args.epochs.value_or(base.epochs);
  options.seed = args.seed;
  options.threads = args.threads;
  if (args.batch) options.batch_size = *args.batch;
  if (args.learning_rate) options.learning_rate = *args.learning_rate;
  if (args.temperature) options.temperature = *args.temperature;
  options.max_sequence_length = static_cast<std::size_t>(args.positions);
  std::printf("rapidqa-train: %zu entries, %zu training and %zu held-back phrasings, vocabulary %lld tokens\n",
              split->entry_ids.size(), split->training.size(), split->held_back.size(),
              static_cast<long long>(vocab_size));
  std::printf("model: hidden %lld, %lld layers, %lld heads, intermediate %lld, %lld parameters\n",
              static_cast<long long>(config.hidden_size), static_cast<long long>(config.num_layers),
              static_cast<long long>(config.num_heads), static_cast<long long>(config.intermediate_size),
              static_cast<long long>(model->parameter_count()));
  std::printf("training: %zu epochs, batch %zu pairs, learning rate %g, temperature %g, seed %llu\n",
              options.epochs, options.batch_size, options.learning_rate, options.temperature,
              static_cast<unsigned long long>(options.seed));
  std::fflush(stdout);
  auto report = train::train_contrastive(
      *model, *shared_tokenizer, split.value(), options, [](const train::EpochReport& r) {
        std::string accuracy;
        if (r.held_out) {
          accuracy = fmt::format("  held-out top-1 {:.3f} ({}/{})", r.held_out->top1(), r.held_out->correct,
                                 r.held_out->queries);
        }
        std::printf("epoch %3zu/%zu  loss %.4f  %6.1f s%s\n", r.epoch, r.epochs, r.mean_loss,
                    static_cast<double>(r.elapsed.count()) / 1000.0, accuracy.c_str());
        std::fflush(stdout);
      });
  if (!report) return fail("training", report.status());
  const double training_seconds = seconds_since(started);

  // The same measurement twice: with the module just trained, and with the
  // directory read back by the inference runtime.
  const auto& max_length = options.max_sequence_length;
  auto trained_accuracy =
      train::top1_accuracy(train::encode_fn(model, shared_tokenizer, max_length), split.value());
  if (!trained_accuracy) return fail("measuring the trained model", trained_accuracy.status());
  if (auto s = model->save(args.out, *shared_tokenizer); !s) return fail("saving to " + args.out, s);

  rapidqa::ComputeThreads threads;
  threads.intra_op = args.threads;
  if (auto s = rapidqa::configure_compute_threads(threads); !s) return fail("setting threads", s);
  rapidqa::TransformerEncoderOptions encoder_options;
  encoder_options.model_dir = args.out;
  encoder_options.pooling = rapidqa::Pooling::kMean;
  encoder_options.normalize = true;
  encoder_options.max_sequence_length = max_length;
  auto runtime = rapidqa::TransformerEncoder::load(encoder_options);
  if (!runtime) return fail("loading " + args.out + " in the runtime", runtime.status());
  const train::EncodeFn runtime_encode = [&](const std::vector<std::string>& texts, std::vector<float>& out) {
    return (*runtime)->encode(texts, out);
  };
  auto runtime_accuracy = train::top1_accuracy(runtime_encode, split.value());
  if (!runtime_accuracy) return fail("measuring through the runtime", runtime_accuracy.status());

  // Every phrasing through both, to show how close the two paths are.
  std::vector<std::string> all;
  for (const auto* part : {&split->training, &split->held_back}) {
    for (const auto& p : *part) all.push_back(p.text);
  }
  std::vector<float> from_module, from_runtime;
  if (auto s = train::encode_texts(*model, *shared_tokenizer, all, max_length, 64, from_module); !s) {
    return fail("encoding with the trained model", s);
  }
  if (auto s = runtime_encode(all, from_runtime); !s) return fail("encoding through the runtime", s);
  double max_diff = 0;
  for (std::size_t i = 0; i < from_module.size(); ++i) {
    max_diff = std::max(max_diff, static_cast<double>(std::fabs(from_module[i] - from_runtime[i])));
  }

  // The built-in lexical encoder on the same split: what training adds.
  auto made_lexical = rapidqa::HashingEncoder::create();
  if (!made_lexical) return fail("creating the hashing encoder", made_lexical.status());
  rapidqa::HashingEncoder& lexical = *made_lexical.value();
  {
    std::vector<std::string> index_texts;
    for (const auto& p : split->training) index_texts.push_back(p.text);
    lexical.adapt(index_texts);
  }
  auto lexical_accuracy = train::top1_accuracy(
      [&](const std::vector<std::string>& texts, std::vector<float>& out) { return lexical.encode(texts, out); },
      split.value());
  if (!lexical_accuracy) return fail("measuring the hashing encoder", lexical_accuracy.status());

  const double total_seconds = seconds_since(started);
  std::printf("held-out top-1 accuracy, training model (LibTorch): %.3f (%zu/%zu)\n", trained_accuracy->top1(),
              trained_accuracy->correct, trained_accuracy->queries);
  std::printf("held-out top-1 accuracy, saved model (runtime):     %.3f (%zu/%zu)\n", runtime_accuracy->top1(),
              runtime_accuracy->correct, runtime_accuracy->queries);
  std::printf("held-out top-1 accuracy, HashingEncoder (lexical):   %.3f (%zu/%zu)\n", lexical_accuracy->top1(),
              lexical_accuracy->correct, lexical_accuracy->queries);
  std::printf("largest difference between the two embeddings of %zu phrasings: %.2e\n", all.size(), max_diff);
  std::printf("trained in %.1f s, %.1f s in all; model written to %s\n", training_seconds, total_seconds,
              args.out.c_str());

  // What was trained and how well, next to the model, for scripts.
  const nlohmann::json summary = {
      {"knowledge_base", args.kb},
      {"seed", args.seed},
      {"epochs", options.epochs},
      {"batch_size", options.batch_size},
      {"learning_rate", options.learning_rate},
      {"temperature", options.temperature},
      {"training_phrasings", split->training.size()},
      {"held_back_phrasings", split->held_back.size()},
      {"held_out_top1_training_model", trained_accuracy->top1()},
      {"held_out_top1_runtime", runtime_accuracy->top1()},
      {"held_out_top1_hashing_encoder", lexical_accuracy->top1()},
      {"max_embedding_difference", max_diff},
      {"training_seconds", training_seconds},
      {"final_loss", report->epochs.back().mean_loss},
  };
  std::ofstream(std::filesystem::path(args.out) / "training_summary.json") << summary.dump(2) << "\n";

  if (trained_accuracy->correct != runtime_accuracy->correct || max_diff > 1e-3) {
    std::fprintf(stderr,
                 "rapidqa-train: the saved model does not reproduce the trained one (accuracy %zu vs %zu correct, "
                 "embeddings differ by up to %.2e)\n",
                 trained_accuracy->correct, runtime_accuracy->correct, max_diff);
    return 1;
  }
  return 0;
}

int main(int argc, char** argv) {
  return rapidqa::tools::run_tool("rapidqa-train", [&] { return tool_main(argc, argv); });
}

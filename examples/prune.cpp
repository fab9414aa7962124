// rapidqa-prune: makes a model directory smaller and faster, and prints
// what it removed and what that cost.
//
//   rapidqa-prune --model IN --out OUT [--kb FILE]         a schedule: prune,
//                 [--target F] [--start F] [--max-drop F]  fine-tune, evaluate
//   rapidqa-prune --model IN --out OUT --heads F --ffn F   one structured step
//   rapidqa-prune --model IN --out OUT --method global-l1 --amount F
//
// Options: --importance magnitude|taylor|head-mask (heads; FFN neurons use
// taylor unless magnitude), --epochs N (fine-tuning per step),
// --no-fine-tune, --export-dense DIR (a plain Hugging Face checkpoint at the
// original shapes), --threads N. --kb is the FAQ the metric is measured and
// fine-tuned on (default: the bundled one).
#include <cmath>
#include <cstdio>
#include <string>

#include <rapidqa/compute_runtime.h>
#include <rapidqa/pruner.h>
#include "tool_support.h"

namespace {

void usage(std::FILE* to) {
  std::fprintf(to,
               "usage: rapidqa-prune --model IN --out OUT [--kb FILE] [--method schedule|structured|global-l1]\n"
               "                     [--heads F] [--ffn F] [--amount F] [--target F] [--start F] [--max-drop F]\n"
               "                     [--rounds N] [--importance magnitude|taylor|head-mask] [--epochs N]\n"
               "                     [--no-fine-tune] [--export-dense DIR] [--threads N]\n"
               "Prunes the model directory IN into OUT and prints the report.\n"
               "  --kb FILE          FAQ (.jsonl) for importance, fine-tuning and held-out top-1 (default: bundled)\n"
               "  --method M         schedule (default), structured (one step), global-l1 (zeros)\n"
               "  --heads F --ffn F  one structured step: fractions of the heads / FFN neurons to remove\n"
               "  --amount F         global-l1: fraction of the encoder's linear weights to zero (default 0.4)\n"
               "  --target F         schedule: fraction of the parameters to remove (default 0.4)\n"
               "  --start F          schedule: the first round's rate (default 0.3)\n"
               "  --max-drop F       schedule: largest top-1 loss allowed, as a fraction (default 0.012)\n"
               "  --rounds N         schedule: at most N rounds (default 10)\n"
               "  --importance M     head importance: head-mask (default), taylor or magnitude; FFN\n"
               "                     neurons use taylor unless magnitude\n"
               "  --epochs N         fine-tuning epochs after each step (default 2)\n"
               "  --no-fine-tune     prune only\n"
               "  --export-dense DIR also a plain Hugging Face checkpoint at the original shapes\n"
               "  --threads N        threads (default: every core)\n");
}

bool parse_number(const char* text, double& out) {
  try {
    std::size_t used = 0;
    out = std::stod(text, &used);
    return used == std::string(text).size() && std::isfinite(out) && out >= 0;
  } catch (const std::exception&) {
    return false;
  }
}

bool takes_value(const std::string& option) {
  static const char* const kValueOptions[] = {
      "--model", "--out", "--kb", "--export-dense", "--method", "--importance", "--heads", "--ffn",
      "--amount", "--target", "--start", "--max-drop", "--epochs", "--rounds", "--threads"};
  for (const char* known : kValueOptions) {
    if (option == known) return true;
  }
  return false;
}

}  // namespace

int tool_main(int argc, char** argv) {
  rapidqa::PrunerOptions options;
  options.knowledge_file = RAPIDQA_DEFAULT_KB;
  std::string model_dir, out_dir;
  bool method_given = false, heads_given = false, ffn_given = false;
  double threads = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      usage(stdout);
      return 0;
    }
    if (arg == "--no-fine-tune") {
      options.fine_tune = false;
      continue;
    }
    // An unknown name is reported as such even when it comes last, rather
    // than as an option that lacks its value.
    if (!takes_value(arg)) {
      std::fprintf(stderr, "rapidqa-prune: unknown option '%s'\n", arg.c_str());
      usage(stderr);
      return 2;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "rapidqa-prune: %s needs a value\n", arg.c_str());
      usage(stderr);
      return 2;
    }
    const std::string value = argv[++i];
    double number = 0;
    auto need_number = [&](double& target, bool whole = false) {
      if (!parse_number(value.c_str(), number) || (whole && number != std::floor(number))) {
        std::fprintf(stderr, "rapidqa-prune: %s needs a %snumber, not '%s'\n", arg.c_str(),
                     whole ? "whole " : "", value.c_str());
        return false;
      }
      target = number;
      return true;
    };
    if (arg == "--model") {
      model_dir = value;
    } else if (arg == "--out") {
      out_dir = value;
    } else if (arg == "--kb") {
      options.knowledge_file = value;
    } else if (arg == "--export-dense") {
      options.export_dense_dir = value;
    } else if (arg == "--method") {
      method_given = true;
      if (value == "schedule") options.method = rapidqa::PruningMethod::kSchedule;
      else if (value == "structured") options.method = rapidqa::PruningMethod::kStructured;
      else if (value == "global-l1") options.method = rapidqa::PruningMethod::kGlobalL1;
      else {
        std::fprintf(stderr, "rapidqa-prune: --method must be schedule, structured or global-l1, not '%s'\n",
                     value.c_str());
        return 2;
      }
    } else if (arg == "--importance") {
      if (value == "magnitude") {
        options.head_importance = options.neuron_importance = rapidqa::ImportanceMethod::kMagnitude;
      } else if (value == "taylor") {
        options.head_importance = options.neuron_importance = rapidqa::ImportanceMethod::kTaylor;
      } else if (value == "head-mask") {
        options.head_importance = rapidqa::ImportanceMethod::kHeadMask;
      } else {
        std::fprintf(stderr, "rapidqa-prune: --importance must be magnitude, taylor or head-mask, not '%s'\n",
                     value.c_str());
        return 2;
      }
    } else if (arg == "--heads" || arg == "--ffn") {
      (arg == "--heads" ? heads_given : ffn_given) = true;
      if (!need_number(arg == "--heads" ? options.head_fraction : options.neuron_fraction)) return 2;
    } else if (arg == "--amount") {
      if (!need_number(options.amount)) return 2;
      if (!method_given) options.method = rapidqa::PruningMethod::kGlobalL1;
    } else if (arg == "--target") {
      if (!need_number(options.target_reduction)) return 2;
    } else if (arg == "--start") {
      if (!need_number(options.start_rate)) return 2;
    } else if (arg == "--max-drop") {
      if (!need_number(options.max_metric_drop)) return 2;
    } else if (arg == "--epochs") {
      double epochs = 0;
      if (!need_number(epochs, true)) return 2;
      options.fine_tune_epochs = static_cast<std::size_t>(epochs);
    } else if (arg == "--rounds") {
      double rounds = 0;
      if (!need_number(rounds, true)) return 2;
      if (rounds < 1) {
        std::fprintf(stderr, "rapidqa-prune: --rounds needs at least 1\n");
        return 2;
      }
      options.max_rounds = static_cast<std::size_t>(rounds);
    } else if (arg == "--threads") {
      if (!need_number(threads, true)) return 2;
    }
  }
  if (heads_given || ffn_given) {
    if (!method_given) options.method = rapidqa::PruningMethod::kStructured;
    // One of --heads / --ffn alone prunes only that part.
    if (!heads_given) options.head_fraction = 0;
    if (!ffn_given) options.neuron_fraction = 0;
  }
  if (model_dir.empty() || out_dir.empty()) {
    std::fprintf(stderr, "rapidqa-prune: --model and --out are required\n");
    usage(stderr);
    return 2;
  }
  // Always configured: LibTorch's own default is one thread per physical
  // core, which halves fine-tuning speed and skews the latency on SMT cores.
  {
    rapidqa::ComputeThreads t;
    t.intra_op = rapidqa::tools::thread_count_arg(threads);  // 0: every core
    if (auto s = rapidqa::configure_compute_threads(t); !s.is_ok()) {
      std::fprintf(stderr, "rapidqa-prune: %s\n", s.to_string().c_str());
      return 2;
    }
  }
  options.progress = [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); };
  auto report = rapidqa::prune_model(model_dir, out_dir, options);
  if (!report) {
    std::fprintf(stderr, "rapidqa-prune: %s\n", report.status().to_string().c_str());
    return 1;
  }
  std::fputs(report->to_text().c_str(), stdout);
  std::printf("wrote %s\n", out_dir.c_str());
  return 0;
}

int main(int argc, char** argv) {
  return rapidqa::tools::run_tool("rapidqa-prune", [&] { return tool_main(argc, argv); });
}

// rapidqa-quantize: quantizes a model directory to INT8 and prints what
// every layer lost and gained. The output directory loads like any model
// directory (rapidqa-encode, rapidqa-demo --model, QAEngine).
//
//   rapidqa-quantize --model IN --out OUT [--mode dynamic|static]
//                    [--calib FILE] [--precision default|auto|int8|TABLE]
//                    [--min-cosine C] [--min-sqnr DB] [--calib-limit N] [--threads N]
//
// --calib reads calibration text: a knowledge file (.jsonl: every question
// and alternate) or plain text (one per line). Without it the bundled FAQ's
// questions are used.
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include <fmt/format.h>

#include <rapidqa/compute_runtime.h>
#include <rapidqa/quantizer.h>
#include "tool_support.h"

namespace {

void usage(std::FILE* to) {
  std::fprintf(to,
               "usage: rapidqa-quantize --model IN --out OUT [--mode dynamic|static] [--calib FILE]\n"
               "                        [--precision default|auto|int8|TABLE] [--min-cosine C]\n"
               "                        [--min-sqnr DB] [--calib-limit N] [--threads N]\n"
               "Quantizes the model directory IN to INT8, writes OUT and prints the per-layer report.\n"
               "--calib: a knowledge file (.jsonl) or one text per line (default: the bundled FAQ).\n"
               "--min-cosine: auto's budget, the worst calibration text's sentence-vector cosine to FP32\n"
               "  (default 0.99); --min-sqnr: the layers that go back to FP32 first where it is missed.\n");
}

bool parse_positive(const char* text, double& out) {
  try {
    std::size_t used = 0;
    out = std::stod(text, &used);
    return used == std::string(text).size() && std::isfinite(out) && out > 0;
  } catch (const std::exception&) {
    return false;
  }
}

bool takes_value(const std::string& option) {
  static const char* const kValueOptions[] = {
      "--model", "--out", "--mode", "--calib", "--precision", "--min-cosine", "--min-sqnr", "--calib-limit", "--threads"};
  for (const char* known : kValueOptions) {
    if (option == known) return true;
  }
  return false;
}

}  // namespace

int tool_main(int argc, char** argv) {
  rapidqa::QuantizerOptions options;
  std::string model_dir, out_dir, calib = RAPIDQA_DEFAULT_KB;
  double calib_limit = 0, threads = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    auto take = [&]() { ++i; return std::string(v); };
    if (arg == "--help" || arg == "-h") {
      usage(stdout);
      return 0;
    } else if (!takes_value(arg)) {
      // Checked before the value, so a misspelt last option is named as
      // unknown rather than as one that lacks its value.
      std::fprintf(stderr, "rapidqa-quantize: unknown option '%s'\n", arg.c_str());
      usage(stderr);
      return 2;
    } else if (!v) {
      std::fprintf(stderr, "rapidqa-quantize: %s needs a value\n", arg.c_str());
      usage(stderr);
      return 2;
    } else if (arg == "--model") {
      model_dir = take();
    } else if (arg == "--out") {
      out_dir = take();
    } else if (arg == "--mode") {
      const std::string mode = take();
      if (mode == "dynamic") options.mode = rapidqa::QuantizationMode::kDynamic;
      else if (mode == "static") options.mode = rapidqa::QuantizationMode::kStatic;
      else {
        std::fprintf(stderr, "rapidqa-quantize: --mode must be dynamic or static, not '%s'\n", mode.c_str());
        return 2;
      }
    } else if (arg == "--calib") {
      calib = take();
    } else if (arg == "--precision") {
      options.precision_table = take();
    } else if (arg == "--min-cosine") {
      if (!parse_positive(v, options.min_vector_cosine) || options.min_vector_cosine > 1) {
        std::fprintf(stderr, "rapidqa-quantize: --min-cosine needs a cosine in (0, 1], not '%s'\n", v);
        return 2;
      }
      ++i;
    } else if (arg == "--min-sqnr") {
      if (!parse_positive(v, options.min_sqnr_db)) {
        std::fprintf(stderr, "rapidqa-quantize: --min-sqnr needs a positive number of dB, not '%s'\n", v);
        return 2;
      }
      ++i;
    } else if (arg == "--calib-limit" || arg == "--threads") {
      double& target = arg == "--threads" ? threads : calib_limit;
      if (!parse_positive(v, target) || target != std::floor(target)) {
        std::fprintf(stderr, "rapidqa-quantize: %s needs a positive whole number, not '%s'\n", arg.c_str(), v);
        return 2;
      }
      ++i;
    }
  }
  if (model_dir.empty() || out_dir.empty()) {
    std::fprintf(stderr, "rapidqa-quantize: --model and --out are required\n");
    usage(stderr);
    return 2;
  }
  if (threads > 0) {
    rapidqa::ComputeThreads runtime;
    runtime.intra_op = rapidqa::tools::thread_count_arg(threads);
    if (auto s = rapidqa::configure_compute_threads(runtime); !s.is_ok()) {
      std::fprintf(stderr, "rapidqa-quantize: %s\n", s.to_string().c_str());
      return 2;
    }
  }
  auto texts = rapidqa::read_calibration_texts(calib);
  if (!texts) {
    std::fprintf(stderr, "rapidqa-quantize: %s\n", texts.status().to_string().c_str());
    return 1;
  }
  if (calib_limit > 0 && texts->size() > static_cast<std::size_t>(calib_limit)) {
    texts->resize(static_cast<std::size_t>(calib_limit));
  }
  options.calibration_texts = std::move(texts).value();
  options.progress = [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); };
  auto report = rapidqa::quantize_model(model_dir, out_dir, options);
  if (!report) {
    std::fprintf(stderr, "rapidqa-quantize: %s\n", report.status().to_string().c_str());
    return 1;
  }
  std::fputs(report->to_text().c_str(), stdout);
  std::printf("wrote %s\n", out_dir.c_str());
  return 0;
}

int main(int argc, char** argv) {
  return rapidqa::tools::run_tool("rapidqa-quantize", [&] { return tool_main(argc, argv); });
}

// rapidqa-encode: embeds text with a user's transformer model, one text per
// line on stdin, one JSON array of floats per line on stdout, so users can
// precompute embeddings. --tokens prints the model's token ids instead.
//
//   rapidqa-encode --model DIR [--pooling MODE] [--prompt TEXT | --prompt-name NAME]
//                  [--normalize] [--tokens] [--batch N] [--max-length N] [--threads N]
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <rapidqa/compute_runtime.h>
#include <rapidqa/text_normalizer.h>
#include <rapidqa/transformer_encoder.h>
#include "common/line_reader.h"
#include "tool_support.h"

namespace {

void usage(std::FILE* to) {
  std::fprintf(to,
               "usage: rapidqa-encode --model DIR [--pooling MODE] [--prompt TEXT | --prompt-name NAME]\n"
               "                      [--normalize] [--tokens] [--batch N] [--max-length N] [--threads N]\n"
               "Reads one text per line on stdin; prints one JSON array per line (floats, or token ids\n"
               "with --tokens). Lines are processed in batches of N (default 32).\n"
               "A sentence-transformers directory says its own pooling, Dense and Normalize modules,\n"
               "prompts and length; the flags win over it:\n"
               "  --pooling MODE      cls, mean, max, mean_sqrt_len, weightedmean, lasttoken (default: the\n"
               "                      directory's, else mean)\n"
               "  --prompt TEXT       put before every line (\"\" for none)\n"
               "  --prompt-name NAME  the directory's prompt of that name: query (the default) for\n"
               "                      questions, passage (or the model's name for it) for passages\n"
               "  --max-length N      tokens per text (default: the directory's max_seq_length, else 128)\n");
}

bool parse_size(const char* text, std::size_t& out) {
  try {
    std::size_t used = 0;
    const long long v = std::stoll(text, &used);
    if (used != std::string(text).size() || v <= 0) return false;
    out = static_cast<std::size_t>(v);
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

}  // namespace

int tool_main(int argc, char** argv) {
  rapidqa::TransformerEncoderOptions options;
  options.normalize = false;
  bool tokens = false;
  std::size_t batch = 32;
  std::size_t threads = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    const char* v = nullptr;
    if (arg == "--model" && (v = value())) {
      options.model_dir = v;
    } else if (arg == "--pooling" && (v = value())) {
      auto mode = rapidqa::pooling_from_name(v);
      if (!mode) {
        std::fprintf(stderr, "rapidqa-encode: --pooling: %s\n", mode.status().message().c_str());
        return 2;
      }
      options.pooling = mode.value();
    } else if (arg == "--prompt" && (v = value())) {
      options.prompt = std::string(v);
    } else if (arg == "--prompt-name" && (v = value())) {
      options.prompt_name = v;
    } else if (arg == "--normalize") {
      options.normalize = true;
    } else if (arg == "--tokens") {
      tokens = true;
    } else if ((arg == "--batch" || arg == "--max-length" || arg == "--threads") && (v = value())) {
      std::size_t n = 0;
      if (!parse_size(v, n)) {
        std::fprintf(stderr, "rapidqa-encode: %s needs a positive integer, not '%s'\n", arg.c_str(), v);
        return 2;
      }
      (arg == "--batch" ? batch : arg == "--threads" ? threads : options.max_sequence_length) = n;
    } else if (arg == "--help" || arg == "-h") {
      usage(stdout);
      return 0;
    } else {
      std::fprintf(stderr, "rapidqa-encode: unknown or incomplete option '%s'\n", arg.c_str());
      usage(stderr);
      return 2;
    }
  }
  if (options.prompt && !options.prompt_name.empty()) {
    std::fprintf(stderr, "rapidqa-encode: --prompt and --prompt-name exclude each other\n");
    return 2;
  }
  if (options.model_dir.empty()) {
    std::fprintf(stderr, "rapidqa-encode: --model DIR is required\n");
    usage(stderr);
    return 2;
  }
  rapidqa::ComputeThreads compute;
  compute.intra_op = rapidqa::tools::thread_count_arg(threads);
  if (auto s = rapidqa::configure_compute_threads(compute); !s.is_ok()) {
    std::fprintf(stderr, "rapidqa-encode: %s\n", s.to_string().c_str());
    return 2;
  }
  options.max_batch_size = batch;
  auto encoder = rapidqa::TransformerEncoder::load(options);
  if (!encoder) {
    std::fprintf(stderr, "rapidqa-encode: %s\n", encoder.status().to_string().c_str());
    return 1;
  }

  // One JSON array per input line, in order. A line that cannot be encoded
  // (invalid UTF-8) prints null, so output lines stay aligned with input
  // lines, and is reported on stderr with its number.
  auto encode_lines = [&](const std::vector<std::string>& texts) -> rapidqa::Result<std::vector<std::string>> {
    std::vector<std::string> rows;
    if (tokens) {
      auto ids = (*encoder)->token_ids(texts);
      if (!ids) return ids.status();
      for (const auto& row : *ids) rows.push_back(rapidqa::tools::json_line(nlohmann::json(row)));
      return rows;
    }
    std::vector<float> out;
    if (auto s = (*encoder)->encode(texts, out); !s.is_ok()) return s;
    const std::size_t dim = (*encoder)->dimension();
    for (std::size_t r = 0; r < texts.size(); ++r) {
      rows.push_back(nlohmann::json(std::vector<float>(out.begin() + static_cast<long>(r * dim),
                                                       out.begin() + static_cast<long>((r + 1) * dim)))
                         .dump());
    }
    return rows;
  };
  std::vector<std::string> lines;
  std::size_t line_number = 0;
  int failures = 0;
  auto flush = [&]() {
    if (lines.empty()) return;
    auto rows = encode_lines(lines);
    if (rows) {
      for (const auto& r : *rows) std::cout << r << "\n";
    } else {
      const std::size_t first_line = line_number - lines.size() + 1;
      for (std::size_t i = 0; i < lines.size(); ++i) {
        auto one = encode_lines({lines[i]});
        if (one) {
          std::cout << one->front() << "\n";
        } else {
          std::cout << "null\n";
          std::fprintf(stderr, "rapidqa-encode: line %zu: %s\n", first_line + i, one.status().message().c_str());
          ++failures;
        }
      }
    }
    std::cout.flush();
    lines.clear();
  };
  std::string line;
  for (;;) {
    const auto read = rapidqa::detail::read_bounded_line(std::cin, line);
    if (read == rapidqa::detail::LineRead::kEnd) break;
    ++line_number;
    if (read == rapidqa::detail::LineRead::kTooLong) {
      flush();
      std::fprintf(stderr, "rapidqa-encode: line %zu is longer than %zu bytes; stopping\n", line_number,
                   rapidqa::detail::kDefaultMaxLineBytes);
      return 1;
    }
    lines.push_back(line);
    if (lines.size() == batch) flush();
  }
  flush();
  if (line_number > 1000) std::fprintf(stderr, "rapidqa-encode: %zu lines\n", line_number);
  return failures == 0 ? 0 : 1;
}

int main(int argc, char** argv) {
  return rapidqa::tools::run_tool("rapidqa-encode", [&] { return tool_main(argc, argv); });
}

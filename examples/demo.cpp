// rapidqa-demo: answers questions from the bundled FAQ (or any JSONL
// knowledge base) on the command line.
//
//   rapidqa-demo --question "How do I reset my password?"
//   echo "如何重置密码？" | rapidqa-demo --json
//   rapidqa-demo --kb my_faq.jsonl --stats < questions.txt
//   rapidqa-demo --store sqlite:faq.db --question "When are you open?"
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <rapidqa/qa_engine.h>
#include <rapidqa/version.h>
#if RAPIDQA_HAS_MODELS
#include <rapidqa/transformer_encoder.h>
#endif
#include "common/line_reader.h"
#include "answer_json.h"
#include "encoder_flags.h"
#include "tool_support.h"

#ifndef RAPIDQA_DEFAULT_KB
#define RAPIDQA_DEFAULT_KB "examples/data/faq.jsonl"
#endif

namespace {

struct DemoOptions {
  std::string kb = RAPIDQA_DEFAULT_KB;
  bool kb_given = false;   // --kb on the command line (with --store: import it)
  std::string store;       // knowledge store URI: answer from (and import into) it
  std::vector<std::string> questions;
  rapidqa::tools::EncoderFlags encoder;  // a transformer or a remote engine instead of the HashingEncoder
  rapidqa::tools::GeneratorFlags generator;  // answers an LLM writes from the entries found
  std::string reader_dir;  // extractive reader over entry contexts
  std::string preload;     // hot questions to warm the caches with, one per line
  bool json = false;
  bool stats = false;
  bool prometheus = false;
  bool version = false;
};

void print_usage(std::FILE* to) {
  std::fprintf(to,
               "usage: rapidqa-demo [--kb FILE] [--store URI] [--model DIR [--bf16] | --remote-encoder URL ...] [--reader DIR]\n"
               "                    [--question TEXT]...\n"
               "                    [--json] [--preload FILE] [--stats] [--metrics] [--version]\n"
               "  --kb FILE        knowledge base, one JSON object per line (default: the bundled FAQ)\n"
               "  --store URI      answer from a knowledge store (sqlite:PATH, created when missing, or\n"
               "                   postgresql://USER@HOST/DATABASE, shared with other instances); with\n"
               "                   --kb the file is first imported into it, without it the store's entries\n"
               "                   are used as they are\n"
               "%s%s"
               "  --reader DIR     answer with the span a question-answering model finds in the entries'\n"
               "                   context passages\n"
               "  --question TEXT  answer TEXT; without it, questions are read from stdin, one per line\n"
               "  --preload FILE   warm the caches first with the questions in FILE, one per line\n"
               "  --json           print one JSON object per answer\n"
               "  --stats          print the per-stage p50/p95/p99 latency table at the end\n"
               "  --metrics        print every metric in the Prometheus text format at the end\n"
               "  --version        print the versions of rapidqa and its libraries\n",
               rapidqa::tools::EncoderFlags::kUsage, rapidqa::tools::GeneratorFlags::kUsage);
}

// Returns 0 to go on, or an exit code.
int parse_args(int argc, char** argv, DemoOptions& o) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&](const char* name) -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "rapidqa-demo: %s needs a value\n", name);
        return nullptr;
      }
      return argv[++i];
    };
    if (arg == "--kb") {
      const char* v = value("--kb");
      if (!v) return 2;
      o.kb = v;
      o.kb_given = true;
    } else if (arg == "--store") {
      const char* v = value("--store");
      if (!v) return 2;
      o.store = v;
    } else if (arg == "--question" || arg == "-q") {
      const char* v = value("--question");
      if (!v) return 2;
      o.questions.emplace_back(v);
    } else if (const int taken = o.generator.parse("rapidqa-demo", argc, argv, i); taken != 0) {
      if (taken < 0) return 2;
    } else if (const int taken = o.encoder.parse("rapidqa-demo", argc, argv, i); taken != 0) {
      if (taken < 0) return 2;
    } else if (arg == "--reader") {
      const char* v = value("--reader");
      if (!v) return 2;
      o.reader_dir = v;
    } else if (arg == "--preload") {
      const char* v = value("--preload");
      if (!v) return 2;
      o.preload = v;
    } else if (arg == "--json") {
      o.json = true;
    } else if (arg == "--stats") {
      o.stats = true;
    } else if (arg == "--metrics") {
      o.prometheus = true;
    } else if (arg == "--version") {
      o.version = true;
    } else if (arg == "--help" || arg == "-h") {
      print_usage(stdout);
      return -1;
    } else {
      std::fprintf(stderr, "rapidqa-demo: unknown option '%s'\n", arg.c_str());
      print_usage(stderr);
      return 2;
    }
  }
  return 0;
}

nlohmann::json to_json(const std::string& question, const rapidqa::Answer& a) {
  nlohmann::json j = rapidqa::tools::answer_to_json(a);
  j["question"] = question;
  return j;
}

}  // namespace

int tool_main(int argc, char** argv) {
  DemoOptions options;
  if (const int rc = parse_args(argc, argv, options); rc != 0) return rc < 0 ? 0 : rc;

  rapidqa::EngineOptions engine_options;
  if (const int rc = options.encoder.make("rapidqa-demo", engine_options); rc != 0) return rc;
  if (const int rc = options.generator.make("rapidqa-demo", engine_options.generator, engine_options.generator_sources);
      rc != 0) {
    return rc;
  }
#if RAPIDQA_HAS_MODELS
  if (!options.reader_dir.empty()) {
    rapidqa::ExtractiveReaderOptions reader_options;
    reader_options.model_dir = options.reader_dir;
    auto reader = rapidqa::ExtractiveReader::load(reader_options);
    if (!reader) {
      std::fprintf(stderr, "rapidqa-demo: --reader: %s\n", reader.status().to_string().c_str());
      return 1;
    }
    engine_options.reader = std::move(reader).value();
  }
#else
  if (!options.reader_dir.empty()) {
    std::fprintf(stderr, "rapidqa-demo: --reader needs the models component, and this rapidqa was "
                         "built without it (-DRAPIDQA_WITH_MODELS=OFF)\n");
    return 2;
  }
#endif
  engine_options.knowledge_store = options.store;
  const bool generating = engine_options.generator != nullptr;
  auto engine = rapidqa::QAEngine::create(std::move(engine_options));
  if (!engine) {
    std::fprintf(stderr, "rapidqa-demo: %s\n", engine.status().to_string().c_str());
    return 1;
  }
  if (options.version) std::fputs(rapidqa::build_info().c_str(), stdout);
  if (options.store.empty() || options.kb_given) {
    auto loaded = (*engine)->load_knowledge(options.kb);
    if (!loaded) {
      std::fprintf(stderr, "rapidqa-demo: %s\n", loaded.status().to_string().c_str());
      return 1;
    }
    if (!options.json) {
      std::fprintf(stderr, "loaded %zu entries (%zu phrasings) from %s%s; encoder %s\n", loaded->entries,
                   loaded->phrasings, options.kb.c_str(), options.store.empty() ? "" : " into the store",
                   (*engine)->encoder().name().c_str());
    }
  } else if (!options.json) {
    std::fprintf(stderr, "%zu entries from %s; encoder %s\n", (*engine)->entry_count(), options.store.c_str(),
                 (*engine)->encoder().name().c_str());
  }
  if (!options.preload.empty()) {
    auto preloaded = (*engine)->preload_questions_file(options.preload, {}, [](std::size_t done, std::size_t total) {
      std::fprintf(stderr, "preloading: %zu/%zu questions\n", done, total);
    });
    if (!preloaded) {
      std::fprintf(stderr, "rapidqa-demo: %s\n", preloaded.status().to_string().c_str());
      return 1;
    }
    for (const auto& bad : preloaded->rejected) {
      std::fprintf(stderr, "rapidqa-demo: %s line %zu: %s\n", options.preload.c_str(), bad.line, bad.message.c_str());
    }
    std::fprintf(stderr, "preloaded %zu of %zu questions (%zu had no answer, %zu rejected)\n", preloaded->cached,
                 preloaded->questions, preloaded->fallbacks, preloaded->rejected.size());
  }

  int failures = 0;
  auto answer_one = [&](const std::string& question) {
    // A generated answer is printed as it is written.
    bool streamed = false;
    rapidqa::AskOptions ask;
    if (generating && !options.json) {
      ask.on_token = [&](std::string_view piece) {
        std::cout << piece << std::flush;
        streamed = true;
        return true;
      };
    }
    auto answer = (*engine)->ask(question, ask);
    if (streamed) std::cout << "\n";
    if (!answer) {
      ++failures;
      if (options.json) {
        // The question is echoed clipped: it may be megabytes long.
        const std::string shown = question.size() > 256 ? question.substr(0, 256) + "..." : question;
        std::cout << rapidqa::tools::json_line({{"question", shown}, {"error", answer.status().to_string()}}) << "\n";
      } else {
        std::fprintf(stderr, "error: %s\n", answer.status().to_string().c_str());
      }
      return;
    }
    if (options.json) {
      std::cout << rapidqa::tools::json_line(to_json(question, *answer)) << "\n";
    } else {
      if (!streamed) std::cout << answer->text << "\n";
      std::cout << fmt::format("  [{} | entry {} | score {:.3f} | {:.1f} us]\n",
                               rapidqa::answer_tier_name(answer->tier),
                               answer->entry_id().empty() ? "-" : answer->entry_id(), answer->score,
                               answer->timings[rapidqa::Stage::kTotal].count() / 1000.0);
    }
    std::cout.flush();
  };

  if (!options.questions.empty()) {
    for (const auto& q : options.questions) answer_one(q);
  } else if (!options.version || argc > 2) {
    std::string line;
    for (std::size_t number = 1;; ++number) {
      const auto read = rapidqa::detail::read_bounded_line(std::cin, line);
      if (read == rapidqa::detail::LineRead::kEnd) break;
      if (read == rapidqa::detail::LineRead::kTooLong) {
        std::fprintf(stderr, "rapidqa-demo: input line %zu is longer than %zu bytes; stopping\n", number,
                     rapidqa::detail::kDefaultMaxLineBytes);
        return 1;
      }
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      answer_one(line);
    }
  }
  if (options.stats) std::fputs((*engine)->metrics().format_table().c_str(), options.json ? stderr : stdout);
  if (options.prometheus) std::fputs((*engine)->metrics().format_prometheus().c_str(), options.json ? stderr : stdout);
  return failures == 0 ? 0 : 1;
}

int main(int argc, char** argv) {
  return rapidqa::tools::run_tool("rapidqa-demo", [&] { return tool_main(argc, argv); });
}

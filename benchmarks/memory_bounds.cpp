// rapidqa-memory-bounds: what the engine's memory does with default
// options under the two inputs that used to grow it without bound: one
// knowledge entry with a 1 MB answer asked 2,000 different ways (each tier
// kept its own copy of the text per question), and 1,000 asks with
// distinct 1 MB tenant names. Prints one table row per case with the
// process's resident memory before, after and at its peak (Linux
// /proc/self/status).
//
//   rapidqa-memory-bounds [--asks N] [--answer-bytes N]
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include <rapidqa/qa_engine.h>

#include "tool_support.h"

namespace {

// VmRSS or VmHWM in MiB.
double proc_status_mib(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field, 0) == 0) return std::strtod(line.c_str() + std::strlen(field) + 1, nullptr) / 1024.0;
  }
  return 0;
}

struct Row {
  const char* name;
  std::size_t asks = 0, answered = 0, refused = 0;
  double rss_before = 0, rss_after = 0, peak = 0;
  std::size_t cache_bytes = 0;
};

void print(const Row& r) {
  std::printf("| %-38s | %6zu | %8zu | %7zu | %9.0f | %8.0f | %8.0f | %11.0f |\n", r.name, r.asks, r.answered,
              r.refused, r.rss_before, r.rss_after, r.peak, static_cast<double>(r.cache_bytes) / (1 << 20));
}

}  // namespace

int tool_main(int argc, char** argv) {
  std::size_t asks = 2000, answer_bytes = 1 << 20;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::printf("usage: rapidqa-memory-bounds [--asks N] [--answer-bytes N]\n"
                  "  one 1 MB answer asked N ways, and N/2 asks with 1 MB tenant names,\n"
                  "  with default engine options; prints resident memory per case\n");
      return 0;
    }
    if ((a == "--asks" || a == "--answer-bytes") && i + 1 < argc) {
      const std::string value = argv[++i];
      std::size_t used = 0;
      unsigned long n = 0;
      try {
        n = std::stoul(value, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used == 0 || used != value.size() || value[0] == '-' || n == 0) {
        std::fprintf(stderr, "rapidqa-memory-bounds: %s needs a positive whole number, not '%s'\n", a.c_str(),
                     value.c_str());
        return 2;
      }
      (a == "--asks" ? asks : answer_bytes) = n;
    } else if (a == "--asks" || a == "--answer-bytes") {
      std::fprintf(stderr, "rapidqa-memory-bounds: %s needs a value\n", a.c_str());
      return 2;
    } else {
      std::fprintf(stderr, "rapidqa-memory-bounds: unknown option '%s'\n", a.c_str());
      return 2;
    }
  }
  rapidqa::EngineOptions options;
  options.min_answer_score = -1.0f;  // every question is answered (and cached) from the one entry
  auto engine = rapidqa::QAEngine::create(options);
  if (!engine) {
    std::fprintf(stderr, "rapidqa-memory-bounds: %s\n", engine.status().to_string().c_str());
    return 1;
  }
  rapidqa::KnowledgeEntry big;
  big.id = "policy";
  big.question = "What does the long policy say?";
  big.answer = std::string(answer_bytes, 'p');
  if (auto loaded = (*engine)->load_entries({big}); !loaded) {
    std::fprintf(stderr, "rapidqa-memory-bounds: %s\n", loaded.status().to_string().c_str());
    return 1;
  }
  std::printf("| case | asks | answered | refused | RSS before MiB | RSS after MiB | peak MiB | cache bytes MiB |\n"
              "|---|---:|---:|---:|---:|---:|---:|---:|\n");
  Row big_answer{"1 MB answer, each ask a new question"};
  big_answer.rss_before = proc_status_mib("VmRSS:");
  for (std::size_t i = 0; i < asks; ++i) {
    auto answer = (*engine)->ask("what does the long policy say, variant " + std::to_string(i));
    ++big_answer.asks;
    answer ? ++big_answer.answered : ++big_answer.refused;
  }
  big_answer.rss_after = proc_status_mib("VmRSS:");
  big_answer.peak = proc_status_mib("VmHWM:");
  big_answer.cache_bytes = (*engine)->metrics().caches.bytes;
  print(big_answer);

  Row tenants{"1 MB tenant name, each ask a new tenant"};
  tenants.rss_before = proc_status_mib("VmRSS:");
  for (std::size_t i = 0; i < asks / 2; ++i) {
    rapidqa::AskOptions ask;
    ask.tenant = std::string(1 << 20, 't') + std::to_string(i);
    auto answer = (*engine)->ask("What does the long policy say?", ask);
    ++tenants.asks;
    answer ? ++tenants.answered : ++tenants.refused;
  }
  tenants.rss_after = proc_status_mib("VmRSS:");
  tenants.peak = proc_status_mib("VmHWM:");
  tenants.cache_bytes = (*engine)->metrics().caches.bytes;
  print(tenants);
  return 0;
}

int main(int argc, char** argv) {
  return rapidqa::tools::run_tool("rapidqa-memory-bounds", [&] { return tool_main(argc, argv); });
}

// rapidqa-generation-bench: a slow generator (an LLM engine taking about
// two seconds an answer; the stand-in chat engine of the tests, started by
// benchmarks/run_generation_cache.sh) behind the engine, with the cache
// tiers on and off, rounds interleaved. N client threads ask in a closed
// loop from one question stream with realistic repeats: each question is
// an entry drawn by popularity (Zipf over the knowledge base, the head of
// a help desk's traffic), asked in one of its phrasings (the question, its
// alternates, the bundled paraphrases). Prints one CSV row per run:
// answers per second, p50/p99, the share answered from each cache tier and
// the generations the engine asked for.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>
#include <rapidqa/generator.h>
#include <rapidqa/qa_engine.h>

#include "bench_percentile.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  std::string generator;
  std::string model = "total-2000";
  std::string kb = "examples/data/faq.jsonl";
  std::string paraphrases = "examples/data/faq_paraphrases.jsonl";
  int rounds = 2;
  double seconds = 30;
  int clients = 64;
  double zipf = 1.0;
};

void usage(std::FILE* to) {
  std::fprintf(to,
               "usage: rapidqa-generation-bench --generator URL [--model NAME] [--kb FILE] [--paraphrases FILE]\n"
               "                                [--rounds N] [--seconds S] [--clients N] [--zipf S]\n"
               "Answers per second and p99 of a question stream with repeats, a slow generator behind the engine,\n"
               "with the cache tiers on and off (interleaved). Run by benchmarks/run_generation_cache.sh.\n"
               "  --generator URL   an OpenAI chat completions engine (required)\n"
               "  --model NAME      its model (total-2000: the stand-in engine spreads 2 s over each answer)\n"
               "  --kb FILE         knowledge base (examples/data/faq.jsonl)\n"
               "  --paraphrases F   more phrasings, {\"question\", \"expected_id\"} lines (examples/data/faq_paraphrases.jsonl)\n"
               "  --rounds N        interleaved rounds (2)\n"
               "  --seconds S       length of each run (30)\n"
               "  --clients N       asking threads, closed loop (64)\n"
               "  --zipf S          popularity skew over entries (1.0)\n");
}

// Every entry's phrasings, in the knowledge base's order.
std::vector<std::vector<std::string>> phrasings_of(const std::string& kb, const std::string& paraphrases) {
  std::vector<std::vector<std::string>> out;
  std::map<std::string, std::size_t> index;
  std::ifstream in(kb);
  std::string line;
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_object() || !j.contains("id") || !j.contains("question")) continue;
    index[j["id"].get<std::string>()] = out.size();
    out.push_back({j["question"].get<std::string>()});
    if (j.contains("alternates") && j["alternates"].is_array()) {
      for (const auto& a : j["alternates"]) {
        if (a.is_string()) out.back().push_back(a);
      }
    }
  }
  std::ifstream more(paraphrases);
  while (std::getline(more, line)) {
    const auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_object() || !j.contains("expected_id") || !j.contains("question")) continue;
    auto it = index.find(j["expected_id"].get<std::string>());
    if (it != index.end()) out[it->second].push_back(j["question"].get<std::string>());
  }
  return out;
}

struct RunResult {
  double answers_per_second = 0;
  double p50_ms = 0, p99_ms = 0;
  std::size_t answers = 0, failed = 0;
  std::map<std::string, std::size_t> tiers;
  std::uint64_t generations = 0;
  double degraded_share = 0;
};

RunResult run(const Options& o, const std::vector<std::vector<std::string>>& phrasings, bool cache, int round) {
  rapidqa::RemoteGeneratorOptions g;
  g.endpoints = {o.generator};
  g.model = o.model;
  auto generator = rapidqa::RemoteGenerator::create(g);
  if (!generator) {
    std::fprintf(stderr, "rapidqa-generation-bench: %s\n", generator.status().to_string().c_str());
    std::exit(1);
  }
  rapidqa::EngineOptions options;
  options.generator = std::move(generator).value();
  if (!cache) {
    options.enable_result_cache = false;
    options.enable_semantic_cache = false;
    options.enable_knowledge_cache = false;
  }
  auto engine = rapidqa::QAEngine::create(std::move(options));
  if (!engine || !(*engine)->load_knowledge(o.kb).is_ok()) {
    std::fprintf(stderr, "rapidqa-generation-bench: cannot start the engine on %s\n", o.kb.c_str());
    std::exit(1);
  }
  // Zipf over entries: weight 1 / rank^s, the ranks shuffled once per
  // round so that popularity does not follow the file's order.
  std::vector<double> weights(phrasings.size());
  std::vector<std::size_t> order(phrasings.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::mt19937_64 shuffle(1000 + static_cast<unsigned>(round));
  std::shuffle(order.begin(), order.end(), shuffle);
  for (std::size_t r = 0; r < order.size(); ++r) weights[order[r]] = 1.0 / std::pow(static_cast<double>(r + 1), o.zipf);

  std::atomic<bool> stop{false};
  std::mutex mu;
  std::vector<double> latencies;
  RunResult result;
  std::size_t degraded = 0;
  std::vector<std::thread> threads;
  const auto started = Clock::now();
  for (int c = 0; c < o.clients; ++c) {
    threads.emplace_back([&, c] {
      std::mt19937_64 random(static_cast<unsigned>(round * 1000 + c));
      std::discrete_distribution<std::size_t> entry(weights.begin(), weights.end());
      std::vector<double> mine;
      std::map<std::string, std::size_t> tiers;
      std::size_t failed = 0, mine_degraded = 0;
      while (!stop.load()) {
        const auto& forms = phrasings[entry(random)];
        const std::string& question = forms[std::uniform_int_distribution<std::size_t>(0, forms.size() - 1)(random)];
        const auto t0 = Clock::now();
        auto answer = (*engine)->ask(question);
        const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
        if (!answer) {
          ++failed;
          continue;
        }
        mine.push_back(ms);
        ++tiers[rapidqa::answer_tier_name(answer->tier)];
        if (answer->degraded) ++mine_degraded;
      }
      std::lock_guard<std::mutex> lock(mu);
      latencies.insert(latencies.end(), mine.begin(), mine.end());
      for (const auto& [tier, n] : tiers) result.tiers[tier] += n;
      result.failed += failed;
      degraded += mine_degraded;
    });
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(o.seconds));
  stop = true;
  for (auto& t : threads) t.join();
  const double elapsed = std::chrono::duration<double>(Clock::now() - started).count();
  result.answers = latencies.size();
  result.answers_per_second = static_cast<double>(result.answers) / elapsed;
  if (!latencies.empty()) {
    result.p50_ms = rapidqa::bench::percentile(latencies, 0.50);
    result.p99_ms = rapidqa::bench::percentile(latencies, 0.99);
  }
  result.generations = (*engine)->metrics().generation.generations;
  result.degraded_share = result.answers ? static_cast<double>(degraded) / static_cast<double>(result.answers) : 0;
  return result;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "rapidqa-generation-bench: %s needs a value\n", arg.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (arg == "--help" || arg == "-h") {
      usage(stdout);
      return 0;
    } else if (arg == "--generator") {
      o.generator = value();
    } else if (arg == "--model") {
      o.model = value();
    } else if (arg == "--kb") {
      o.kb = value();
    } else if (arg == "--paraphrases") {
      o.paraphrases = value();
    } else if (arg == "--rounds") {
      o.rounds = std::atoi(value());
    } else if (arg == "--seconds") {
      o.seconds = std::atof(value());
    } else if (arg == "--clients") {
      o.clients = std::atoi(value());
    } else if (arg == "--zipf") {
      o.zipf = std::atof(value());
    } else {
      std::fprintf(stderr, "rapidqa-generation-bench: unknown option %s\n", arg.c_str());
      usage(stderr);
      return 2;
    }
  }
  if (o.generator.empty() || o.rounds < 1 || o.seconds <= 0 || o.clients < 1 || o.zipf < 0) {
    usage(stderr);
    return 2;
  }
  const auto phrasings = phrasings_of(o.kb, o.paraphrases);
  std::size_t forms = 0;
  for (const auto& p : phrasings) forms += p.size();
  if (phrasings.empty()) {
    std::fprintf(stderr, "rapidqa-generation-bench: no entries in %s\n", o.kb.c_str());
    return 1;
  }
  std::fprintf(stderr, "%zu entries, %zu phrasings, %d clients, %.0f s a run, Zipf %.2f\n", phrasings.size(), forms,
               o.clients, o.seconds, o.zipf);
  std::printf("round,cache,answers,answers_per_s,p50_ms,p99_ms,result_cache,knowledge_cache,semantic_cache,knowledge,"
              "fallback,generations,degraded_share,failed\n");
  for (int round = 1; round <= o.rounds; ++round) {
    for (const bool cache : {true, false}) {
      std::fprintf(stderr, "round %d, cache %s ...\n", round, cache ? "on" : "off");
      const RunResult r = run(o, phrasings, cache, round);
      auto tier = [&](const char* name) {
        const auto it = r.tiers.find(name);
        return r.answers ? static_cast<double>(it == r.tiers.end() ? 0 : it->second) / static_cast<double>(r.answers)
                         : 0.0;
      };
      std::printf("%d,%s,%zu,%.1f,%.1f,%.1f,%.3f,%.3f,%.3f,%.3f,%.3f,%llu,%.3f,%zu\n", round, cache ? "on" : "off",
                  r.answers, r.answers_per_second, r.p50_ms, r.p99_ms, tier("result_cache"), tier("knowledge_cache"),
                  tier("semantic_cache"), tier("knowledge"), tier("fallback"),
                  static_cast<unsigned long long>(r.generations), r.degraded_share, r.failed);
      std::fflush(stdout);
    }
  }
  return 0;
}

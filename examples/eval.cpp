// rapidqa-eval: measures answer quality and latency on a user's own
// knowledge base. Retrieval: top-1 and top-3 accuracy, MRR over the first
// ten, fallback rate, latency percentiles, for questions whose right entry
// is known. Semantic cache: hit rate on paraphrases (each question asked
// after its entry's first phrasing) and false-hit rate on labelled
// non-paraphrase pairs (the second asked after the first), each pair in a
// tenant of its own so no other pair's answer interferes.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <sys/stat.h>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <rapidqa/qa_engine.h>

#include "encoder_flags.h"
#include "tool_support.h"

namespace {

// Debian's python3-jieba ships this word list; used when present.
constexpr const char* kDebianWordList = "/usr/lib/python3/dist-packages/jieba/dict.txt";

struct EvalOptions {
  std::string kb, queries, negpairs, answers;
  rapidqa::RetrievalFusion fusion = rapidqa::RetrievalOptions{}.fusion;  // the engine's default
  std::string word_dictionary = "auto";
  std::vector<float> thresholds;  // semantic-cache thresholds to sweep (empty: the engine's default)
  std::size_t limit = 0;          // questions and pairs read from each file (0: all)
  bool json = false;
  rapidqa::tools::EncoderFlags encoder;
};

void print_usage(std::FILE* out) {
  std::fprintf(out,
               "usage: rapidqa-eval --kb FILE --queries TSV [--negpairs TSV] [options]\n"
               "Measures retrieval and semantic-cache quality on a knowledge base.\n"
               "  --kb FILE        knowledge base (JSONL, JSON array or CSV, as rapidqa-demo reads)\n"
               "  --queries TSV    question<TAB>expected entry id, one per line\n"
               "  --negpairs TSV   question<TAB>question, labelled different in meaning: every\n"
               "                   semantic-cache hit on the second after the first is a false hit\n"
               "  --fusion MODE    fitted (the engine's default), rrf or dense: how retrieval\n"
               "                   ranks (see RetrievalOptions)\n"
               "  --word-dictionary PATH|none\n"
               "                   word list for segmenting CJK text (\"word count [tag]\" lines);\n"
               "                   default: %s when present\n"
               "  --semantic-thresholds LIST\n"
               "                   comma-separated cosines to measure the semantic cache at\n"
               "                   (default: the engine's 0.92)\n"
               "  --limit N        read at most N questions and N pairs\n"
               "  --answers FILE   write each question's retrieval as a JSON line (question,\n"
               "                   expected, matches with scores, tier) to FILE\n"
               "  --json           print the results as one JSON object\n"
               "%s",
               kDebianWordList, rapidqa::tools::EncoderFlags::kUsage);
}

bool parse_thresholds(const std::string& text, std::vector<float>& out) {
  std::size_t begin = 0;
  while (begin <= text.size()) {
    const std::size_t end = std::min(text.find(',', begin), text.size());
    const std::string item = text.substr(begin, end - begin);
    char* stop = nullptr;
    const float v = std::strtof(item.c_str(), &stop);
    if (item.empty() || *stop != '\0' || !(v > 0.0f && v <= 1.0f)) {
      std::fprintf(stderr, "rapidqa-eval: --semantic-thresholds: '%s' is not a cosine in (0, 1]\n", item.c_str());
      return false;
    }
    out.push_back(v);
    begin = end + 1;
  }
  return true;
}

// Returns 0 to go on, -1 after --help, or an exit code.
int parse_args(int argc, char** argv, EvalOptions& o) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    rapidqa::tools::FlagValues values{"rapidqa-eval", argc, argv, i};
    auto text = [&](std::string& out) {
      const char* v = values.text();
      if (v) out = v;
      return v != nullptr;
    };
    if (arg == "--kb") {
      if (!text(o.kb)) return 2;
    } else if (arg == "--queries") {
      if (!text(o.queries)) return 2;
    } else if (arg == "--answers") {
      if (!text(o.answers)) return 2;
    } else if (arg == "--negpairs") {
      if (!text(o.negpairs)) return 2;
    } else if (arg == "--word-dictionary") {
      if (!text(o.word_dictionary)) return 2;
    } else if (arg == "--fusion") {
      std::string mode;
      if (!text(mode)) return 2;
      if (mode == "fitted") {
        o.fusion = rapidqa::RetrievalFusion::kFitted;
      } else if (mode == "rrf") {
        o.fusion = rapidqa::RetrievalFusion::kReciprocalRank;
      } else if (mode == "dense") {
        o.fusion = rapidqa::RetrievalFusion::kDense;
      } else {
        std::fprintf(stderr, "rapidqa-eval: --fusion must be fitted, rrf or dense, not '%s'\n", mode.c_str());
        return 2;
      }
    } else if (arg == "--semantic-thresholds") {
      std::string list;
      if (!text(list) || !parse_thresholds(list, o.thresholds)) return 2;
    } else if (arg == "--limit") {
      if (!values.number(o.limit)) return 2;
    } else if (arg == "--json") {
      o.json = true;
    } else if (const int taken = o.encoder.parse("rapidqa-eval", argc, argv, i); taken != 0) {
      if (taken < 0) return 2;
    } else if (arg == "--help" || arg == "-h") {
      print_usage(stdout);
      return -1;
    } else {
      std::fprintf(stderr, "rapidqa-eval: unknown option '%s'\n", arg.c_str());
      print_usage(stderr);
      return 2;
    }
  }
  if (o.kb.empty() || o.queries.empty()) {
    std::fprintf(stderr, "rapidqa-eval: --kb and --queries are required\n");
    print_usage(stderr);
    return 2;
  }
  return 0;
}

// Two tab-separated fields per line; a line without them is an error
// naming the file and line, so a broken file never scores as a bad engine.
bool read_pairs(const std::string& path, std::size_t limit, std::vector<std::pair<std::string, std::string>>& out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "rapidqa-eval: cannot open '%s'\n", path.c_str());
    return false;
  }
  std::string line;
  for (std::size_t number = 1; std::getline(in, line); ++number) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    const std::size_t tab = line.find('\t');
    if (tab == std::string::npos || tab == 0 || tab + 1 == line.size() ||
        line.find('\t', tab + 1) != std::string::npos) {
      std::fprintf(stderr, "rapidqa-eval: %s line %zu: expected two fields separated by one tab\n", path.c_str(), number);
      return false;
    }
    out.emplace_back(line.substr(0, tab), line.substr(tab + 1));
    if (limit && out.size() == limit) break;
  }
  if (out.empty()) {
    std::fprintf(stderr, "rapidqa-eval: '%s' holds no lines\n", path.c_str());
    return false;
  }
  return true;
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t i = std::min(v.size() - 1, static_cast<std::size_t>(p * static_cast<double>(v.size())));
  return v[i];
}

// A binomial proportion's 95% Wilson interval.
std::pair<double, double> wilson(std::size_t hits, std::size_t n) {
  if (n == 0) return {0, 0};
  const double z = 1.96, p = static_cast<double>(hits) / static_cast<double>(n), nn = static_cast<double>(n);
  const double centre = (p + z * z / (2 * nn)) / (1 + z * z / nn);
  const double half = z * std::sqrt(p * (1 - p) / nn + z * z / (4 * nn * nn)) / (1 + z * z / nn);
  return {std::max(0.0, centre - half), std::min(1.0, centre + half)};
}

void progress(const char* what, std::size_t done, std::size_t total) {
  if (done % 500 == 0 || done == total) std::fprintf(stderr, "%s: %zu/%zu\n", what, done, total);
}

}  // namespace

int tool_main(int argc, char** argv) {
  EvalOptions options;
  if (const int rc = parse_args(argc, argv, options); rc != 0) return rc < 0 ? 0 : rc;
  std::vector<std::pair<std::string, std::string>> queries, negpairs;
  if (!read_pairs(options.queries, options.limit, queries)) return 1;
  if (!options.negpairs.empty() && !read_pairs(options.negpairs, options.limit, negpairs)) return 1;

  rapidqa::EngineOptions engine_options;
  if (const int rc = options.encoder.make("rapidqa-eval", engine_options.encoder); rc != 0) return rc;
  engine_options.retrieval.fusion = options.fusion;
  if (options.word_dictionary == "auto") {
    struct stat info {};
    options.word_dictionary = ::stat(kDebianWordList, &info) == 0 ? kDebianWordList : "none";
  }
  if (options.word_dictionary != "none") engine_options.retrieval.word_dictionary = options.word_dictionary;
  engine_options.top_k = 10;
  const float default_threshold = engine_options.semantic_cache.similarity_threshold;
  if (options.thresholds.empty()) options.thresholds.push_back(default_threshold);
  auto engine = rapidqa::QAEngine::create(std::move(engine_options));
  if (!engine) {
    std::fprintf(stderr, "rapidqa-eval: %s\n", engine.status().to_string().c_str());
    return 1;
  }
  const auto load_started = std::chrono::steady_clock::now();
  auto loaded = (*engine)->load_knowledge(options.kb);
  if (!loaded) {
    std::fprintf(stderr, "rapidqa-eval: %s\n", loaded.status().to_string().c_str());
    return 1;
  }
  const double load_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - load_started).count();
  std::fprintf(stderr, "loaded %zu entries (%zu phrasings) in %.1f s; encoder %s; fusion %s; words %s\n",
               loaded->entries, loaded->phrasings, load_seconds, (*engine)->encoder().name().c_str(),
               options.fusion == rapidqa::RetrievalFusion::kFitted      ? "fitted"
               : options.fusion == rapidqa::RetrievalFusion::kDense     ? "dense"
                                                                         : "rrf",
               options.word_dictionary.c_str());
  std::fprintf(stderr, "ranking: %s\n", loaded->ranking.c_str());

  // Retrieval, with every cache skipped so each question is a full miss.
  std::size_t top1 = 0, top3 = 0, fallbacks = 0, failed = 0;
  double reciprocal_ranks = 0;
  std::vector<double> latencies_us;
  rapidqa::AskOptions uncached;
  uncached.use_cache = false;
  std::ofstream answers_out;
  if (!options.answers.empty()) {
    answers_out.open(options.answers, std::ios::binary | std::ios::trunc);
    if (!answers_out) {
      std::fprintf(stderr, "rapidqa-eval: cannot write '%s'\n", options.answers.c_str());
      return 1;
    }
  }
  for (std::size_t i = 0; i < queries.size(); ++i) {
    const auto& [question, expected] = queries[i];
    const auto started = std::chrono::steady_clock::now();
    auto answer = (*engine)->ask(question, uncached);
    latencies_us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - started).count());
    if (!answer) {
      ++failed;  // an empty or oversize question: counted, and as wrong
    } else {
      fallbacks += answer->tier == rapidqa::AnswerTier::kFallback;
      for (std::size_t r = 0; r < answer->matches.size(); ++r) {
        if (answer->matches[r].entry_id != expected) continue;
        top1 += r == 0;
        top3 += r < 3;
        reciprocal_ranks += 1.0 / static_cast<double>(r + 1);
        break;
      }
    }
    if (answers_out.is_open()) {
      nlohmann::json line = {{"question", question}, {"expected", expected}};
      if (answer) {
        line["tier"] = rapidqa::answer_tier_name(answer->tier);
        for (const auto& m : answer->matches) line["matches"].push_back({{"entry_id", m.entry_id}, {"score", m.score}});
      } else {
        line["error"] = answer.status().to_string();
      }
      answers_out << rapidqa::tools::json_line(line) << '\n';
    }
    progress("retrieval", i + 1, queries.size());
  }
  const double n = static_cast<double>(queries.size());

  // The semantic cache, per threshold: paraphrases after their entry's first
  // phrasing, and labelled non-paraphrases after their partner.
  struct CacheRow {
    float threshold;
    std::size_t paraphrases = 0, hits = 0, pairs = 0, false_hits = 0;
  };
  std::vector<CacheRow> cache_rows;
  for (const float threshold : options.thresholds) {
    CacheRow row{threshold};
    rapidqa::AskOptions ask;
    ask.semantic_threshold = threshold;
    const std::string prefix = fmt::format("t{}-", threshold);
    for (std::size_t i = 0; i < queries.size(); ++i) {
      const auto& [question, expected] = queries[i];
      auto first = (*engine)->entry(expected);
      if (!first) continue;  // the expected id is not in the base: nothing to cache first
      ask.tenant = prefix + "p" + std::to_string(i);
      (void)(*engine)->ask(first->question, ask);
      auto answer = (*engine)->ask(question, ask);
      ++row.paraphrases;
      row.hits += answer && answer->tier == rapidqa::AnswerTier::kSemanticCache;
    }
    for (std::size_t i = 0; i < negpairs.size(); ++i) {
      ask.tenant = prefix + "n" + std::to_string(i);
      (void)(*engine)->ask(negpairs[i].first, ask);
      auto answer = (*engine)->ask(negpairs[i].second, ask);
      ++row.pairs;
      row.false_hits += answer && answer->tier == rapidqa::AnswerTier::kSemanticCache;
    }
    cache_rows.push_back(row);
  }

  nlohmann::json out;
  out["knowledge_base"] = {{"entries", loaded->entries},
                           {"phrasings", loaded->phrasings},
                           {"load_seconds", load_seconds},
                           {"ranking", loaded->ranking}};
  out["retrieval"] = {{"questions", queries.size()},
                      {"top1", top1 / n},
                      {"top3", top3 / n},
                      {"mrr10", reciprocal_ranks / n},
                      {"fallback_rate", fallbacks / n},
                      {"refused", failed},
                      {"latency_us", {{"p50", percentile(latencies_us, 0.50)},
                                      {"p95", percentile(latencies_us, 0.95)},
                                      {"p99", percentile(latencies_us, 0.99)}}}};
  for (const CacheRow& row : cache_rows) {
    const auto [low, high] = wilson(row.false_hits, row.pairs);
    out["semantic_cache"].push_back({{"threshold", row.threshold},
                                     {"paraphrases", row.paraphrases},
                                     {"hit_rate", row.paraphrases ? double(row.hits) / double(row.paraphrases) : 0.0},
                                     {"negative_pairs", row.pairs},
                                     {"false_hit_rate", row.pairs ? double(row.false_hits) / double(row.pairs) : 0.0},
                                     {"false_hit_rate_95", {low, high}}});
  }
  if (options.json) {
    std::puts(rapidqa::tools::json_line(out).c_str());
    return 0;
  }
  std::printf("retrieval over %zu questions (%zu entries):\n", queries.size(), loaded->entries);
  std::printf("  top-1 %.3f  top-3 %.3f  MRR@10 %.3f  fallback %.3f  refused %zu\n", top1 / n, top3 / n,
              reciprocal_ranks / n, fallbacks / n, failed);
  std::printf("  latency p50 %.0f us  p95 %.0f us  p99 %.0f us\n", percentile(latencies_us, 0.50),
              percentile(latencies_us, 0.95), percentile(latencies_us, 0.99));
  std::printf("semantic cache:\n  threshold  hit rate (paraphrases)  false-hit rate (non-paraphrases, 95%% interval)\n");
  for (const CacheRow& row : cache_rows) {
    const auto [low, high] = wilson(row.false_hits, row.pairs);
    std::printf("  %9.3f  %8.3f (%zu)            %8.3f (%zu) [%.3f, %.3f]\n", row.threshold,
                row.paraphrases ? double(row.hits) / double(row.paraphrases) : 0.0, row.paraphrases,
                row.pairs ? double(row.false_hits) / double(row.pairs) : 0.0, row.pairs, low, high);
  }
  return 0;
}

int main(int argc, char** argv) {
  return rapidqa::tools::run_tool("rapidqa-eval", [&] { return tool_main(argc, argv); });
}

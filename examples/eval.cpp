// rapidqa-eval: measures answer quality and latency on a user's own
// knowledge base. Retrieval: top-1 and top-3 accuracy, MRR over the first
// ten, fallback rate, latency percentiles, for questions whose right entry
// is known. Semantic cache: hit rate on paraphrases (each question asked
// after its entry's first phrasing) and false-hit rate on labelled
// non-paraphrase pairs (the second asked after the first), each pair in a
// tenant of its own so no other pair's answer interferes. Abstention: with
// out-of-domain questions (another corpus's), in-domain accuracy and the
// out-of-domain fallback rate over thresholds of the calibrated confidence
// and, for comparison, of the raw cosine.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <set>
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
  std::string kb, queries, negpairs, answers, ood_queries;
  rapidqa::RetrievalFusion fusion = rapidqa::RetrievalOptions{}.fusion;  // the engine's default
  std::string word_dictionary = "auto";
  std::vector<float> thresholds;  // semantic-cache thresholds to sweep (empty: the engine's default)
  std::vector<float> stream_thresholds;  // fixed thresholds measured on the one-namespace stream
  std::vector<float> targets;     // error-bound targets measured on the stream
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
               "  --ood-queries TSV questions the knowledge base does not answer (the first\n"
               "                   field of each line; another corpus's queries file will do):\n"
               "                   adds abstention curves over the answer-confidence threshold\n"
               "  --fusion MODE    fitted (the engine's default), rrf or dense: how retrieval\n"
               "                   ranks (see RetrievalOptions)\n"
               "  --word-dictionary PATH|none\n"
               "                   word list for segmenting CJK text (\"word count [tag]\" lines);\n"
               "                   default: %s when present\n"
               "  --semantic-thresholds LIST\n"
               "                   comma-separated cosines to measure the semantic cache at\n"
               "                   (default: the engine's 0.92)\n"
               "  --semantic-targets LIST\n"
               "                   comma-separated target error rates in (0, 0.5]: adds a question\n"
               "                   stream in one namespace (each paraphrase after its entry's first\n"
               "                   phrasing, each non-paraphrase after its partner, interleaved)\n"
               "                   measured with fixed thresholds and with the error-bound hit\n"
               "                   decision at each target; a hit is false when full retrieval\n"
               "                   names another entry\n"
               "  --stream-thresholds LIST\n"
               "                   the fixed thresholds for that stream (default 0.80 to 0.98)\n"
               "  --limit N        read at most N questions and N pairs\n"
               "  --answers FILE   write each question's retrieval as a JSON line (question,\n"
               "                   expected, matches with scores, tier) to FILE\n"
               "  --json           print the results as one JSON object\n"
               "%s",
               kDebianWordList, rapidqa::tools::EncoderFlags::kUsage);
}

bool parse_thresholds(const std::string& text, std::vector<float>& out, const char* flag = "--semantic-thresholds",
                      float most = 1.0f) {
  std::size_t begin = 0;
  while (begin <= text.size()) {
    const std::size_t end = std::min(text.find(',', begin), text.size());
    const std::string item = text.substr(begin, end - begin);
    char* stop = nullptr;
    const float v = std::strtof(item.c_str(), &stop);
    if (item.empty() || *stop != '\0' || !(v > 0.0f && v <= most)) {
      std::fprintf(stderr, "rapidqa-eval: %s: '%s' is not in (0, %g]\n", flag, item.c_str(), most);
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
    } else if (arg == "--ood-queries") {
      if (!text(o.ood_queries)) return 2;
    } else if (arg == "--negpairs") {
      if (!text(o.negpairs)) return 2;
    } else if (arg == "--word-dictionary") {
      if (!text(o.word_dictionary)) return 2;
    } else if (arg == "--fusion") {
      std::string mode;
      if (!text(mode)) return 2;
      auto fusion = rapidqa::retrieval_fusion_from_name(mode);
      if (!fusion) {
        std::fprintf(stderr, "rapidqa-eval: --fusion: %s\n", fusion.status().message().c_str());
        return 2;
      }
      o.fusion = fusion.value();
    } else if (arg == "--semantic-thresholds") {
      std::string list;
      if (!text(list) || !parse_thresholds(list, o.thresholds)) return 2;
    } else if (arg == "--semantic-targets") {
      std::string list;
      if (!text(list) || !parse_thresholds(list, o.targets, "--semantic-targets", 0.5f)) return 2;
    } else if (arg == "--stream-thresholds") {
      std::string list;
      if (!text(list) || !parse_thresholds(list, o.stream_thresholds, "--stream-thresholds")) return 2;
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

// One way of deciding semantic hits, run over the stream.
struct StreamRow {
  float threshold = -1;  // a fixed threshold (-1: the error-bound mode)
  float target = -1;     // the error-bound mode's target
  std::size_t decisions = 0, hits = 0, false_hits = 0;
  std::uint64_t verifications = 0, outcomes = 0;
  // Right and wrong hits, each over all decisions.
  double hit_rate() const { return decisions ? double(hits - false_hits) / double(decisions) : 0.0; }
  double false_hit_rate() const { return decisions ? double(false_hits) / double(decisions) : 0.0; }
};

// Every paraphrase after its entry's first phrasing and every labelled
// non-paraphrase after its partner, the pairs interleaved at random (seeded,
// so every run and every mode sees the same stream); a question already
// asked is not asked again (the exact tiers would answer it).
std::vector<std::string> build_stream(const rapidqa::QAEngine& engine,
                                      const std::vector<std::pair<std::string, std::string>>& queries,
                                      const std::vector<std::pair<std::string, std::string>>& negpairs) {
  std::vector<std::pair<std::string, std::string>> pairs;
  for (const auto& [question, expected] : queries) {
    if (auto first = engine.entry(expected)) pairs.emplace_back(first->question, question);
  }
  pairs.insert(pairs.end(), negpairs.begin(), negpairs.end());
  std::mt19937_64 random(20261207);
  std::uniform_real_distribution<double> start(0.0, 1.0), gap(0.0, 0.05);
  std::vector<std::pair<double, std::string>> timed;
  for (const auto& [first, second] : pairs) {
    const double t = start(random);
    timed.emplace_back(t, first);
    timed.emplace_back(t + gap(random), second);
  }
  std::stable_sort(timed.begin(), timed.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::string> stream;
  std::set<std::string> asked;
  for (auto& [t, question] : timed) {
    if (asked.insert(question).second) stream.push_back(std::move(question));
  }
  return stream;
}

// Asks the stream in a fresh namespace; a semantic hit is false when full
// retrieval (truth) names another entry.
StreamRow run_stream(rapidqa::QAEngine& engine, const std::vector<std::string>& stream,
                     const std::map<std::string, std::string>& truth, const std::string& tenant,
                     std::optional<float> threshold) {
  StreamRow row;
  rapidqa::AskOptions ask;
  ask.tenant = "stream-" + tenant;
  ask.semantic_threshold = threshold;
  for (const std::string& question : stream) {
    auto answer = engine.ask(question, ask);
    if (!answer) continue;
    ++row.decisions;
    if (answer->tier != rapidqa::AnswerTier::kSemanticCache) continue;
    ++row.hits;
    row.false_hits += answer->entry_id() != truth.at(question);
  }
  return row;
}

// The best hit rate a fixed threshold reached on the stream without more
// false hits (as a share of decisions) than `row`.
double best_fixed_hit_rate(const std::vector<StreamRow>& rows, const StreamRow& row) {
  double best = 0;
  for (const StreamRow& r : rows) {
    if (r.target >= 0 || r.decisions == 0) continue;
    if (r.false_hits * row.decisions <= row.false_hits * r.decisions) best = std::max(best, r.hit_rate());
  }
  return best;
}

// One question's retrieval, for the abstention curves.
struct Judged {
  bool answered;  // past min_answer_score (the confidence threshold is applied by the curve)
  bool right;     // the best entry is the expected one
  float confidence, score;
};
Judged judged(const rapidqa::Answer& a, bool right) {
  // A fallback for too short a question is an abstention at any threshold.
  const bool answered = a.tier != rapidqa::AnswerTier::kFallback;
  return {answered, right, a.confidence, a.score};
}

// In-domain accuracy (right answers over all in-domain questions), the
// share answered, and the out-of-domain fallback rate, at one threshold of
// the confidence (or of the cosine).
struct AbstentionPoint {
  float threshold;
  double accuracy, answered, ood_fallback;
};
AbstentionPoint abstention_at(float threshold, bool by_cosine, const std::vector<Judged>& in_domain,
                              const std::vector<Judged>& out_of_domain) {
  const auto passes = [&](const Judged& j) {
    // An uncalibrated confidence (-1) is no evidence either way: the
    // cosine threshold alone decides, as in the engine.
    return j.answered && (by_cosine ? j.score >= threshold : (j.confidence < 0 || j.confidence >= threshold));
  };
  AbstentionPoint p{threshold, 0, 0, 0};
  for (const Judged& j : in_domain) {
    p.answered += passes(j);
    p.accuracy += passes(j) && j.right;
  }
  for (const Judged& j : out_of_domain) p.ood_fallback += !passes(j);
  p.accuracy /= std::max<double>(1, in_domain.size());
  p.answered /= std::max<double>(1, in_domain.size());
  p.ood_fallback /= std::max<double>(1, out_of_domain.size());
  return p;
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
  std::vector<std::pair<std::string, std::string>> ood_queries;
  if (!options.ood_queries.empty() && !read_pairs(options.ood_queries, options.limit, ood_queries)) return 1;

  if (options.word_dictionary == "auto") {
    struct stat info {};
    options.word_dictionary = ::stat(kDebianWordList, &info) == 0 ? kDebianWordList : "none";
  }
  const float default_threshold = rapidqa::SemanticCacheOptions{}.similarity_threshold;
  if (options.thresholds.empty()) options.thresholds.push_back(default_threshold);
  // An engine loaded with the knowledge base; target: the error-bound
  // mode's target error rate.
  struct LoadedEngine {
    std::unique_ptr<rapidqa::QAEngine> engine;
    rapidqa::KnowledgeLoadReport report;
    double seconds = 0;
  };
  const auto make_engine = [&](std::optional<float> target) -> std::optional<LoadedEngine> {
    rapidqa::EngineOptions engine_options;
    if (options.encoder.make("rapidqa-eval", engine_options) != 0) return std::nullopt;
    engine_options.retrieval.fusion = options.fusion;
    if (options.word_dictionary != "none") engine_options.retrieval.word_dictionary = options.word_dictionary;
    engine_options.top_k = 10;
    engine_options.semantic_cache.target_error_rate = target;
    // Every question reaches the semantic tier: no exact tier answers first.
    engine_options.enable_result_cache = false;
    engine_options.enable_knowledge_cache = false;
    auto created = rapidqa::QAEngine::create(std::move(engine_options));
    if (!created) {
      std::fprintf(stderr, "rapidqa-eval: %s\n", created.status().to_string().c_str());
      return std::nullopt;
    }
    const auto load_started = std::chrono::steady_clock::now();
    auto loaded = (*created)->load_knowledge(options.kb);
    if (!loaded) {
      std::fprintf(stderr, "rapidqa-eval: %s\n", loaded.status().to_string().c_str());
      return std::nullopt;
    }
    return LoadedEngine{std::move(created).value(), std::move(loaded).value(),
                        std::chrono::duration<double>(std::chrono::steady_clock::now() - load_started).count()};
  };
  auto measured = make_engine(std::nullopt);
  if (!measured) return 1;
  rapidqa::QAEngine& engine = *measured->engine;
  const rapidqa::KnowledgeLoadReport& loaded = measured->report;
  const double load_seconds = measured->seconds;
  std::fprintf(stderr, "loaded %zu entries (%zu phrasings) in %.1f s; encoder %s; fusion %s; words %s\n",
               loaded.entries, loaded.phrasings, load_seconds, engine.encoder().name().c_str(),
               rapidqa::retrieval_fusion_name(options.fusion),
               options.word_dictionary.c_str());
  std::fprintf(stderr, "ranking: %s\n", loaded.ranking.c_str());

  // Retrieval, with every cache skipped so each question is a full miss.
  std::size_t top1 = 0, top3 = 0, fallbacks = 0, failed = 0;
  double reciprocal_ranks = 0;
  std::vector<double> latencies_us;
  std::vector<Judged> in_domain, out_of_domain;
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
    auto answer = engine.ask(question, uncached);
    latencies_us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - started).count());
    if (!answer) {
      ++failed;  // an empty or oversize question: counted, and as wrong
    } else {
      fallbacks += answer->tier == rapidqa::AnswerTier::kFallback;
      in_domain.push_back(judged(*answer, answer->entry_id() == expected));
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
        line["confidence"] = answer->confidence;
        for (const auto& m : answer->matches) line["matches"].push_back({{"entry_id", m.entry_id}, {"score", m.score}});
      } else {
        line["error"] = answer.status().to_string();
      }
      answers_out << rapidqa::tools::json_line(line) << '\n';
    }
    progress("retrieval", i + 1, queries.size());
  }
  const double n = static_cast<double>(queries.size());
  for (std::size_t i = 0; i < ood_queries.size(); ++i) {
    auto answer = engine.ask(ood_queries[i].first, uncached);
    if (answer) out_of_domain.push_back(judged(*answer, false));
    progress("out-of-domain", i + 1, ood_queries.size());
  }

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
      auto first = engine.entry(expected);
      if (!first) continue;  // the expected id is not in the base: nothing to cache first
      ask.tenant = prefix + "p" + std::to_string(i);
      (void)engine.ask(first->question, ask);
      auto answer = engine.ask(question, ask);
      ++row.paraphrases;
      row.hits += answer && answer->tier == rapidqa::AnswerTier::kSemanticCache;
    }
    for (std::size_t i = 0; i < negpairs.size(); ++i) {
      ask.tenant = prefix + "n" + std::to_string(i);
      (void)engine.ask(negpairs[i].first, ask);
      auto answer = engine.ask(negpairs[i].second, ask);
      ++row.pairs;
      row.false_hits += answer && answer->tier == rapidqa::AnswerTier::kSemanticCache;
    }
    cache_rows.push_back(row);
  }

  // The stream: every question in one namespace, as a service sees them.
  std::vector<StreamRow> stream_rows;
  std::size_t stream_decisions = 0;
  if (!options.targets.empty()) {
    const std::vector<std::string> stream = build_stream(engine, queries, negpairs);
    stream_decisions = stream.size();
    // What full retrieval answers for each question: the truth a hit is
    // judged by.
    std::map<std::string, std::string> truth;
    for (std::size_t i = 0; i < stream.size(); ++i) {
      auto answer = engine.ask(stream[i], uncached);
      truth[stream[i]] = answer && answer->tier == rapidqa::AnswerTier::kKnowledge ? answer->entry_id() : "";
      progress("stream truth", i + 1, stream.size());
    }
    if (options.stream_thresholds.empty()) options.stream_thresholds = {0.80f, 0.84f, 0.88f, 0.90f, 0.92f, 0.94f, 0.96f, 0.98f};
    for (const float t : options.stream_thresholds) {
      stream_rows.push_back(run_stream(engine, stream, truth, fmt::format("fixed-{}", t), t));
      stream_rows.back().threshold = t;
      progress("fixed thresholds", stream_rows.size(), options.stream_thresholds.size());
    }
    for (const float target : options.targets) {
      auto bounded = make_engine(target);
      if (!bounded) return 1;
      stream_rows.push_back(run_stream(*bounded->engine, stream, truth, "error-bound", std::nullopt));
      stream_rows.back().target = target;
      const auto caches = bounded->engine->metrics().caches;
      stream_rows.back().verifications = caches.semantic_verifications;
      stream_rows.back().outcomes = caches.semantic_outcomes;
      std::fprintf(stderr, "error-bound target %.3f: done\n", target);
    }
  }

  nlohmann::json out;
  out["knowledge_base"] = {{"entries", loaded.entries},
                           {"phrasings", loaded.phrasings},
                           {"load_seconds", load_seconds},
                           {"ranking", loaded.ranking}};
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
  constexpr float kConfidenceSteps[] = {0.0f, 0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f, 0.7f, 0.8f, 0.9f, 0.95f};
  constexpr float kCosineSteps[] = {0.35f, 0.4f, 0.45f, 0.5f, 0.55f, 0.6f, 0.65f, 0.7f, 0.75f, 0.8f, 0.85f, 0.9f};
  std::vector<AbstentionPoint> by_confidence, by_cosine;
  if (!out_of_domain.empty()) {
    for (const float t : kConfidenceSteps) by_confidence.push_back(abstention_at(t, false, in_domain, out_of_domain));
    for (const float t : kCosineSteps) by_cosine.push_back(abstention_at(t, true, in_domain, out_of_domain));
    const auto rows = [](const std::vector<AbstentionPoint>& points) {
      nlohmann::json out = nlohmann::json::array();
      for (const auto& p : points) {
        out.push_back({{"threshold", p.threshold},
                       {"in_domain_accuracy", p.accuracy},
                       {"in_domain_answered", p.answered},
                       {"out_of_domain_fallback", p.ood_fallback}});
      }
      return out;
    };
    out["abstention"] = {{"out_of_domain_questions", out_of_domain.size()},
                         {"by_confidence", rows(by_confidence)},
                         {"by_cosine", rows(by_cosine)}};
  }
  if (!stream_rows.empty()) {
    nlohmann::json rows = nlohmann::json::array();
    for (const StreamRow& r : stream_rows) {
      const auto [low, high] = wilson(r.false_hits, r.decisions);
      nlohmann::json row = {{"mode", r.target < 0 ? "fixed" : "error-bound"},
                            {"decisions", r.decisions},
                            {"hits", r.hits},
                            {"false_hits", r.false_hits},
                            {"hit_rate", r.hit_rate()},
                            {"false_hit_rate", r.false_hit_rate()},
                            {"false_hit_rate_95", {low, high}}};
      if (r.target < 0) {
        row["threshold"] = r.threshold;
      } else {
        row["target"] = r.target;
        row["verifications"] = r.verifications;
        row["outcomes"] = r.outcomes;
        row["best_fixed_hit_rate_at_or_under"] = best_fixed_hit_rate(stream_rows, r);
      }
      rows.push_back(row);
    }
    out["semantic_stream"] = {{"decisions", stream_decisions}, {"rows", rows}};
  }
  if (options.json) {
    std::puts(rapidqa::tools::json_line(out).c_str());
    return 0;
  }
  std::printf("retrieval over %zu questions (%zu entries):\n", queries.size(), loaded.entries);
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
  if (!stream_rows.empty()) {
    std::printf("semantic cache on a stream of %zu questions in one namespace (a hit is right when full retrieval\n"
                "names the same entry; rates over all decisions):\n"
                "  mode                    hit rate  false-hit rate [95%%]       best fixed at that false-hit rate\n",
                stream_decisions);
    for (const StreamRow& r : stream_rows) {
      const auto [low, high] = wilson(r.false_hits, r.decisions);
      const std::string mode =
          r.target < 0 ? fmt::format("fixed {:.2f}", r.threshold) : fmt::format("error-bound {:.3f}", r.target);
      const std::string best = r.target < 0 ? "" : fmt::format("{:.3f}", best_fixed_hit_rate(stream_rows, r));
      std::printf("  %-22s  %8.3f  %6.4f [%.4f, %.4f]  %s\n", mode.c_str(), r.hit_rate(), r.false_hit_rate(), low,
                  high, best.c_str());
    }
  }
  if (!out_of_domain.empty()) {
    const auto print = [](const char* what, const std::vector<AbstentionPoint>& points) {
      std::printf("abstention by %s:\n  threshold  in-domain accuracy  answered  out-of-domain fallback\n", what);
      for (const auto& p : points) {
        std::printf("  %9.2f  %18.3f  %8.3f  %22.3f\n", p.threshold, p.accuracy, p.answered, p.ood_fallback);
      }
    };
    print("calibrated confidence", by_confidence);
    print("cosine (min_answer_score)", by_cosine);
  }
  return 0;
}

int main(int argc, char** argv) {
  return rapidqa::tools::run_tool("rapidqa-eval", [&] { return tool_main(argc, argv); });
}


// The whole pipeline: QAEngine::ask end to end on generated knowledge bases
// of 1k and 10k entries (and 100k with RAPIDQA_BENCH_LARGE=1), one benchmark
// per path a question can take.
//
// Every ask benchmark times each call with steady_clock and reports the
// mean and p50/p95/p99 of those latencies (mean_us, p50_us, p95_us, p99_us),
// plus the p50/p99 of the pipeline stages that path runs, from
// Answer::timings (<stage>_p50_us, <stage>_p99_us), so a slow percentile can
// be traced to its stage. Each benchmark checks the tier of every answer and fails
// (SkipWithError) rather than report a path it did not measure.
//
// The engines are built once per size, lazily, and shared by the
// benchmarks; each benchmark clears the caches before it starts.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bench_data.h"
#include "bench_percentile.h"
#include "rapidqa/qa_engine.h"

namespace {

using rapidqa::AnswerTier;
using rapidqa::QAEngine;
using rapidqa::Stage;
using rapidqa::bench::percentile;
using SteadyClock = std::chrono::steady_clock;

// Phrasings per entry besides the question. The 100k base has none: an
// HNSW graph of 300k phrasings takes far too long to build with the
// baseline (scalar) FAISS of Debian 12 on a 2-core machine; even 100k
// phrasings take minutes, which is why that size needs RAPIDQA_BENCH_LARGE=1.
std::size_t alternates_for(std::size_t entries) { return entries >= 100000 ? 0 : 2; }

// Default EngineOptions: HNSW above 2048 phrasings with efSearch 128,
// semantic threshold 0.92, both caches on. Null with `error` set when the
// engine cannot be built (the failure is remembered, not retried).
QAEngine* engine_with(std::size_t entries, std::string& error,
                      rapidqa::RetrievalFusion fusion = rapidqa::RetrievalFusion::kFitted) {
  struct Built {
    std::unique_ptr<QAEngine> engine;
    std::string error;
  };
  static std::map<std::pair<std::size_t, rapidqa::RetrievalFusion>, Built> built;
  if (const auto it = built.find({entries, fusion}); it != built.end()) {
    error = it->second.error;
    return it->second.engine.get();
  }
  Built& slot = built[{entries, fusion}];
  const std::size_t alternates = alternates_for(entries);
  std::fprintf(stderr, "rapidqa-bench: generating a %zu-entry knowledge base (%zu alternates each)...\n", entries,
               alternates);
  const auto started = SteadyClock::now();
  rapidqa::EngineOptions options;
  options.retrieval.fusion = fusion;
  auto created = QAEngine::create(std::move(options));
  if (!created) {
    slot.error = "creating the engine: " + created.status().to_string();
  } else {
    std::fprintf(stderr, "rapidqa-bench:   loading it (normalise, encode, build the index)...\n");
    auto report = (*created)->load_entries(rapidqa::bench::generated_entries(entries, alternates));
    if (!report) {
      slot.error = "loading the generated knowledge: " + report.status().to_string();
    } else {
      std::fprintf(stderr, "rapidqa-bench:   %zu entries, %zu phrasings in %.1f s\n", report->entries,
                   report->phrasings, std::chrono::duration<double>(SteadyClock::now() - started).count());
      slot.engine = std::move(created).value();
    }
  }
  if (!slot.error.empty()) std::fprintf(stderr, "rapidqa-bench: %s\n", slot.error.c_str());
  error = slot.error;
  return slot.engine.get();
}

// The engine for the benchmark's knowledge-base size (range 0), caches
// cleared; null after SkipWithError when it could not be built.
QAEngine* fresh_engine(benchmark::State& state, rapidqa::RetrievalFusion fusion = rapidqa::RetrievalFusion::kFitted) {
  std::string error;
  QAEngine* engine = engine_with(static_cast<std::size_t>(state.range(0)), error, fusion);
  if (!engine) {
    state.SkipWithError(error.c_str());
    return nullptr;
  }
  engine->clear_caches();
  return engine;
}

// Per-ask latencies and, for the named stages, per-stage times.
class LatencyLog {
 public:
  LatencyLog(std::size_t expected, std::vector<Stage> stages) : stages_(std::move(stages)) {
    total_.reserve(expected);
    per_stage_.resize(stages_.size());
    for (auto& s : per_stage_) s.reserve(expected);
  }

  void add(SteadyClock::duration elapsed, const rapidqa::Answer& answer) {
    total_.push_back(std::chrono::duration<double, std::micro>(elapsed).count());
    for (std::size_t i = 0; i < stages_.size(); ++i) {
      per_stage_[i].push_back(std::chrono::duration<double, std::micro>(answer.timings[stages_[i]]).count());
    }
  }

  void report(benchmark::State& state) {
    if (total_.empty()) return;
    double sum = 0;
    for (double t : total_) sum += t;
    state.counters["mean_us"] = sum / static_cast<double>(total_.size());
    state.counters["p50_us"] = percentile(total_, 0.50);
    state.counters["p95_us"] = percentile(total_, 0.95);
    state.counters["p99_us"] = percentile(total_, 0.99);
    for (std::size_t i = 0; i < stages_.size(); ++i) {
      const std::string name = rapidqa::stage_name(stages_[i]);
      state.counters[name + "_p50_us"] = percentile(per_stage_[i], 0.50);
      state.counters[name + "_p99_us"] = percentile(per_stage_[i], 0.99);
    }
  }

 private:
  std::vector<Stage> stages_;
  std::vector<double> total_;
  std::vector<std::vector<double>> per_stage_;
};

std::string tier_error(const std::string& question, AnswerTier got, const char* wanted) {
  return "\"" + question + "\" was answered from the " + rapidqa::answer_tier_name(got) + " tier, expected " + wanted;
}

// --- exact tier ------------------------------------------------------------

// One question asked over and over: after the first ask (untimed) every ask
// is normalise + result-cache hit.
void BM_AskResultCacheHit(benchmark::State& state) {
  QAEngine* engine = fresh_engine(state);
  if (!engine) return;
  const std::string question = rapidqa::bench::generated_entry(7).question;
  auto warm = engine->ask(question);
  if (!warm || warm->tier != AnswerTier::kKnowledge) {
    state.SkipWithError(warm ? tier_error(question, warm->tier, "knowledge on the first ask").c_str()
                             : warm.status().to_string().c_str());
    return;
  }
  LatencyLog log(static_cast<std::size_t>(state.max_iterations), {Stage::kNormalize, Stage::kResultCache});
  for (auto _ : state) {
    const auto started = SteadyClock::now();
    auto answer = engine->ask(question);
    const auto elapsed = SteadyClock::now() - started;
    if (!answer || answer->tier != AnswerTier::kResultCache) {
      state.SkipWithError(answer ? tier_error(question, answer->tier, "result_cache").c_str()
                                 : answer.status().to_string().c_str());
      break;
    }
    log.add(elapsed, *answer);
  }
  log.report(state);
}

// --- similar-question tier ---------------------------------------------------

// The first kSemanticBases canonical questions are asked once (untimed), so
// the semantic cache holds their answers; then every iteration asks a
// different rewording of one of them (bench::reworded_question: another
// cache key, cosine about 0.96 or more). Each rewording is asked exactly once, so
// every timed ask pays what a user pays on a semantic hit with default
// options: normalise, result-cache miss, encode, semantic-cache lookup
// (flat search over kSemanticBases vectors) and the result-cache fill.
// Disabling the result cache instead would leave out its miss and fill;
// repeating a question would measure the exact tier.
constexpr std::size_t kSemanticBases = 1000;

void BM_AskSemanticCacheHit(benchmark::State& state) {
  const auto entries = static_cast<std::size_t>(state.range(0));
  QAEngine* engine = fresh_engine(state);
  if (!engine) return;
  const std::size_t bases = std::min(kSemanticBases, entries);
  const auto iterations = static_cast<std::size_t>(state.max_iterations);
  if (iterations > bases * rapidqa::bench::kRewordings) {
    state.SkipWithError("more iterations than distinct rewordings: each would be asked twice (an exact-tier hit)");
    return;
  }
  std::vector<std::string> questions;
  questions.reserve(iterations);
  for (std::size_t j = 0; j < iterations; ++j) {
    questions.push_back(rapidqa::bench::reworded_question(j % bases, j / bases));
  }

  // Setup check: every rewording must be above the threshold before any is
  // asked (asking one fills the result cache with it).
  const rapidqa::Encoder& encoder = engine->encoder();
  const std::size_t dim = encoder.dimension();
  float lowest = 1.0f;
  std::string lowest_question;
  for (std::size_t i = 0; i < bases; ++i) {
    std::vector<std::string> texts{rapidqa::normalize_text(rapidqa::bench::generated_entry(i, 0).question).value()};
    for (std::size_t j = i; j < iterations; j += bases) texts.push_back(rapidqa::normalize_text(questions[j]).value());
    std::vector<float> vectors;
    if (!encoder.encode(texts, vectors).is_ok()) {
      state.SkipWithError("encoding the rewordings failed");
      return;
    }
    for (std::size_t t = 1; t < texts.size(); ++t) {
      float cosine = 0;
      for (std::size_t d = 0; d < dim; ++d) cosine += vectors[d] * vectors[t * dim + d];
      if (cosine < lowest) {
        lowest = cosine;
        lowest_question = questions[i + (t - 1) * bases];
      }
    }
  }
  const float threshold = rapidqa::SemanticCacheOptions{}.similarity_threshold;
  if (lowest < threshold) {
    state.SkipWithError(("\"" + lowest_question + "\" has cosine " + std::to_string(lowest) +
                         " to its cached question, below the semantic threshold " + std::to_string(threshold) +
                         ": it would not be a semantic-cache hit (change bench::reworded_question)")
                            .c_str());
    return;
  }

  for (std::size_t i = 0; i < bases; ++i) {
    const std::string question = rapidqa::bench::generated_entry(i, 0).question;
    auto warm = engine->ask(question);
    if (!warm || warm->tier != AnswerTier::kKnowledge) {
      state.SkipWithError(warm ? tier_error(question, warm->tier, "knowledge on the warm-up ask").c_str()
                               : warm.status().to_string().c_str());
      return;
    }
  }

  LatencyLog log(iterations, {Stage::kResultCache, Stage::kEncode, Stage::kSemanticCache});
  std::size_t next = 0;
  for (auto _ : state) {
    const std::string& question = questions[next++];
    const auto started = SteadyClock::now();
    auto answer = engine->ask(question);
    const auto elapsed = SteadyClock::now() - started;
    if (!answer || answer->tier != AnswerTier::kSemanticCache) {
      state.SkipWithError(answer ? tier_error(question, answer->tier, "semantic_cache").c_str()
                                 : answer.status().to_string().c_str());
      break;
    }
    log.add(elapsed, *answer);
  }
  log.report(state);
  state.counters["cached_questions"] = static_cast<double>(bases);
  state.counters["min_similarity"] = lowest;
}

// --- miss path ----------------------------------------------------------------

// Every iteration asks a different paraphrase of a knowledge entry
// (bench::paraphrase_of: two words dropped, two added, reordered), so both
// caches miss and the answer comes from retrieval: normalise, result-cache
// miss, encode, semantic-cache miss, HNSW search of the knowledge base, and
// the fill of both caches.
//
// Each answered miss is added to the semantic cache, whose lookup is a flat
// search that grows with it (up to 20k answers), so the miss path's cost
// depends on how many answers are cached. BM_AskMiss clears the caches
// (untimed) every kMissCacheBound asks, holding the semantic cache at
// 0..kMissCacheBound-1 answers; BM_AskMissFillingCache never clears, so
// over 10,000 asks the semantic cache grows from 0 to ~10,000 answers.
constexpr std::size_t kMissCacheBound = 1000;

void ask_misses(benchmark::State& state, bool bound_semantic_cache,
                rapidqa::RetrievalFusion fusion = rapidqa::RetrievalFusion::kFitted) {
  const auto entries = static_cast<std::size_t>(state.range(0));
  QAEngine* engine = fresh_engine(state, fusion);
  if (!engine) return;
  const auto iterations = static_cast<std::size_t>(state.max_iterations);
  // Question j paraphrases entry (j * 7919) mod entries, spread over the
  // whole base; rewording j / entries keeps repeats of an entry distinct.
  std::vector<std::string> questions;
  std::vector<std::string> targets;
  questions.reserve(iterations);
  for (std::size_t j = 0; j < iterations; ++j) {
    const std::size_t entry = (j * 7919) % entries;
    questions.push_back(rapidqa::bench::paraphrase_of(entry, j / entries + 1));
    targets.push_back("gen-" + std::to_string(entry));
  }

  LatencyLog log(iterations, {Stage::kEncode, Stage::kSemanticCache, Stage::kRetrieve, Stage::kPostprocess});
  std::size_t next = 0, fallbacks = 0, found_target = 0;
  for (auto _ : state) {
    if (bound_semantic_cache && next > 0 && next % kMissCacheBound == 0) {
      state.PauseTiming();
      engine->clear_caches();
      state.ResumeTiming();
    }
    const std::string& question = questions[next];
    const auto started = SteadyClock::now();
    auto answer = engine->ask(question);
    const auto elapsed = SteadyClock::now() - started;
    if (!answer || (answer->tier != AnswerTier::kKnowledge && answer->tier != AnswerTier::kFallback)) {
      state.SkipWithError(answer ? tier_error(question, answer->tier, "knowledge or fallback (both caches missing)").c_str()
                                 : answer.status().to_string().c_str());
      break;
    }
    fallbacks += answer->tier == AnswerTier::kFallback;
    found_target += answer->entry_id() == targets[next];
    log.add(elapsed, *answer);
    ++next;
  }
  log.report(state);
  if (next > 0) {
    state.counters["fallback_ratio"] = static_cast<double>(fallbacks) / static_cast<double>(next);
    state.counters["top1_target_ratio"] = static_cast<double>(found_target) / static_cast<double>(next);
  }
}

void BM_AskMiss(benchmark::State& state) { ask_misses(state, true); }
void BM_AskMissFillingCache(benchmark::State& state) { ask_misses(state, false); }
// The same misses ranked by the vector index alone (RetrievalFusion::kDense):
// what the default fitted ranker costs over it.
void BM_AskMissDenseOnly(benchmark::State& state) { ask_misses(state, true, rapidqa::RetrievalFusion::kDense); }

// Knowledge-base sizes in entries; 100k only with RAPIDQA_BENCH_LARGE=1.
void knowledge_sizes(benchmark::internal::Benchmark* b) {
  b->Arg(1000)->Arg(10000);
  if (rapidqa::bench::large_sizes_enabled()) b->Arg(100000);
}

}  // namespace

// 10,000 asks per run, so the p99 is the 100th slowest of 10,000.
BENCHMARK(BM_AskResultCacheHit)->Apply(knowledge_sizes)->Iterations(10000)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_AskSemanticCacheHit)->Apply(knowledge_sizes)->Iterations(10000)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_AskMiss)->Apply(knowledge_sizes)->Iterations(10000)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_AskMissDenseOnly)->Apply(knowledge_sizes)->Iterations(10000)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_AskMissFillingCache)->Arg(10000)->Iterations(10000)->Unit(benchmark::kMicrosecond);

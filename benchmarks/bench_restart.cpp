// Restarting an engine on a knowledge store: the time QAEngine::create
// (and, with a model, loading the model first) takes on a SQLite store of
// N generated entries (two phrasings each), on the first start (the store
// keeps no vectors: every phrasing is encoded, then the vectors and the
// encoder's learned state are saved, the retrieval index is built, HNSW
// above 2,048 phrasings, and saved beside the file) and on a restart (the
// learned state and the index snapshot are read back; nothing is encoded
// or built).
//
// BM_EngineStart/entries:N/restart:0|1: the built-in HashingEncoder, N in
// 10k and 100k; RAPIDQA_BENCH_RESTART_LARGE=1 adds a restart at 1M (the
// first start that warms its store takes tens of minutes on two cores and
// is reported as the counter first_start_s, not measured again).
// BM_EngineStartTransformer/entries:N/restart:0|1: a BERT-family encoder,
// registered when RAPIDQA_BENCH_RESTART_MODEL names a model directory
// (benchmarks/run_restart.sh writes a MiniLM-L6-shaped one): 10k both
// ways, 100k restart with first_start_s.
//
// The stores are written once per size into RAPIDQA_BENCH_RESTART_DIR (a
// temporary folder when unset) and kept there, so a later run with the same
// folder reuses them, including the restart cases' warmed copies: their
// first start is paid once, not per run. One iteration each (a start is a
// one-off, measured whole); entries_per_s for comparison across N.
#include <benchmark/benchmark.h>

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "rapidqa/knowledge_store.h"
#include "rapidqa/qa_engine.h"
#ifdef RAPIDQA_BENCH_WITH_MODELS
#include "rapidqa/transformer_encoder.h"
#endif

namespace {

namespace fs = std::filesystem;

fs::path fixture_folder() {
  static const fs::path folder = [] {
    const char* named = std::getenv("RAPIDQA_BENCH_RESTART_DIR");
    fs::path f = named && *named ? fs::path(named)
                                 : fs::temp_directory_path() / ("rapidqa-bench-restart-" + std::to_string(::getpid()));
    fs::create_directories(f);
    return f;
  }();
  return folder;
}

// A store file of n entries without vectors, written once per n (and kept
// in the fixture folder); each first start copies it.
std::string pristine_store(std::size_t n) {
  static std::map<std::size_t, std::string> made;
  auto it = made.find(n);
  if (it != made.end()) return it->second;
  const std::string path = (fixture_folder() / ("pristine-" + std::to_string(n) + ".db")).string();
  const std::string done_marker = path + ".complete";
  if (!fs::exists(done_marker)) {
    fs::remove(path);
    fs::remove(path + "-wal");
    {
      auto store = rapidqa::KnowledgeStore::open("sqlite:" + path);
      if (!store) return {};
      std::vector<rapidqa::StoreChange> changes;
      changes.reserve(n);
      for (std::size_t i = 0; i < n; ++i) {
        rapidqa::KnowledgeEntry e;
        e.id = "entry-" + std::to_string(i);
        e.question = "how do i change setting " + std::to_string(i) + " of product " + std::to_string(i % 97);
        e.alternates = {"setting " + std::to_string(i) + " change for product " + std::to_string(i % 89)};
        e.answer = "Open the settings page and change setting " + std::to_string(i) + ".";
        changes.push_back(rapidqa::StoreChange::put(std::move(e)));
      }
      if (!(*store)->commit(changes)) return {};
    }  // closing folds the write-ahead log into the file
    std::ofstream(done_marker) << "complete\n";
  }
  made.emplace(n, path);
  return path;
}

// A copy of `from` under a new name (no write-ahead log, no index).
std::string copy_of(const std::string& from, const std::string& suffix) {
  const std::string path = from + suffix;
  for (const char* extra : {"-wal", "-shm", ".index", ".index.labels"}) fs::remove(path + extra);
  fs::copy_file(from, path, fs::copy_options::overwrite_existing);
  return path;
}

struct Encoding {
  std::string name;       // part of the warmed store's file name
  std::string model_dir;  // "" = the HashingEncoder
};

rapidqa::Result<rapidqa::EngineOptions> options_on(const std::string& path, const Encoding& encoding) {
  rapidqa::EngineOptions options;
  options.knowledge_store = "sqlite:" + path;
  options.rebuild_workers = 0;
  options.log = [](rapidqa::LogLevel, const std::string&) {};
  if (!encoding.model_dir.empty()) {
#ifndef RAPIDQA_BENCH_WITH_MODELS
    return rapidqa::Status::failed_precondition("this rapidqa-bench was built without the models");
#else
    rapidqa::TransformerEncoderOptions encoder;
    encoder.model_dir = encoding.model_dir;
    auto loaded = rapidqa::TransformerEncoder::load(encoder);
    if (!loaded) return loaded.status();
    options.encoder = std::move(loaded).value();
#endif
  }
  return options;
}

// A copy of the pristine store whose first start has run (vectors, state
// and index snapshot saved), kept across runs of the same folder, and how
// long that first start took (its marker file keeps the seconds; 0 when
// unknown).
struct Warmed {
  std::string path;
  double first_start_s = 0;
};

rapidqa::Result<Warmed> warmed_store(const std::string& pristine, const Encoding& encoding) {
  Warmed warmed{pristine + ".warm-" + encoding.name};
  const std::string done_marker = warmed.path + ".complete";
  if (fs::exists(done_marker)) {
    std::ifstream(done_marker) >> warmed.first_start_s;
    return warmed;
  }
  copy_of(pristine, ".warm-" + encoding.name);
  auto options = options_on(warmed.path, encoding);
  if (!options) return options.status();
  const auto began = std::chrono::steady_clock::now();
  auto first = rapidqa::QAEngine::create(std::move(options).value());
  if (!first) return first.status();
  warmed.first_start_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  first->reset();  // closing saves the index snapshot if anything changed
  std::ofstream(done_marker) << warmed.first_start_s << "\n";
  return warmed;
}

void engine_start(benchmark::State& state, const Encoding& encoding) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const bool restart = state.range(1) != 0;
  const std::string pristine = pristine_store(n);
  if (pristine.empty()) {
    state.SkipWithError("could not write the store");
    return;
  }
  std::string warm;
  if (restart) {
    auto made = warmed_store(pristine, encoding);
    if (!made) {
      state.SkipWithError(made.status().to_string().c_str());
      return;
    }
    warm = made->path;
    // The first start that warmed the store: the figure to compare with,
    // where measuring it again would take too long.
    state.counters["first_start_s"] = made->first_start_s;
  }
  for (auto _ : state) {
    state.PauseTiming();
    const std::string path = restart ? warm : copy_of(pristine, ".first-" + encoding.name);
    state.ResumeTiming();
    // A restart of a service loads its model too: timed.
    auto options = options_on(path, encoding);
    if (!options) {
      state.SkipWithError(options.status().to_string().c_str());
      break;
    }
    auto engine = rapidqa::QAEngine::create(std::move(options).value());
    state.PauseTiming();
    if (!engine) {
      state.SkipWithError(engine.status().to_string().c_str());
      break;
    }
    engine->reset();
    state.ResumeTiming();
  }
  state.counters["entries_per_s"] =
      benchmark::Counter(static_cast<double>(n * state.iterations()), benchmark::Counter::kIsRate);
}

bool env_set(const char* name) {
  const char* value = std::getenv(name);
  return value && *value && std::string(value) != "0";
}

// Registered at start-up from the environment: the 1M size and the model
// are opt-in, so a plain run of every benchmark stays short.
// Each size gets a restart case; first-start cases only below
// `first_start_below` entries (above it the restart case reports the first
// start that warmed its store, first_start_s).
void register_starts(const char* name, const Encoding& encoding, const std::vector<std::int64_t>& sizes,
                     std::int64_t first_start_below) {
  auto* b = benchmark::RegisterBenchmark(name, engine_start, encoding);
  b->ArgNames({"entries", "restart"})->Iterations(1)->Unit(benchmark::kMillisecond)->UseRealTime();
  for (const std::int64_t n : sizes) {
    if (n < first_start_below) b->Args({n, 0});
    b->Args({n, 1});
  }
}

const bool registered = [] {
  std::vector<std::int64_t> sizes = {10000, 100000};
  if (env_set("RAPIDQA_BENCH_RESTART_LARGE")) sizes.push_back(1000000);
  register_starts("BM_EngineStart", Encoding{"hashing", ""}, sizes, 1000000);
  if (const char* model = std::getenv("RAPIDQA_BENCH_RESTART_MODEL"); model && *model) {
    register_starts("BM_EngineStartTransformer", Encoding{"transformer", model}, {10000, 100000}, 100000);
  }
  return true;
}();

}  // namespace

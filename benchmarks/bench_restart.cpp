// Restarting an engine on a knowledge store: the time QAEngine::create
// takes on a SQLite store of N generated entries (two phrasings each) with
// the built-in HashingEncoder, on the first start (the store keeps no
// vectors: every phrasing is encoded, then the vectors and the encoder's
// learned state are saved, the retrieval index is built, HNSW above 2,048
// phrasings, and saved beside the file) and on a restart (the learned state
// and the index snapshot are read back; nothing is encoded or built).
//
// BM_EngineStart/entries:N/restart:0|1, one iteration each (a start is a
// one-off, measured whole); entries_per_s for comparison across N.
#include <benchmark/benchmark.h>

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "rapidqa/knowledge_store.h"
#include "rapidqa/qa_engine.h"

namespace {

namespace fs = std::filesystem;

// A store file of n entries without vectors, written once per n for the
// whole run; each start copies it.
std::string pristine_store(std::size_t n) {
  static std::map<std::size_t, std::string> made;
  auto it = made.find(n);
  if (it != made.end()) return it->second;
  const fs::path folder = fs::temp_directory_path() / ("rapidqa-bench-restart-" + std::to_string(::getpid()));
  fs::create_directories(folder);
  const std::string path = (folder / ("pristine-" + std::to_string(n) + ".db")).string();
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
  made.emplace(n, path);
  return path;
}

// A copy of the pristine store under a new name (no write-ahead log).
std::string copy_of(const std::string& pristine, const std::string& suffix) {
  const std::string path = pristine + suffix;
  fs::remove(path + "-wal");
  fs::copy_file(pristine, path, fs::copy_options::overwrite_existing);
  return path;
}

rapidqa::EngineOptions options_on(const std::string& path) {
  rapidqa::EngineOptions options;
  options.knowledge_store = "sqlite:" + path;
  options.rebuild_workers = 0;
  options.log = [](rapidqa::LogLevel, const std::string&) {};
  return options;
}

void BM_EngineStart(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const bool restart = state.range(1) != 0;
  const std::string pristine = pristine_store(n);
  if (pristine.empty()) {
    state.SkipWithError("could not write the store");
    return;
  }
  std::string warm;
  if (restart) {
    // A store whose first start has saved the vectors.
    warm = copy_of(pristine, ".warm");
    auto first = rapidqa::QAEngine::create(options_on(warm));
    if (!first) {
      state.SkipWithError(first.status().to_string().c_str());
      return;
    }
  }
  for (auto _ : state) {
    state.PauseTiming();
    const std::string path = restart ? warm : copy_of(pristine, ".first");
    state.ResumeTiming();
    auto engine = rapidqa::QAEngine::create(options_on(path));
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
BENCHMARK(BM_EngineStart)
    ->ArgNames({"entries", "restart"})
    ->ArgsProduct({{10000, 100000}, {0, 1}})
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace

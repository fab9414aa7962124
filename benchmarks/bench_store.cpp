// Write throughput of the knowledge stores: changes committed per second,
// one change per transaction and 100 per transaction, on a SQLite file
// (WAL, synchronous=FULL) and on a private PostgreSQL server this file
// starts (tests/support/postgres_server.h, fsync on, synchronous_commit
// on: the same promise as SQLite's, a returned commit is on disk).
//
// BM_StoreWrite/store:0|1/batch:N: store 0 is SQLite in a temporary
// folder, 1 is PostgreSQL; each iteration commits N updates of distinct
// entries out of 1,000 (every one a new version with its history row).
// changes_per_s is the figure the README quotes. The PostgreSQL rows are
// skipped, with the reason, when no server can be started.
//
// Run them interleaved, as the README's table was:
//   rapidqa-bench --benchmark_filter=BM_StoreWrite --benchmark_repetitions=3
//     --benchmark_enable_random_interleaving=true
// (one command line)
#include <benchmark/benchmark.h>

#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "rapidqa/knowledge_store.h"
#include "support/postgres_server.h"

namespace {

constexpr std::size_t kEntries = 1000;

rapidqa::KnowledgeEntry numbered(std::size_t id, std::size_t round) {
  rapidqa::KnowledgeEntry e;
  e.id = "entry-" + std::to_string(id);
  e.question = "What does entry " + std::to_string(id) + " say?";
  e.alternates = {"entry " + std::to_string(id) + " in other words"};
  e.answer = "Entry " + std::to_string(id) + " says this, in round " + std::to_string(round) + ".";
  return e;
}

// One store per kind for the whole run, holding the 1,000 entries.
struct StoreUnderBench {
  std::unique_ptr<rapidqa::testing::PostgresServer> server;  // kind 1 only; outlives the store
  std::filesystem::path folder;                              // kind 0 only
  std::unique_ptr<rapidqa::KnowledgeStore> store;
  std::string unavailable;  // why the kind cannot run here
  std::size_t round = 0;

  explicit StoreUnderBench(int kind) {
    std::string uri;
    if (kind == 0) {
      folder = std::filesystem::temp_directory_path() / ("rapidqa-bench-store-" + std::to_string(::getpid()));
      std::filesystem::create_directories(folder);
      uri = "sqlite:" + (folder / "kb.db").string();
    } else {
      auto started = rapidqa::testing::PostgresServer::start();
      if (!started) {
        unavailable = "no PostgreSQL server: " + started.status().to_string();
        return;
      }
      server = std::move(started).value();
      uri = server->uri();
    }
    auto opened = rapidqa::KnowledgeStore::open(uri);
    if (!opened) {
      unavailable = opened.status().to_string();
      return;
    }
    store = std::move(opened).value();
    std::vector<rapidqa::StoreChange> all;
    for (std::size_t i = 0; i < kEntries; ++i) all.push_back(rapidqa::StoreChange::put(numbered(i, 0)));
    if (auto committed = store->commit(all); !committed) unavailable = committed.status().to_string();
  }
  ~StoreUnderBench() {
    store.reset();
    if (!folder.empty()) {
      std::error_code ignored;
      std::filesystem::remove_all(folder, ignored);
    }
  }
};

StoreUnderBench& store_of_kind(int kind) {
  static StoreUnderBench sqlite(0);
  if (kind == 0) return sqlite;
  static StoreUnderBench postgres(1);
  return postgres;
}

void BM_StoreWrite(benchmark::State& state) {
  StoreUnderBench& bench = store_of_kind(static_cast<int>(state.range(0)));
  if (!bench.unavailable.empty()) {
    state.SkipWithError(bench.unavailable.c_str());
    return;
  }
  const auto batch = static_cast<std::size_t>(state.range(1));
  std::size_t next = 0;
  std::vector<rapidqa::StoreChange> changes;
  for (auto _ : state) {
    state.PauseTiming();
    ++bench.round;
    changes.clear();
    for (std::size_t i = 0; i < batch; ++i) {
      changes.push_back(rapidqa::StoreChange::update(numbered(next, bench.round)));
      next = (next + 1) % kEntries;
    }
    state.ResumeTiming();
    auto committed = bench.store->commit(changes);
    if (!committed) {
      state.SkipWithError(committed.status().to_string().c_str());
      break;
    }
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * batch));
  state.counters["changes_per_s"] =
      benchmark::Counter(static_cast<double>(state.iterations() * batch), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_StoreWrite)
    ->ArgNames({"store", "batch"})
    ->ArgsProduct({{0, 1}, {1, 100}})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime()
    ->MinTime(2.0);

}  // namespace

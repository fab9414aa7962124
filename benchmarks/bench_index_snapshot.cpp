// Stage 4, retrieval, at a restart: reading a saved HNSW index back
// (VectorIndex::load) against building it again from its vectors
// (add_batch), on random L2-normalised 384-dimensional vectors with the
// default graph options (M 32, efConstruction 80). The gain of a snapshot is
// BM_IndexBuild's time over BM_IndexLoad's.
//
//   BM_IndexBuild/vectors:N     one build, every core given to FAISS's
//                               OpenMP loop (the fastest rebuild there is)
//   BM_IndexSave/vectors:N      save, fsync and rename included
//   BM_IndexLoad/vectors:N      load of that file, page cache warm (a cold
//                               disk adds file_MB / its read rate); the
//                               mean of several loads in one process
//   BM_SnapshotChecksum         XXH64 over 64 MiB, the share of a load that
//                               goes to checking the file
//
// 10k vectors always; 100k with RAPIDQA_BENCH_LARGE=1 (its build takes
// minutes on a small machine). The snapshot lives in the temporary folder
// while the benchmarks run.
#include <benchmark/benchmark.h>
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "bench_data.h"
#include "common/checksum.h"
#include "index/vector_index.h"

namespace {

using rapidqa::index::VectorIndex;
using rapidqa::index::VectorIndexOptions;

constexpr std::size_t kDimension = 384;

VectorIndexOptions graph_options() {
  VectorIndexOptions options;
  options.dimension = kDimension;
  options.exact_limit = 0;  // HNSW from the first vector
  return options;
}

const std::vector<float>& vectors_of(std::size_t size) {
  static std::map<std::size_t, std::vector<float>> made;
  auto& v = made[size];
  if (v.empty()) v = rapidqa::bench::random_unit_vectors(size, kDimension, 0x5a7e + size);
  return v;
}

std::unique_ptr<VectorIndex> build_index(std::size_t size) {
  // As a rebuild at start-up would: every core for FAISS's build loop.
  const int previous_threads = omp_get_max_threads();
  omp_set_num_threads(static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  auto index = std::make_unique<VectorIndex>(graph_options());
  std::vector<std::int64_t> labels(size);
  for (std::size_t i = 0; i < size; ++i) labels[i] = static_cast<std::int64_t>(i);
  index->add_batch(labels, vectors_of(size).data());
  omp_set_num_threads(previous_threads);
  return index;
}

// The last index built of each size, so saving does not build it again.
std::map<std::size_t, std::unique_ptr<VectorIndex>>& built() {
  static std::map<std::size_t, std::unique_ptr<VectorIndex>> indexes;
  return indexes;
}

const VectorIndex& index_of(std::size_t size) {
  auto& slot = built()[size];
  if (!slot) slot = build_index(size);
  return *slot;
}

std::string snapshot_path(std::size_t size) {
  return (std::filesystem::temp_directory_path() /
          ("rapidqa-bench-index-" + std::to_string(size) + "-" + std::to_string(::getpid()) + ".snap"))
      .string();
}

// Removes the snapshots at exit.
struct SnapshotFiles {
  ~SnapshotFiles() {
    for (const auto& path : paths) std::filesystem::remove(path);
  }
  std::vector<std::string> paths;
};

const std::string& saved_snapshot(std::size_t size) {
  static SnapshotFiles files;
  static std::map<std::size_t, std::string> saved;
  auto& path = saved[size];
  if (path.empty()) {
    const std::string target = snapshot_path(size);
    if (!index_of(size).save(target).is_ok()) return path;
    files.paths.push_back(target);
    path = target;
  }
  return path;
}

void BM_IndexBuild(benchmark::State& state) {
  const auto size = static_cast<std::size_t>(state.range(0));
  vectors_of(size);  // generated outside the timing
  for (auto _ : state) built()[size] = build_index(size);
  state.SetLabel("HNSW M 32 efConstruction 80, " + std::to_string(std::thread::hardware_concurrency()) + " threads");
}

void BM_IndexSave(benchmark::State& state) {
  const auto size = static_cast<std::size_t>(state.range(0));
  const VectorIndex& index = index_of(size);
  const std::string path = snapshot_path(size) + ".save";
  for (auto _ : state) {
    if (auto s = index.save(path); !s.is_ok()) {
      state.SkipWithError(s.to_string().c_str());
      break;
    }
  }
  state.counters["file_MB"] = static_cast<double>(std::filesystem::file_size(path)) / 1e6;
  std::filesystem::remove(path);
}

void BM_IndexLoad(benchmark::State& state) {
  const auto size = static_cast<std::size_t>(state.range(0));
  const std::string& path = saved_snapshot(size);
  if (path.empty()) {
    state.SkipWithError("cannot save the snapshot to load");
    return;
  }
  std::optional<VectorIndex> previous;
  for (auto _ : state) {
    // Freeing the last one is no part of a restart.
    state.PauseTiming();
    previous.reset();
    state.ResumeTiming();
    auto loaded = VectorIndex::load(path, graph_options());
    if (!loaded.is_ok()) {
      state.SkipWithError(loaded.status().to_string().c_str());
      break;
    }
    previous.emplace(std::move(loaded).value());
  }
  state.counters["file_MB"] = static_cast<double>(std::filesystem::file_size(path)) / 1e6;
}

void BM_SnapshotChecksum(benchmark::State& state) {
  // The speed does not depend on the bytes' values.
  std::vector<std::uint8_t> bytes(64u << 20);
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<std::uint8_t>(i * 131);
  for (auto _ : state) benchmark::DoNotOptimize(rapidqa::detail::xxh64(bytes.data(), bytes.size()));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * bytes.size()));
}

void sizes(benchmark::internal::Benchmark* b) {
  b->Arg(10000);
  if (rapidqa::bench::large_sizes_enabled()) b->Arg(100000);
}

}  // namespace

// One build per size: a second would take as long and say nothing new.
BENCHMARK(BM_IndexBuild)->Apply(sizes)->ArgName("vectors")->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_IndexSave)->Apply(sizes)->ArgName("vectors")->Unit(benchmark::kMillisecond);
// Several loads even at 100k: the first in a process runs colder than the rest.
BENCHMARK(BM_IndexLoad)->Apply(sizes)->ArgName("vectors")->MinTime(3.0)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SnapshotChecksum)->Unit(benchmark::kMillisecond);

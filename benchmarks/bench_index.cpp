// Stage 4, retrieval: index::VectorIndex search, exact (FAISS flat inner
// product) against approximate (HNSW, the library's default M 32,
// efConstruction 80, efSearch 128), at 10k and 100k random L2-normalised
// 384-dimensional vectors, k = 12 (what the knowledge base asks for with
// top_k 3). Both kinds run side by side in one process, to be compared as
// ratios (--benchmark_filter=BM_IndexSearch). Random vectors have no
// cluster structure, so HNSW gains less here than on text; the engine
// benchmarks (bench_engine.cpp) measure retrieval on generated questions.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "bench_data.h"
#include "index/vector_index.h"

namespace {

constexpr std::size_t kDimension = 384;
constexpr std::size_t kNeighbors = 12;
constexpr std::size_t kQueries = 1024;

// Built once per (size, kind) and kept: the 100k HNSW graph takes a while.
const rapidqa::index::VectorIndex& index_for(std::size_t size, bool approximate) {
  static std::map<std::pair<std::size_t, bool>, std::unique_ptr<rapidqa::index::VectorIndex>> built;
  auto& slot = built[{size, approximate}];
  if (!slot) {
    std::fprintf(stderr, "rapidqa-bench: building %s index of %zu random vectors...\n",
                 approximate ? "an HNSW" : "a flat", size);
    const auto started = std::chrono::steady_clock::now();
    rapidqa::index::VectorIndexOptions options;
    options.dimension = kDimension;
    options.exact_limit = approximate ? 0 : std::numeric_limits<std::size_t>::max();
    slot = std::make_unique<rapidqa::index::VectorIndex>(options);
    std::vector<std::int64_t> labels(size);
    for (std::size_t i = 0; i < size; ++i) labels[i] = static_cast<std::int64_t>(i);
    slot->add_batch(labels, rapidqa::bench::random_unit_vectors(size, kDimension, 0x1de5 + size).data());
    std::fprintf(stderr, "rapidqa-bench:   done in %.1f s\n",
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  }
  return *slot;
}

void search(benchmark::State& state, bool approximate) {
  const auto size = static_cast<std::size_t>(state.range(0));
  const auto& index = index_for(size, approximate);
  if (index.is_approximate() != approximate) {
    state.SkipWithError("the index did not take the requested kind (exact/HNSW)");
    return;
  }
  static const std::vector<float> queries = rapidqa::bench::random_unit_vectors(kQueries, kDimension, 0x9e77);
  std::size_t q = 0;
  for (auto _ : state) {
    auto found = index.search(queries.data() + (q++ % kQueries) * kDimension, kNeighbors);
    benchmark::DoNotOptimize(found.data());
  }
  state.counters["vectors"] = static_cast<double>(size);
}

void BM_IndexSearchExact(benchmark::State& state) { search(state, false); }
void BM_IndexSearchHnsw(benchmark::State& state) { search(state, true); }

// The 100k HNSW graph only with RAPIDQA_BENCH_LARGE=1: it takes many minutes
// to build with a baseline FAISS on a small machine. Flat indexes build in
// a moment at either size.
void hnsw_sizes(benchmark::internal::Benchmark* b) {
  b->Arg(10000);
  if (rapidqa::bench::large_sizes_enabled()) b->Arg(100000);
}

}  // namespace

BENCHMARK(BM_IndexSearchExact)->Arg(10000)->Arg(100000)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_IndexSearchHnsw)->Apply(hnsw_sizes)->Unit(benchmark::kMicrosecond);

// Stage 4, retrieval: index::VectorIndex against FAISS's own indexes, side
// by side in one process, on random L2-normalised 384-dimensional vectors,
// k = 12 (what the knowledge base asks for with top_k 3).
//
//   BM_IndexSearch/kind:K/vectors:N/efSearch:E
//     kind 0  rapidqa exact (int8 scan, float re-ranking)
//     kind 1  rapidqa HNSW (int8 graph storage, float re-ranking)
//     kind 2  FAISS IndexFlatIP (Debian's build)
//     kind 3  FAISS IndexHNSWFlat, the same M and efConstruction, built by
//             FAISS (10k only: 13 minutes at 100k, hours at 1M on two cores)
//     kind 4  FAISS IndexHNSWFlat searching rapidqa's own graph of kind 1
//             with its float storage: the two searches over one graph
//   BM_IndexSearchBatch/kind:K/vectors:N/queries:Q: Q queries per call
//
// Every benchmark reports recall@1: how often its first result is the true
// nearest vector (a float brute-force scan), over 200 queries, measured
// before timing. The HNSW kinds run at several efSearch values so they can
// be compared at equal recall. Random vectors have no cluster structure,
// the hardest case for a graph; the engine benchmarks measure retrieval on
// generated questions. 100k graphs need RAPIDQA_BENCH_LARGE=1, every 1M
// index RAPIDQA_BENCH_1M=1 (each 1M graph takes many minutes to build).
#include <benchmark/benchmark.h>
#include <faiss/IndexFlat.h>
#include <faiss/IndexHNSW.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <memory>
#include <thread>
#include <tuple>
#include <vector>

#include "bench_data.h"
#include "index/int8_rows.h"
#include "index/simd_flat_index.h"
#include "index/vector_index.h"

namespace {

constexpr std::size_t kDimension = 384;
constexpr std::size_t kNeighbors = 12;
constexpr std::size_t kQueries = 1024;
constexpr std::size_t kRecallQueries = 200;
constexpr int kNeighborsM = 32;         // HNSW M, as VectorIndexOptions
constexpr int kBuildBreadth = 80;       // efConstruction, as VectorIndexOptions

enum Kind { kRapidqaExact = 0, kRapidqaHnsw = 1, kFaissFlat = 2, kFaissHnsw = 3, kFaissOnRapidqaGraph = 4 };

const char* kind_name(int kind) {
  switch (kind) {
    case kRapidqaExact: return "rapidqa exact";
    case kRapidqaHnsw: return "rapidqa HNSW";
    case kFaissFlat: return "FAISS IndexFlatIP";
    case kFaissHnsw: return "FAISS IndexHNSWFlat";
    default: return "FAISS IndexHNSWFlat on rapidqa's graph";
  }
}

bool huge_sizes_enabled() {
  const char* v = std::getenv("RAPIDQA_BENCH_1M");
  return v && *v && std::string(v) != "0";
}

const std::vector<float>& base_vectors(std::size_t size) {
  static std::map<std::size_t, std::vector<float>> made;
  auto& v = made[size];
  if (v.empty()) v = rapidqa::bench::random_unit_vectors(size, kDimension, 0x1de5 + size);
  return v;
}

const std::vector<float>& query_vectors() {
  static const std::vector<float> queries = rapidqa::bench::random_unit_vectors(kQueries, kDimension, 0x9e77);
  return queries;
}

// The true nearest row of each recall query, by a float scan (rows outer,
// queries inner: each row is read from memory once, which at 1M rows is
// the difference between seconds and minutes).
const std::vector<std::int64_t>& true_nearest(std::size_t size) {
  static std::map<std::size_t, std::vector<std::int64_t>> made;
  auto& nearest = made[size];
  if (nearest.empty()) {
    const auto& base = base_vectors(size);
    std::vector<float> best(kRecallQueries, -std::numeric_limits<float>::infinity());
    nearest.assign(kRecallQueries, -1);
    for (std::size_t row = 0; row < size; ++row) {
      const float* vector = base.data() + row * kDimension;
      for (std::size_t q = 0; q < kRecallQueries; ++q) {
        const float s = rapidqa::index::inner_product(query_vectors().data() + q * kDimension, vector, kDimension);
        if (s > best[q]) best[q] = s, nearest[q] = static_cast<std::int64_t>(row);
      }
    }
  }
  return nearest;
}

// One index of either library behind one search call.
struct AnyIndex {
  std::unique_ptr<rapidqa::index::VectorIndex> rapidqa;
  std::unique_ptr<faiss::Index> faiss;

  void set_breadth(int ef) {
    if (rapidqa) rapidqa->set_search_breadth(ef);
    if (auto* hnsw = dynamic_cast<faiss::IndexHNSW*>(faiss.get())) hnsw->hnsw.efSearch = ef;
  }
  // Labels of the k nearest of each of n queries.
  void search(const float* queries, std::size_t n, std::size_t k, std::vector<std::int64_t>& labels,
              std::vector<float>& scores) const {
    labels.resize(n * k);
    scores.resize(n * k);
    if (rapidqa) {
      const auto found = rapidqa->search_batch(queries, n, k);
      for (std::size_t q = 0; q < n; ++q) {
        for (std::size_t j = 0; j < k; ++j) labels[q * k + j] = j < found[q].size() ? found[q][j].label : -1;
      }
      return;
    }
    faiss->search(static_cast<faiss::Index::idx_t>(n), queries, static_cast<faiss::Index::idx_t>(k), scores.data(),
                  labels.data());
  }
};

AnyIndex& index_for(int kind, std::size_t size) {
  static std::map<std::pair<int, std::size_t>, AnyIndex> built;
  auto& slot = built[{kind, size}];
  if (slot.rapidqa || slot.faiss) return slot;
  std::fprintf(stderr, "rapidqa-bench: building %s over %zu random vectors...\n", kind_name(kind), size);
  const auto started = std::chrono::steady_clock::now();
  // Both libraries build graphs with FAISS's OpenMP loop; give it every
  // core for the build (the runtime keeps OpenMP at one thread otherwise).
  const int previous_threads = omp_get_max_threads();
  omp_set_num_threads(static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  const auto& base = base_vectors(size);
  if (kind == kRapidqaExact || kind == kRapidqaHnsw) {
    rapidqa::index::VectorIndexOptions options;
    options.dimension = kDimension;
    options.hnsw_neighbors = kNeighborsM;
    options.hnsw_build_breadth = kBuildBreadth;
    options.exact_limit = kind == kRapidqaHnsw ? 0 : std::numeric_limits<std::size_t>::max();
    slot.rapidqa = std::make_unique<rapidqa::index::VectorIndex>(options);
    std::vector<std::int64_t> labels(size);
    for (std::size_t i = 0; i < size; ++i) labels[i] = static_cast<std::int64_t>(i);
    slot.rapidqa->add_batch(labels, base.data());
  } else if (kind == kFaissOnRapidqaGraph) {
    // FAISS's IndexHNSWFlat given rapidqa's graph and the float vectors:
    // no build of its own, the same links walked by FAISS's search.
    const rapidqa::index::VectorIndex& ours = *index_for(kRapidqaHnsw, size).rapidqa;
    auto hnsw = std::make_unique<faiss::IndexHNSWFlat>(static_cast<int>(kDimension), kNeighborsM,
                                                       faiss::METRIC_INNER_PRODUCT);
    hnsw->hnsw = *ours.graph();
    hnsw->storage->add(static_cast<faiss::Index::idx_t>(size), base.data());
    hnsw->ntotal = static_cast<faiss::Index::idx_t>(size);
    slot.faiss = std::move(hnsw);
  } else if (kind == kFaissFlat) {
    slot.faiss = std::make_unique<faiss::IndexFlatIP>(static_cast<faiss::Index::idx_t>(kDimension));
    slot.faiss->add(static_cast<faiss::Index::idx_t>(size), base.data());
  } else {
    auto hnsw = std::make_unique<faiss::IndexHNSWFlat>(static_cast<int>(kDimension), kNeighborsM,
                                                       faiss::METRIC_INNER_PRODUCT);
    hnsw->hnsw.efConstruction = kBuildBreadth;
    hnsw->add(static_cast<faiss::Index::idx_t>(size), base.data());
    slot.faiss = std::move(hnsw);
  }
  omp_set_num_threads(previous_threads);
  std::fprintf(stderr, "rapidqa-bench:   done in %.1f s\n",
               std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  return slot;
}

double recall_at_1(const AnyIndex& index, std::size_t size) {
  const auto& truth = true_nearest(size);
  std::vector<std::int64_t> labels;
  std::vector<float> scores;
  std::size_t hits = 0;
  for (std::size_t q = 0; q < kRecallQueries; ++q) {
    index.search(query_vectors().data() + q * kDimension, 1, kNeighbors, labels, scores);
    hits += labels[0] == truth[q];
  }
  return static_cast<double>(hits) / kRecallQueries;
}

void run(benchmark::State& state, std::size_t queries_per_call) {
  const int kind = static_cast<int>(state.range(0));
  const auto size = static_cast<std::size_t>(state.range(1));
  const int breadth = static_cast<int>(state.range(2));
  AnyIndex& index = index_for(kind, size);
  if (breadth > 0) index.set_breadth(breadth);
  state.counters["recall@1"] = recall_at_1(index, size);
  std::vector<std::int64_t> labels;
  std::vector<float> scores;
  std::size_t q = 0;
  for (auto _ : state) {
    index.search(query_vectors().data() + q * kDimension, queries_per_call, kNeighbors, labels, scores);
    benchmark::DoNotOptimize(labels.data());
    q = (q + queries_per_call) % (kQueries - queries_per_call);
  }
  state.counters["per_query_us"] = benchmark::Counter(static_cast<double>(state.iterations() * queries_per_call),
                                                      benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.SetLabel(std::string(kind_name(kind)) + " " + rapidqa::index::scan_kernel_name(rapidqa::index::scan_kernel()));
}

void BM_IndexSearch(benchmark::State& state) { run(state, 1); }
void BM_IndexSearchBatch(benchmark::State& state) { run(state, static_cast<std::size_t>(state.range(2))); }

void search_points(benchmark::internal::Benchmark* b) {
  // Flat indexes build in moments: 10k and 100k always. Graphs: 10k, and
  // 100k or 1M where their builds are enabled.
  std::vector<std::int64_t> flat_sizes{10000, 100000}, graph_sizes{10000};
  if (rapidqa::bench::large_sizes_enabled()) graph_sizes.push_back(100000);
  if (huge_sizes_enabled()) flat_sizes.push_back(1000000), graph_sizes.push_back(1000000);
  for (const auto size : flat_sizes) {
    for (int kind : {kRapidqaExact, kFaissFlat}) b->Args({kind, size, 0});
  }
  for (const auto size : graph_sizes) {
    for (int kind : {kRapidqaHnsw, kFaissOnRapidqaGraph, kFaissHnsw}) {
      // FAISS's own build: 9-11 s at 10k, 13 min at 100k and hours at 1M on
      // two cores; past 10k kind 4 compares the searches on one graph.
      if (kind == kFaissHnsw && size > 10000) continue;
      for (int ef : {32, 64, 128, 256}) b->Args({kind, size, ef});
    }
  }
}

void batch_points(benchmark::internal::Benchmark* b) {
  for (std::int64_t size : {10000, 100000}) {
    for (std::int64_t queries : {1, 4, 16}) b->Args({kRapidqaExact, size, queries});
    b->Args({kFaissFlat, size, 16});
  }
}

}  // namespace

BENCHMARK(BM_IndexSearch)->Apply(search_points)->ArgNames({"kind", "vectors", "efSearch"})->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_IndexSearchBatch)->Apply(batch_points)->ArgNames({"kind", "vectors", "queries"})->Unit(benchmark::kMicrosecond);

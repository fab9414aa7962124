// Stage 3, the cache tiers on their own: ResultCache (exact normalised
// question) lookup hit, and SemanticCache (nearest cached question vector)
// lookup hit and miss at 1k and 10k cached questions. The semantic cache
// searches a flat index up to its exact_index_limit (20k), so its lookup
// grows with the number of answers it holds.
#include <benchmark/benchmark.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "bench_data.h"
#include "rapidqa/result_cache.h"
#include "rapidqa/semantic_cache.h"

namespace {

using rapidqa::bench::typical_answer;

constexpr std::size_t kDimension = 384;

// 10k cached questions of which the benchmark looks up 64 in turn.
void BM_ResultCacheLookupHit(benchmark::State& state) {
  auto owned_cache = rapidqa::ResultCache::create().value();
  rapidqa::ResultCache& cache = *owned_cache;
  std::vector<std::string> keys;
  for (std::size_t i = 0; i < 10000; ++i) {
    keys.push_back(rapidqa::bench::generated_entry(i, 0).question);
    cache.insert(keys.back(), typical_answer(i));
  }
  std::size_t i = 0;
  for (auto _ : state) {
    auto hit = cache.lookup(keys[(i++ * 157) % keys.size()]);
    if (!hit) {
      state.SkipWithError("result cache missed a key it holds");
      break;
    }
    benchmark::DoNotOptimize(hit->text.data());
  }
}

struct FilledSemanticCache {
  std::unique_ptr<rapidqa::SemanticCache> cache;
  std::vector<float> vectors;  // what was inserted, row i = answer i
};

const FilledSemanticCache& semantic_cache_with(std::size_t size) {
  static std::map<std::size_t, FilledSemanticCache> filled;
  auto& slot = filled[size];
  if (!slot.cache) {
    rapidqa::SemanticCacheOptions options;
    options.dimension = kDimension;
    slot.cache = rapidqa::SemanticCache::create(options).value();
    slot.vectors = rapidqa::bench::random_unit_vectors(size, kDimension, 0x5eca + size);
    for (std::size_t i = 0; i < size; ++i) slot.cache->insert(slot.vectors.data() + i * kDimension, "how do i reset my password", typical_answer(i));
  }
  return slot;
}

void BM_SemanticCacheLookupHit(benchmark::State& state) {
  const auto size = static_cast<std::size_t>(state.range(0));
  const auto& filled = semantic_cache_with(size);
  std::size_t i = 0;
  for (auto _ : state) {
    auto found = filled.cache->lookup(filled.vectors.data() + ((i++ * 157) % size) * kDimension, "how do i reset my password");
    if (!found.answer) {
      state.SkipWithError("semantic cache missed a vector it holds");
      break;
    }
    benchmark::DoNotOptimize(found.answer->text.data());
  }
  state.counters["cached"] = static_cast<double>(size);
}

// Random queries: nearest similarity about 0.2, far below the 0.92 threshold.
void BM_SemanticCacheLookupMiss(benchmark::State& state) {
  const auto size = static_cast<std::size_t>(state.range(0));
  const auto& filled = semantic_cache_with(size);
  const auto queries = rapidqa::bench::random_unit_vectors(256, kDimension, 0xa11ce);
  std::size_t i = 0;
  for (auto _ : state) {
    auto found = filled.cache->lookup(queries.data() + (i++ % 256) * kDimension, "how do i reset my password");
    if (found.answer) {
      state.SkipWithError("a random query hit the semantic cache");
      break;
    }
    benchmark::DoNotOptimize(found.nearest_similarity);
  }
  state.counters["cached"] = static_cast<double>(size);
}

}  // namespace

BENCHMARK(BM_ResultCacheLookupHit)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_SemanticCacheLookupHit)->Arg(1000)->Arg(10000)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_SemanticCacheLookupMiss)->Arg(1000)->Arg(10000)->Unit(benchmark::kMicrosecond);

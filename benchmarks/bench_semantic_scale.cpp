// SemanticCache at scale: lookup latency, top-1 recall of the approximate
// index and memory per cached entry, at 10k and 100k cached questions
// (the index alone at 100k and, with RAPIDQA_BENCH_HUGE=1, 1M), 384
// dimensions, for an exact (flat) index (exact_index_limit above the size)
// and the default approximate one (HNSW above exact_index_limit), each
// with hit and miss lookups.
//
// Each benchmark times every one of its lookups on its own and reports
// p50_us/p99_us/mean_us of those latencies, plus:
//   recall_at_1         fraction of lookups whose nearest cached question
//                       is the brute-force nearest (index::inner_product
//                       over every cached vector)
//   decision_agreement  fraction whose hit/miss is what the brute-force
//                       nearest similarity decides against the threshold
//   hit_ratio           fraction that hit
//   exact_top1_similarity  mean brute-force nearest similarity of the queries
//   bytes_per_entry     resident-memory growth of the process while filling
//                       the cache, per entry (vectors, index, answers,
//                       questions, bookkeeping: what a deployment pays)
//   index_bytes_per_entry  VectorIndex::memory_bytes() of an index holding
//                       the same vectors, per entry (the index alone)
//   fill_s              seconds to fill the cache one insert at a time
//   build_s             (index-only rows) seconds to build the index in one
//                       batch
//
// The cached vectors are not uniform random: they model sentence
// embeddings of FAQ questions (see question_vector), with topics, intents
// and paraphrases of each intent, because an HNSW graph behaves very
// differently on clustered data. A hit query is a perturbed copy of a
// cached vector (cosine about 0.95, above the default threshold 0.92); a
// miss query is a new intent in a topic the cache knows (nearest cosine
// about 0.6): a question nobody asked yet, not a vector from nowhere.
//
// The caches are filled with SemanticCache::insert, as the engine fills
// them, once per (size, index) and kept for the process; filling shows
// progress on stderr. A cache of 1M entries cannot be filled that way in
// reasonable time (see kCacheFillLimit): BM_SemanticScaleIndexOnly*
// measure the index such a cache would search, built in one batch, at 1M
// and, for comparison with the cache, at 100k.
//
// Latencies are wall-clock (p50_us, p99_us) and the lookup thread's CPU
// time (p50_cpu_us, p99_cpu_us): on a machine shared with other work a
// wall-clock p99 can be a scheduler time slice rather than the lookup.
#include <benchmark/benchmark.h>
#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bench_data.h"
#include "bench_percentile.h"
#include "index/simd_flat_index.h"
#include "index/vector_index.h"
#include "rapidqa/semantic_cache.h"
#include "rapidqa/text_normalizer.h"

namespace {

using rapidqa::bench::percentile;
using rapidqa::bench::Rng;
using SteadyClock = std::chrono::steady_clock;

constexpr std::size_t kDimension = 384;
constexpr std::size_t kLookups = 2000;  // per benchmark, each timed on its own

// --- cached data -------------------------------------------------------------

// A cached question's vector is the normalised sum of four random
// directions: one common to all (sentence embeddings are anisotropic: two
// unrelated questions still have a cosine of about 0.2), its topic's, its
// intent's, and its own (the wording of this paraphrase). With these
// weights, measured in 384 dimensions: paraphrases of one intent have a
// cosine of about 0.88 to each other, questions of one topic about 0.55,
// unrelated questions about 0.2, like MiniLM-style embeddings of FAQ
// traffic. Entry i is the same vector whatever the cache size.
constexpr std::size_t kParaphrasesPerIntent = 4;
constexpr std::size_t kIntentsPerTopic = 50;
constexpr float kCommonWeight = 0.48f;
constexpr float kTopicWeight = 0.63f;
constexpr float kIntentWeight = 0.61f;
constexpr float kParaphraseWeight = 0.37f;
// Noise added to a cached vector for a hit query: cosine 1/sqrt(1 + w^2),
// about 0.95, to the vector it copies.
constexpr float kHitNoiseWeight = 0.33f;

// Seeds of the direction families, so no two families share a stream.
constexpr std::uint64_t kCommonSeed = 0xc0aa0a;
constexpr std::uint64_t kTopicSeed = 0x70b1c5ULL << 32;
constexpr std::uint64_t kIntentSeed = 0x1a7e47ULL << 32;
constexpr std::uint64_t kWordingSeed = 0x3a0d1aULL << 32;
constexpr std::uint64_t kHitNoiseSeed = 0x417ULL << 48;
// Intents of miss queries: numbered far above any cached intent.
constexpr std::uint64_t kMissIntentBase = 1ULL << 40;

// out += weight * (a random unit direction drawn from seed).
void add_direction(std::uint64_t seed, float weight, float* out) {
  Rng rng(Rng(seed).next());
  float direction[kDimension];
  double norm = 0;
  for (auto& x : direction) {
    x = rng.unit() * 2.0f - 1.0f;
    norm += static_cast<double>(x) * x;
  }
  const auto scale = static_cast<float>(weight / std::sqrt(norm));
  for (std::size_t d = 0; d < kDimension; ++d) out[d] += scale * direction[d];
}

void normalise(float* v) {
  double norm = 0;
  for (std::size_t d = 0; d < kDimension; ++d) norm += static_cast<double>(v[d]) * v[d];
  const auto inv = static_cast<float>(1.0 / std::sqrt(norm));
  for (std::size_t d = 0; d < kDimension; ++d) v[d] *= inv;
}

// A question of `intent` in `topic`, in the wording drawn from `wording`.
void phrasing_vector(std::uint64_t topic, std::uint64_t intent, std::uint64_t wording, float* out) {
  std::fill(out, out + kDimension, 0.0f);
  add_direction(kCommonSeed, kCommonWeight, out);
  add_direction(kTopicSeed ^ topic, kTopicWeight, out);
  add_direction(kIntentSeed ^ intent, kIntentWeight, out);
  add_direction(kWordingSeed ^ wording, kParaphraseWeight, out);
  normalise(out);
}

std::size_t intent_of(std::size_t entry) { return entry / kParaphrasesPerIntent; }
std::size_t topic_of(std::size_t entry) { return intent_of(entry) / kIntentsPerTopic; }

void question_vector(std::size_t entry, float* out) { phrasing_vector(topic_of(entry), intent_of(entry), entry, out); }

// The cached question text of entry i, normalised as the engine caches it.
std::string cached_question(std::size_t entry) {
  return rapidqa::normalize_text(rapidqa::bench::generated_entry(entry, 0).question).value();
}

// The cached entry query j of a set is about; 7919 is prime, so j below
// the size never repeats an entry.
std::size_t source_entry(std::size_t j, std::size_t size) { return (j * 7919 + 1) % size; }

struct Queries {
  std::vector<float> vectors;          // kLookups rows
  std::vector<std::string> questions;  // normalised text, for the near-miss guard
  // Brute-force nearest cached entry of each query and its similarity.
  std::vector<std::size_t> exact_top1;
  std::vector<float> exact_similarity;
};

// Nearest of `cached` rows for every query, by a blocked scan: each block
// of cached vectors is compared with every query while it is in cache.
void brute_force_top1(const std::vector<float>& cached, std::size_t rows, Queries& q) {
  const std::size_t n = q.questions.size();
  q.exact_top1.assign(n, 0);
  q.exact_similarity.assign(n, -2.0f);
  constexpr std::size_t kBlock = 256;
  for (std::size_t first = 0; first < rows; first += kBlock) {
    const std::size_t last = std::min(rows, first + kBlock);
    for (std::size_t j = 0; j < n; ++j) {
      const float* query = q.vectors.data() + j * kDimension;
      for (std::size_t row = first; row < last; ++row) {
        const float s = rapidqa::index::inner_product(query, cached.data() + row * kDimension, kDimension);
        if (s > q.exact_similarity[j]) {
          q.exact_similarity[j] = s;
          q.exact_top1[j] = row;
        }
      }
    }
  }
}

// Everything a size needs besides the caches: the vectors of its entries
// (row i = entry i) and its two query sets with their brute-force answers.
struct DataSet {
  std::vector<float> vectors;
  Queries hits, misses;
};

const DataSet& data_set(std::size_t size) {
  static std::map<std::size_t, DataSet> sets;
  auto& set = sets[size];
  if (!set.vectors.empty()) return set;
  std::fprintf(stderr, "rapidqa-bench: generating %zu question vectors and %zu hit and miss queries...\n", size,
               kLookups);
  const auto started = SteadyClock::now();
  set.vectors.resize(size * kDimension);
  for (std::size_t i = 0; i < size; ++i) question_vector(i, set.vectors.data() + i * kDimension);
  for (Queries* q : {&set.hits, &set.misses}) {
    q->vectors.resize(kLookups * kDimension);
    q->questions.reserve(kLookups);
  }
  for (std::size_t j = 0; j < kLookups; ++j) {
    const std::size_t source = source_entry(j, size);
    float* hit = set.hits.vectors.data() + j * kDimension;
    std::copy_n(set.vectors.data() + source * kDimension, kDimension, hit);
    add_direction(kHitNoiseSeed ^ j, kHitNoiseWeight, hit);
    normalise(hit);
    set.hits.questions.push_back(cached_question(source));  // the same question in other words
    phrasing_vector(topic_of(source), kMissIntentBase + j, kMissIntentBase + j,
                    set.misses.vectors.data() + j * kDimension);
    set.misses.questions.push_back(cached_question(size + j));  // a question not cached
  }
  std::fprintf(stderr, "rapidqa-bench:   brute-force nearest neighbours of the queries...\n");
  brute_force_top1(set.vectors, size, set.hits);
  brute_force_top1(set.vectors, size, set.misses);
  std::fprintf(stderr, "rapidqa-bench:   done in %.1f s\n",
               std::chrono::duration<double>(SteadyClock::now() - started).count());
  return set;
}

// --- filled caches -------------------------------------------------------------

// Resident memory of the process, after handing free heap pages back to the
// system, so what is counted is what is live, not what the allocator keeps
// from temporaries.
std::size_t resident_bytes() {
  malloc_trim(0);
  std::ifstream statm("/proc/self/statm");
  std::size_t total_pages = 0, resident_pages = 0;
  statm >> total_pages >> resident_pages;
  return resident_pages * static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
}

struct FilledCache {
  std::unique_ptr<rapidqa::SemanticCache> cache;
  std::string error;
  double fill_seconds = 0;
  double resident_bytes_per_entry = 0;
  double index_bytes_per_entry = 0;
};

rapidqa::SemanticCacheOptions cache_options(std::size_t size, bool approximate) {
  rapidqa::SemanticCacheOptions options;
  options.dimension = kDimension;
  options.capacity = size;
  options.capacity_bytes = 0;  // measures the index at its full size: no byte bound
  // Exact: never switch to HNSW. Approximate: the default limit.
  if (!approximate) options.exact_index_limit = size + 1;
  // A clock that never moves: nothing expires during a long fill.
  options.clock = std::make_shared<rapidqa::ManualClock>();
  return options;
}

// VectorIndex::memory_bytes of the same vectors in the kind of index the
// cache builds (exact, or HNSW with the cache's graph degree), built in one
// batch: the index's own accounting, without the cache's answers. The
// graph's memory depends on its degree and the levels drawn, not on the
// build breadth, so a narrow build (much faster at 1M) gives the same
// count.
double index_bytes_per_entry(const DataSet& set, std::size_t size, bool approximate) {
  rapidqa::index::VectorIndexOptions options;
  options.dimension = kDimension;
  options.exact_limit = approximate ? rapidqa::SemanticCacheOptions{}.exact_index_limit : size + 1;
  options.hnsw_build_breadth = 8;
  rapidqa::index::VectorIndex index(options);
  std::vector<std::int64_t> labels(size);
  for (std::size_t i = 0; i < size; ++i) labels[i] = static_cast<std::int64_t>(i);
  index.add_batch(labels, set.vectors.data());
  return static_cast<double>(index.memory_bytes()) / static_cast<double>(size);
}

// Entries arrive in shuffled order, as paraphrases of one intent do. The
// order also decides where each vector lies in the index's storage: in
// entry order, graph neighbours (one topic) would sit side by side in
// memory and a walk would hit the CPU caches far more often than it does
// in a real cache.
std::vector<std::size_t> insertion_order(std::size_t size) {
  std::vector<std::size_t> order(size);
  for (std::size_t i = 0; i < size; ++i) order[i] = i;
  Rng rng(0x0de7 + size);
  for (std::size_t i = size; i > 1; --i) std::swap(order[i - 1], order[rng.below(i)]);
  return order;
}

const FilledCache& filled_cache(std::size_t size, bool approximate) {
  static std::map<std::pair<std::size_t, bool>, FilledCache> filled;
  auto& slot = filled[{size, approximate}];
  if (slot.cache || !slot.error.empty()) return slot;
  const DataSet& set = data_set(size);
  const char* kind = approximate ? "HNSW" : "exact";

  const std::vector<std::size_t> order = insertion_order(size);
  auto created = rapidqa::SemanticCache::create(cache_options(size, approximate));
  if (!created) {
    slot.error = "creating the semantic cache: " + created.status().to_string();
    return slot;
  }
  auto cache = std::move(created).value();
  std::fprintf(stderr, "rapidqa-bench: filling the %s semantic cache with %zu entries, one insert each...\n", kind,
               size);
  const std::size_t resident_before = resident_bytes();
  const auto started = SteadyClock::now();
  auto last_report = started;
  for (std::size_t n = 0; n < size; ++n) {
    const std::size_t entry = order[n];
    cache->insert(set.vectors.data() + entry * kDimension, cached_question(entry),
                  rapidqa::bench::typical_answer(entry));
    const auto now = SteadyClock::now();
    if (now - last_report >= std::chrono::seconds(15)) {
      last_report = now;
      const double elapsed = std::chrono::duration<double>(now - started).count();
      std::fprintf(stderr, "rapidqa-bench:   %zu / %zu entries in %.0f s (%.0f inserts/s)\n", n + 1, size, elapsed,
                   static_cast<double>(n + 1) / elapsed);
    }
  }
  slot.fill_seconds = std::chrono::duration<double>(SteadyClock::now() - started).count();
  slot.resident_bytes_per_entry =
      static_cast<double>(std::max(resident_bytes(), resident_before) - resident_before) / static_cast<double>(size);
  std::fprintf(stderr, "rapidqa-bench:   filled in %.1f s, %.0f resident bytes per entry\n", slot.fill_seconds,
               slot.resident_bytes_per_entry);
  if (cache->stats().size != size) {
    slot.error = "the cache holds " + std::to_string(cache->stats().size) + " entries, not " + std::to_string(size) +
                 " (two generated questions too similar?)";
    return slot;
  }
  slot.index_bytes_per_entry = index_bytes_per_entry(set, size, approximate);
  slot.cache = std::move(cache);
  return slot;
}

// Caches are filled one insert at a time only up to this size. An insert
// first searches the cache (the duplicate check), so an exact cache costs
// n^2/2 inner products to fill: 9 to 12 minutes for 100k on the reference
// machine, at least 100 times that (15 h) for 1M. An HNSW cache there
// fills at about 470 inserts/s once it holds 100k entries (362k took 11.5
// min), so 1M takes 35 min or more. Above the limit the benchmarks measure
// the index such a cache would search, built in one batch: the same
// vectors in the same order, the cache's parameters and its 4 neighbours
// per lookup. Its search is what a lookup pays for; the index-only rows at
// 100k show how close the two are.
constexpr std::size_t kCacheFillLimit = 100000;
constexpr std::size_t kCacheLookupNeighbors = 4;  // what SemanticCache::lookup asks its index for

// Lookups per index-only benchmark: a 1M flat search takes over 100 ms.
std::size_t index_only_lookup_count(bool approximate) { return approximate ? kLookups : 200; }

// The index a cache of this size would hold, as SemanticCache builds it
// (src/cache/semantic_cache.cpp): flat below exact_index_limit, else HNSW
// with M 32, efConstruction 80, efSearch 64.
struct BuiltIndex {
  std::unique_ptr<rapidqa::index::VectorIndex> index;
  double build_seconds = 0;
  double resident_bytes_per_entry = 0;
};

constexpr int kCacheSearchBreadth = 64;  // SemanticCache's efSearch

BuiltIndex& built_index(std::size_t size, bool approximate) {
  static std::map<std::pair<std::size_t, bool>, BuiltIndex> built;
  auto& slot = built[{size, approximate}];
  if (slot.index) return slot;
  const DataSet& set = data_set(size);
  // In the cache's insertion order (see insertion_order).
  const std::vector<std::size_t> order = insertion_order(size);
  std::vector<std::int64_t> labels(size);
  std::vector<float> vectors(size * kDimension);
  for (std::size_t n = 0; n < size; ++n) {
    labels[n] = static_cast<std::int64_t>(order[n]);
    std::copy_n(set.vectors.data() + order[n] * kDimension, kDimension, vectors.data() + n * kDimension);
  }
  rapidqa::index::VectorIndexOptions options{kDimension, rapidqa::SemanticCacheOptions{}.exact_index_limit, 32, 80,
                                              kCacheSearchBreadth};
  if (!approximate) options.exact_limit = size + 1;
  std::fprintf(stderr, "rapidqa-bench: building the %s index of %zu vectors in one batch...\n",
               approximate ? "HNSW" : "exact", size);
  const std::size_t resident_before = resident_bytes();
  const auto started = SteadyClock::now();
  slot.index = std::make_unique<rapidqa::index::VectorIndex>(options);
  slot.index->add_batch(labels, vectors.data());
  slot.build_seconds = std::chrono::duration<double>(SteadyClock::now() - started).count();
  slot.resident_bytes_per_entry =
      static_cast<double>(std::max(resident_bytes(), resident_before) - resident_before) / static_cast<double>(size);
  std::fprintf(stderr, "rapidqa-bench:   built in %.1f s\n", slot.build_seconds);
  return slot;
}

// Wall-clock and on-CPU time of one call, in µs. On a shared machine the
// wall time includes slices in which another process had the core; the
// thread's CPU time does not, so the two tell a slow lookup from a
// descheduled one.
struct CallTimes {
  double wall_us, cpu_us;
};

double thread_cpu_us() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e6 + static_cast<double>(t.tv_nsec) / 1e3;
}

template <typename Call>
CallTimes time_call(Call&& call) {
  const double cpu_started = thread_cpu_us();
  const auto started = SteadyClock::now();
  call();
  const auto elapsed = SteadyClock::now() - started;
  const double cpu_us = thread_cpu_us() - cpu_started;
  return {std::chrono::duration<double, std::micro>(elapsed).count(), cpu_us};
}

// What the lookups of one benchmark found, against the brute force.
class LookupTally {
 public:
  LookupTally(const Queries& queries, std::size_t expected) : queries_(queries) {
    wall_us_.reserve(expected);
    cpu_us_.reserve(expected);
  }

  // Query j took `times`, found a nearest neighbour of `similarity` and
  // hit or missed.
  void add(std::size_t j, CallTimes times, float similarity, bool hit) {
    wall_us_.push_back(times.wall_us);
    cpu_us_.push_back(times.cpu_us);
    // Returned similarities are exact (HNSW candidates are re-ranked with
    // the float vectors, with the same kernel as the brute force), so an
    // equal one is the same neighbour.
    found_top1_ += std::abs(similarity - queries_.exact_similarity[j]) <= 1e-6f;
    agreed_ += hit == (queries_.exact_similarity[j] >= kThreshold);
    hits_ += hit;
    similarity_sum_ += queries_.exact_similarity[j];
  }

  void report(benchmark::State& state, std::size_t size, double resident_bytes_per_entry,
              double index_bytes_per_entry) {
    if (wall_us_.empty()) return;
    const auto n = static_cast<double>(wall_us_.size());
    double sum = 0;
    for (double t : wall_us_) sum += t;
    state.counters["entries"] = static_cast<double>(size);
    state.counters["mean_us"] = sum / n;
    state.counters["p50_us"] = percentile(wall_us_, 0.50);
    state.counters["p99_us"] = percentile(wall_us_, 0.99);
    state.counters["p50_cpu_us"] = percentile(cpu_us_, 0.50);
    state.counters["p99_cpu_us"] = percentile(cpu_us_, 0.99);
    state.counters["recall_at_1"] = static_cast<double>(found_top1_) / n;
    state.counters["decision_agreement"] = static_cast<double>(agreed_) / n;
    state.counters["hit_ratio"] = static_cast<double>(hits_) / n;
    state.counters["exact_top1_similarity"] = similarity_sum_ / n;
    state.counters["bytes_per_entry"] = resident_bytes_per_entry;
    state.counters["index_bytes_per_entry"] = index_bytes_per_entry;
  }

  static inline const float kThreshold = rapidqa::SemanticCacheOptions{}.similarity_threshold;

 private:
  const Queries& queries_;
  std::vector<double> wall_us_, cpu_us_;
  std::size_t found_top1_ = 0, agreed_ = 0, hits_ = 0;
  double similarity_sum_ = 0;
};

void cache_lookups(benchmark::State& state, std::size_t size, bool approximate, bool hit) {
  const FilledCache& filled = filled_cache(size, approximate);
  if (!filled.cache) {
    state.SkipWithError(filled.error.c_str());
    return;
  }
  const Queries& queries = hit ? data_set(size).hits : data_set(size).misses;
  LookupTally tally(queries, static_cast<std::size_t>(state.max_iterations));
  std::size_t j = 0;
  for (auto _ : state) {
    rapidqa::SemanticLookup found;
    const auto times =
        time_call([&] { found = filled.cache->lookup(queries.vectors.data() + j * kDimension, queries.questions[j]); });
    tally.add(j, times, found.nearest_similarity, found.answer.has_value());
    benchmark::DoNotOptimize(found);
    ++j;
  }
  tally.report(state, size, filled.resident_bytes_per_entry, filled.index_bytes_per_entry);
  state.counters["fill_s"] = filled.fill_seconds;
}

// The index alone (see kCacheFillLimit), searched with efSearch
// `breadth`: bytes_per_entry is then the index's resident memory, without
// answers, and a lookup hits when its nearest similarity reaches the
// cache's default threshold.
void index_only_lookups(benchmark::State& state, std::size_t size, bool approximate, bool hit,
                        int breadth = kCacheSearchBreadth) {
  BuiltIndex& built = built_index(size, approximate);
  built.index->set_search_breadth(breadth);
  const Queries& queries = hit ? data_set(size).hits : data_set(size).misses;
  LookupTally tally(queries, static_cast<std::size_t>(state.max_iterations));
  std::size_t j = 0;
  for (auto _ : state) {
    std::vector<rapidqa::index::Neighbor> found;
    const auto times =
        time_call([&] { found = built.index->search(queries.vectors.data() + j * kDimension, kCacheLookupNeighbors); });
    const float similarity = found.empty() ? -1.0f : found.front().similarity;
    tally.add(j, times, similarity, similarity >= LookupTally::kThreshold);
    benchmark::DoNotOptimize(found.data());
    ++j;
  }
  tally.report(state, size, built.resident_bytes_per_entry,
               static_cast<double>(built.index->memory_bytes()) / static_cast<double>(size));
  state.counters["build_s"] = built.build_seconds;
  state.counters["ef_search"] = breadth;
}

// HNSW search breadths (efSearch) the breadth benchmarks try on the
// index-only graphs: the cache's 64, VectorIndex's default 128, and wider.
constexpr int kSearchBreadths[] = {64, 128, 256, 512, 1024};

bool huge_sizes_enabled() {
  const char* value = std::getenv("RAPIDQA_BENCH_HUGE");
  return value != nullptr && *value != '\0' && std::string(value) != "0";
}

// Sizes in cached entries; 1M only with RAPIDQA_BENCH_HUGE=1: generating
// its vectors, brute-forcing its queries and building its HNSW graph take
// minutes.
std::vector<std::size_t> sizes() {
  std::vector<std::size_t> out{10000, 100000};
  if (huge_sizes_enabled()) out.push_back(1000000);
  return out;
}

// One benchmark per (size, index, query kind), size by size, so each size's
// caches are filled just before they are measured.
const bool registered = [] {
  for (const std::size_t size : sizes()) {
    for (const bool approximate : {false, true}) {
      for (const bool hit : {true, false}) {
        const std::string query = hit ? "Hit" : "Miss";
        const std::string suffix = std::string(approximate ? "hnsw" : "exact") + "/" + std::to_string(size);
        if (size <= kCacheFillLimit) {
          benchmark::RegisterBenchmark(("BM_SemanticScaleLookup" + query + "/" + suffix).c_str(),
                                       [=](benchmark::State& state) { cache_lookups(state, size, approximate, hit); })
              ->Iterations(kLookups)
              ->Unit(benchmark::kMicrosecond);
        }
        if (size >= kCacheFillLimit) {
          benchmark::RegisterBenchmark(
              ("BM_SemanticScaleIndexOnly" + query + "/" + suffix).c_str(),
              [=](benchmark::State& state) { index_only_lookups(state, size, approximate, hit); })
              ->Iterations(index_only_lookup_count(approximate))
              ->Unit(benchmark::kMicrosecond);
        }
      }
    }
  }
  // Recall against latency of the graph alone, at the sizes where the
  // cache's breadth may not be enough.
  for (const std::size_t size : sizes()) {
    if (size < kCacheFillLimit) continue;
    for (const bool hit : {true, false}) {
      for (const int breadth : kSearchBreadths) {
        const std::string name = std::string("BM_SemanticScaleIndexBreadth") + (hit ? "Hit" : "Miss") + "/hnsw/" +
                                 std::to_string(size) + "/ef:" + std::to_string(breadth);
        benchmark::RegisterBenchmark(
            name.c_str(), [=](benchmark::State& state) { index_only_lookups(state, size, true, hit, breadth); })
            ->Iterations(kLookups)
            ->Unit(benchmark::kMicrosecond);
      }
    }
  }
  return true;
}();

}  // namespace

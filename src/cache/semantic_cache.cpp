#include "rapidqa/semantic_cache.h"

#include <atomic>
#include <map>
#include <mutex>
#include <shared_mutex>

#include <fmt/format.h>

#include "cache/answer_provenance.h"
#include "common/guard.h"
#include "index/vector_index.h"

namespace rapidqa {
namespace {

struct Slot {
  Answer answer;
  Clock::time_point expires_at;
};

// Similarity at which a new question counts as the same cached question.
constexpr float kSameQuestionSimilarity = 0.999f;
// Nearest neighbours inspected per lookup, so a few expired entries at the
// top do not hide a live one just behind them.
constexpr std::size_t kLookupNeighbors = 4;

}  // namespace

struct SemanticCache::Impl {
  explicit Impl(const SemanticCacheOptions& o)
      : options(o), index({o.dimension, o.exact_index_limit, 32, 80, 64}) {}

  SemanticCacheOptions options;
  mutable std::shared_mutex mu;
  index::VectorIndex index;           // guarded by mu
  std::map<std::int64_t, Slot> slots; // guarded by mu; label order = insertion order
  std::int64_t next_label = 0;        // guarded by mu
  mutable std::atomic<std::uint64_t> hits{0}, misses{0};
  std::atomic<std::uint64_t> expirations{0}, evictions{0}, invalidations{0};

  void erase_label(std::int64_t label) {  // needs mu held exclusively
    index.remove(label);
    slots.erase(label);
  }
};

Result<std::unique_ptr<SemanticCache>> SemanticCache::create(SemanticCacheOptions options) {
  if (options.dimension == 0) return Status::invalid_argument("semantic cache: dimension must be positive");
  if (!(options.similarity_threshold > 0.0f && options.similarity_threshold <= 1.0f)) {
    return Status::invalid_argument(
        fmt::format("semantic cache: similarity_threshold {} is outside (0, 1]", options.similarity_threshold));
  }
  if (!options.clock) options.clock = steady_clock_instance();
  return detail::guarded("creating the semantic cache", [&]() -> Result<std::unique_ptr<SemanticCache>> {
    return std::unique_ptr<SemanticCache>(new SemanticCache(options));
  });
}

SemanticCache::SemanticCache(SemanticCacheOptions options) : impl_(std::make_unique<Impl>(options)) {}
SemanticCache::~SemanticCache() = default;

SemanticLookup SemanticCache::lookup(const float* vector) const {
  SemanticLookup result;
  const auto now = impl_->options.clock->now();
  std::shared_lock<std::shared_mutex> lock(impl_->mu);
  const auto neighbors = impl_->index.search(vector, kLookupNeighbors);
  for (const auto& n : neighbors) {
    const auto slot = impl_->slots.find(n.label);
    if (slot == impl_->slots.end() || now >= slot->second.expires_at) continue;
    result.nearest_similarity = n.similarity;
    if (n.similarity >= impl_->options.similarity_threshold) result.answer = slot->second.answer;
    break;
  }
  (result.answer ? impl_->hits : impl_->misses).fetch_add(1, std::memory_order_relaxed);
  return result;
}

void SemanticCache::insert(const float* vector, Answer answer) {
  if (impl_->options.capacity == 0) return;
  const auto now = impl_->options.clock->now();
  std::unique_lock<std::shared_mutex> lock(impl_->mu);
  const auto nearest = impl_->index.search(vector, 1);
  if (!nearest.empty() && nearest.front().similarity >= kSameQuestionSimilarity) {
    impl_->erase_label(nearest.front().label);
  }
  // Drop expired entries from the oldest end, then evict to stay in capacity.
  while (!impl_->slots.empty() && now >= impl_->slots.begin()->second.expires_at) {
    impl_->erase_label(impl_->slots.begin()->first);
    impl_->expirations.fetch_add(1, std::memory_order_relaxed);
  }
  while (impl_->slots.size() >= impl_->options.capacity) {
    impl_->erase_label(impl_->slots.begin()->first);
    impl_->evictions.fetch_add(1, std::memory_order_relaxed);
  }
  const std::int64_t label = impl_->next_label++;
  impl_->index.upsert(label, vector);
  impl_->slots.emplace(label, Slot{std::move(answer), now + impl_->options.ttl});
}

std::size_t SemanticCache::invalidate_entry(const std::string& entry_id) {
  std::unique_lock<std::shared_mutex> lock(impl_->mu);
  std::vector<std::int64_t> doomed;
  for (const auto& [label, slot] : impl_->slots) {
    if (cache::built_from(slot.answer, entry_id)) doomed.push_back(label);
  }
  for (auto label : doomed) impl_->erase_label(label);
  impl_->invalidations.fetch_add(doomed.size(), std::memory_order_relaxed);
  return doomed.size();
}

void SemanticCache::clear() {
  std::unique_lock<std::shared_mutex> lock(impl_->mu);
  impl_->index.clear();
  impl_->slots.clear();
}

std::size_t SemanticCache::dimension() const { return impl_->options.dimension; }

SemanticCacheStats SemanticCache::stats() const {
  SemanticCacheStats s;
  s.hits = impl_->hits.load(std::memory_order_relaxed);
  s.misses = impl_->misses.load(std::memory_order_relaxed);
  s.expirations = impl_->expirations.load(std::memory_order_relaxed);
  s.evictions = impl_->evictions.load(std::memory_order_relaxed);
  s.invalidations = impl_->invalidations.load(std::memory_order_relaxed);
  std::shared_lock<std::shared_mutex> lock(impl_->mu);
  s.size = impl_->slots.size();
  return s;
}

}  // namespace rapidqa

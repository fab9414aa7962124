#include "rapidqa/result_cache.h"

#include <algorithm>
#include <atomic>
#include <functional>
#include <mutex>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "cache/answer_provenance.h"
#include "cache/cached_answer.h"
#include "cache/tier_store.h"
#include "common/guard.h"

namespace rapidqa {
namespace {

constexpr std::size_t kMaxShards = 4096;

using Store = cache::TierStore<CacheKey, cache::CachedAnswer>;

// One lock domain with its own share of the bounds.
struct Shard {
  explicit Shard(const cache::TierLimits& limits) : store(limits) {}
  mutable std::mutex mu;
  Store store;  // guarded by mu
};

std::size_t item_bytes(const CacheKey& key, const cache::CachedAnswer& answer) {
  // The key is held twice: in the item and in the store's index. An empty
  // tenant costs nothing beyond the struct it sits in.
  const std::size_t key_bytes = key.question.capacity() + (key.tenant.empty() ? 0 : key.tenant.capacity());
  return 2 * key_bytes + answer.bytes() + sizeof(Store::Item) + 32;
}

constexpr auto kIgnoreRemoval = [](const Store::Item&, cache::Removal) {};

}  // namespace

struct ResultCache::Impl {
  ResultCacheOptions options;
  std::vector<std::unique_ptr<Shard>> shards;
  std::atomic<std::uint64_t> hits{0}, misses{0}, lookup_expirations{0}, invalidations{0};

  Shard& shard_for(const CacheKey& key) const { return *shards[std::hash<CacheKey>{}(key) % shards.size()]; }
};

Status validate_result_cache_options(const ResultCacheOptions& o) {
  constexpr auto kOneYear = std::chrono::hours(24 * 366);
  if (o.ttl.count() <= 0 || o.ttl > kOneYear) {
    return Status::invalid_argument(
        fmt::format("ttl {} ms is outside (0, one year] (to cache nothing, disable the tier)", o.ttl.count()));
  }
  if (o.stale_grace.count() < 0 || o.stale_grace > kOneYear) {
    return Status::invalid_argument(fmt::format("stale_grace {} ms is outside [0, one year]", o.stale_grace.count()));
  }
  if (o.shards == 0 || o.shards > kMaxShards) {
    return Status::invalid_argument(fmt::format("shards {} is outside [1, {}]", o.shards, kMaxShards));
  }
  return Status::ok();
}

Result<std::unique_ptr<ResultCache>> ResultCache::create(ResultCacheOptions options) {
  if (Status valid = validate_result_cache_options(options); !valid.is_ok()) return valid;
  return detail::guarded("creating a result cache", [&]() -> Result<std::unique_ptr<ResultCache>> {
    return std::unique_ptr<ResultCache>(new ResultCache(Checked{}, std::move(options)));
  });
}

ResultCache::ResultCache(ResultCacheOptions options) : ResultCache(Checked{}, [&] {
  if (options.shards == 0) options.shards = 1;
  return std::move(options);
}()) {}

ResultCache::ResultCache(Checked, ResultCacheOptions options) : impl_(std::make_unique<Impl>()) {
  if (options.capacity < options.shards) options.shards = std::max<std::size_t>(1, options.capacity);
  if (!options.clock) options.clock = steady_clock_instance();
  impl_->options = options;
  cache::TierLimits limits;
  limits.ttl = options.ttl;
  limits.expiry = options.expiry;
  limits.eviction = options.eviction;
  limits.grace = options.stale_grace;
  limits.max_entries = options.capacity == 0 ? 0 : std::max<std::size_t>(1, options.capacity / options.shards);
  limits.max_bytes = options.capacity_bytes == 0 ? 0 : std::max<std::size_t>(1, options.capacity_bytes / options.shards);
  for (std::size_t i = 0; i < options.shards; ++i) impl_->shards.push_back(std::make_unique<Shard>(limits));
}

ResultCache::~ResultCache() = default;

std::optional<Answer> ResultCache::lookup(const CacheKey& key) { return find(key, /*count_miss=*/true); }

std::optional<Answer> ResultCache::lookup_if_present(const CacheKey& key) { return find(key, /*count_miss=*/false); }

std::optional<Answer> ResultCache::find(const CacheKey& key, bool count_miss) {
  Shard& shard = impl_->shard_for(key);
  const auto now = impl_->options.clock->now();
  std::lock_guard<std::mutex> lock(shard.mu);
  const Store::Item* item = shard.store.find(key);
  if (!item) {
    if (count_miss) impl_->misses.fetch_add(1, std::memory_order_relaxed);
    return std::nullopt;
  }
  if (!Store::live(*item, now)) {
    // Within the stale grace the answer stays for lookup_stale(); it is
    // counted as expired once, when it goes.
    if (shard.store.reclaimable(*item, now)) {
      shard.store.erase(key);
      impl_->lookup_expirations.fetch_add(1, std::memory_order_relaxed);
    }
    if (count_miss) impl_->misses.fetch_add(1, std::memory_order_relaxed);
    return std::nullopt;
  }
  shard.store.record_hit(*item, now);
  impl_->hits.fetch_add(1, std::memory_order_relaxed);
  return item->value.answer();
}

void ResultCache::insert(const CacheKey& key, Answer answer, std::chrono::milliseconds ttl) {
  Shard& shard = impl_->shard_for(key);
  const auto now = impl_->options.clock->now();
  cache::CachedAnswer cached(std::move(answer));
  const std::size_t bytes = item_bytes(key, cached);
  std::lock_guard<std::mutex> lock(shard.mu);
  shard.store.insert(key, std::move(cached), bytes, ttl, now, kIgnoreRemoval);
}

std::optional<Answer> ResultCache::lookup_stale(const CacheKey& key, std::chrono::milliseconds max_age,
                                                std::chrono::milliseconds* age) const {
  Shard& shard = impl_->shard_for(key);
  const auto now = impl_->options.clock->now();
  std::lock_guard<std::mutex> lock(shard.mu);
  const Store::Item* item = shard.store.find(key);
  if (!item) return std::nullopt;
  const auto expired = std::max(Clock::duration::zero(), Store::expired_for(*item, now));
  if (expired > max_age || (expired > Clock::duration::zero() && shard.store.reclaimable(*item, now))) {
    return std::nullopt;
  }
  if (age) *age = std::chrono::duration_cast<std::chrono::milliseconds>(expired);
  return item->value.answer();
}

bool ResultCache::erase(const CacheKey& key) {
  Shard& shard = impl_->shard_for(key);
  std::lock_guard<std::mutex> lock(shard.mu);
  return shard.store.erase(key);
}

std::size_t ResultCache::invalidate_entry(const std::string& entry_id, std::vector<CacheKey>* hot_keys,
                                         std::uint64_t min_hits) {
  std::size_t removed = 0;
  for (auto& shard : impl_->shards) {
    std::lock_guard<std::mutex> lock(shard->mu);
    removed += shard->store.erase_if(
        [&](const Store::Item& item) { return cache::built_from(item.value.metadata(), entry_id); },
        [&](const Store::Item& item) {
          if (hot_keys && item.hits.load(std::memory_order_relaxed) >= min_hits) hot_keys->push_back(item.key);
        });
  }
  impl_->invalidations.fetch_add(removed, std::memory_order_relaxed);
  return removed;
}

void ResultCache::clear() {
  for (auto& shard : impl_->shards) {
    std::lock_guard<std::mutex> lock(shard->mu);
    shard->store.clear();
  }
}

ResultCacheStats ResultCache::stats() const {
  ResultCacheStats s;
  s.hits = impl_->hits.load(std::memory_order_relaxed);
  s.misses = impl_->misses.load(std::memory_order_relaxed);
  s.expirations = impl_->lookup_expirations.load(std::memory_order_relaxed);
  s.invalidations = impl_->invalidations.load(std::memory_order_relaxed);
  for (const auto& shard : impl_->shards) {
    std::lock_guard<std::mutex> lock(shard->mu);
    s.size += shard->store.size();
    s.bytes += shard->store.bytes();
    s.expirations += shard->store.expirations();
    s.evictions += shard->store.evictions();
  }
  return s;
}

}  // namespace rapidqa

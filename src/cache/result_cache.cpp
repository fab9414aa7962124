#include "rapidqa/result_cache.h"

#include <algorithm>
#include <atomic>
#include <functional>
#include <list>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "cache/answer_provenance.h"

namespace rapidqa {
namespace {

struct Slot {
  std::string key;
  Answer answer;
  Clock::time_point expires_at;
  std::uint64_t hits = 0;
};

// One lock domain: an LRU list (most recent first) and a key index into it.
struct Shard {
  mutable std::mutex mu;
  std::list<Slot> lru;                                             // guarded by mu
  std::unordered_map<std::string, std::list<Slot>::iterator> map;  // guarded by mu
};

}  // namespace

struct ResultCache::Impl {
  ResultCacheOptions options;
  std::size_t shard_capacity = 1;
  std::vector<Shard> shards;
  std::atomic<std::uint64_t> hits{0}, misses{0}, expirations{0}, evictions{0}, invalidations{0};

  Shard& shard_for(const std::string& key) { return shards[std::hash<std::string>{}(key) % shards.size()]; }
};

ResultCache::ResultCache(ResultCacheOptions options) : impl_(std::make_unique<Impl>()) {
  if (options.shards == 0) options.shards = 1;
  if (options.capacity < options.shards) options.shards = std::max<std::size_t>(1, options.capacity);
  if (!options.clock) options.clock = steady_clock_instance();
  impl_->options = options;
  impl_->shard_capacity = std::max<std::size_t>(1, options.capacity / options.shards);
  impl_->shards = std::vector<Shard>(options.shards);
}

ResultCache::~ResultCache() = default;

std::optional<Answer> ResultCache::lookup(const std::string& key) {
  Shard& shard = impl_->shard_for(key);
  const auto now = impl_->options.clock->now();
  std::lock_guard<std::mutex> lock(shard.mu);
  const auto it = shard.map.find(key);
  if (it == shard.map.end()) {
    impl_->misses.fetch_add(1, std::memory_order_relaxed);
    return std::nullopt;
  }
  if (now >= it->second->expires_at) {
    shard.lru.erase(it->second);
    shard.map.erase(it);
    impl_->expirations.fetch_add(1, std::memory_order_relaxed);
    impl_->misses.fetch_add(1, std::memory_order_relaxed);
    return std::nullopt;
  }
  shard.lru.splice(shard.lru.begin(), shard.lru, it->second);
  ++it->second->hits;
  impl_->hits.fetch_add(1, std::memory_order_relaxed);
  return it->second->answer;
}

void ResultCache::insert(const std::string& key, Answer answer) {
  if (impl_->options.capacity == 0) return;
  Shard& shard = impl_->shard_for(key);
  const auto expires_at = impl_->options.clock->now() + impl_->options.ttl;
  std::lock_guard<std::mutex> lock(shard.mu);
  const auto it = shard.map.find(key);
  if (it != shard.map.end()) {
    it->second->answer = std::move(answer);
    it->second->expires_at = expires_at;
    shard.lru.splice(shard.lru.begin(), shard.lru, it->second);
    return;
  }
  if (shard.map.size() >= impl_->shard_capacity) {
    shard.map.erase(shard.lru.back().key);
    shard.lru.pop_back();
    impl_->evictions.fetch_add(1, std::memory_order_relaxed);
  }
  shard.lru.push_front(Slot{key, std::move(answer), expires_at, 0});
  shard.map.emplace(key, shard.lru.begin());
}

bool ResultCache::erase(const std::string& key) {
  Shard& shard = impl_->shard_for(key);
  std::lock_guard<std::mutex> lock(shard.mu);
  const auto it = shard.map.find(key);
  if (it == shard.map.end()) return false;
  shard.lru.erase(it->second);
  shard.map.erase(it);
  return true;
}

std::size_t ResultCache::invalidate_entry(const std::string& entry_id, std::vector<std::string>* hot_keys,
                                         std::uint64_t min_hits) {
  std::size_t removed = 0;
  for (Shard& shard : impl_->shards) {
    std::lock_guard<std::mutex> lock(shard.mu);
    for (auto it = shard.lru.begin(); it != shard.lru.end();) {
      if (cache::built_from(it->answer, entry_id)) {
        if (hot_keys && it->hits >= min_hits) hot_keys->push_back(it->key);
        shard.map.erase(it->key);
        it = shard.lru.erase(it);
        ++removed;
      } else {
        ++it;
      }
    }
  }
  impl_->invalidations.fetch_add(removed, std::memory_order_relaxed);
  return removed;
}

void ResultCache::clear() {
  for (Shard& shard : impl_->shards) {
    std::lock_guard<std::mutex> lock(shard.mu);
    shard.map.clear();
    shard.lru.clear();
  }
}

ResultCacheStats ResultCache::stats() const {
  ResultCacheStats s;
  s.hits = impl_->hits.load(std::memory_order_relaxed);
  s.misses = impl_->misses.load(std::memory_order_relaxed);
  s.expirations = impl_->expirations.load(std::memory_order_relaxed);
  s.evictions = impl_->evictions.load(std::memory_order_relaxed);
  s.invalidations = impl_->invalidations.load(std::memory_order_relaxed);
  for (const Shard& shard : impl_->shards) {
    std::lock_guard<std::mutex> lock(shard.mu);
    s.size += shard.map.size();
  }
  return s;
}

}  // namespace rapidqa

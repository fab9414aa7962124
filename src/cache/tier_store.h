// TierStore: the bookkeeping every cache tier shares: items with a TTL
// (absolute or sliding), bounded by entry count and by bytes, evicted least
// recently or least frequently used first, with expirations and evictions
// counted.
//
// Victims are chosen by sampling (as Redis does): when room is needed, up to
// `eviction_samples` items are drawn and the worst of them goes; a tier that
// holds no more items than that is scanned whole, so small tiers evict
// exactly. Sampling lets readers record a hit with two atomic stores under a
// shared lock, instead of relinking a list under an exclusive one, which is
// what keeps the semantic tier's lookups concurrent.
//
// Thread safety: thread-compatible, with one concession: find(), live() and
// record_hit() may run concurrently with each other (the owner's shared
// lock); everything else needs exclusive access.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

#include "rapidqa/cache_policy.h"
#include "rapidqa/clock.h"

namespace rapidqa::cache {

struct TierLimits {
  Clock::duration ttl = std::chrono::minutes(5);  // the tier's TTL; items may ask for less
  ExpiryMode expiry = ExpiryMode::kAbsolute;
  std::size_t max_entries = 0;                    // 0: the tier keeps nothing
  std::size_t max_bytes = 0;                      // 0: bounded by entry count only
  EvictionPolicy eviction = EvictionPolicy::kLeastRecentlyUsed;
  std::size_t eviction_samples = 16;              // items compared per eviction
  // How long an expired item is kept (never served as fresh) so a degraded
  // request may still use it; memory is reclaimed after that.
  Clock::duration grace = Clock::duration::zero();
};

// Why an item left the store (for the owner's own bookkeeping).
enum class Removal { kExpired, kEvicted };

template <typename Key, typename Value, typename Hash = std::hash<Key>>
class TierStore {
 public:
  struct Item {
    Item(Key k, Value v, std::size_t b, Clock::duration t, Clock::time_point now, std::uint64_t tick)
        : key(std::move(k)), value(std::move(v)), bytes(b), ttl(t), expires_at((now + t).time_since_epoch().count()),
          last_use(tick) {}
    Key key;
    Value value;
    std::size_t bytes;
    Clock::duration ttl;
    // Written by readers under the owner's shared lock.
    mutable std::atomic<Clock::duration::rep> expires_at;
    mutable std::atomic<std::uint64_t> hits{0};
    // LFU's count: hits plus one for being stored, so a newcomer ties with
    // answers hit once (and wins on recency) instead of always going first;
    // halved as the tier turns over.
    mutable std::atomic<std::uint64_t> frequency{1};
    mutable std::atomic<std::uint64_t> last_use;
  };

  explicit TierStore(TierLimits limits) : limits_(limits) {
    if (limits_.eviction_samples == 0) limits_.eviction_samples = 1;
  }

  const TierLimits& limits() const { return limits_; }

  // The item stored under key, live or not; null when absent.
  const Item* find(const Key& key) const {
    const auto it = position_.find(key);
    return it == position_.end() ? nullptr : items_[it->second].get();
  }
  static bool live(const Item& item, Clock::time_point now) {
    return now.time_since_epoch().count() < item.expires_at.load(std::memory_order_relaxed);
  }
  // How long ago the item expired (zero or negative while live).
  static Clock::duration expired_for(const Item& item, Clock::time_point now) {
    return now.time_since_epoch() - Clock::duration(item.expires_at.load(std::memory_order_relaxed));
  }
  // Past its expiry and its grace: nothing may use it any more.
  bool reclaimable(const Item& item, Clock::time_point now) const {
    return expired_for(item, now) >= limits_.grace;
  }
  // A hit: counts it, marks it recent and, with sliding expiry, restarts its TTL.
  void record_hit(const Item& item, Clock::time_point now) const {
    item.hits.fetch_add(1, std::memory_order_relaxed);
    item.frequency.fetch_add(1, std::memory_order_relaxed);
    item.last_use.store(tick_.fetch_add(1, std::memory_order_relaxed), std::memory_order_relaxed);
    if (limits_.expiry == ExpiryMode::kSliding) {
      item.expires_at.store((now + item.ttl).time_since_epoch().count(), std::memory_order_relaxed);
    }
  }

  // Stores value under key (replacing what was there) for min(ttl, the
  // tier's TTL), making room first. on_remove(const Item&, Removal) sees
  // every item expired or evicted to make room, before it is destroyed.
  // Returns false, storing nothing (and having removed what was under key),
  // when the item can never fit (bigger than max_bytes, or a tier that
  // keeps nothing).
  template <typename OnRemove>
  bool insert(Key key, Value value, std::size_t bytes, Clock::duration ttl, Clock::time_point now,
              OnRemove&& on_remove) {
    erase(key);  // even when the new value cannot be stored, the old one is replaced
    if (limits_.max_entries == 0 || (limits_.max_bytes != 0 && bytes > limits_.max_bytes)) return false;
    sweep_expired(now, on_remove);
    while (!items_.empty() && (items_.size() + 1 > limits_.max_entries ||
                               (limits_.max_bytes != 0 && bytes_ + bytes > limits_.max_bytes))) {
      evict_one(now, on_remove);
    }
    if (ttl <= Clock::duration::zero() || ttl > limits_.ttl) ttl = limits_.ttl;
    items_.push_back(std::make_unique<Item>(std::move(key), std::move(value), bytes, ttl, now,
                                            tick_.fetch_add(1, std::memory_order_relaxed)));
    position_.emplace(items_.back()->key, items_.size() - 1);
    bytes_ += bytes;
    if (limits_.eviction == EvictionPolicy::kLeastFrequentlyUsed && ++inserts_since_decay_ >= limits_.max_entries) {
      decay_hits();
    }
    return true;
  }

  // Removes key; returns whether it was there.
  bool erase(const Key& key) {
    const auto it = position_.find(key);
    if (it == position_.end()) return false;
    remove_at(it->second);
    return true;
  }

  // Removes every item for which pred(const Item&) holds, calling
  // before_remove(const Item&) on each first; returns how many.
  template <typename Pred, typename BeforeRemove>
  std::size_t erase_if(Pred&& pred, BeforeRemove&& before_remove) {
    std::size_t removed = 0;
    for (std::size_t i = 0; i < items_.size();) {
      if (pred(*items_[i])) {
        before_remove(*items_[i]);
        remove_at(i);  // the last item moved into i: look at i again
        ++removed;
      } else {
        ++i;
      }
    }
    return removed;
  }

  // Calls f(const Item&) on every item, live or not.
  template <typename F>
  void for_each(F&& f) const {
    for (const auto& item : items_) f(*item);
  }

  void clear() {
    items_.clear();
    position_.clear();
    bytes_ = 0;
  }

  std::size_t size() const { return items_.size(); }
  std::size_t bytes() const { return bytes_; }
  std::uint64_t expirations() const { return expirations_; }
  std::uint64_t evictions() const { return evictions_; }

 private:
  // Whether a would be evicted before b.
  bool colder(const Item& a, const Item& b) const {
    const auto a_use = a.last_use.load(std::memory_order_relaxed), b_use = b.last_use.load(std::memory_order_relaxed);
    if (limits_.eviction == EvictionPolicy::kLeastFrequentlyUsed) {
      const auto a_freq = a.frequency.load(std::memory_order_relaxed);
      const auto b_freq = b.frequency.load(std::memory_order_relaxed);
      if (a_freq != b_freq) return a_freq < b_freq;
    }
    return a_use < b_use;
  }

  std::size_t random_position() { return static_cast<std::size_t>(next_random() % items_.size()); }
  std::uint64_t next_random() {  // splitmix64: deterministic, so evictions are reproducible
    std::uint64_t z = (random_state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }

  // Drops the coldest of a sample (an expired item first, if the sample has one).
  template <typename OnRemove>
  void evict_one(Clock::time_point now, OnRemove& on_remove) {
    const bool whole = items_.size() <= limits_.eviction_samples;
    const std::size_t draws = whole ? items_.size() : limits_.eviction_samples;
    std::size_t victim = whole ? 0 : random_position();
    for (std::size_t d = 0; d < draws; ++d) {
      const std::size_t i = whole ? d : random_position();
      if (!live(*items_[i], now)) {  // expired, in its grace or not: the first to go
        victim = i;
        break;
      }
      if (colder(*items_[i], *items_[victim])) victim = i;
    }
    const Removal why = live(*items_[victim], now) ? Removal::kEvicted : Removal::kExpired;
    ++(why == Removal::kEvicted ? evictions_ : expirations_);
    on_remove(*items_[victim], why);
    remove_at(victim);
  }

  // Reclaims a few expired items per insert, so memory held by answers
  // nobody asks for again is returned without a full scan.
  template <typename OnRemove>
  void sweep_expired(Clock::time_point now, OnRemove& on_remove) {
    for (int probe = 0; probe < 4 && !items_.empty(); ++probe) {
      const std::size_t i = random_position();
      if (!reclaimable(*items_[i], now)) continue;
      ++expirations_;
      on_remove(*items_[i], Removal::kExpired);
      remove_at(i);
    }
  }

  void remove_at(std::size_t i) {
    bytes_ -= items_[i]->bytes;
    position_.erase(items_[i]->key);
    if (i + 1 != items_.size()) {
      items_[i] = std::move(items_.back());
      position_[items_[i]->key] = i;
    }
    items_.pop_back();
  }

  void decay_hits() {
    inserts_since_decay_ = 0;
    for (auto& item : items_) {
      item->frequency.store(std::max<std::uint64_t>(1, item->frequency.load(std::memory_order_relaxed) / 2),
                            std::memory_order_relaxed);
    }
  }

  TierLimits limits_;
  std::vector<std::unique_ptr<Item>> items_;          // dense, for sampling
  std::unordered_map<Key, std::size_t, Hash> position_;  // key -> index in items_
  std::size_t bytes_ = 0;
  std::uint64_t expirations_ = 0, evictions_ = 0;
  std::size_t inserts_since_decay_ = 0;
  std::uint64_t random_state_ = 0x5eed;
  mutable std::atomic<std::uint64_t> tick_{0};  // logical time of uses, for recency
};

}  // namespace rapidqa::cache

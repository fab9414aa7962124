// ResultCache: an exact tier. Maps a CacheKey (a normalised question and
// its tenant) to the Answer given for it, for a limited time (TTL, absolute or
// sliding, per cache and per answer) within bounds on entries and bytes
// (least recently or least frequently used first out). A hit costs one hash
// and one lock of a shard, so it answers repeated questions in
// microseconds. QAEngine keeps two: the result tier (finished answers,
// 5 min) and the knowledge tier (what retrieval and the reader found for a
// question, 24 h, checked against the entries' versions on every hit).
//
// Thread safety: thread-safe. The cache is split into shards, each with its
// own mutex, so concurrent askers rarely wait on each other.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "rapidqa/answer.h"
#include "rapidqa/cache_key.h"
#include "rapidqa/cache_policy.h"
#include "rapidqa/clock.h"
#include "rapidqa/export.h"
#include "rapidqa/status.h"

namespace rapidqa {

struct ResultCacheOptions {
  std::size_t capacity = 100000;              // most entries kept (all shards together); 0 keeps nothing
  // Most bytes of answers and keys kept (256 MiB; 0 = no byte bound). Each
  // answer counts its whole text although tiers share one copy of a text,
  // so the bound holds however the answers overlap. Split evenly between
  // the shards: one answer larger than a shard's share is not cached.
  std::size_t capacity_bytes = std::size_t{256} << 20;
  std::chrono::milliseconds ttl{5 * 60 * 1000};  // expiry (5 min); an insert may ask for less
  ExpiryMode expiry = ExpiryMode::kAbsolute;  // TTL from insertion, or from the last hit
  EvictionPolicy eviction = EvictionPolicy::kLeastRecentlyUsed;  // what goes first when full
  // Expired answers are kept this much longer (never served as fresh, still
  // counted in the bounds) for lookup_stale(); 0 = dropped at expiry.
  std::chrono::milliseconds stale_grace{0};
  std::size_t shards = 16;                    // independent lock domains, 1 to 4096 (at most `capacity` are used)
  std::shared_ptr<Clock> clock;               // time source; null = steady clock
};

// The knowledge tier's defaults: the same store with a 24 h TTL.
inline ResultCacheOptions knowledge_cache_defaults() {
  ResultCacheOptions o;
  o.ttl = std::chrono::hours(24);
  return o;
}

struct ResultCacheStats {
  std::uint64_t hits = 0;
  std::uint64_t misses = 0;       // includes lookups that found an expired entry
  std::uint64_t expirations = 0;  // entries dropped because their TTL passed
  std::uint64_t evictions = 0;    // entries dropped to stay within capacity (entries or bytes)
  std::uint64_t invalidations = 0;// entries dropped because their knowledge changed
  std::size_t size = 0;           // entries held now
  std::size_t bytes = 0;          // estimated bytes held now (answers and keys)
};

// kInvalidArgument naming the field: ttl outside (0, one year], stale_grace
// outside [0, one year], shards outside [1, 4096].
RAPIDQA_EXPORT Status validate_result_cache_options(const ResultCacheOptions& options);

class RAPIDQA_EXPORT ResultCache {
 public:
  // Refuses bad options (validate_result_cache_options) rather than fixing them.
  static Result<std::unique_ptr<ResultCache>> create(ResultCacheOptions options = {});
  // Deprecated in 0.2, removed in 0.3: takes 0 shards as 1 instead of refusing.
  [[deprecated("use ResultCache::create(), which refuses bad options")]] explicit ResultCache(
      ResultCacheOptions options = {});
  ~ResultCache();
  ResultCache(const ResultCache&) = delete;
  ResultCache& operator=(const ResultCache&) = delete;

  // The answer stored under key if it has not expired; counts the hit
  // (recency, frequency, and with sliding expiry a fresh TTL). An expired
  // entry is removed and never returned.
  std::optional<Answer> lookup(const CacheKey& key);
  // The same, except that a miss is not counted: for a first, cheap look
  // that falls back to the full ask (which looks again, and counts).
  std::optional<Answer> lookup_if_present(const CacheKey& key);

  // Stores (or replaces) the answer for key for the cache's TTL, or for ttl
  // when positive and shorter; evicts by the policy when the shard is full
  // by count or by bytes. An answer larger than the shard's byte bound is
  // not stored.
  void insert(const CacheKey& key, Answer answer, std::chrono::milliseconds ttl = std::chrono::milliseconds(0));

  // The last resort of a degraded request: the answer under key even if it
  // expired, as long as it expired at most max_age ago (and within
  // stale_grace). *age receives how long ago it expired (zero when live).
  std::optional<Answer> lookup_stale(const CacheKey& key, std::chrono::milliseconds max_age,
                                     std::chrono::milliseconds* age = nullptr) const;

  // Removes key; returns whether it was there.
  bool erase(const CacheKey& key);

  // Removes every answer that was built from the given knowledge entry;
  // returns how many. hot_keys, when given, receives the keys of those that
  // had been hit at least min_hits times (worth re-answering ahead of time).
  std::size_t invalidate_entry(const std::string& entry_id, std::vector<CacheKey>* hot_keys = nullptr,
                               std::uint64_t min_hits = 1);

  void clear();
  ResultCacheStats stats() const;

 private:
  struct Checked {};  // options already validated
  ResultCache(Checked, ResultCacheOptions options);
  std::optional<Answer> find(const CacheKey& key, bool count_miss);
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace rapidqa

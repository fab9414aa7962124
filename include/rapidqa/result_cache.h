// ResultCache: the exact tier. Maps a normalised question to the Answer
// given for it, for a limited time (TTL) and a bounded number of entries
// (least recently used first out). A hit costs one hash and one lock of a
// shard, so it answers repeated questions in microseconds.
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
#include "rapidqa/clock.h"
#include "rapidqa/export.h"

namespace rapidqa {

struct ResultCacheOptions {
  std::size_t capacity = 100000;              // most entries kept (all shards together)
  std::chrono::milliseconds ttl{5 * 60 * 1000};  // expiry after insertion (5 min)
  std::size_t shards = 16;                    // independent lock domains; at least 1
  std::shared_ptr<Clock> clock;               // time source; null = steady clock
};

struct ResultCacheStats {
  std::uint64_t hits = 0;
  std::uint64_t misses = 0;       // includes lookups that found an expired entry
  std::uint64_t expirations = 0;  // entries dropped because their TTL passed
  std::uint64_t evictions = 0;    // entries dropped to stay within capacity
  std::uint64_t invalidations = 0;// entries dropped because their knowledge changed
  std::size_t size = 0;           // entries held now
};

class RAPIDQA_EXPORT ResultCache {
 public:
  explicit ResultCache(ResultCacheOptions options = {});
  ~ResultCache();
  ResultCache(const ResultCache&) = delete;
  ResultCache& operator=(const ResultCache&) = delete;

  // The answer stored under key if it has not expired; refreshes its
  // recency. An expired entry is removed and never returned.
  std::optional<Answer> lookup(const std::string& key);

  // Stores (or replaces) the answer for key, evicting the least recently
  // used entry of the shard when it is full.
  void insert(const std::string& key, Answer answer);

  // Removes key; returns whether it was there.
  bool erase(const std::string& key);

  // Removes every answer that was built from the given knowledge entry;
  // returns how many. hot_keys, when given, receives the keys of those that
  // had been hit at least min_hits times (worth re-answering ahead of time).
  std::size_t invalidate_entry(const std::string& entry_id, std::vector<std::string>* hot_keys = nullptr,
                               std::uint64_t min_hits = 1);

  void clear();
  ResultCacheStats stats() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace rapidqa

// SemanticCache: the similar-question tier. Holds the vectors of recently
// answered questions in a FAISS index; a new question whose vector is close
// enough (cosine similarity at or above the threshold) to a cached one gets
// that answer without retrieval or inference.
//
// Thread safety: thread-safe. Lookups share a reader lock; inserts and
// invalidations take the writer lock.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "rapidqa/answer.h"
#include "rapidqa/clock.h"
#include "rapidqa/export.h"
#include "rapidqa/status.h"

namespace rapidqa {

struct SemanticCacheOptions {
  std::size_t dimension = 384;                  // vector length; must match the encoder
  float similarity_threshold = 0.92f;           // cosine needed for a hit, in (0, 1]
  std::chrono::milliseconds ttl{60 * 60 * 1000};// expiry after insertion (1 h)
  std::size_t capacity = 100000;                // most entries; the oldest go first
  std::size_t exact_index_limit = 4096;         // above this many vectors, search HNSW instead of flat
  std::shared_ptr<Clock> clock;                 // time source; null = steady clock
};

struct SemanticLookup {
  std::optional<Answer> answer;   // set on a hit
  float nearest_similarity = -1;  // best similarity seen, hit or not (-1: cache empty)
};

struct SemanticCacheStats {
  std::uint64_t hits = 0;
  std::uint64_t misses = 0;
  std::uint64_t expirations = 0;
  std::uint64_t evictions = 0;
  std::uint64_t invalidations = 0;
  std::size_t size = 0;
};

class RAPIDQA_EXPORT SemanticCache {
 public:
  // Fails with kInvalidArgument on a zero dimension or a threshold outside
  // (0, 1].
  static Result<std::unique_ptr<SemanticCache>> create(SemanticCacheOptions options);
  ~SemanticCache();
  SemanticCache(const SemanticCache&) = delete;
  SemanticCache& operator=(const SemanticCache&) = delete;

  // Looks up the nearest cached question; vector holds dimension() floats,
  // L2-normalised. Expired entries are never returned.
  SemanticLookup lookup(const float* vector) const;

  // Caches answer under the question vector (copied). A cached question at
  // similarity >= 0.999 is replaced rather than duplicated.
  void insert(const float* vector, Answer answer);

  // Removes every answer built from the given knowledge entry; returns how many.
  std::size_t invalidate_entry(const std::string& entry_id);

  void clear();
  std::size_t dimension() const;
  SemanticCacheStats stats() const;

 private:
  explicit SemanticCache(SemanticCacheOptions options);
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace rapidqa

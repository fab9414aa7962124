// SemanticCache: the similar-question tier. Holds the vectors of recently
// answered questions in a FAISS index; a new question whose vector is close
// enough (cosine similarity at or above the threshold) to a cached one gets
// that answer without retrieval or inference, unless the two questions ask
// opposite things (a negation, an opposite key term such as open/close or
// 开户/销户, a different number): that near miss is refused.
//
// Every entry and lookup belongs to a namespace (a tenant); each namespace
// has its own index, so a lookup can never return another namespace's
// answer.
//
// Thread safety: thread-safe. Lookups share a reader lock; inserts and
// invalidations take the writer lock.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
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

struct SemanticCacheOptions {
  std::size_t dimension = 384;                  // vector length; must match the encoder
  float similarity_threshold = 0.92f;           // cosine needed for a hit, in (0, 1]
  // Per-namespace thresholds, overriding similarity_threshold for a tenant
  // (a request's own threshold overrides both); each in (0, 1].
  std::map<std::string, float> tenant_thresholds;
  std::chrono::milliseconds ttl{60 * 60 * 1000};// expiry (1 h); an insert may ask for less
  ExpiryMode expiry = ExpiryMode::kAbsolute;    // TTL from insertion, or from the last hit
  std::size_t capacity = 100000;                // most entries, all namespaces together; 0 keeps nothing
  std::size_t capacity_bytes = std::size_t{256} << 20;  // most bytes (answers, questions, vectors, index; 256 MiB); 0 = no bound
  EvictionPolicy eviction = EvictionPolicy::kLeastRecentlyUsed;  // what goes first when full
  std::size_t exact_index_limit = 4096;         // above this many vectors, search HNSW instead of flat
  // The HNSW graph of each namespace (see docs/semantic-cache-scale.md:
  // these give recall@1 0.9985 at 100k entries; 1M needs a search breadth
  // of about 256 for 0.99).
  int hnsw_neighbors = 32;                      // graph degree (M), >= 2
  int hnsw_build_breadth = 80;                  // candidates kept while inserting (efConstruction), >= 1
  int hnsw_search_breadth = 64;                 // candidates kept while searching (efSearch), >= 1
  // Error-bound hit decisions: when set, in (0, 0.5], each cached question
  // gets its own threshold, learned from verified outcomes so that at most
  // this share of hits name a different entry than full retrieval would
  // (one-sided 95% bound; see docs/answer-quality.md). Every miss is such
  // an outcome, compared by the engine after its retrieval; a would-be hit
  // is verified the same way with probability verification_rate (and
  // answered by retrieval then). similarity_threshold is where a namespace
  // starts, before outcomes accumulate. A tenant's or a request's own
  // threshold overrides this mode for its lookups.
  std::optional<float> target_error_rate;
  float verification_rate = 0.05f;              // in (0, 1]
  std::shared_ptr<Clock> clock;                 // time source; null = steady clock
  // A secret that authenticates snapshots (HMAC-SHA256): when set, saved
  // snapshots carry a MAC and load_snapshot refuses any file without a
  // matching one. Empty: snapshots are checksummed only, which catches
  // accidents, not someone who can write the file.
  std::string snapshot_key;
};

// Per-lookup settings.
struct SemanticQuery {
  std::string tenant;                        // namespace; "" is the default one
  std::optional<float> similarity_threshold; // overrides the cache's threshold for this lookup
};

// A cached answer to check against full retrieval (error-bound mode):
// give it to SemanticCache::record_outcome with what retrieval answered.
struct HitObservation {
  std::string tenant;
  std::int64_t cached = -1;  // the cached question
  float similarity = 0;
  float lead = 0;            // similarity less the next cached question's
  std::string entry_id;      // the entry its answer names
  double weight = 1;         // 1 / the probability this outcome was asked for
};

struct SemanticLookup {
  std::optional<Answer> answer;   // set on a hit
  float nearest_similarity = -1;  // best similarity seen, hit or not (-1: nothing cached in the namespace)
  std::string refused_reason;     // why a close enough question was refused ("negation", "open/close"), or ""
  float threshold = -1;           // what the nearest cached question needed (-1: nothing cached)
  std::string decision;           // the decision in words: similarity, threshold, why
  // Error-bound mode: the outcome to record once retrieval has answered
  // (after a miss, or a would-be hit chosen for verification).
  std::optional<HitObservation> observation;
};

// A group of similar cached questions: what users keep asking.
struct CachedIntent {
  std::string representative_question;  // the cached question nearest the group's centre
  std::string entry_id;                 // the entry that answers it ("" when none)
  std::size_t questions = 0;            // distinct cached questions in the group
};

struct SemanticCacheStats {
  std::uint64_t hits = 0;
  std::uint64_t misses = 0;
  std::uint64_t expirations = 0;
  std::uint64_t evictions = 0;
  std::uint64_t invalidations = 0;
  std::uint64_t near_miss_refusals = 0;  // hits refused because the questions ask opposite things
  std::uint64_t displacements = 0;       // answers dropped because an added entry now answers better
  std::size_t size = 0;                  // entries held now
  std::size_t bytes = 0;                 // estimated bytes held now
  // Error-bound mode: outcomes recorded, how many named another entry, and
  // the would-be hits answered by retrieval to check them.
  std::uint64_t outcomes = 0;
  std::uint64_t wrong_outcomes = 0;
  std::uint64_t verifications = 0;
};

// A cached question, as reported by SemanticCache::displace: the same
// key the exact tiers file it under.
using CachedQuestion = CacheKey;

class RAPIDQA_EXPORT SemanticCache {
 public:
  // Fails with kInvalidArgument on a zero dimension or a threshold (global
  // or per tenant) outside (0, 1].
  static Result<std::unique_ptr<SemanticCache>> create(SemanticCacheOptions options);
  ~SemanticCache();
  SemanticCache(const SemanticCache&) = delete;
  SemanticCache& operator=(const SemanticCache&) = delete;

  // Looks up the nearest cached question of the query's namespace; vector
  // holds dimension() floats, L2-normalised, and question is the normalised
  // question text (for the near-miss check). Expired entries are never
  // returned.
  SemanticLookup lookup(const float* vector, const std::string& question, const SemanticQuery& query = {}) const;

  // Caches answer under the question vector (copied) in a namespace, for
  // the cache's TTL or ttl when positive and shorter. A cached question of
  // that namespace at similarity >= 0.999 is replaced rather than
  // duplicated. When full (entries or bytes) the eviction policy makes room.
  // Nothing is stored for a vector that is not finite and unit length, or an
  // answer that could never be invalidated (no entry match, a fallback, a
  // non-finite score): such an entry would hit every question or none.
  void insert(const float* vector, const std::string& question, Answer answer, const std::string& tenant = "",
              std::chrono::milliseconds ttl = std::chrono::milliseconds(0));

  // Error-bound mode: what full retrieval answered for a lookup's question
  // (the entry id, "" for the fallback), for the observation the lookup
  // asked for. Right when it names the cached answer's entry.
  void record_outcome(const HitObservation& observation, const std::string& retrieved_entry_id);

  // Sets (or with nullopt removes) a namespace's own similarity threshold.
  // kInvalidArgument for a threshold outside (0, 1].
  Status set_tenant_threshold(const std::string& tenant, std::optional<float> threshold);

  // A new knowledge entry with these phrasing vectors (count of them, each
  // dimension() floats) would now beat some cached answers: those whose
  // question is more similar to one of the phrasings than the cached
  // answer's own score. Removes them, in every namespace, and returns which
  // questions they were (so the exact tiers can drop them too). Answers
  // scoring below min_score were fallbacks, which are never cached.
  std::vector<CachedQuestion> displace(const float* vectors, std::size_t count, float min_score);

  // Removes every answer built from the given knowledge entry; returns how many.
  std::size_t invalidate_entry(const std::string& entry_id);

  // Removes the answers cached for this exact (normalised) question in a
  // namespace; returns how many.
  std::size_t erase_question(const std::string& question, const std::string& tenant = "");

  // Writes every live entry (vector, question, namespace, answer, time to
  // live left) to a snapshot file: a temporary file, fsync, then rename, so
  // a crash never leaves a half-written snapshot under the name. kIoError
  // when the file cannot be written.
  Status save_snapshot(const std::string& path) const;
  // Replaces the cache's contents with a snapshot's. A missing file is
  // kNotFound; a corrupt, truncated or other-version file, or one of another
  // dimension, is refused whole (kDataLoss / kFailedPrecondition) and the
  // cache is left empty: it never serves entries from a half-read file.
  // A snapshot is data, not trusted code, and its checksum only catches
  // accidents: every entry is validated (finite unit vectors, known tiers,
  // entry provenance, bounded sizes and nesting) and a file with a bad one
  // is refused whole with the entry named. A file larger than 4x
  // capacity_bytes (at least 64 MiB) is refused with kOutOfRange unread.
  // keep decides, per cached answer, whether it may be loaded (null: all).
  Result<std::size_t> load_snapshot(const std::string& path,
                                    const std::function<bool(const Answer&)>& keep = nullptr);

  // Clusters a namespace's cached questions with FAISS k-means (spherical,
  // seeded, so the same cache gives the same groups) into at most
  // `intents` groups, largest first.
  std::vector<CachedIntent> top_intents(std::size_t intents, const std::string& tenant = "") const;

  void clear();
  std::size_t dimension() const;
  SemanticCacheStats stats() const;

 private:
  explicit SemanticCache(SemanticCacheOptions options);
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace rapidqa

#include "rapidqa/semantic_cache.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <map>
#include <mutex>
#include <shared_mutex>

#include <fmt/format.h>

#include "cache/answer_provenance.h"
#include "cache/cached_answer.h"
#include "cache/hit_decision.h"
#include "cache/near_miss_guard.h"
#include "cache/snapshot_codec.h"
#include "cache/tier_store.h"
#include "common/bounded_json.h"
#include "common/guard.h"
#include "common/squared_norm.h"
#include "index/inner_product.h"
#include "index/spherical_kmeans.h"
#include "index/vector_index.h"

namespace rapidqa {
namespace {

struct CachedEntry {
  cache::CachedAnswer answer;
  std::string question;  // normalised, for the near-miss check
  std::string tenant;
};

using Store = cache::TierStore<std::int64_t, CachedEntry>;

// The outcome a lookup asks the engine to record for a cached question.
HitObservation observation_of(const std::string& tenant, std::int64_t label, const Store::Item& item, float similarity,
                              float lead, double weight) {
  HitObservation o;
  o.tenant = tenant;
  o.cached = label;
  o.similarity = similarity;
  o.lead = lead;
  o.entry_id = item.value.answer.metadata().entry_id();
  o.weight = weight;
  return o;
}

// Similarity at which a new question counts as the same cached question.
constexpr float kSameQuestionSimilarity = 0.999f;
// Bounds of what a snapshot may hold (the engine refuses longer tenants and
// questions before they are ever cached).
constexpr std::size_t kMaxTenantBytes = 256;
constexpr std::size_t kMaxCachedQuestionBytes = 1 << 20;
// Nearest neighbours inspected per lookup, so a few expired entries at the
// top do not hide a live one just behind them.
constexpr std::size_t kLookupNeighbors = 4;

// splitmix64: the verification draw of the n-th lookup, so a run is
// repeatable and lookups need no shared generator.
std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

Status check_threshold(float threshold, const std::string& what) {
  if (threshold > 0.0f && threshold <= 1.0f) return Status::ok();
  return Status::invalid_argument(fmt::format("semantic cache: {} {} is outside (0, 1]", what, threshold));
}

// The vector scaled to unit length, so similarities are cosines whatever
// the encoder returns: the vector itself when it already is, a copy in
// scratch when not, null when it cannot be (a NaN or infinity, length 0).
const float* unit_length(const float* vector, std::size_t dimension, std::vector<float>& scratch) {
  const double squared = squared_norm(vector, dimension);
  if (!std::isfinite(squared) || squared <= 0) return nullptr;
  if (std::fabs(squared - 1.0) < 1e-5) return vector;
  const double scale = 1.0 / std::sqrt(squared);
  scratch.resize(dimension);
  for (std::size_t i = 0; i < dimension; ++i) scratch[i] = static_cast<float>(vector[i] * scale);
  return scratch.data();
}

}  // namespace

struct SemanticCache::Impl {
  explicit Impl(const SemanticCacheOptions& o) : options(o), store(limits_of(o)) {
    // What one vector costs beyond the answer: the float copy, the int8
    // copy and graph links once the index is HNSW, and the label maps.
    vector_bytes = options.dimension * sizeof(float) + options.dimension + sizeof(float) +
                   2 * static_cast<std::size_t>(options.hnsw_neighbors) * sizeof(std::int32_t) + 64;
  }

  static cache::TierLimits limits_of(const SemanticCacheOptions& o) {
    cache::TierLimits limits;
    limits.ttl = o.ttl;
    limits.expiry = o.expiry;
    limits.max_entries = o.capacity;
    limits.max_bytes = o.capacity_bytes;
    limits.eviction = o.eviction;
    return limits;
  }

  SemanticCacheOptions options;  // tenant_thresholds guarded by mu
  std::size_t vector_bytes = 0;
  cache::NearMissGuard guard;
  mutable std::shared_mutex mu;
  std::map<std::string, index::VectorIndex> indexes;  // guarded by mu; one per namespace
  Store store;                                        // guarded by mu (hits recorded under the shared lock)
  std::int64_t next_label = 0;                        // guarded by mu
  mutable std::atomic<std::uint64_t> hits{0}, misses{0}, refusals{0}, draws{0}, verifications{0};
  std::atomic<std::uint64_t> outcomes{0}, wrong_outcomes{0};
  // Error-bound mode: one learner per namespace. Taken after mu, never
  // before it.
  mutable std::mutex learn_mu;
  std::map<std::string, cache::ErrorBoundLearner> learners;  // guarded by learn_mu
  std::atomic<std::uint64_t> invalidations{0}, displacements{0};

  index::VectorIndex& index_for(const std::string& tenant) {  // needs mu held exclusively
    auto it = indexes.find(tenant);
    if (it == indexes.end()) {
      it = indexes.emplace(tenant, index::VectorIndex({options.dimension, options.exact_index_limit, options.hnsw_neighbors,
                                                            options.hnsw_build_breadth, options.hnsw_search_breadth}))
               .first;
    }
    return it->second;
  }

  // The namespace's learner, made on first use; needs learn_mu held. A
  // namespace has one while it has cached questions (see unindex).
  cache::ErrorBoundLearner& learner_for(const std::string& tenant) {
    auto it = learners.find(tenant);
    if (it == learners.end()) {
      it = learners.emplace(tenant, cache::ErrorBoundLearner(*options.target_error_rate, options.similarity_threshold))
               .first;
    }
    return it->second;
  }

  // Takes a label out of its namespace's index; the store item goes
  // separately. A namespace left empty loses its learner too, so tenants
  // that come and go leave nothing behind.
  void unindex(const Store::Item& item) {  // needs mu held exclusively
    bool emptied = false;
    if (const auto it = indexes.find(item.value.tenant); it != indexes.end()) {
      it->second.remove(item.key);
      emptied = it->second.size() == 0;
      if (emptied) indexes.erase(it);
    }
    if (!options.target_error_rate) return;
    std::lock_guard<std::mutex> learning(learn_mu);
    const auto learner = learners.find(item.value.tenant);
    if (learner == learners.end()) return;
    if (emptied) {
      learners.erase(learner);
    } else {
      learner->second.forget(item.key);
    }
  }

  void erase_label(std::int64_t label) {  // needs mu held exclusively
    if (const Store::Item* item = store.find(label)) {
      unindex(*item);
      store.erase(label);
    }
  }

  // Stores an entry for ttl (the answer's own, for sliding renewals), its
  // first expiry `left` from now when given (a snapshot's time left); needs
  // mu held exclusively.
  void store_entry(const float* vector, CachedEntry entry, Clock::duration ttl, Clock::time_point now,
                   std::optional<Clock::duration> left = std::nullopt) {
    const std::size_t bytes = sizeof(Store::Item) + entry.answer.bytes() + entry.question.capacity() +
                              entry.tenant.capacity() + vector_bytes;
    const std::int64_t label = next_label;
    const std::string tenant = entry.tenant;
    const bool stored = store.insert(label, std::move(entry), bytes, ttl, now,
                                     [this](const Store::Item& item, cache::Removal) { unindex(item); });
    if (!stored) return;
    if (left) {
      const Store::Item* item = store.find(label);
      item->expires_at.store((now + std::min(*left, item->ttl)).time_since_epoch().count(), std::memory_order_relaxed);
    }
    ++next_label;
    index_for(tenant).upsert(label, vector);
  }

  // Drops the namespace's cached question this vector repeats (similarity
  // >= 0.999), which a new insert replaces; needs mu held exclusively.
  void erase_same_question(const std::string& tenant, const float* vector) {
    const auto index = indexes.find(tenant);
    if (index == indexes.end()) return;
    const auto nearest = index->second.search(vector, 1);
    if (!nearest.empty() && nearest.front().similarity >= kSameQuestionSimilarity) erase_label(nearest.front().label);
  }

  template <typename Pred>
  std::size_t erase_where(Pred&& pred) {  // needs mu held exclusively
    return store.erase_if(pred, [this](const Store::Item& item) { unindex(item); });
  }

  float threshold_for(const SemanticQuery& query) const {  // needs mu held (shared is enough)
    if (query.similarity_threshold) return *query.similarity_threshold;
    const auto it = options.tenant_thresholds.find(query.tenant);
    return it == options.tenant_thresholds.end() ? options.similarity_threshold : it->second;
  }

  // Whether a lookup decides by learned thresholds: error-bound mode, with
  // no threshold of the request's or the tenant's own.
  bool learns_for(const SemanticQuery& query) const {  // needs mu held (shared is enough)
    return options.target_error_rate && !query.similarity_threshold && !options.tenant_thresholds.count(query.tenant);
  }
};

Result<std::unique_ptr<SemanticCache>> SemanticCache::create(SemanticCacheOptions options) {
  if (options.dimension == 0) return Status::invalid_argument("semantic cache: dimension must be positive");
  if (options.hnsw_neighbors < 2 || options.hnsw_build_breadth < 1 || options.hnsw_search_breadth < 1) {
    return Status::invalid_argument(fmt::format(
        "semantic cache: HNSW parameters M {}, efConstruction {}, efSearch {} must be at least 2, 1 and 1",
        options.hnsw_neighbors, options.hnsw_build_breadth, options.hnsw_search_breadth));
  }
  if (options.target_error_rate && !(*options.target_error_rate > 0.0f && *options.target_error_rate <= 0.5f)) {
    return Status::invalid_argument(
        fmt::format("semantic cache: target_error_rate {} is outside (0, 0.5]", *options.target_error_rate));
  }
  if (!(options.verification_rate > 0.0f && options.verification_rate <= 1.0f)) {
    return Status::invalid_argument(
        fmt::format("semantic cache: verification_rate {} is outside (0, 1]", options.verification_rate));
  }
  Status valid = check_threshold(options.similarity_threshold, "similarity_threshold");
  for (const auto& [tenant, threshold] : options.tenant_thresholds) {
    if (valid.is_ok()) {
      valid = check_threshold(threshold, fmt::format("threshold of tenant '{}'", detail::clip_for_message(tenant)));
    }
  }
  if (!valid.is_ok()) return valid;
  if (!options.clock) options.clock = steady_clock_instance();
  return detail::guarded("creating the semantic cache", [&]() -> Result<std::unique_ptr<SemanticCache>> {
    return std::unique_ptr<SemanticCache>(new SemanticCache(options));
  });
}

SemanticCache::SemanticCache(SemanticCacheOptions options) : impl_(std::make_unique<Impl>(options)) {}
SemanticCache::~SemanticCache() = default;

SemanticLookup SemanticCache::lookup(const float* vector, const std::string& question,
                                    const SemanticQuery& query) const {
  SemanticLookup result;
  // A non-finite query (a broken encoder) compares as "not below the
  // threshold" with every cached vector: it must never hit.
  std::vector<float> scratch;
  vector = unit_length(vector, impl_->options.dimension, scratch);
  if (!vector) {
    impl_->misses.fetch_add(1, std::memory_order_relaxed);
    return result;
  }
  const auto now = impl_->options.clock->now();
  std::shared_lock<std::shared_mutex> lock(impl_->mu);
  const float fixed_threshold = impl_->threshold_for(query);
  const bool learning = impl_->learns_for(query);
  const auto index = impl_->indexes.find(query.tenant);
  // The live neighbours, best first (a few expired entries at the top must
  // not hide a live one just behind them).
  std::vector<std::pair<const Store::Item*, index::Neighbor>> live;
  if (index != impl_->indexes.end()) {
    for (const auto& n : index->second.search(vector, kLookupNeighbors)) {
      const Store::Item* item = impl_->store.find(n.label);
      if (item && Store::live(*item, now)) live.emplace_back(item, n);  // expired: reclaimed by a later insert
    }
  }
  if (!live.empty()) result.nearest_similarity = live.front().second.similarity;
  for (std::size_t i = 0; i < live.size(); ++i) {
    const Store::Item& item = *live[i].first;
    const index::Neighbor& n = live[i].second;
    // How far this cached question stands ahead of the next one.
    const float lead = n.similarity - (i + 1 < live.size() ? live[i + 1].second.similarity : 0.0f);
    std::string why = "the fixed threshold";
    float threshold = fixed_threshold;
    if (learning) {
      std::lock_guard<std::mutex> learn(impl_->learn_mu);
      threshold = impl_->learner_for(query.tenant).threshold_for(n.label, lead, &why);
    }
    if (result.threshold < 0) result.threshold = threshold;
    if (n.similarity < threshold) {
      if (result.decision.empty()) {
        result.decision = fmt::format("miss: similarity {:.3f} under {:.3f} ({})", n.similarity, threshold, why);
        if (learning) result.observation = observation_of(query.tenant, n.label, item, n.similarity, lead, 1.0);
      }
      // Neighbours come best first: under a fixed threshold none further
      // can pass. Under learned ones a farther neighbour's could be lower,
      // but the outcomes measure the nearest question's answer, not a
      // farther one's: the nearest decides.
      break;
    }
    std::string conflict = impl_->guard.conflict(item.value.question, question);
    if (!conflict.empty()) {
      // A question that asks the opposite is no answer; a farther
      // neighbour may still be the same question in other words.
      if (result.refused_reason.empty()) result.refused_reason = conflict;
      if (result.decision.empty()) {
        result.decision = fmt::format("miss: a near miss ({}) at similarity {:.3f}", conflict, n.similarity);
      }
      continue;
    }
    const std::string verdict = fmt::format("similarity {:.3f} at or above {:.3f} ({})", n.similarity, threshold, why);
    result.threshold = threshold;
    if (learning) {
      const double rate = impl_->options.verification_rate;
      const std::uint64_t draw = mix(impl_->draws.fetch_add(1, std::memory_order_relaxed));
      if (static_cast<double>(draw >> 11) * 0x1.0p-53 < rate) {
        // Answered by retrieval this time, to check the cached answer.
        result.observation = observation_of(query.tenant, n.label, item, n.similarity, lead, 1.0 / rate);
        result.decision = "verifying a would-be hit by retrieval: " + verdict;
        impl_->verifications.fetch_add(1, std::memory_order_relaxed);
        break;
      }
      result.observation.reset();  // a hit: nothing to compare with
    }
    impl_->store.record_hit(item, now);
    result.answer = item.value.answer.answer();
    result.decision = "hit: " + verdict;
    break;
  }
  if (!result.refused_reason.empty() && !result.answer) impl_->refusals.fetch_add(1, std::memory_order_relaxed);
  (result.answer ? impl_->hits : impl_->misses).fetch_add(1, std::memory_order_relaxed);
  if (result.answer) {
    result.answer->nearest_cached_similarity = result.nearest_similarity;
    result.answer->cache_threshold = result.threshold;
    result.answer->cache_decision = result.decision;
  }
  return result;
}

void SemanticCache::record_outcome(const HitObservation& observation, const std::string& retrieved_entry_id) {
  if (!impl_->options.target_error_rate) return;
  const bool right = !retrieved_entry_id.empty() && retrieved_entry_id == observation.entry_id;
  impl_->outcomes.fetch_add(1, std::memory_order_relaxed);
  if (!right) impl_->wrong_outcomes.fetch_add(1, std::memory_order_relaxed);
  std::vector<cache::ErrorBoundLearner::Outcome> window;
  cache::ErrorBoundLearner::Model from;
  bool first = false;
  {
    // A namespace emptied since the lookup has no learner to teach.
    std::shared_lock<std::shared_mutex> lock(impl_->mu);
    if (!impl_->indexes.count(observation.tenant)) return;
    std::lock_guard<std::mutex> learn(impl_->learn_mu);
    cache::ErrorBoundLearner& learner = impl_->learner_for(observation.tenant);
    if (!learner.record(observation.cached, observation.similarity, observation.lead, right, observation.weight)) {
      return;
    }
    window = learner.window();
    from = learner.model();
    first = !learner.learned();
  }
  // The fit takes a fraction of a millisecond: lookups must not wait on it.
  const auto model = cache::ErrorBoundLearner::fit(window, *impl_->options.target_error_rate, from, first);
  std::lock_guard<std::mutex> learn(impl_->learn_mu);
  const auto learner = impl_->learners.find(observation.tenant);
  // Gone: the cache was cleared or the namespace emptied meanwhile.
  if (learner != impl_->learners.end()) learner->second.install(model);
}

void SemanticCache::insert(const float* vector, const std::string& question, Answer answer, const std::string& tenant,
                           std::chrono::milliseconds ttl) {
  if (impl_->options.capacity == 0) return;
  // A vector with a NaN (a broken model) or of zero length would match
  // everything or nothing: it is never cached. Neither is an answer without
  // provenance, which no knowledge change could ever drop.
  std::vector<float> scratch;
  vector = unit_length(vector, impl_->options.dimension, scratch);
  if (!vector || !cache::cached_answer_problem(answer).empty()) return;
  const auto now = impl_->options.clock->now();
  std::unique_lock<std::shared_mutex> lock(impl_->mu);
  impl_->erase_same_question(tenant, vector);
  impl_->store_entry(vector, CachedEntry{cache::CachedAnswer(std::move(answer)), question, tenant}, ttl, now);
}

Status SemanticCache::set_tenant_threshold(const std::string& tenant, std::optional<float> threshold) {
  if (threshold) {
    Status valid = check_threshold(*threshold, fmt::format("threshold of tenant '{}'", detail::clip_for_message(tenant)));
    if (!valid.is_ok()) return valid;
  }
  std::unique_lock<std::shared_mutex> lock(impl_->mu);
  if (threshold) {
    impl_->options.tenant_thresholds[tenant] = *threshold;
  } else {
    impl_->options.tenant_thresholds.erase(tenant);
  }
  return Status::ok();
}

std::vector<CachedQuestion> SemanticCache::displace(const float* vectors, std::size_t count, float min_score) {
  std::vector<CachedQuestion> displaced;
  const std::size_t d = impl_->options.dimension;
  std::unique_lock<std::shared_mutex> lock(impl_->mu);
  std::vector<std::int64_t> doomed;
  for (const auto& [tenant, index] : impl_->indexes) {
    for (std::size_t p = 0; p < count; ++p) {
      // Widen the search until the farthest neighbour is below any cached
      // answer's score: nothing beyond it can be beaten.
      for (std::size_t k = 16;; k *= 4) {
        const auto neighbours = index.search(vectors + p * d, k);
        for (const auto& n : neighbours) {
          const Store::Item* item = impl_->store.find(n.label);
          if (item && n.similarity > item->value.answer.metadata().score) doomed.push_back(n.label);
        }
        if (neighbours.size() < k || neighbours.back().similarity < min_score) break;
      }
    }
  }
  std::sort(doomed.begin(), doomed.end());
  doomed.erase(std::unique(doomed.begin(), doomed.end()), doomed.end());
  for (auto label : doomed) {
    const Store::Item* item = impl_->store.find(label);
    displaced.push_back({item->value.tenant, item->value.question});
    impl_->erase_label(label);
  }
  impl_->displacements.fetch_add(doomed.size(), std::memory_order_relaxed);
  return displaced;
}

std::size_t SemanticCache::invalidate_entry(const std::string& entry_id) {
  std::unique_lock<std::shared_mutex> lock(impl_->mu);
  const std::size_t removed =
      impl_->erase_where([&](const Store::Item& item) { return cache::built_from(item.value.answer.metadata(), entry_id); });
  impl_->invalidations.fetch_add(removed, std::memory_order_relaxed);
  return removed;
}

std::size_t SemanticCache::erase_question(const std::string& question, const std::string& tenant) {
  std::unique_lock<std::shared_mutex> lock(impl_->mu);
  return impl_->erase_where(
      [&](const Store::Item& item) { return item.value.tenant == tenant && item.value.question == question; });
}

Status SemanticCache::save_snapshot(const std::string& path) const {
  return detail::guarded("saving the semantic cache", [&]() -> Status {
    const auto now = impl_->options.clock->now();
    nlohmann::json entries = nlohmann::json::array();
    {
      std::shared_lock<std::shared_mutex> lock(impl_->mu);
      impl_->store.for_each([&](const Store::Item& item) {
        if (!Store::live(item, now)) return;
        const auto index = impl_->indexes.find(item.value.tenant);
        const float* v = index == impl_->indexes.end() ? nullptr : index->second.vector_of(item.key);
        if (!v) return;
        const auto* bytes = reinterpret_cast<const std::uint8_t*>(v);
        const Clock::time_point expires_at{Clock::duration(item.expires_at.load(std::memory_order_relaxed))};
        entries.push_back(
            {{"tenant", item.value.tenant},
             {"question", item.value.question},
             {"ttl_ms", std::chrono::duration_cast<std::chrono::milliseconds>(expires_at - now).count()},
             {"answer_ttl_ms", std::chrono::duration_cast<std::chrono::milliseconds>(item.ttl).count()},
             {"vector", nlohmann::json::binary(std::vector<std::uint8_t>(
                            bytes, bytes + impl_->options.dimension * sizeof(float)))},
             {"answer", cache::answer_to_json(item.value.answer.answer())}});
      });
    }
    const nlohmann::json doc = {{"dimension", impl_->options.dimension}, {"entries", std::move(entries)}};
    return cache::write_snapshot_file(path, nlohmann::json::to_cbor(doc), impl_->options.snapshot_key);
  });
}

Result<std::size_t> SemanticCache::load_snapshot(const std::string& path,
                                                 const std::function<bool(const Answer&)>& keep) {
  // Nothing here should throw, but an allocation can: the caller gets a
  // Status, never an exception (and the cache what was loaded so far).
  return detail::guarded("loading the semantic cache", [&]() -> Result<std::size_t> {
    clear();  // whatever happens, nothing from before or from a bad file is served
    // A byte-bounded cache never wrote a file much larger than its bound (the
    // estimate counts more than the file stores): a larger one is not ours.
    const std::uint64_t bound = impl_->options.capacity_bytes;
    const std::uint64_t max_file_bytes =
        bound == 0 ? 0 : std::max<std::uint64_t>(64u << 20, bound > UINT64_MAX / 4 ? UINT64_MAX : 4 * bound);
    auto payload = cache::read_snapshot_file(path, max_file_bytes, impl_->options.snapshot_key);
    if (!payload) return payload.status();
    struct Loaded {
      std::string tenant, question;
      std::chrono::milliseconds left, ttl;  // time left, and the answer's own TTL (for sliding renewals)
      std::vector<float> vector;
      Answer answer;
    };
    std::vector<Loaded> loaded;
    auto doc = detail::parse_cbor_bounded(payload.value());
    if (!doc) return Status::data_loss(fmt::format("{}: snapshot payload is malformed: {}", path, doc.status().message()));
    std::size_t position = 0;
    try {
      const auto dimension = doc->at("dimension").get<std::size_t>();
      if (dimension != impl_->options.dimension) {
        return Status::failed_precondition(fmt::format(
            "{}: snapshot vectors have dimension {}, this cache {} (another encoder?)", path, dimension,
            impl_->options.dimension));
      }
      // TTLs are clamped to the cache's before anything converts them: a
      // value near INT64_MAX milliseconds overflows in nanoseconds.
      const auto cache_ttl = std::chrono::duration_cast<std::chrono::milliseconds>(impl_->options.ttl).count();
      for (const auto& e : doc->at("entries")) {
        ++position;
        const auto& bytes = e.at("vector").get_binary();
        if (bytes.size() != dimension * sizeof(float)) {
          return Status::data_loss(fmt::format("{}: entry {}: vector has {} bytes, expected {}", path, position,
                                               bytes.size(), dimension * sizeof(float)));
        }
        const std::chrono::milliseconds left(std::min(e.at("ttl_ms").get<std::int64_t>(), cache_ttl));
        // Expired when saved (or a snapshot written before answer_ttl_ms
        // existed with nothing left): skipped, whatever else it holds.
        if (left.count() <= 0) continue;
        const std::chrono::milliseconds ttl(std::min(e.value("answer_ttl_ms", left.count()), cache_ttl));
        Loaded l{e.at("tenant").get<std::string>(), e.at("question").get<std::string>(), left, ttl,
                 std::vector<float>(dimension), cache::answer_from_json(e.at("answer"))};
        std::memcpy(l.vector.data(), bytes.data(), bytes.size());
        std::string problem = cache::cached_vector_problem(l.vector.data(), dimension);
        if (problem.empty()) problem = cache::cached_answer_problem(l.answer);
        if (problem.empty() && l.question.empty()) problem = "empty question";
        if (problem.empty() && l.question.size() > kMaxCachedQuestionBytes) {
          problem = fmt::format("question of {} bytes", l.question.size());
        }
        if (problem.empty() && l.tenant.size() > kMaxTenantBytes) problem = fmt::format("tenant of {} bytes", l.tenant.size());
        if (problem.empty() && l.ttl.count() <= 0) problem = fmt::format("answer TTL {} ms is not positive", l.ttl.count());
        if (!problem.empty()) return Status::data_loss(fmt::format("{}: entry {}: {}", path, position, problem));
        loaded.push_back(std::move(l));
      }
    } catch (const std::exception& e) {
      return Status::data_loss(
          fmt::format("{}: snapshot payload is malformed (entry {}): {}", path, position, detail::clip_for_message(e.what(), 160)));
    }
    // Everything parsed and checked: only now does anything enter the cache.
    std::size_t inserted = 0;
    const auto now = impl_->options.clock->now();
    std::unique_lock<std::shared_mutex> lock(impl_->mu);
    for (auto& l : loaded) {
      if (keep && !keep(l.answer)) continue;  // entries expired when saved were skipped above
      // The same question twice (or a file of copies) keeps the later one, as
      // insert() would, so the index never holds a pile of equal points.
      impl_->erase_same_question(l.tenant, l.vector.data());
      if (impl_->store.size() >= impl_->options.capacity) break;
      impl_->store_entry(l.vector.data(), CachedEntry{cache::CachedAnswer(std::move(l.answer)), std::move(l.question), l.tenant},
                         l.ttl, now, Clock::duration(l.left));
      ++inserted;
    }
    return inserted;
  });
}

std::vector<CachedIntent> SemanticCache::top_intents(std::size_t intents, const std::string& tenant) const {
  std::vector<float> vectors;
  std::vector<const CachedEntry*> slots;
  const auto now = impl_->options.clock->now();
  const std::size_t d = impl_->options.dimension;
  std::shared_lock<std::shared_mutex> lock(impl_->mu);
  const auto index = impl_->indexes.find(tenant);
  if (index == impl_->indexes.end() || intents == 0) return {};
  impl_->store.for_each([&](const Store::Item& item) {
    if (item.value.tenant != tenant || !Store::live(item, now)) return;
    const float* v = index->second.vector_of(item.key);
    if (!v) return;
    vectors.insert(vectors.end(), v, v + d);
    slots.push_back(&item.value);
  });
  const std::size_t n = slots.size();
  if (n == 0) return {};
  const std::size_t k = std::min(intents, n);
  const std::vector<float> centroids = index::spherical_kmeans(vectors.data(), n, d, k);
  // Nearest centre of every question, and the question nearest each centre.
  std::vector<std::size_t> members(k, 0);
  std::vector<float> best(k, -2.0f);
  std::vector<const CachedEntry*> representative(k, nullptr);
  for (std::size_t i = 0; i < n; ++i) {
    std::size_t centre = 0;
    float similarity = -2.0f;
    for (std::size_t c = 0; c < k; ++c) {
      const float s = index::inner_product(vectors.data() + i * d, centroids.data() + c * d, d);
      if (s > similarity) {
        similarity = s;
        centre = c;
      }
    }
    ++members[centre];
    if (similarity > best[centre]) {
      best[centre] = similarity;
      representative[centre] = slots[i];
    }
  }
  std::vector<CachedIntent> out;
  for (std::size_t c = 0; c < k; ++c) {
    if (members[c] == 0) continue;
    out.push_back({representative[c]->question, representative[c]->answer.metadata().entry_id(), members[c]});
  }
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.questions > b.questions; });
  return out;
}

void SemanticCache::clear() {
  std::unique_lock<std::shared_mutex> lock(impl_->mu);
  impl_->indexes.clear();
  impl_->store.clear();
  std::lock_guard<std::mutex> learn(impl_->learn_mu);
  impl_->learners.clear();
}

std::size_t SemanticCache::dimension() const { return impl_->options.dimension; }

SemanticCacheStats SemanticCache::stats() const {
  SemanticCacheStats s;
  s.hits = impl_->hits.load(std::memory_order_relaxed);
  s.misses = impl_->misses.load(std::memory_order_relaxed);
  s.invalidations = impl_->invalidations.load(std::memory_order_relaxed);
  s.near_miss_refusals = impl_->refusals.load(std::memory_order_relaxed);
  s.displacements = impl_->displacements.load(std::memory_order_relaxed);
  s.outcomes = impl_->outcomes.load(std::memory_order_relaxed);
  s.wrong_outcomes = impl_->wrong_outcomes.load(std::memory_order_relaxed);
  s.verifications = impl_->verifications.load(std::memory_order_relaxed);
  std::shared_lock<std::shared_mutex> lock(impl_->mu);
  s.expirations = impl_->store.expirations();
  s.evictions = impl_->store.evictions();
  s.size = impl_->store.size();
  s.bytes = impl_->store.bytes();
  return s;
}

}  // namespace rapidqa

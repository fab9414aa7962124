#include "rapidqa/semantic_cache.h"

#include <faiss/Clustering.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <shared_mutex>

#include <fmt/format.h>

#include "cache/answer_provenance.h"
#include "cache/near_miss_guard.h"
#include "cache/snapshot_codec.h"
#include "common/guard.h"
#include "index/simd_flat_index.h"
#include "index/vector_index.h"

namespace rapidqa {
namespace {

struct Slot {
  Answer answer;
  std::string question;  // normalised, for the near-miss check
  std::string tenant;
  Clock::time_point expires_at;
};

// Similarity at which a new question counts as the same cached question.
constexpr float kSameQuestionSimilarity = 0.999f;
// Nearest neighbours inspected per lookup, so a few expired entries at the
// top do not hide a live one just behind them.
constexpr std::size_t kLookupNeighbors = 4;

}  // namespace

struct SemanticCache::Impl {
  explicit Impl(const SemanticCacheOptions& o) : options(o) {}

  SemanticCacheOptions options;
  cache::NearMissGuard guard;
  mutable std::shared_mutex mu;
  std::map<std::string, index::VectorIndex> indexes;  // guarded by mu; one per namespace
  std::map<std::int64_t, Slot> slots;  // guarded by mu; label order = insertion order
  std::int64_t next_label = 0;         // guarded by mu
  mutable std::atomic<std::uint64_t> hits{0}, misses{0}, refusals{0};
  std::atomic<std::uint64_t> expirations{0}, evictions{0}, invalidations{0};

  index::VectorIndex& index_for(const std::string& tenant) {  // needs mu held exclusively
    auto it = indexes.find(tenant);
    if (it == indexes.end()) {
      it = indexes.emplace(tenant, index::VectorIndex({options.dimension, options.exact_index_limit, 32, 80, 64})).first;
    }
    return it->second;
  }

  void erase_label(std::int64_t label) {  // needs mu held exclusively
    const auto slot = slots.find(label);
    if (slot == slots.end()) return;
    const auto it = indexes.find(slot->second.tenant);
    if (it != indexes.end()) {
      it->second.remove(label);
      if (it->second.size() == 0) indexes.erase(it);
    }
    slots.erase(slot);
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

SemanticLookup SemanticCache::lookup(const float* vector, const std::string& question,
                                    const SemanticQuery& query) const {
  SemanticLookup result;
  const float threshold = query.similarity_threshold.value_or(impl_->options.similarity_threshold);
  const auto now = impl_->options.clock->now();
  std::shared_lock<std::shared_mutex> lock(impl_->mu);
  const auto index = impl_->indexes.find(query.tenant);
  if (index != impl_->indexes.end()) {
    for (const auto& n : index->second.search(vector, kLookupNeighbors)) {
      const auto slot = impl_->slots.find(n.label);
      if (slot == impl_->slots.end() || now >= slot->second.expires_at) continue;
      if (result.nearest_similarity < n.similarity) result.nearest_similarity = n.similarity;
      if (n.similarity < threshold) break;  // neighbours come best first
      std::string conflict = impl_->guard.conflict(slot->second.question, question);
      if (!conflict.empty()) {
        // A question that asks the opposite is no answer; a farther
        // neighbour may still be the same question in other words.
        if (result.refused_reason.empty()) result.refused_reason = std::move(conflict);
        continue;
      }
      result.answer = slot->second.answer;
      break;
    }
  }
  if (!result.refused_reason.empty() && !result.answer) impl_->refusals.fetch_add(1, std::memory_order_relaxed);
  (result.answer ? impl_->hits : impl_->misses).fetch_add(1, std::memory_order_relaxed);
  return result;
}

void SemanticCache::insert(const float* vector, const std::string& question, Answer answer, const std::string& tenant) {
  if (impl_->options.capacity == 0) return;
  const auto now = impl_->options.clock->now();
  std::unique_lock<std::shared_mutex> lock(impl_->mu);
  {
    auto& index = impl_->index_for(tenant);
    const auto nearest = index.search(vector, 1);
    if (!nearest.empty() && nearest.front().similarity >= kSameQuestionSimilarity) {
      impl_->erase_label(nearest.front().label);
    }
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
  impl_->index_for(tenant).upsert(label, vector);
  impl_->slots.emplace(label, Slot{std::move(answer), question, tenant, now + impl_->options.ttl});
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

std::size_t SemanticCache::erase_question(const std::string& question, const std::string& tenant) {
  std::unique_lock<std::shared_mutex> lock(impl_->mu);
  std::vector<std::int64_t> doomed;
  for (const auto& [label, slot] : impl_->slots) {
    if (slot.tenant == tenant && slot.question == question) doomed.push_back(label);
  }
  for (auto label : doomed) impl_->erase_label(label);
  return doomed.size();
}

Status SemanticCache::save_snapshot(const std::string& path) const {
  return detail::guarded("saving the semantic cache", [&]() -> Status {
    const auto now = impl_->options.clock->now();
    nlohmann::json entries = nlohmann::json::array();
    {
      std::shared_lock<std::shared_mutex> lock(impl_->mu);
      for (const auto& [label, slot] : impl_->slots) {
        if (now >= slot.expires_at) continue;
        const auto index = impl_->indexes.find(slot.tenant);
        const float* v = index == impl_->indexes.end() ? nullptr : index->second.vector_of(label);
        if (!v) continue;
        const auto* bytes = reinterpret_cast<const std::uint8_t*>(v);
        entries.push_back(
            {{"tenant", slot.tenant},
             {"question", slot.question},
             {"ttl_ms", std::chrono::duration_cast<std::chrono::milliseconds>(slot.expires_at - now).count()},
             {"vector", nlohmann::json::binary(std::vector<std::uint8_t>(
                            bytes, bytes + impl_->options.dimension * sizeof(float)))},
             {"answer", cache::answer_to_json(slot.answer)}});
      }
    }
    const nlohmann::json doc = {{"dimension", impl_->options.dimension}, {"entries", std::move(entries)}};
    return cache::write_snapshot_file(path, nlohmann::json::to_cbor(doc));
  });
}

Result<std::size_t> SemanticCache::load_snapshot(const std::string& path,
                                                 const std::function<bool(const Answer&)>& keep) {
  clear();  // whatever happens, nothing from before or from a bad file is served
  auto payload = cache::read_snapshot_file(path);
  if (!payload) return payload.status();
  struct Loaded {
    std::string tenant, question;
    std::chrono::milliseconds ttl;
    std::vector<float> vector;
    Answer answer;
  };
  std::vector<Loaded> loaded;
  try {
    const auto doc = nlohmann::json::from_cbor(payload.value());
    const auto dimension = doc.at("dimension").get<std::size_t>();
    if (dimension != impl_->options.dimension) {
      return Status::failed_precondition(fmt::format(
          "{}: snapshot vectors have dimension {}, this cache {} (another encoder?)", path, dimension,
          impl_->options.dimension));
    }
    for (const auto& e : doc.at("entries")) {
      const auto& bytes = e.at("vector").get_binary();
      if (bytes.size() != dimension * sizeof(float)) {
        return Status::data_loss(fmt::format("{}: an entry's vector has {} bytes, expected {}", path, bytes.size(),
                                             dimension * sizeof(float)));
      }
      Loaded l{e.at("tenant").get<std::string>(), e.at("question").get<std::string>(),
               std::chrono::milliseconds(e.at("ttl_ms").get<std::int64_t>()), std::vector<float>(dimension),
               cache::answer_from_json(e.at("answer"))};
      std::memcpy(l.vector.data(), bytes.data(), bytes.size());
      loaded.push_back(std::move(l));
    }
  } catch (const std::exception& e) {
    return Status::data_loss(fmt::format("{}: snapshot payload is malformed: {}", path, e.what()));
  }
  // Everything parsed: only now does anything enter the cache.
  std::size_t inserted = 0;
  const auto now = impl_->options.clock->now();
  std::unique_lock<std::shared_mutex> lock(impl_->mu);
  for (auto& l : loaded) {
    if (l.ttl.count() <= 0 || (keep && !keep(l.answer))) continue;
    if (impl_->slots.size() >= impl_->options.capacity) break;
    const std::int64_t label = impl_->next_label++;
    impl_->index_for(l.tenant).upsert(label, l.vector.data());
    impl_->slots.emplace(label, Slot{std::move(l.answer), std::move(l.question), l.tenant,
                                     now + std::min<Clock::duration>(l.ttl, impl_->options.ttl)});
    ++inserted;
  }
  return inserted;
}

std::vector<CachedIntent> SemanticCache::top_intents(std::size_t intents, const std::string& tenant) const {
  std::vector<float> vectors;
  std::vector<const Slot*> slots;
  const auto now = impl_->options.clock->now();
  const std::size_t d = impl_->options.dimension;
  std::shared_lock<std::shared_mutex> lock(impl_->mu);
  const auto index = impl_->indexes.find(tenant);
  if (index == impl_->indexes.end() || intents == 0) return {};
  for (const auto& [label, slot] : impl_->slots) {
    if (slot.tenant != tenant || now >= slot.expires_at) continue;
    const float* v = index->second.vector_of(label);
    if (!v) continue;
    vectors.insert(vectors.end(), v, v + d);
    slots.push_back(&slot);
  }
  const std::size_t n = slots.size();
  if (n == 0) return {};
  const std::size_t k = std::min(intents, n);
  faiss::ClusteringParameters params;
  params.spherical = true;  // the vectors are unit length: cluster by cosine
  params.niter = 25;
  params.nredo = 8;  // k-means from one start is brittle on few points: keep the best of several
  params.seed = 1234;
  params.min_points_per_centroid = 1;
  params.verbose = false;
  faiss::Clustering clustering(static_cast<int>(d), static_cast<int>(k), params);
  index::SimdFlatIP assign(static_cast<faiss::Index::idx_t>(d));
  clustering.train(static_cast<faiss::Index::idx_t>(n), vectors.data(), assign);
  // Nearest centre of every question, and the question nearest each centre.
  std::vector<std::size_t> members(k, 0);
  std::vector<float> best(k, -2.0f);
  std::vector<const Slot*> representative(k, nullptr);
  for (std::size_t i = 0; i < n; ++i) {
    std::size_t centre = 0;
    float similarity = -2.0f;
    for (std::size_t c = 0; c < k; ++c) {
      const float s = index::inner_product(vectors.data() + i * d, clustering.centroids.data() + c * d, d);
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
    out.push_back({representative[c]->question, representative[c]->answer.entry_id(), members[c]});
  }
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.questions > b.questions; });
  return out;
}

void SemanticCache::clear() {
  std::unique_lock<std::shared_mutex> lock(impl_->mu);
  impl_->indexes.clear();
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
  s.near_miss_refusals = impl_->refusals.load(std::memory_order_relaxed);
  std::shared_lock<std::shared_mutex> lock(impl_->mu);
  s.size = impl_->slots.size();
  return s;
}

}  // namespace rapidqa

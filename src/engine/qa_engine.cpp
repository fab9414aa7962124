#include "rapidqa/qa_engine.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <mutex>
#include <random>
#include <shared_mutex>

#include <fmt/format.h>

#include "common/bounded_json.h"
#include "cache/knowledge_change.h"
#include "cache/redis_relay.h"
#include "common/guard.h"
#include "common/line_reader.h"
#include "engine/knowledge_base.h"
#include "engine/rebuild_pool.h"
#include "metrics/metrics_registry.h"
#include "text/utf8.h"

namespace rapidqa {
namespace {

using SteadyTime = std::chrono::steady_clock;

// The separator between tenant and question in result-cache keys; the
// background rebuild splits keys on it again.
constexpr char kTenantSeparator = '\x1f';

std::string result_cache_key(const std::string& tenant, const std::string& normalized_question) {
  return tenant.empty() ? normalized_question : tenant + kTenantSeparator + normalized_question;
}

// Measures one stage into an Answer's timings.
class StageTimer {
 public:
  explicit StageTimer(StageTimings& timings) : timings_(timings), start_(SteadyTime::now()) {}
  void finish(Stage stage) {
    const auto now = SteadyTime::now();
    timings_[stage] += std::chrono::duration_cast<std::chrono::nanoseconds>(now - start_);
    start_ = now;
  }

 private:
  StageTimings& timings_;
  SteadyTime::time_point start_;
};

// Names this engine on the change bus and in Redis, so an instance can tell
// its own changes from its peers'.
std::string random_instance_id() {
  std::random_device device;
  std::mt19937_64 generator((static_cast<std::uint64_t>(device()) << 32) ^ device());
  return fmt::format("{:016x}", generator());
}

// Longest tenant name: tenants name namespaces, not documents; a longer one
// is refused rather than stored in every cache key.
constexpr std::size_t kMaxTenantBytes = 256;
// Most matches a request may ask for: retrieval returns them all, sorted.
constexpr std::size_t kMaxTopK = 1000;
// The longest a cache may keep an answer: beyond a year is a typo.
constexpr auto kMaxCacheTtl = std::chrono::hours(24 * 366);

Status validate_tenant(const std::string& tenant) {
  if (tenant.size() > kMaxTenantBytes) {
    return Status::invalid_argument(
        fmt::format("tenant is {} bytes, more than the limit of {}", tenant.size(), kMaxTenantBytes));
  }
  if (text::find_invalid_utf8(tenant) != std::string::npos) return Status::invalid_argument("tenant is not valid UTF-8");
  // Control characters would make keys ambiguous in logs and peers' messages.
  for (unsigned char c : tenant) {
    if (c < 0x20 || c == 0x7f) {
      return Status::invalid_argument(fmt::format("tenant contains the control character 0x{:02x}", c));
    }
  }
  return Status::ok();
}

Status check_score(float score, const char* field) {
  if (score >= -1.0f && score <= 1.0f) return Status::ok();  // false for NaN too
  return Status::invalid_argument(fmt::format("{} {} is outside [-1, 1]", field, score));
}

Status check_tier(const ResultCacheOptions& o, const char* name) {
  if (o.ttl.count() <= 0 || o.ttl > kMaxCacheTtl) {
    return Status::invalid_argument(fmt::format(
        "{}.ttl {} ms is outside (0, one year] (to cache nothing, disable the tier)", name, o.ttl.count()));
  }
  if (o.stale_grace.count() < 0 || o.stale_grace > kMaxCacheTtl) {
    return Status::invalid_argument(fmt::format("{}.stale_grace {} ms is outside [0, one year]", name, o.stale_grace.count()));
  }
  if (o.shards == 0) return Status::invalid_argument(fmt::format("{}.shards must be at least 1", name));
  return Status::ok();
}

// Every option, refused with its name rather than quietly fixed.
Status validate_options(const EngineOptions& o) {
  if (o.encoder && o.encoder->dimension() == 0) return Status::invalid_argument("encoder has dimension 0");
  if (!o.encoder && o.hashing.dimension == 0) return Status::invalid_argument("hashing.dimension must be positive");
  if (!o.encoder && o.hashing.dimension > 65536) {
    return Status::invalid_argument(fmt::format("hashing.dimension {} is more than 65536", o.hashing.dimension));
  }
  if (Status s = check_score(o.min_answer_score, "min_answer_score"); !s.is_ok()) return s;
  // Above 1 is allowed here: it switches the lexical path's answers off.
  if (!std::isfinite(o.degradation.lexical_min_score)) {
    return Status::invalid_argument(fmt::format("degradation.lexical_min_score {} is not finite", o.degradation.lexical_min_score));
  }
  if (o.top_k == 0 || o.top_k > kMaxTopK) {
    return Status::invalid_argument(fmt::format("top_k {} is outside [1, {}]", o.top_k, kMaxTopK));
  }
  if (o.reader_passages > kMaxTopK) {
    return Status::invalid_argument(fmt::format("reader_passages {} is more than {}", o.reader_passages, kMaxTopK));
  }
  // A disabled tier's options are never used: not checked.
  if (o.enable_result_cache) {
    if (Status s = check_tier(o.result_cache, "result_cache"); !s.is_ok()) return s;
  }
  if (o.enable_knowledge_cache) {
    if (Status s = check_tier(o.knowledge_cache, "knowledge_cache"); !s.is_ok()) return s;
  }
  if (o.enable_semantic_cache && (o.semantic_cache.ttl.count() <= 0 || o.semantic_cache.ttl > kMaxCacheTtl)) {
    return Status::invalid_argument(
        fmt::format("semantic_cache.ttl {} ms is outside (0, one year]", o.semantic_cache.ttl.count()));
  }
  if (o.degradation.max_staleness.count() < 0 || o.degradation.max_staleness > kMaxCacheTtl) {
    return Status::invalid_argument("degradation.max_staleness must be between 0 and a year");
  }
  if (o.degradation.default_timeout.count() < 0) return Status::invalid_argument("degradation.default_timeout must not be negative");
  if (o.degradation.lexical_reserve.count() < 0) return Status::invalid_argument("degradation.lexical_reserve must not be negative");
  if (o.rebuild_workers > 64) return Status::invalid_argument(fmt::format("rebuild_workers {} is more than 64", o.rebuild_workers));
  if (o.knowledge_search_breadth <= 0) return Status::invalid_argument("knowledge_search_breadth must be positive");
  if (o.normalize.max_bytes == 0) return Status::invalid_argument("normalize.max_bytes must be positive");
  if (o.reader && o.reader_passages == 0) return Status::invalid_argument("reader_passages must be at least 1");
  if (!(o.degradation.queue_saturation > 0.0 && o.degradation.queue_saturation <= 1.0)) {
    return Status::invalid_argument(
        fmt::format("degradation.queue_saturation {} is outside (0, 1]", o.degradation.queue_saturation));
  }
  if (o.encoder_batching.queue_capacity == 0) return Status::invalid_argument("encoder_batching.queue_capacity must be positive");
  // Each worker is a thread, each batch slot a model input: a typo of
  // 100000 would hang create() starting threads.
  if (o.encoder_batching.workers == 0 || o.encoder_batching.workers > 64) {
    return Status::invalid_argument(fmt::format("encoder_batching.workers {} is outside [1, 64]", o.encoder_batching.workers));
  }
  if (o.encoder_batching.max_batch_size == 0 || o.encoder_batching.max_batch_size > 4096) {
    return Status::invalid_argument(
        fmt::format("encoder_batching.max_batch_size {} is outside [1, 4096]", o.encoder_batching.max_batch_size));
  }
  if (o.auto_tune) {
    const AutoTunerOptions& t = o.tuner;
    if (!(t.shrink_factor > 0 && t.shrink_factor < 1) || !(t.grow_factor > 1 && std::isfinite(t.grow_factor))) {
      return Status::invalid_argument("tuner.shrink_factor must be in (0, 1) and tuner.grow_factor finite and above 1");
    }
    if (t.min_batch_size == 0 || t.min_batch_size > t.max_batch_size || t.hysteresis == 0) {
      return Status::invalid_argument("tuner: min_batch_size must be in [1, max_batch_size] and hysteresis at least 1");
    }
  }
  if (!o.redis.host.empty()) return cache::validate_redis_sync_options(o.redis);
  return Status::ok();
}

}  // namespace

struct QAEngine::Impl {
  EngineOptions options;
  std::shared_ptr<Encoder> encoder;
  std::unique_ptr<ResultCache> result_cache;      // null when disabled
  std::unique_ptr<ResultCache> knowledge_cache;   // null when disabled
  std::unique_ptr<SemanticCache> semantic_cache;  // null when disabled
  mutable std::shared_mutex knowledge_mu;         // writers: load/add/update/remove
  std::unique_ptr<engine::KnowledgeBase> knowledge;  // guarded by knowledge_mu
  metrics::MetricsRegistry metrics;
  // The degraded path of a model encoder: the same entries indexed by the
  // HashingEncoder (null for a lightweight encoder or without degradation).
  std::unique_ptr<engine::KnowledgeBase> lexical;  // guarded by knowledge_mu
  std::shared_ptr<HashingEncoder> lexical_encoder;
  using EncodeBatcher = DynamicBatcher<std::string, std::vector<float>>;
  std::unique_ptr<EncodeBatcher> batcher;  // a model encoder's calls; null when inline
  // The batcher's dispatch counts at the previous metrics window, for the
  // tuner's per-window shares.
  std::mutex window_mu;
  std::uint64_t window_batches = 0, window_full_batches = 0;  // guarded by window_mu
  // Steers batcher; declared after everything recent_load() uses, so it
  // stops first.
  std::unique_ptr<AutoTuner> tuner;
  // Declared after everything ask() uses, so it stops (joining its threads,
  // which call ask()) before any of that is destroyed.
  std::unique_ptr<engine::RebuildPool> rebuilds;

  // Every knowledge change reaches the tiers (and the Redis relay) through
  // this bus; see cache/knowledge_change.h.
  cache::ChangeBus changes;
  std::string instance_id = random_instance_id();
  // What the tiers' subscribers report for the change being published;
  // written and read with knowledge_mu held exclusively.
  std::size_t change_removed = 0;
  std::vector<std::string> change_hot_keys;
  // Shares changes with the other instances (null without a Redis host).
  // Declared last, so it is destroyed first: its thread calls
  // apply_remote_change, which uses everything above.
  std::unique_ptr<cache::RedisRelay> relay;

  // Connects this engine's bus to Redis; options must be in place (the
  // relay's thread may deliver a peer's change before this returns).
  Status start_relay() {
    cache::RedisRelay::Callbacks callbacks;
    callbacks.on_change = [this](const cache::KnowledgeChange& change) { apply_remote_change(change); };
    callbacks.on_gap = [this](const std::string& reason) {
      // Dropping cached answers is always safe; the knowledge and its TTLs
      // stay as they are.
      log(LogLevel::kWarning, fmt::format("{}; dropping every cached answer", reason));
      clear_tiers();
    };
    callbacks.log = options.log;
    auto started = cache::RedisRelay::start(options.redis, instance_id, std::move(callbacks));
    if (!started) return started.status();
    relay = std::move(started).value();
    changes.subscribe([this](const cache::KnowledgeChange& change) {
      // Only this instance's own changes go out: a peer's arrives through
      // apply_remote_change and must not echo back. A reload stays local:
      // each instance loads its own knowledge file.
      if (change.origin == instance_id && change.kind != cache::KnowledgeChange::Kind::kReload) {
        relay->publish(change);
      }
    });
    return Status::ok();
  }

  void subscribe_tiers() {
    changes.subscribe([this](const cache::KnowledgeChange& change) {
      if (change.kind == cache::KnowledgeChange::Kind::kReload) {
        clear_tiers();
        return;
      }
      if (result_cache) {
        change_removed += result_cache->invalidate_entry(change.entry_id, &change_hot_keys, options.rebuild_min_hits);
      }
      if (knowledge_cache) change_removed += knowledge_cache->invalidate_entry(change.entry_id);
      if (semantic_cache) change_removed += semantic_cache->invalidate_entry(change.entry_id);
      if (change.kind == cache::KnowledgeChange::Kind::kUpsert) displace_beaten_answers(change.entry_id);
    });
  }

  void clear_tiers() {
    for (ResultCache* exact : {result_cache.get(), knowledge_cache.get()}) {
      if (exact) exact->clear();
    }
    if (semantic_cache) semantic_cache->clear();
  }

  // A new or changed entry may answer some cached questions better than the
  // answer they hold: retrieval would now pick it. The semantic tier holds
  // the cached questions' vectors, so it finds them; the exact tiers drop
  // the same questions. knowledge_mu held exclusively.
  void displace_beaten_answers(const std::string& entry_id) {
    if (!semantic_cache) return;
    const std::vector<float> vectors = knowledge->phrasing_vectors(entry_id);
    const std::size_t count = vectors.size() / encoder->dimension();
    if (count == 0) return;
    for (const auto& beaten : semantic_cache->displace(vectors.data(), count, options.min_answer_score)) {
      const std::string key = result_cache_key(beaten.tenant, beaten.question);
      for (ResultCache* exact : {result_cache.get(), knowledge_cache.get()}) {
        if (exact) exact->erase(key);
      }
      ++change_removed;
    }
  }

  // Publishes a change to every tier and subscriber; knowledge_mu held
  // exclusively (the knowledge is updated first, then the caches, and no ask
  // can refill a cache from the old version in between). Returns how many
  // cached answers went; hot_keys receives the result-cache keys worth
  // re-answering.
  std::size_t publish(cache::KnowledgeChange change, std::vector<std::string>* hot_keys = nullptr) {
    if (change.origin.empty()) change.origin = instance_id;
    change_removed = 0;
    change_hot_keys.clear();
    changes.publish(change);
    if (hot_keys) *hot_keys = std::move(change_hot_keys);
    change_hot_keys.clear();
    return change_removed;
  }

  // Applies a change another instance made (delivered by the Redis relay):
  // the knowledge first, when the change is newer than the local copy, then
  // the caches, whatever the versions (dropping a cached answer is always
  // safe). Hot questions are re-answered here as after a local update.
  void apply_remote_change(const cache::KnowledgeChange& change) {
    std::vector<std::string> hot;
    {
      std::unique_lock<std::shared_mutex> lock(knowledge_mu);
      using Kind = cache::KnowledgeChange::Kind;
      if (change.kind == Kind::kUpsert && change.entry) {
        KnowledgeEntry entry = *change.entry;
        entry.version = change.version;
        auto applied = knowledge->store_if_newer(std::move(entry));
        if (!applied) {
          log(LogLevel::kWarning, fmt::format("change to entry '{}' from instance {} not applied: {}",
                                              detail::clip_for_message(change.entry_id),
                                              detail::clip_for_message(change.origin), applied.status().message()));
        }
      } else if (change.kind == Kind::kRemove && knowledge->find(change.entry_id)) {
        (void)knowledge->remove(change.entry_id);
      }
      sync_lexical(change.entry_id);
      publish(change, &hot);
    }
    schedule_rebuilds(hot);
  }

  // Keeps the lexical index in step with the knowledge for one entry;
  // knowledge_mu held exclusively.
  void sync_lexical(const std::string& id) {
    if (!lexical) return;
    Status s = Status::ok();
    if (const KnowledgeEntry* e = knowledge->find(id)) {
      auto stored = lexical->store_if_newer(*e);
      if (!stored) s = stored.status();
    } else if (lexical->find(id)) {
      s = lexical->remove(id);
    }
    if (!s.is_ok()) log(LogLevel::kWarning, fmt::format("lexical index of entry '{}': {}", id, s.message()));
  }

  // The change event for an entry just added or updated; knowledge_mu held.
  cache::KnowledgeChange upsert_change(const std::string& id) const {
    cache::KnowledgeChange change;
    change.kind = cache::KnowledgeChange::Kind::kUpsert;
    change.entry_id = id;
    if (const KnowledgeEntry* stored = knowledge->find(id)) {
      change.version = stored->version;
      change.entry = *stored;
    }
    return change;
  }

  LoadSample recent_load() {
    // One caller at a time: the counts are deltas since the previous call.
    std::lock_guard<std::mutex> lock(window_mu);
    LoadSample sample = metrics.roll_window();
    if (!batcher) return sample;
    const DynamicBatcherStats b = batcher->stats();
    sample.queue_depth = b.queue_depth;
    // Dispatches, not completions: a batch still running counts as formed.
    std::uint64_t dispatched = 0;
    for (auto n : b.dispatch_reasons) dispatched += n;
    const std::uint64_t full = b.dispatch_reasons[static_cast<std::size_t>(BatchPlan::Reason::kFull)];
    const std::uint64_t batches = dispatched - window_batches;
    // No batch in the window: nothing says the limit binds.
    sample.full_batch_fraction =
        batches == 0 ? 0.0 : std::min(1.0, static_cast<double>(full - window_full_batches) / static_cast<double>(batches));
    window_batches = dispatched;
    window_full_batches = full;
    return sample;
  }

  void log(LogLevel level, const std::string& message) const {
    if (options.log) options.log(level, message);
  }

  // Re-answers invalidated hot questions in the background (knowledge_mu
  // must not be held: each rebuild is an ask that takes it).
  void schedule_rebuilds(const std::vector<std::string>& keys) {
    if (!rebuilds) return;
    for (const auto& key : keys) {
      const auto cut = key.find(kTenantSeparator);
      AskOptions ask_options;
      if (cut != std::string::npos) ask_options.tenant = key.substr(0, cut);
      std::string question = cut == std::string::npos ? key : key.substr(cut + 1);
      rebuilds->submit([this, ask_options, question] { (void)ask(question, ask_options); });
    }
  }

  // The normalised question and its result-cache key for a tenant.
  Result<std::pair<std::string, std::string>> cache_keys(std::string_view question, const std::string& tenant) const {
    if (Status valid = validate_tenant(tenant); !valid.is_ok()) return valid;
    auto normalized = normalize_text(question, options.normalize);
    if (!normalized) return normalized.status();
    std::string key = result_cache_key(tenant, normalized.value());
    return std::make_pair(std::move(normalized).value(), std::move(key));
  }

  Answer answer_from_knowledge(const std::vector<engine::KnowledgeMatch>& matches, float min_score) const {
    Answer answer;
    for (const auto& m : matches) answer.matches.push_back({m.entry->id, m.similarity, m.entry->version});
    if (!matches.empty() && matches.front().similarity >= min_score) {
      answer.text = matches.front().entry->answer;
      answer.score = matches.front().similarity;
      answer.tier = AnswerTier::kKnowledge;
    } else {
      answer.text = options.fallback_answer;
      answer.score = matches.empty() ? 0.0f : matches.front().similarity;
      answer.tier = AnswerTier::kFallback;
    }
    return answer;
  }

  // Replaces the FAQ answer with the span the reader finds in the context
  // passages of the best entries. A reader failure keeps the FAQ answer and
  // says so: the request still gets an answer.
  void read_answer(std::string_view question, const std::vector<engine::KnowledgeMatch>& matches, float min_score,
                   Answer& answer) const {
    // The best entry decides: without a passage of its own, its FAQ answer
    // stands rather than a span from a less relevant entry.
    if (matches.empty() || matches.front().entry->context.empty()) return;
    std::vector<std::string> passages;
    std::vector<const KnowledgeEntry*> owners;
    for (const auto& m : matches) {
      if (owners.size() == options.reader_passages || m.similarity < min_score) break;
      if (m.entry->context.empty()) continue;
      passages.push_back(m.entry->context);
      owners.push_back(m.entry);
    }
    if (passages.empty()) return;
    auto spans = options.reader->read(std::string(question), passages, 1);
    if (!spans) {
      answer.degraded = true;
      answer.degraded_reason = "reader failed, FAQ answer given: " + spans.status().message();
      return;
    }
    if (spans->empty()) return;
    const AnswerSpan& best = spans->front();
    answer.text = best.text;
    answer.extracted = ExtractedSpan{owners[best.passage]->id, best.begin, best.end, best.score, best.probability};
  }

  // How long answers built from these matches may be cached: the shortest
  // cache_ttl of the entries whose text they serve (0: the tiers' own);
  // knowledge_mu held.
  std::chrono::milliseconds cache_ttl_of(const Answer& answer) const {
    std::chrono::milliseconds ttl{0};
    auto shorten = [&](const std::string& id) {
      const KnowledgeEntry* e = knowledge->find(id);
      if (e && e->cache_ttl.count() > 0 && (ttl.count() == 0 || e->cache_ttl < ttl)) ttl = e->cache_ttl;
    };
    if (!answer.matches.empty()) shorten(answer.matches.front().entry_id);
    if (answer.extracted) shorten(answer.extracted->entry_id);
    return ttl;
  }

  // Whether every entry an answer was built from is still at the version it
  // was built from; knowledge_mu held.
  bool built_from_current_knowledge(const Answer& answer) const {
    return std::all_of(answer.matches.begin(), answer.matches.end(), [&](const EntryMatch& m) {
      const KnowledgeEntry* e = knowledge->find(m.entry_id);
      return e != nullptr && e->version == m.version;
    });
  }

  // Encodes through the model's batcher; returns "" with the vector, or why
  // the model cannot answer in time (the request then degrades).
  std::string encode_through_batcher(const std::string& text, BatchPriority priority,
                                     const std::optional<Clock::time_point>& deadline, std::vector<float>& out) {
    // The batcher's token budget and latency model count tokens; four bytes
    // a token is close enough for WordPiece on both scripts.
    const std::size_t tokens = std::max<std::size_t>(1, text.size() / 4 + 2);
    const auto now = options.clock->now();
    if (options.degradation.enabled && batcher->saturated(options.degradation.queue_saturation)) {
      return "the model's queue is saturated";
    }
    if (options.degradation.enabled && deadline) {
      const auto predicted = batcher->predict_completion(tokens);
      if (now + predicted > *deadline) {
        return fmt::format("{:.1f} ms left, the model needs about {:.1f} ms",
                           std::chrono::duration<double, std::milli>(*deadline - now).count(),
                           std::chrono::duration<double, std::milli>(predicted).count());
      }
    }
    // The model gets the budget less the lexical path's reserve: the queue
    // monitor completes a queued request then, and one already running is
    // not waited for past it.
    std::optional<Clock::time_point> give_up;
    if (deadline) {
      give_up = *deadline - (options.degradation.enabled ? options.degradation.lexical_reserve : Clock::duration::zero());
    }
    BatchRequestOptions request;
    request.priority = priority;
    request.deadline = give_up;
    request.tokens = tokens;
    auto pending = batcher->submit(text, request);
    // The wait is in real time for the clock's distance (the same for the
    // steady clock; a manual clock's tests move time themselves).
    if (give_up && pending.wait_for(*give_up - now) != std::future_status::ready) {
      return "the model did not answer within the budget";
    }
    BatchResult<std::vector<float>> result = pending.get();
    if (!result.ok()) return fmt::format("model request {}: {}", batch_status_name(result.status), result.message);
    out = std::move(*result.response);
    return "";
  }

  // The answer of a request the model cannot serve in time: lexical
  // retrieval while time is left, else a recently expired cached answer,
  // else the fallback; always marked degraded with the reason.
  Answer degraded_answer(std::string reason, const std::string& question_key, const std::string& key,
                         const std::optional<Clock::time_point>& deadline, std::size_t top_k, bool use_cache) const {
    if (lexical && (!deadline || options.clock->now() < *deadline)) {
      std::vector<float> v(lexical_encoder->dimension());
      if (lexical_encoder->encode_one(question_key, v.data()).is_ok()) {
        Answer a = answer_from_knowledge(lexical->search(v.data(), std::max<std::size_t>(top_k, 1)),
                                         options.degradation.lexical_min_score);
        if (a.matches.size() > top_k) a.matches.resize(top_k);
        if (a.tier == AnswerTier::kKnowledge) {
          a.degraded = true;
          a.degraded_reason = reason + ": answered by lexical retrieval";
          return a;
        }
      }
      reason += "; lexical retrieval found no answer";
    } else if (lexical) {
      reason += "; the deadline passed";
    }
    if (use_cache && options.degradation.max_staleness.count() > 0) {
      for (const auto& [tier, name] : {std::make_pair(result_cache.get(), AnswerTier::kResultCache),
                                       std::make_pair(knowledge_cache.get(), AnswerTier::kKnowledgeCache)}) {
        if (!tier) continue;
        std::chrono::milliseconds age{0};
        auto stale = tier->lookup_stale(key, options.degradation.max_staleness, &age);
        if (!stale || !built_from_current_knowledge(*stale)) continue;
        stale->tier = name;
        stale->degraded = true;
        stale->degraded_reason = fmt::format("{}: cached answer served {:.1f} s past its TTL", reason,
                                             std::chrono::duration<double>(age).count());
        return *stale;
      }
    }
    Answer a;
    a.text = options.fallback_answer;
    a.tier = AnswerTier::kFallback;
    a.degraded = true;
    a.degraded_reason = reason + ": no answer in time";
    return a;
  }

  static Status validate_ask_options(const AskOptions& o) {
    if (o.semantic_threshold && !(*o.semantic_threshold > 0.0f && *o.semantic_threshold <= 1.0f)) {
      return Status::invalid_argument(fmt::format("semantic_threshold {} is outside (0, 1]", *o.semantic_threshold));
    }
    if (o.top_k && (*o.top_k == 0 || *o.top_k > kMaxTopK)) {
      return Status::invalid_argument(fmt::format("top_k {} is outside [1, {}]", *o.top_k, kMaxTopK));
    }
    if (o.min_answer_score) {
      if (Status s = check_score(*o.min_answer_score, "min_answer_score"); !s.is_ok()) return s;
    }
    if (o.timeout.count() < 0) return Status::invalid_argument(fmt::format("timeout {} ms is negative", o.timeout.count()));
    const int priority = static_cast<int>(o.priority);
    if (priority < 0 || priority > static_cast<int>(BatchPriority::kLow)) {
      return Status::invalid_argument(fmt::format("priority {} is not high, normal or low", priority));
    }
    return validate_tenant(o.tenant);
  }

  Result<Answer> ask(std::string_view question, const AskOptions& ask_options) {
    const auto started = SteadyTime::now();
    const auto clock_started = options.clock->now();
    Answer answer;
    StageTimings timings;
    StageTimer timer(timings);
    // Retrieval settings of its own make an answer that other askers must
    // not get from a cache, nor this one from theirs.
    const bool use_cache = ask_options.use_cache && !ask_options.top_k && !ask_options.min_answer_score;
    const bool use_result_cache = use_cache && result_cache;
    const bool use_knowledge_cache = use_cache && knowledge_cache;
    const bool use_semantic_cache = use_cache && semantic_cache;

    if (Status valid = validate_ask_options(ask_options); !valid.is_ok()) {
      metrics.record_error();
      return valid;
    }
    auto normalized = normalize_text(question, options.normalize);
    timer.finish(Stage::kNormalize);
    if (!normalized) {
      metrics.record_error();
      return normalized.status();
    }
    const std::string& question_key = normalized.value();
    // Cache keys carry the tenant, so tenants never share an entry.
    const std::string key = result_cache_key(ask_options.tenant, question_key);

    bool looked_up_knowledge = false, looked_up_semantic = false;
    auto finish = [&](Answer&& a) -> Result<Answer> {
      a.timings = timings;
      a.timings[Stage::kTotal] = std::chrono::duration_cast<std::chrono::nanoseconds>(SteadyTime::now() - started);
      metrics.record_answer(a, use_result_cache, looked_up_knowledge, looked_up_semantic);
      return std::move(a);
    };

    if (use_result_cache) {
      auto hit = result_cache->lookup(key);
      timer.finish(Stage::kResultCache);
      if (hit) {
        hit->tier = AnswerTier::kResultCache;
        return finish(std::move(*hit));
      }
    }

    // Reads the knowledge under the shared lock for the rest of the request,
    // so an update cannot slip between retrieval and the cache fill and
    // leave an answer from the old version in a cache.
    std::shared_lock<std::shared_mutex> lock(knowledge_mu);
    if (use_knowledge_cache) {
      // Timed with the result tier: both are exact lookups by question.
      looked_up_knowledge = true;
      auto hit = knowledge_cache->lookup(key);
      // The versions are checked on every hit: even a change that reached
      // this instance late (through Redis) never lets an old answer out.
      if (hit && !built_from_current_knowledge(*hit)) {
        knowledge_cache->erase(key);
        hit.reset();
      }
      timer.finish(Stage::kResultCache);
      if (hit) {
        hit->tier = AnswerTier::kKnowledgeCache;
        if (use_result_cache) result_cache->insert(key, *hit, cache_ttl_of(*hit));
        return finish(std::move(*hit));
      }
    }

    const std::size_t top_k = ask_options.top_k.value_or(options.top_k);
    const float min_score = ask_options.min_answer_score.value_or(options.min_answer_score);
    // Clamped to a day, so a huge budget cannot overflow the clock.
    const auto timeout = std::min<std::chrono::milliseconds>(
        ask_options.timeout.count() > 0 ? ask_options.timeout : options.degradation.default_timeout, std::chrono::hours(24));
    std::optional<Clock::time_point> deadline;
    if (timeout.count() > 0) deadline = clock_started + timeout;

    std::vector<float> vector;
    const std::string encoder_text = encoder->wants_normalized_text() ? question_key : std::string(question);
    if (batcher) {
      // The model's vectors do not depend on the knowledge: wait for it
      // without the lock, so updates are never held behind the model. The
      // semantic lookup, retrieval and cache fill below run under one hold
      // again, so an update still cannot slip between them.
      lock.unlock();
      std::string why_not_model = encode_through_batcher(encoder_text, ask_options.priority, deadline, vector);
      lock.lock();
      timer.finish(Stage::kEncode);
      if (!why_not_model.empty()) {
        Answer degraded = degraded_answer(std::move(why_not_model), question_key, key, deadline, top_k, use_cache);
        timer.finish(Stage::kRetrieve);
        return finish(std::move(degraded));
      }
    } else {
      Status encoded = encoder->encode({encoder_text}, vector);
      timer.finish(Stage::kEncode);
      if (!encoded.is_ok()) {
        metrics.record_error();
        return encoded;
      }
    }
    // A broken encoder (NaN weights, a user's encoder with a bug) must not
    // reach retrieval: NaN similarities compare as "good enough".
    if (vector.size() != encoder->dimension() ||
        !std::all_of(vector.begin(), vector.end(), [](float x) { return std::isfinite(x); })) {
      metrics.record_error();
      return Status::internal(fmt::format("the encoder {} returned a vector of {} values, not {} finite ones",
                                          encoder->name(), vector.size(), encoder->dimension()));
    }

    float nearest_cached = -1;
    std::string near_miss;
    if (use_semantic_cache) {
      looked_up_semantic = true;
      SemanticQuery query;
      query.tenant = ask_options.tenant;
      query.similarity_threshold = ask_options.semantic_threshold;
      SemanticLookup cached = semantic_cache->lookup(vector.data(), question_key, query);
      timer.finish(Stage::kSemanticCache);
      nearest_cached = cached.nearest_similarity;
      near_miss = cached.refused_reason;
      if (cached.answer) {
        Answer a = std::move(*cached.answer);
        a.tier = AnswerTier::kSemanticCache;
        a.nearest_cached_similarity = nearest_cached;
        if (use_result_cache) result_cache->insert(key, a, cache_ttl_of(a));
        return finish(std::move(a));
      }
    }

    const auto matches = knowledge->search(vector.data(), std::max<std::size_t>(top_k, 1));
    timer.finish(Stage::kRetrieve);

    answer = answer_from_knowledge(matches, min_score);
    answer.nearest_cached_similarity = nearest_cached;
    answer.near_miss_reason = near_miss;
    if (options.reader && answer.tier == AnswerTier::kKnowledge) {
      if (deadline && options.clock->now() >= *deadline) {
        answer.degraded = true;
        answer.degraded_reason = "the deadline passed before the reader ran: FAQ answer given";
      } else {
        read_answer(question, matches, min_score, answer);
      }
      timer.finish(Stage::kInfer);
    }
    if (answer.matches.size() > top_k) answer.matches.resize(top_k);
    // A fallback is never cached: a later entry may answer the question.
    // Neither is an answer the reader failed on: the next ask should read.
    if (answer.tier == AnswerTier::kKnowledge && !answer.degraded) {
      const auto ttl = cache_ttl_of(answer);
      if (use_result_cache) result_cache->insert(key, answer, ttl);
      if (use_knowledge_cache) knowledge_cache->insert(key, answer, ttl);
      if (use_semantic_cache) semantic_cache->insert(vector.data(), question_key, answer, ask_options.tenant, ttl);
    }
    timer.finish(Stage::kPostprocess);
    return finish(std::move(answer));
  }
};

QAEngine::QAEngine() : impl_(std::make_unique<Impl>()) {}
QAEngine::~QAEngine() = default;

Result<std::unique_ptr<QAEngine>> QAEngine::create(EngineOptions options) {
  Status valid = validate_options(options);
  if (!valid.is_ok()) return valid;
  return detail::guarded("creating the engine", [&]() -> Result<std::unique_ptr<QAEngine>> {
    Status threads = configure_compute_threads(options.threads);
    if (!threads.is_ok()) return threads;
    std::unique_ptr<QAEngine> engine(new QAEngine());
    Impl& impl = *engine->impl_;
    if (!options.clock) options.clock = steady_clock_instance();
    impl.encoder = options.encoder ? options.encoder : std::make_shared<HashingEncoder>(options.hashing);
    // A model encoder's degraded requests may fall back on recently expired
    // answers: the exact tiers keep them that long.
    const bool keeps_stale = !impl.encoder->is_lightweight() && options.degradation.enabled;
    auto exact_tier = [&](ResultCacheOptions o) {
      if (!o.clock) o.clock = options.clock;
      if (keeps_stale) o.stale_grace = std::max(o.stale_grace, options.degradation.max_staleness);
      return std::make_unique<ResultCache>(o);
    };
    if (options.enable_result_cache) impl.result_cache = exact_tier(options.result_cache);
    if (options.enable_knowledge_cache) impl.knowledge_cache = exact_tier(options.knowledge_cache);
    if (options.enable_semantic_cache) {
      SemanticCacheOptions sc = options.semantic_cache;
      sc.dimension = impl.encoder->dimension();
      if (!sc.clock) sc.clock = options.clock;
      auto cache = SemanticCache::create(sc);
      if (!cache) return cache.status();
      impl.semantic_cache = std::move(cache).value();
    }
    impl.metrics.configure(options.clock, options.anomaly);
    engine::KnowledgeBaseOptions kb;
    kb.exact_limit = options.knowledge_exact_limit;
    kb.search_breadth = options.knowledge_search_breadth;
    kb.normalize = options.normalize;
    impl.knowledge = std::make_unique<engine::KnowledgeBase>(impl.encoder, kb);
    if (!impl.encoder->is_lightweight()) {
      if (options.degradation.enabled) {
        impl.lexical_encoder = std::make_shared<HashingEncoder>(options.hashing);
        impl.lexical = std::make_unique<engine::KnowledgeBase>(impl.lexical_encoder, kb);
      }
      if (options.batch_encoder) {
        DynamicBatcherOptions batching = options.encoder_batching;
        if (!batching.clock) batching.clock = options.clock;
        std::shared_ptr<Encoder> model = impl.encoder;
        impl.batcher = std::make_unique<Impl::EncodeBatcher>(
            batching, [model](std::vector<std::string>& texts, std::size_t) {
              std::vector<float> flat;
              Status s = model->encode(texts, flat);
              if (!s.is_ok()) throw std::runtime_error(s.message());
              const std::size_t d = model->dimension();
              std::vector<std::vector<float>> rows(texts.size());
              for (std::size_t i = 0; i < texts.size(); ++i) rows[i].assign(flat.begin() + i * d, flat.begin() + (i + 1) * d);
              return rows;
            });
        if (options.auto_tune) {
          AutoTunerOptions tuning = options.tuner;
          if (!tuning.clock) tuning.clock = options.clock;
          Impl* self = &impl;
          impl.tuner = std::make_unique<AutoTuner>(tuning, [self] { return self->recent_load(); },
                                                   control_of(*impl.batcher));
          impl.tuner->start();
        }
      }
    }
    impl.subscribe_tiers();
    if (options.rebuild_workers > 0) {
      impl.rebuilds = std::make_unique<engine::RebuildPool>(options.rebuild_workers, options.rebuild_queue_capacity);
    }
    impl.options = std::move(options);
    if (!impl.options.redis.host.empty()) {
      Status relay = impl.start_relay();
      if (!relay.is_ok()) return relay;
    }
    return engine;
  });
}

Result<KnowledgeLoadReport> QAEngine::load_knowledge(const std::string& path,
                                                     const KnowledgeFileOptions& file_options) {
  auto file = read_knowledge_file(path, file_options);
  if (!file) return file.status();
  auto skipped = std::move(file->skipped);
  auto report = load_entries(std::move(file->entries));
  if (!report) {
    return Status(report.status().code(), fmt::format("{}: {}", path, report.status().message()));
  }
  report->skipped = std::move(skipped);
  return report;
}

Result<KnowledgeLoadReport> QAEngine::load_entries(std::vector<KnowledgeEntry> entries) {
  return detail::guarded("loading knowledge", [&]() -> Result<KnowledgeLoadReport> {
    for (const auto& e : entries) {
      Status valid = validate_entry(e);
      if (!valid.is_ok()) return Status::invalid_argument(fmt::format("entry '{}': {}", e.id, valid.message()));
    }
    std::unique_lock<std::shared_mutex> lock(impl_->knowledge_mu);
    std::vector<KnowledgeEntry> lexical_copy;
    if (impl_->lexical) lexical_copy = entries;
    Status s = impl_->knowledge->replace_all(std::move(entries));
    if (!s.is_ok()) return s;
    if (impl_->lexical) {
      Status mirrored = impl_->lexical->replace_all(std::move(lexical_copy));
      if (!mirrored.is_ok()) impl_->log(LogLevel::kWarning, "lexical index: " + mirrored.message());
    }
    cache::KnowledgeChange reload;
    reload.kind = cache::KnowledgeChange::Kind::kReload;
    impl_->publish(std::move(reload));
    KnowledgeLoadReport report;
    report.entries = impl_->knowledge->size();
    report.phrasings = impl_->knowledge->phrasing_count();
    return report;
  });
}

Status QAEngine::add_entry(KnowledgeEntry entry) {
  return detail::guarded("adding an entry", [&]() -> Status {
    Status valid = validate_entry(entry);
    if (!valid.is_ok()) return valid;
    std::unique_lock<std::shared_mutex> lock(impl_->knowledge_mu);
    const std::string id = entry.id;
    Status s = impl_->knowledge->add(std::move(entry));
    if (s.is_ok()) {
      impl_->sync_lexical(id);
      impl_->publish(impl_->upsert_change(id));
    }
    return s;
  });
}

Status QAEngine::update_entry(KnowledgeEntry entry) {
  return detail::guarded("updating an entry", [&]() -> Status {
    Status valid = validate_entry(entry);
    if (!valid.is_ok()) return valid;
    const std::string id = entry.id;
    std::vector<std::string> hot;
    Status s;
    {
      std::unique_lock<std::shared_mutex> lock(impl_->knowledge_mu);
      s = impl_->knowledge->update(std::move(entry));
      if (s.is_ok()) {
        impl_->sync_lexical(id);
        impl_->publish(impl_->upsert_change(id), &hot);
      }
    }
    impl_->schedule_rebuilds(hot);
    return s;
  });
}

Status QAEngine::remove_entry(const std::string& id) {
  return detail::guarded("removing an entry", [&]() -> Status {
    std::vector<std::string> hot;
    Status s;
    {
      std::unique_lock<std::shared_mutex> lock(impl_->knowledge_mu);
      s = impl_->knowledge->remove(id);
      if (s.is_ok()) {
        impl_->sync_lexical(id);
        cache::KnowledgeChange removal;
        removal.kind = cache::KnowledgeChange::Kind::kRemove;
        removal.entry_id = id;
        impl_->publish(std::move(removal), &hot);
      }
    }
    // A removed entry's hot questions now get the next best answer.
    impl_->schedule_rebuilds(hot);
    return s;
  });
}

Result<KnowledgeEntry> QAEngine::entry(const std::string& id) const {
  std::shared_lock<std::shared_mutex> lock(impl_->knowledge_mu);
  const KnowledgeEntry* e = impl_->knowledge->find(id);
  if (!e) return Status::not_found(fmt::format("no entry with id '{}'", detail::clip_for_message(id)));
  return *e;
}

std::size_t QAEngine::entry_count() const {
  std::shared_lock<std::shared_mutex> lock(impl_->knowledge_mu);
  return impl_->knowledge->size();
}

Status QAEngine::reindex() {
  return detail::guarded("reindexing", [&]() -> Status {
    std::unique_lock<std::shared_mutex> lock(impl_->knowledge_mu);
    Status s = impl_->knowledge->reindex();
    if (!s.is_ok()) return s;
    if (impl_->lexical) {
      Status lexical = impl_->lexical->reindex();
      if (!lexical.is_ok()) impl_->log(LogLevel::kWarning, "lexical index: " + lexical.message());
    }
    // Vectors changed meaning and retrieval may rank entries differently:
    // no cached answer or question vector is trusted any more.
    impl_->clear_tiers();
    return s;
  });
}

Result<Answer> QAEngine::ask(std::string_view question, const AskOptions& options) {
  return detail::guarded("answering", [&]() -> Result<Answer> { return impl_->ask(question, options); });
}

std::vector<Result<Answer>> QAEngine::ask_batch(const std::vector<std::string>& questions,
                                                const AskOptions& options) {
  std::vector<Result<Answer>> answers;
  answers.reserve(questions.size());
  for (const auto& q : questions) answers.push_back(ask(q, options));
  return answers;
}

Status QAEngine::correct_cached_answer(std::string_view question, std::string text, const AskOptions& options) {
  return detail::guarded("correcting a cached answer", [&]() -> Status {
    if (text.find_first_not_of(" \t\r\n") == std::string::npos) {
      return Status::invalid_argument("the corrected answer text is empty");
    }
    if (const auto bad = text::find_invalid_utf8(text); bad != std::string::npos) {
      return Status::invalid_argument(fmt::format("the corrected answer text is not valid UTF-8 (byte {})", bad));
    }
    auto keys = impl_->cache_keys(question, options.tenant);
    if (!keys) return keys.status();
    const auto& [normalized, key] = keys.value();
    std::unique_lock<std::shared_mutex> lock(impl_->knowledge_mu);
    // Keep the provenance of what was cached, so knowledge updates still
    // reach the correction.
    Answer corrected;
    for (ResultCache* exact : {impl_->result_cache.get(), impl_->knowledge_cache.get()}) {
      if (!exact) continue;
      if (auto old = exact->lookup(key)) {
        corrected = std::move(*old);
        break;
      }
    }
    corrected.text = std::move(text);
    corrected.extracted.reset();
    corrected.tier = AnswerTier::kKnowledge;
    if (impl_->result_cache) impl_->result_cache->insert(key, corrected);
    // The knowledge tier would serve what retrieval found once the result
    // tier's copy expires: the correction replaces it everywhere.
    if (impl_->knowledge_cache) impl_->knowledge_cache->erase(key);
    if (impl_->semantic_cache) {
      std::vector<float> vector;
      const Encoder& enc = *impl_->encoder;
      Status s = enc.encode({enc.wants_normalized_text() ? normalized : std::string(question)}, vector);
      if (!s.is_ok()) return s;
      impl_->semantic_cache->erase_question(normalized, options.tenant);
      impl_->semantic_cache->insert(vector.data(), normalized, corrected, options.tenant);
    }
    return Status::ok();
  });
}

Result<std::size_t> QAEngine::delete_cached_answer(std::string_view question, const AskOptions& options) {
  return detail::guarded("deleting a cached answer", [&]() -> Result<std::size_t> {
    auto keys = impl_->cache_keys(question, options.tenant);
    if (!keys) return keys.status();
    const auto& [normalized, key] = keys.value();
    std::size_t removed = 0;
    for (ResultCache* exact : {impl_->result_cache.get(), impl_->knowledge_cache.get()}) {
      if (exact && exact->erase(key)) ++removed;
    }
    if (impl_->semantic_cache) removed += impl_->semantic_cache->erase_question(normalized, options.tenant);
    return removed;
  });
}

Result<std::size_t> QAEngine::invalidate_entry(const std::string& id) {
  return detail::guarded("invalidating an entry", [&]() -> Result<std::size_t> {
    std::unique_lock<std::shared_mutex> lock(impl_->knowledge_mu);
    const KnowledgeEntry* stored = impl_->knowledge->find(id);
    if (!stored) return Status::not_found(fmt::format("no entry with id '{}'", detail::clip_for_message(id)));
    cache::KnowledgeChange change;
    change.kind = cache::KnowledgeChange::Kind::kInvalidate;
    change.entry_id = id;
    change.version = stored->version;
    return impl_->publish(std::move(change));
  });
}

Status QAEngine::save_cache_snapshot(const std::string& path) const {
  if (!impl_->semantic_cache) return Status::failed_precondition("the semantic cache is disabled");
  return impl_->semantic_cache->save_snapshot(path);
}

Result<std::size_t> QAEngine::load_cache_snapshot(const std::string& path) {
  if (!impl_->semantic_cache) return Status::failed_precondition("the semantic cache is disabled");
  std::shared_lock<std::shared_mutex> lock(impl_->knowledge_mu);
  const auto& knowledge = *impl_->knowledge;
  return impl_->semantic_cache->load_snapshot(path, [&](const Answer& a) {
    // Only answers built from the entries' current versions come back.
    return std::all_of(a.matches.begin(), a.matches.end(), [&](const EntryMatch& m) {
      const KnowledgeEntry* e = knowledge.find(m.entry_id);
      return e != nullptr && e->version == m.version;
    });
  });
}

PreloadReport QAEngine::preload_questions(const std::vector<std::string>& questions, const AskOptions& options,
                                         const std::function<void(std::size_t, std::size_t)>& progress) {
  PreloadReport report;
  for (std::size_t i = 0; i < questions.size(); ++i) {
    auto answer = ask(questions[i], options);
    ++report.questions;
    if (!answer) {
      report.rejected.push_back({i + 1, answer.status().message()});
    } else if (answer->tier == AnswerTier::kFallback) {
      ++report.fallbacks;
    } else if (answer->degraded) {
      ++report.degraded;
    } else {
      ++report.cached;
    }
    if (progress && ((i + 1) % 1000 == 0 || i + 1 == questions.size())) progress(i + 1, questions.size());
  }
  return report;
}

Result<PreloadReport> QAEngine::preload_questions_file(const std::string& path, const AskOptions& options,
                                                       const std::function<void(std::size_t, std::size_t)>& progress) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::not_found(fmt::format("question file '{}' cannot be opened (missing or unreadable)", path));
  std::vector<std::string> questions;
  std::vector<std::size_t> line_of;  // question index -> line in the file
  std::string line;
  for (std::size_t number = 1;; ++number) {
    const detail::LineRead read = detail::read_bounded_line(in, line);
    if (read == detail::LineRead::kEnd) break;
    if (read == detail::LineRead::kTooLong) {
      return Status::out_of_range(fmt::format("{}: line {} is longer than {} bytes: not a file of questions", path,
                                              number, detail::kDefaultMaxLineBytes));
    }
    const auto first = line.find_first_not_of(" \t");
    if (first == std::string::npos || line[first] == '#') continue;
    questions.push_back(line);
    line_of.push_back(number);
  }
  if (in.bad()) return Status::io_error(fmt::format("{}: read failed", path));
  PreloadReport report = preload_questions(questions, options, progress);
  for (auto& bad : report.rejected) bad.line = line_of[bad.line - 1];
  return report;
}

std::vector<CachedIntent> QAEngine::top_intents(std::size_t intents, const std::string& tenant) const {
  if (!impl_->semantic_cache) return {};
  try {
    return impl_->semantic_cache->top_intents(intents, tenant);
  } catch (const std::exception&) {
    return {};  // clustering is a report: a FAISS failure leaves it empty rather than failing the caller
  }
}

void QAEngine::wait_for_rebuilds() {
  if (impl_->rebuilds) impl_->rebuilds->drain();
}

MetricsSnapshot QAEngine::metrics() const {
  MetricsSnapshot snapshot = impl_->metrics.snapshot();
  if (impl_->rebuilds) {
    snapshot.rebuilds_completed = impl_->rebuilds->completed();
    snapshot.rebuilds_dropped = impl_->rebuilds->dropped();
  }
  // The tiers' stats share these field names; the totals cover all three.
  auto add_tier = [&snapshot](const auto& s) {
    snapshot.cache_evictions += s.evictions;
    snapshot.cache_expirations += s.expirations;
    snapshot.cache_invalidations += s.invalidations;
    snapshot.cache_entries += s.size;
    snapshot.cache_bytes += s.bytes;
  };
  for (const ResultCache* exact : {impl_->result_cache.get(), impl_->knowledge_cache.get()}) {
    if (exact) add_tier(exact->stats());
  }
  if (impl_->tuner) snapshot.tuner_moves = impl_->tuner->moves();
  if (impl_->batcher) {
    const DynamicBatcherStats b = impl_->batcher->stats();
    snapshot.encoder_queue_depth = b.queue_depth;
    snapshot.encoder_batches = b.batches;
    snapshot.encoder_rejected = b.rejected;
    snapshot.encoder_timed_out = b.timed_out;
    snapshot.encoder_batch_sizes = b.batch_sizes;
    snapshot.encoder_max_batch_size = b.max_batch_size;
  }
  if (impl_->semantic_cache) {
    const SemanticCacheStats s = impl_->semantic_cache->stats();
    add_tier(s);
    snapshot.cache_displacements = s.displacements;
  }
  if (impl_->relay) {
    const cache::RedisRelayStats redis = impl_->relay->stats();
    snapshot.redis_connected = redis.connected;
    snapshot.redis_outages = redis.outages;
    snapshot.changes_published = redis.published;
    snapshot.changes_received = redis.received;
    snapshot.changes_replayed = redis.replayed;
    snapshot.changes_queued = redis.queued;
    snapshot.changes_dropped = redis.dropped;
    snapshot.changes_malformed = redis.malformed;
    snapshot.redis_gaps = redis.gaps;
  }
  return snapshot;
}
void QAEngine::reset_metrics() { impl_->metrics.reset(); }

LoadSample QAEngine::recent_load() { return impl_->recent_load(); }

BatchControl QAEngine::encoder_batch_control() {
  if (!impl_->batcher) return {};
  return control_of(*impl_->batcher);
}

std::vector<TunerMove> QAEngine::tuner_history() const {
  return impl_->tuner ? impl_->tuner->history() : std::vector<TunerMove>{};
}

void QAEngine::clear_caches() { impl_->clear_tiers(); }

Status QAEngine::set_tenant_semantic_threshold(const std::string& tenant, std::optional<float> threshold) {
  if (!impl_->semantic_cache) return Status::failed_precondition("the semantic cache is disabled");
  if (Status valid = validate_tenant(tenant); !valid.is_ok()) return valid;
  return impl_->semantic_cache->set_tenant_threshold(tenant, threshold);
}

const Encoder& QAEngine::encoder() const { return *impl_->encoder; }

}  // namespace rapidqa

#include "engine/options_validation.h"

#include <cmath>

#include <fmt/format.h>

#include "cache/redis_relay.h"
#include "text/utf8.h"

namespace rapidqa::engine {
namespace {

// Longest tenant name: tenants name namespaces, not documents; a longer one
// is refused rather than stored in every cache key.
constexpr std::size_t kMaxTenantBytes = 256;
// The longest a cache may keep an answer: beyond a year is a typo.
constexpr auto kMaxCacheTtl = std::chrono::hours(24 * 366);

Status check_score(float score, const char* field) {
  if (score >= -1.0f && score <= 1.0f) return Status::ok();  // false for NaN too
  return Status::invalid_argument(fmt::format("{} {} is outside [-1, 1]", field, score));
}

Status check_tier(const ResultCacheOptions& o, const char* name) {
  if (Status valid = validate_result_cache_options(o); !valid.is_ok()) {
    return Status::invalid_argument(fmt::format("{}.{}", name, valid.message()));
  }
  return Status::ok();
}

}  // namespace

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

// A probability threshold: NaN and values outside [0, 1] are refused.
Status check_confidence(float value, const char* name) {
  if (value >= 0.0f && value <= 1.0f) return Status::ok();
  return Status::invalid_argument(fmt::format("{} {} is outside [0, 1]", name, value));
}

// Every option, refused with its name rather than quietly fixed.
Status validate_engine_options(const EngineOptions& o) {
  if (o.encoder && o.encoder->dimension() == 0) return Status::invalid_argument("encoder has dimension 0");
  // Checked with a model encoder too: the degraded path's lexical mirror
  // always runs a HashingEncoder with these options.
  if (Status hashing = validate_hashing_encoder_options(o.hashing); !hashing.is_ok()) {
    return Status::invalid_argument("hashing." + hashing.message());
  }
  if (Status s = check_score(o.min_answer_score, "min_answer_score"); !s.is_ok()) return s;
  if (Status s = check_confidence(o.min_answer_confidence, "min_answer_confidence"); !s.is_ok()) return s;
  if (o.min_question_characters == 0) return Status::invalid_argument("min_question_characters must be at least 1");
  // Above 1 is allowed here: it switches the lexical path's answers off.
  if (!std::isfinite(o.degradation.lexical_min_score)) {
    return Status::invalid_argument(fmt::format("degradation.lexical_min_score {} is not finite", o.degradation.lexical_min_score));
  }
  if (o.top_k == 0 || o.top_k > kMaxTopK) {
    return Status::invalid_argument(fmt::format("top_k {} is outside [1, {}]", o.top_k, kMaxTopK));
  }
  if (o.retrieval.fusion != RetrievalFusion::kDense) {
    const RetrievalOptions& r = o.retrieval;
    if (r.lexical_candidates + r.dense_candidates == 0 || r.lexical_candidates > kMaxRetrievalCandidates ||
        r.dense_candidates > kMaxRetrievalCandidates) {
      return Status::invalid_argument(fmt::format(
          "retrieval.lexical_candidates {} and retrieval.dense_candidates {} must each be at most {} and not both 0",
          r.lexical_candidates, r.dense_candidates, kMaxRetrievalCandidates));
    }
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
  if (o.generator && (o.generator_sources == 0 || o.generator_sources > kMaxTopK)) {
    return Status::invalid_argument(fmt::format("generator_sources must be in [1, {}]", kMaxTopK));
  }
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
    Status tuner = validate_auto_tuner_options(o.tuner);
    if (!tuner.is_ok()) return Status(tuner.code(), "tuner." + tuner.message());
  }
  if (!o.knowledge_store.empty() && o.knowledge_store_options.read_only) {
    return Status::invalid_argument(
        "knowledge_store_options.read_only: an engine writes its store; open the store itself "
        "(KnowledgeStore::open) to read it alongside a running engine");
  }
  if (o.knowledge_store_options.busy_timeout.count() < 0) {
    return Status::invalid_argument("knowledge_store_options.busy_timeout is negative");
  }
  if (!o.redis.host.empty()) return cache::validate_redis_sync_options(o.redis);
  return Status::ok();
}

Status validate_ask_options(const AskOptions& o) {
  if (o.semantic_threshold && !(*o.semantic_threshold > 0.0f && *o.semantic_threshold <= 1.0f)) {
    return Status::invalid_argument(fmt::format("semantic_threshold {} is outside (0, 1]", *o.semantic_threshold));
  }
  if (o.top_k && (*o.top_k == 0 || *o.top_k > kMaxTopK)) {
    return Status::invalid_argument(fmt::format("top_k {} is outside [1, {}]", *o.top_k, kMaxTopK));
  }
  if (o.min_answer_score) {
    if (Status s = check_score(*o.min_answer_score, "min_answer_score"); !s.is_ok()) return s;
  }
  if (o.min_answer_confidence) {
    if (Status s = check_confidence(*o.min_answer_confidence, "min_answer_confidence"); !s.is_ok()) return s;
  }
  if (o.timeout.count() < 0) return Status::invalid_argument(fmt::format("timeout {} ms is negative", o.timeout.count()));
  const int priority = static_cast<int>(o.priority);
  if (priority < 0 || priority > static_cast<int>(BatchPriority::kLow)) {
    return Status::invalid_argument(fmt::format("priority {} is not high, normal or low", priority));
  }
  return validate_tenant(o.tenant);
}
}  // namespace rapidqa::engine

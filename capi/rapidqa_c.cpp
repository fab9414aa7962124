// The C ABI: translates between rapidqa.h and the C++ API, nothing more.
// No exception leaves an extern "C" function.
#include "rapidqa/rapidqa.h"

#include <algorithm>
#include <cstddef>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "rapidqa/qa_engine.h"
#include "rapidqa/generator.h"
#include "rapidqa/remote_encoder.h"
#include "rapidqa/version.h"
#if RAPIDQA_HAS_MODELS
#include "rapidqa/quantizer.h"
#include "rapidqa/transformer_encoder.h"
#endif

// The C enums are the C++ ones, value for value: the casts below rely on it.
static_assert(RQA_OK == static_cast<int>(rapidqa::StatusCode::kOk) &&
              RQA_INVALID_ARGUMENT == static_cast<int>(rapidqa::StatusCode::kInvalidArgument) &&
              RQA_NOT_FOUND == static_cast<int>(rapidqa::StatusCode::kNotFound) &&
              RQA_ALREADY_EXISTS == static_cast<int>(rapidqa::StatusCode::kAlreadyExists) &&
              RQA_OUT_OF_RANGE == static_cast<int>(rapidqa::StatusCode::kOutOfRange) &&
              RQA_FAILED_PRECONDITION == static_cast<int>(rapidqa::StatusCode::kFailedPrecondition) &&
              RQA_RESOURCE_EXHAUSTED == static_cast<int>(rapidqa::StatusCode::kResourceExhausted) &&
              RQA_DEADLINE_EXCEEDED == static_cast<int>(rapidqa::StatusCode::kDeadlineExceeded) &&
              RQA_DATA_LOSS == static_cast<int>(rapidqa::StatusCode::kDataLoss) &&
              RQA_IO_ERROR == static_cast<int>(rapidqa::StatusCode::kIoError) &&
              RQA_UNAVAILABLE == static_cast<int>(rapidqa::StatusCode::kUnavailable) &&
              RQA_INTERNAL == static_cast<int>(rapidqa::StatusCode::kInternal),
              "rqa_status and rapidqa::StatusCode disagree");
static_assert(RQA_TIER_RESULT_CACHE == static_cast<int>(rapidqa::AnswerTier::kResultCache) &&
              RQA_TIER_SEMANTIC_CACHE == static_cast<int>(rapidqa::AnswerTier::kSemanticCache) &&
              RQA_TIER_KNOWLEDGE == static_cast<int>(rapidqa::AnswerTier::kKnowledge) &&
              RQA_TIER_FALLBACK == static_cast<int>(rapidqa::AnswerTier::kFallback) &&
              RQA_TIER_KNOWLEDGE_CACHE == static_cast<int>(rapidqa::AnswerTier::kKnowledgeCache),
              "rqa_tier and rapidqa::AnswerTier disagree");
static_assert(RQA_LOG_INFO == static_cast<int>(rapidqa::LogLevel::kInfo) &&
              RQA_LOG_WARNING == static_cast<int>(rapidqa::LogLevel::kWarning) &&
              RQA_LOG_ERROR == static_cast<int>(rapidqa::LogLevel::kError),
              "rqa_log_level and rapidqa::LogLevel disagree");

struct rqa_engine {
  std::unique_ptr<rapidqa::QAEngine> engine;
};

struct rqa_answer {
  rapidqa::Answer answer;
};


namespace {

thread_local std::string t_last_error;

// The process-wide log callback (rqa_log_set). Engines hold a sink that
// reads it per message, so a change reaches engines created before it.
struct LogTarget {
  std::mutex mu;
  rqa_log_callback callback = nullptr;  // null: stderr
  void* user_data = nullptr;
};
LogTarget& log_target() {
  static LogTarget* target = new LogTarget;  // never destroyed: threads may log during exit
  return *target;
}

rapidqa::LogSink c_log_sink() {
  return [stderr_sink = rapidqa::stderr_log_sink()](rapidqa::LogLevel level, const std::string& message) {
    LogTarget& target = log_target();
    std::lock_guard<std::mutex> lock(target.mu);
    if (target.callback) {
      target.callback(static_cast<rqa_log_level>(level), message.c_str(), target.user_data);
    } else {
      stderr_sink(level, message);
    }
  };
}


rqa_status to_c(rapidqa::StatusCode code) {
  using rapidqa::StatusCode;
  switch (code) {
    case StatusCode::kOk: return RQA_OK;
    case StatusCode::kInvalidArgument: return RQA_INVALID_ARGUMENT;
    case StatusCode::kNotFound: return RQA_NOT_FOUND;
    case StatusCode::kAlreadyExists: return RQA_ALREADY_EXISTS;
    case StatusCode::kOutOfRange: return RQA_OUT_OF_RANGE;
    case StatusCode::kFailedPrecondition: return RQA_FAILED_PRECONDITION;
    case StatusCode::kResourceExhausted: return RQA_RESOURCE_EXHAUSTED;
    case StatusCode::kDeadlineExceeded: return RQA_DEADLINE_EXCEEDED;
    case StatusCode::kDataLoss: return RQA_DATA_LOSS;
    case StatusCode::kIoError: return RQA_IO_ERROR;
    case StatusCode::kUnavailable: return RQA_UNAVAILABLE;
    case StatusCode::kInternal: return RQA_INTERNAL;
  }
  return RQA_INTERNAL;
}

rqa_status fail(rqa_status status, std::string message) {
  t_last_error = std::move(message);
  return status;
}

rqa_status report(const rapidqa::Status& status) {
  if (status.is_ok()) {
    t_last_error.clear();
    return RQA_OK;
  }
  return fail(to_c(status.code()), status.message());
}

#if !RAPIDQA_HAS_MODELS
rqa_status models_not_built(const char* what) {
  return fail(RQA_FAILED_PRECONDITION,
              fmt::format("{} needs the models component, and this rapidqa was built without it "
                          "(rqa_components() is \"{}\"; build with -DRAPIDQA_WITH_MODELS=ON)",
                          what, RAPIDQA_COMPONENTS_TEXT));
}
#endif

rqa_status null_argument(const char* name) {
  return fail(RQA_INVALID_ARGUMENT, std::string(name) + " must not be NULL");
}

// The body of every fallible extern "C" function.
template <typename Fn>
rqa_status translate(Fn&& fn) noexcept {
  try {
    return fn();
  } catch (const std::bad_alloc&) {
    return fail(RQA_RESOURCE_EXHAUSTED, "out of memory");
  } catch (const std::exception& e) {
    return fail(RQA_INTERNAL, e.what());
  } catch (...) {
    return fail(RQA_INTERNAL, "unknown exception");
  }
}

// A call that yields a count: the status, and the count into `out` (which
// may be NULL) on success.
rqa_status report_count(const rapidqa::Result<std::size_t>& count, size_t* out) {
  if (!count) return report(count.status());
  if (out) *out = count.value();
  return report(rapidqa::Status::ok());
}

rapidqa::AskOptions tenant_options(const char* tenant) {
  rapidqa::AskOptions options;
  if (tenant) options.tenant = tenant;
  return options;
}

rqa_status change_entry(rqa_engine* engine, const char* entry_json, bool update) {
  return translate([&] {
    if (!engine) return null_argument("engine");
    if (!entry_json) return null_argument("entry_json");
    auto entry = rapidqa::parse_knowledge_entry_json(entry_json);
    if (!entry) return report(entry.status());
    return report(update ? engine->engine->update_entry(std::move(entry).value())
                         : engine->engine->add_entry(std::move(entry).value()));
  });
}

// Hands text to the caller as a string it frees with rqa_free.
rqa_status string_out(const std::string& text, char** out) {
  char* buffer = static_cast<char*>(std::malloc(text.size() + 1));
  if (!buffer) return fail(RQA_RESOURCE_EXHAUSTED, "out of memory");
  std::memcpy(buffer, text.c_str(), text.size() + 1);
  *out = buffer;
  return report(rapidqa::Status::ok());
}

// Hands a metrics rendering to the caller as a string it frees with rqa_free.
rqa_status metrics_out(const rqa_engine* engine, char** out, std::string (rapidqa::MetricsSnapshot::*render)() const) {
  return translate([&] {
    if (!out) return null_argument("out");
    *out = nullptr;
    if (!engine) return null_argument("engine");
    return string_out((engine->engine->metrics().*render)(), out);
  });
}

// "a,b,,c" -> {"a", "b", "c"}: the C ABI's lists of URLs.
std::vector<std::string> comma_separated(const std::string& text) {
  std::vector<std::string> items;
  for (std::size_t begin = 0; begin <= text.size();) {
    const std::size_t end = std::min(text.find(',', begin), text.size());
    if (end > begin) items.push_back(text.substr(begin, end - begin));
    begin = end + 1;
  }
  return items;
}

}  // namespace

extern "C" {

void rqa_engine_options_init(rqa_engine_options* options) {
  if (!options) return;
  const rapidqa::EngineOptions defaults;
  std::memset(options, 0, sizeof(*options));
  options->struct_size = sizeof(*options);
  options->hashing_dimension = defaults.hashing.dimension;
  options->min_answer_score = defaults.min_answer_score;
  options->enable_result_cache = defaults.enable_result_cache ? 1 : 0;
  options->enable_semantic_cache = defaults.enable_semantic_cache ? 1 : 0;
  options->result_cache_ttl_seconds = static_cast<double>(defaults.result_cache.ttl.count()) / 1000.0;
  options->semantic_cache_ttl_seconds = static_cast<double>(defaults.semantic_cache.ttl.count()) / 1000.0;
  options->semantic_similarity_threshold = defaults.semantic_cache.similarity_threshold;
  options->intra_op_threads = defaults.threads.intra_op;
  options->redis_port = defaults.redis.port;
}

rqa_status rqa_engine_create(const rqa_engine_options* options, rqa_engine** out) {
  return translate([&] {
    if (!out) return null_argument("out");
    *out = nullptr;
    rqa_engine_options c;
    rqa_engine_options_init(&c);
    if (options) {
      // The smallest layout any released header had ends at intra_op_threads.
      if (options->struct_size < offsetof(rqa_engine_options, intra_op_threads) + sizeof(int) ||
          options->struct_size > sizeof(rqa_engine_options)) {
        return fail(RQA_INVALID_ARGUMENT, "options->struct_size is not a size this library knows; "
                                          "initialise options with rqa_engine_options_init");
      }
      std::memcpy(&c, options, options->struct_size);
    }
    // A year at most: longer is a typo, and NaN or a huge value would
    // overflow the conversion to milliseconds.
    for (const auto& [name, seconds] : {std::make_pair("result_cache_ttl_seconds", c.result_cache_ttl_seconds),
                                        std::make_pair("semantic_cache_ttl_seconds", c.semantic_cache_ttl_seconds)}) {
      if (!(seconds == 0 || (seconds >= 0.001 && seconds <= 366.0 * 86400.0))) {
        return fail(RQA_INVALID_ARGUMENT, fmt::format("{} must be 0 (cache nothing) or a number of seconds in "
                                                      "[0.001, 31622400], not {:.6g}", name, seconds));
      }
    }
    rapidqa::EngineOptions o;
    o.log = c_log_sink();
    o.hashing.dimension = c.hashing_dimension;
    o.min_answer_score = c.min_answer_score;
    // A TTL of 0 keeps nothing: the tier is off.
    o.enable_result_cache = c.enable_result_cache != 0 && c.result_cache_ttl_seconds > 0;
    o.enable_semantic_cache = c.enable_semantic_cache != 0 && c.semantic_cache_ttl_seconds > 0;
    o.result_cache.ttl = std::chrono::milliseconds(static_cast<std::int64_t>(std::ceil(c.result_cache_ttl_seconds * 1000.0)));
    o.semantic_cache.ttl =
        std::chrono::milliseconds(static_cast<std::int64_t>(std::ceil(c.semantic_cache_ttl_seconds * 1000.0)));
    o.semantic_cache.similarity_threshold = c.semantic_similarity_threshold;
    o.threads.intra_op = c.intra_op_threads;
    // Fields past the original layout only count when the caller's struct has them.
    const bool has_models = c.struct_size >= offsetof(rqa_engine_options, encoder_pooling_cls) + sizeof(int);
#if RAPIDQA_HAS_MODELS
    if (has_models && c.encoder_model_dir && *c.encoder_model_dir) {
      rapidqa::TransformerEncoderOptions eo;
      eo.model_dir = c.encoder_model_dir;
      eo.pooling = c.encoder_pooling_cls ? rapidqa::Pooling::kCls : rapidqa::Pooling::kFromModel;
      const bool has_encoder_choices = c.struct_size >= offsetof(rqa_engine_options, encoder_prompt) + sizeof(char*);
      if (has_encoder_choices && c.encoder_pooling && *c.encoder_pooling) {
        auto pooling = rapidqa::pooling_from_name(c.encoder_pooling);
        if (!pooling || pooling.value() == rapidqa::Pooling::kFromModel) {
          return fail(RQA_INVALID_ARGUMENT,
                      fmt::format("encoder_pooling: '{}' is not one of cls, mean, max, mean_sqrt_len, weightedmean, "
                                  "lasttoken",
                                  c.encoder_pooling));
        }
        eo.pooling = pooling.value();
      }
      if (has_encoder_choices && c.encoder_prompt) eo.prompt = std::string(c.encoder_prompt);
      auto encoder = rapidqa::TransformerEncoder::load(eo);
      if (!encoder) return report(encoder.status());
      o.encoder = std::move(encoder).value();
    }
    if (has_models && c.reader_model_dir && *c.reader_model_dir) {
      rapidqa::ExtractiveReaderOptions ro;
      ro.model_dir = c.reader_model_dir;
      auto reader = rapidqa::ExtractiveReader::load(ro);
      if (!reader) return report(reader.status());
      o.reader = std::move(reader).value();
    }
#else
    if (has_models && c.encoder_model_dir && *c.encoder_model_dir) return models_not_built("encoder_model_dir");
    if (has_models && c.reader_model_dir && *c.reader_model_dir) return models_not_built("reader_model_dir");
#endif
    const bool has_redis = c.struct_size >= offsetof(rqa_engine_options, redis_port) + sizeof(int);
    if (has_redis && c.redis_host && *c.redis_host) {
      o.redis.host = c.redis_host;
      o.redis.port = c.redis_port;
    }
    const bool has_key = c.struct_size >= offsetof(rqa_engine_options, snapshot_key) + sizeof(const char*);
    if (has_key && c.snapshot_key) o.semantic_cache.snapshot_key = c.snapshot_key;
    const bool has_store = c.struct_size >= offsetof(rqa_engine_options, knowledge_store) + sizeof(const char*);
    if (has_store && c.knowledge_store) o.knowledge_store = c.knowledge_store;
    const bool has_snapshot = c.struct_size >= offsetof(rqa_engine_options, index_snapshot) + sizeof(const char*);
    if (has_snapshot && c.index_snapshot) o.index_snapshot = c.index_snapshot;
    const bool has_remote = c.struct_size >= offsetof(rqa_engine_options, remote_encoder_dimension) + sizeof(size_t);
    if (has_remote && c.remote_encoder_url && *c.remote_encoder_url) {
      if (o.encoder) return fail(RQA_INVALID_ARGUMENT, "encoder_model_dir and remote_encoder_url exclude each other");
      rapidqa::RemoteEncoderOptions ro;
      ro.endpoints = comma_separated(c.remote_encoder_url);
      if (c.remote_encoder_protocol && *c.remote_encoder_protocol) {
        const auto protocol = rapidqa::remote_protocol_from_name(c.remote_encoder_protocol);
        if (!protocol) {
          return fail(RQA_INVALID_ARGUMENT, "remote_encoder_protocol must be \"openai\", \"kserve\" or \"kserve-grpc\"");
        }
        ro.protocol = *protocol;
      }
      if (c.remote_encoder_model) ro.model = c.remote_encoder_model;
      if (c.remote_encoder_token) ro.bearer_token = c.remote_encoder_token;
      ro.dimension = c.remote_encoder_dimension;
      auto encoder = rapidqa::RemoteEncoder::create(std::move(ro));
      if (!encoder) return report(encoder.status());
      o.encoder = std::move(encoder).value();
      o.encoder_batching = rapidqa::remote_encoder_batching();
    }
    const bool has_generator = c.struct_size >= offsetof(rqa_engine_options, generator_sources) + sizeof(size_t);
    if (has_generator && c.generator_url && *c.generator_url) {
      rapidqa::RemoteGeneratorOptions go;
      go.endpoints = comma_separated(c.generator_url);
      if (c.generator_model) go.model = c.generator_model;
      if (c.generator_token) go.bearer_token = c.generator_token;
      if (c.generator_prompt) go.prompt_template = c.generator_prompt;
      if (c.generator_max_tokens > 0) go.max_tokens = c.generator_max_tokens;
      if (c.generator_sources > 0) o.generator_sources = c.generator_sources;
      auto generator = rapidqa::RemoteGenerator::create(std::move(go));
      if (!generator) return report(generator.status());
      o.generator = std::move(generator).value();
    }
    const bool has_quality =
        c.struct_size >= offsetof(rqa_engine_options, semantic_verification_rate) + sizeof(float);
    if (has_quality) {
      o.min_answer_confidence = c.min_answer_confidence;
      if (c.min_question_characters > 0) o.min_question_characters = c.min_question_characters;
      if (c.semantic_target_error_rate != 0) o.semantic_cache.target_error_rate = c.semantic_target_error_rate;
      if (c.semantic_verification_rate != 0) o.semantic_cache.verification_rate = c.semantic_verification_rate;
    }
    const bool has_retrieval = c.struct_size >= offsetof(rqa_engine_options, word_dictionary) + sizeof(const char*);
    if (has_retrieval) {
      if (c.retrieval_fusion && *c.retrieval_fusion) {
        auto fusion = rapidqa::retrieval_fusion_from_name(c.retrieval_fusion);
        if (!fusion) return fail(RQA_INVALID_ARGUMENT, "retrieval_fusion: " + fusion.status().message());
        o.retrieval.fusion = fusion.value();
      }
      if (c.word_dictionary) o.retrieval.word_dictionary = c.word_dictionary;
    }
    auto engine = rapidqa::QAEngine::create(std::move(o));
    if (!engine) return report(engine.status());
    *out = new rqa_engine{std::move(engine).value()};
    return report(rapidqa::Status::ok());
  });
}

void rqa_engine_destroy(rqa_engine* engine) { delete engine; }

rqa_status rqa_engine_load_knowledge(rqa_engine* engine, const char* path, size_t* loaded_entries) {
  return translate([&] {
    if (!engine) return null_argument("engine");
    if (!path) return null_argument("path");
    auto loaded = engine->engine->load_knowledge(path);
    if (!loaded) return report(loaded.status());
    if (loaded_entries) *loaded_entries = loaded->entries;
    return report(rapidqa::Status::ok());
  });
}

rqa_status rqa_engine_add_entry(rqa_engine* engine, const char* entry_json) {
  return change_entry(engine, entry_json, false);
}

rqa_status rqa_engine_update_entry(rqa_engine* engine, const char* entry_json) {
  return change_entry(engine, entry_json, true);
}

rqa_status rqa_engine_remove_entry(rqa_engine* engine, const char* entry_id) {
  return translate([&] {
    if (!engine) return null_argument("engine");
    if (!entry_id) return null_argument("entry_id");
    return report(engine->engine->remove_entry(entry_id));
  });
}

rqa_status rqa_engine_export_knowledge(const rqa_engine* engine, const char* path, size_t* exported) {
  return translate([&] {
    if (!engine) return null_argument("engine");
    if (!path) return null_argument("path");
    return report_count(engine->engine->export_knowledge(path), exported);
  });
}

rqa_status rqa_engine_entry_history(const rqa_engine* engine, const char* entry_id, char** out) {
  return translate([&] {
    if (!out) return null_argument("out");
    *out = nullptr;
    if (!engine) return null_argument("engine");
    if (!entry_id) return null_argument("entry_id");
    auto history = engine->engine->entry_history(entry_id);
    if (!history) return report(history.status());
    std::string lines;
    for (const auto& v : *history) {
      nlohmann::json line = {{"version", v.version}, {"removed", v.removed}, {"committed_at_ms", v.committed_at_ms}};
      if (!v.removed) line["entry"] = nlohmann::json::parse(rapidqa::knowledge_entry_to_json(v.entry));
      lines += line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      lines += '\n';
    }
    return string_out(lines, out);
  });
}

rqa_status rqa_engine_rollback_entry(rqa_engine* engine, const char* entry_id, uint64_t version,
                                     uint64_t* new_version) {
  return translate([&] {
    if (!engine) return null_argument("engine");
    if (!entry_id) return null_argument("entry_id");
    auto rolled = engine->engine->rollback_entry(entry_id, version);
    if (!rolled) return report(rolled.status());
    if (new_version) *new_version = rolled->version;
    return report(rapidqa::Status::ok());
  });
}

rqa_status rqa_engine_invalidate_entry(rqa_engine* engine, const char* entry_id, size_t* removed) {
  return translate([&] {
    if (!engine) return null_argument("engine");
    if (!entry_id) return null_argument("entry_id");
    return report_count(engine->engine->invalidate_entry(entry_id), removed);
  });
}

rqa_status rqa_engine_preload_questions(rqa_engine* engine, const char* path, const char* tenant, size_t* cached) {
  return translate([&] {
    if (!engine) return null_argument("engine");
    if (!path) return null_argument("path");
    auto report = engine->engine->preload_questions_file(path, tenant_options(tenant));
    return report_count(report ? rapidqa::Result<std::size_t>(report->cached)
                               : rapidqa::Result<std::size_t>(report.status()),
                        cached);
  });
}

rqa_status rqa_engine_set_tenant_threshold(rqa_engine* engine, const char* tenant, float threshold) {
  return translate([&] {
    if (!engine) return null_argument("engine");
    std::optional<float> own;
    if (threshold != 0.0f) own = threshold;
    return report(engine->engine->set_tenant_semantic_threshold(tenant ? tenant : "", own));
  });
}

rqa_status rqa_engine_correct_cached_answer(rqa_engine* engine, const char* question, const char* tenant,
                                            const char* text) {
  return translate([&] {
    if (!engine) return null_argument("engine");
    if (!question) return null_argument("question");
    if (!text) return null_argument("text");
    return report(engine->engine->correct_cached_answer(question, text, tenant_options(tenant)));
  });
}

rqa_status rqa_engine_delete_cached_answer(rqa_engine* engine, const char* question, const char* tenant,
                                           size_t* removed) {
  return translate([&] {
    if (!engine) return null_argument("engine");
    if (!question) return null_argument("question");
    return report_count(engine->engine->delete_cached_answer(question, tenant_options(tenant)), removed);
  });
}

rqa_status rqa_engine_save_cache_snapshot(const rqa_engine* engine, const char* path) {
  return translate([&] {
    if (!engine) return null_argument("engine");
    if (!path) return null_argument("path");
    return report(engine->engine->save_cache_snapshot(path));
  });
}

rqa_status rqa_engine_load_cache_snapshot(rqa_engine* engine, const char* path, size_t* loaded) {
  return translate([&] {
    if (!engine) return null_argument("engine");
    if (!path) return null_argument("path");
    return report_count(engine->engine->load_cache_snapshot(path), loaded);
  });
}

size_t rqa_engine_entry_count(const rqa_engine* engine) {
  try {
    return engine ? engine->engine->entry_count() : 0;
  } catch (...) {
    return 0;
  }
}

rqa_status rqa_engine_ask(rqa_engine* engine, const char* question, rqa_answer** out) {
  return rqa_engine_ask_tenant(engine, question, nullptr, out);
}

void rqa_ask_options_init(rqa_ask_options* options) {
  if (!options) return;
  *options = rqa_ask_options{};
  options->struct_size = sizeof(rqa_ask_options);
  options->use_cache = 1;
  options->priority = 1;
}

rqa_status rqa_engine_ask_with(rqa_engine* engine, const char* question, const rqa_ask_options* options,
                               rqa_answer** out) {
  return translate([&] {
    if (!out) return null_argument("out");
    *out = nullptr;
    if (!engine) return null_argument("engine");
    if (!question) return null_argument("question");
    rapidqa::AskOptions ask;
    if (options) {
      // The first layout ends with semantic_threshold; fields added later
      // are read only when struct_size says the caller has them.
      constexpr std::size_t kFirstLayout = offsetof(rqa_ask_options, semantic_threshold) + sizeof(float);
      if (options->struct_size < kFirstLayout) {
        return fail(RQA_INVALID_ARGUMENT, "rqa_ask_options.struct_size is too small: initialise with rqa_ask_options_init");
      }
      if (options->tenant) ask.tenant = options->tenant;
      ask.use_cache = options->use_cache != 0;
      if (!(options->timeout_ms >= 0) || !std::isfinite(options->timeout_ms)) {
        return fail(RQA_INVALID_ARGUMENT, "timeout_ms must be a finite number of milliseconds, 0 or more");
      }
      // A day at most: longer is no deadline in practice, and stays clear of overflow.
      ask.timeout = std::chrono::milliseconds(static_cast<std::int64_t>(std::ceil(std::min(options->timeout_ms, 86400e3))));
      if (options->priority < 0 || options->priority > 2) {
        return fail(RQA_INVALID_ARGUMENT, "priority must be 0 (high), 1 (normal) or 2 (low)");
      }
      ask.priority = static_cast<rapidqa::BatchPriority>(options->priority);
      if (options->semantic_threshold != 0.0f) ask.semantic_threshold = options->semantic_threshold;
      const bool has_on_token = options->struct_size >= offsetof(rqa_ask_options, on_token_user_data) + sizeof(void*);
      if (has_on_token && options->on_token) {
        auto* callback = options->on_token;
        void* user_data = options->on_token_user_data;
        ask.on_token = [callback, user_data](std::string_view piece) {
          const std::string terminated(piece);
          return callback(terminated.c_str(), terminated.size(), user_data) != 0;
        };
      }
    }
    auto answer = engine->engine->ask(question, ask);
    if (!answer) return report(answer.status());
    *out = new rqa_answer{std::move(answer).value()};
    return report(rapidqa::Status::ok());
  });
}

rqa_status rqa_engine_ask_tenant(rqa_engine* engine, const char* question, const char* tenant, rqa_answer** out) {
  rqa_ask_options options;
  rqa_ask_options_init(&options);
  options.tenant = tenant;
  return rqa_engine_ask_with(engine, question, &options, out);
}

rqa_status rqa_engine_encode(const rqa_engine* engine, const char* text, float* out, size_t capacity,
                              size_t* dimension) {
  return translate([&] {
    if (!engine) return null_argument("engine");
    if (!text) return null_argument("text");
    const rapidqa::Encoder& encoder = engine->engine->encoder();
    const std::size_t dim = encoder.dimension();
    if (dimension) *dimension = dim;
    if (!out || capacity < dim) {
      return fail(RQA_OUT_OF_RANGE, "output buffer holds " + std::to_string(capacity) + " floats; the encoder needs " +
                                        std::to_string(dim));
    }
    std::string input = text;
    if (encoder.wants_normalized_text()) {
      auto normalized = rapidqa::normalize_text(text);
      if (!normalized) return report(normalized.status());
      input = std::move(normalized).value();
    }
    std::vector<float> vector;
    const rapidqa::Status s = encoder.encode({input}, vector);
    if (!s.is_ok()) return report(s);
    std::copy(vector.begin(), vector.end(), out);
    return report(rapidqa::Status::ok());
  });
}

rqa_status rqa_engine_metrics_text(const rqa_engine* engine, char** out) {
  return metrics_out(engine, out, &rapidqa::MetricsSnapshot::format_table);
}

rqa_status rqa_engine_metrics_prometheus(const rqa_engine* engine, char** out) {
  return metrics_out(engine, out, &rapidqa::MetricsSnapshot::format_prometheus);
}

const char* rqa_answer_text(const rqa_answer* answer) { return answer ? answer->answer.text.c_str() : ""; }
float rqa_answer_score(const rqa_answer* answer) { return answer ? answer->answer.score : 0.0f; }
rqa_tier rqa_answer_tier(const rqa_answer* answer) {
  return answer ? static_cast<rqa_tier>(answer->answer.tier) : RQA_TIER_FALLBACK;
}
const char* rqa_answer_entry_id(const rqa_answer* answer) { return answer ? answer->answer.entry_id().c_str() : ""; }
int rqa_answer_degraded(const rqa_answer* answer) { return answer && answer->answer.degraded ? 1 : 0; }
int rqa_answer_generated(const rqa_answer* answer) { return answer && answer->answer.generated ? 1 : 0; }
const char* rqa_answer_degraded_reason(const rqa_answer* answer) {
  return answer ? answer->answer.degraded_reason.c_str() : "";
}
float rqa_answer_confidence(const rqa_answer* answer) { return answer ? answer->answer.confidence : -1.0f; }
const char* rqa_answer_fallback_reason(const rqa_answer* answer) {
  return answer ? answer->answer.fallback_reason.c_str() : "";
}
const char* rqa_answer_cache_decision(const rqa_answer* answer) {
  return answer ? answer->answer.cache_decision.c_str() : "";
}
uint64_t rqa_answer_total_microseconds(const rqa_answer* answer) {
  if (!answer) return 0;
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(answer->answer.timings[rapidqa::Stage::kTotal]).count());
}
void rqa_answer_destroy(rqa_answer* answer) { delete answer; }

rqa_status rqa_quantize_model(const char* model_dir, const char* out_dir, const char* mode,
                              const char* precision_table, const char* calibration_file, char** report_out) {
  return translate([&] {
    if (report_out) *report_out = nullptr;
    if (!model_dir) return null_argument("model_dir");
    if (!out_dir) return null_argument("out_dir");
#if !RAPIDQA_HAS_MODELS
    (void)mode, (void)precision_table, (void)calibration_file;
    return models_not_built("rqa_quantize_model");
#else
    rapidqa::QuantizerOptions options;
    const std::string m = mode ? mode : "dynamic";
    if (m == "static") {
      options.mode = rapidqa::QuantizationMode::kStatic;
    } else if (m != "dynamic") {
      return fail(RQA_INVALID_ARGUMENT, "mode must be \"dynamic\" or \"static\", not \"" + m + "\"");
    }
    if (precision_table) options.precision_table = precision_table;
    if (calibration_file) {
      auto texts = rapidqa::read_calibration_texts(calibration_file);
      if (!texts) return report(texts.status());
      options.calibration_texts = std::move(texts).value();
    }
    auto result = rapidqa::quantize_model(model_dir, out_dir, options);
    if (!result) return report(result.status());
    if (report_out) {
      const std::string text = result->to_text();
      char* buffer = static_cast<char*>(std::malloc(text.size() + 1));
      if (!buffer) return fail(RQA_RESOURCE_EXHAUSTED, "out of memory");
      std::memcpy(buffer, text.c_str(), text.size() + 1);
      *report_out = buffer;
    }
    return report(rapidqa::Status::ok());
#endif
  });
}

void rqa_free(void* memory) { std::free(memory); }

const char* rqa_last_error(void) { return t_last_error.c_str(); }

const char* rqa_status_string(rqa_status status) {
  switch (status) {
    case RQA_OK: return "ok";
    case RQA_INVALID_ARGUMENT: return "invalid argument";
    case RQA_NOT_FOUND: return "not found";
    case RQA_ALREADY_EXISTS: return "already exists";
    case RQA_OUT_OF_RANGE: return "out of range";
    case RQA_FAILED_PRECONDITION: return "failed precondition";
    case RQA_RESOURCE_EXHAUSTED: return "resource exhausted";
    case RQA_DEADLINE_EXCEEDED: return "deadline exceeded";
    case RQA_DATA_LOSS: return "data loss";
    case RQA_IO_ERROR: return "I/O error";
    case RQA_UNAVAILABLE: return "unavailable";
    case RQA_INTERNAL: return "internal error";
  }
  return "unknown status";
}

const char* rqa_tier_name(rqa_tier tier) {
  return rapidqa::answer_tier_name(static_cast<rapidqa::AnswerTier>(tier));
}

const char* rqa_version(void) { return RAPIDQA_VERSION_STRING; }

const char* rqa_components(void) { return RAPIDQA_COMPONENTS_TEXT; }

void rqa_log_set(rqa_log_callback callback, void* user_data) {
  LogTarget& target = log_target();
  std::lock_guard<std::mutex> lock(target.mu);
  target.callback = callback;
  target.user_data = user_data;
}

void rqa_log_discard(rqa_log_level, const char*, void*) {}

}  // extern "C"

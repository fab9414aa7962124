/* rapidqa C ABI: low-latency question answering from C and any language
 * with a C foreign-function interface.
 *
 * Conventions
 * - Handles are opaque; every *_destroy accepts NULL.
 * - Every fallible call returns rqa_status. On failure rqa_last_error()
 *   returns a message for this thread, valid until the next rqa_ call on the
 *   same thread; a successful call clears it.
 * - Strings in are UTF-8 and NUL-terminated; they are borrowed for the call.
 * - Strings out are either borrowed from a handle (valid until it is
 *   destroyed) or allocated by the library and freed with rqa_free, as each
 *   function says.
 * - Thread safety: an rqa_engine may be used from any number of threads at
 *   once (asks, adds, updates, removals). An rqa_answer is a plain value:
 *   read it from one thread at a time.
 */
#ifndef RAPIDQA_RAPIDQA_H_
#define RAPIDQA_RAPIDQA_H_

#include <stddef.h>
#include <stdint.h>

#define RQA_VERSION_MAJOR 0
#define RQA_VERSION_MINOR 1
#define RQA_VERSION_PATCH 0

#if defined(_WIN32)
#  if defined(RAPIDQA_BUILDING_LIBRARY)
#    define RQA_API __declspec(dllexport)
#  else
#    define RQA_API __declspec(dllimport)
#  endif
#else
#  define RQA_API __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rqa_engine rqa_engine;
typedef struct rqa_answer rqa_answer;

typedef enum rqa_status {
  RQA_OK = 0,
  RQA_INVALID_ARGUMENT = 1,   /* bad input: empty question, invalid UTF-8, bad JSON */
  RQA_NOT_FOUND = 2,          /* unknown entry id, missing file */
  RQA_ALREADY_EXISTS = 3,     /* adding an id that exists */
  RQA_OUT_OF_RANGE = 4,       /* oversize input */
  RQA_FAILED_PRECONDITION = 5,
  RQA_RESOURCE_EXHAUSTED = 6, /* out of memory, queue full */
  RQA_DEADLINE_EXCEEDED = 7,
  RQA_DATA_LOSS = 8,          /* corrupt file */
  RQA_IO_ERROR = 9,
  RQA_UNAVAILABLE = 10,
  RQA_INTERNAL = 11
} rqa_status;

typedef enum rqa_tier {
  RQA_TIER_RESULT_CACHE = 0,   /* exact question seen recently */
  RQA_TIER_SEMANTIC_CACHE = 1, /* similar question answered recently */
  RQA_TIER_KNOWLEDGE = 2,      /* retrieved from the knowledge base */
  RQA_TIER_FALLBACK = 3,       /* nothing matched well enough */
  RQA_TIER_KNOWLEDGE_CACHE = 4 /* this question's retrieval seen recently, its entries unchanged */
} rqa_tier;

/* Engine options. Always initialise with rqa_engine_options_init, which sets
 * struct_size and the defaults; fields added in later versions go at the end,
 * so older callers keep working. */
typedef struct rqa_engine_options {
  size_t struct_size;                  /* sizeof(rqa_engine_options), set by init */
  size_t hashing_dimension;            /* HashingEncoder vector length (384) */
  float min_answer_score;              /* best-match cosine below this gives the fallback (0.35) */
  int enable_result_cache;             /* nonzero: exact tier on (1) */
  int enable_semantic_cache;           /* nonzero: similar-question tier on (1) */
  double result_cache_ttl_seconds;     /* exact tier expiry (300), in [0.001, 31622400]; 0 = tier off */
  double semantic_cache_ttl_seconds;   /* similar-question tier expiry (3600), in [0.001, 31622400]; 0 = tier off */
  float semantic_similarity_threshold; /* cosine for a similar-question hit (0.92) */
  int intra_op_threads;                /* model threads; 0 = all cores; at most 4x the cores */
  /* Added in 0.1: user models. NULL or "" = not used. Borrowed during create. */
  const char* encoder_model_dir;       /* BERT-family model directory to encode with (NULL: hashing encoder) */
  const char* reader_model_dir;        /* question-answering model directory for extractive answers */
  int encoder_pooling_cls;             /* nonzero: [CLS] pooling; zero: mean pooling (0) */
  /* Sharing knowledge changes with other engine processes through Redis
   * (see docs/redis.md). NULL or "" = none. Redis being unreachable is not an
   * error: the engine starts, logs to stderr and keeps retrying. Borrowed
   * during create. */
  const char* redis_host;              /* Redis host name or address */
  int redis_port;                      /* Redis TCP port, 1..65535 (6379) */
  /* Added after 0.1.0: a secret that authenticates cache snapshots with an
   * HMAC-SHA256; with it, rqa_engine_load_cache_snapshot refuses files not
   * written with the same key. NULL or "" = checksummed snapshots only.
   * Borrowed during create (copied). */
  const char* snapshot_key;
} rqa_engine_options;

RQA_API void rqa_engine_options_init(rqa_engine_options* options);

/* Creates an engine with no knowledge. options may be NULL (defaults). On
 * success *out owns a new engine, released with rqa_engine_destroy. */
RQA_API rqa_status rqa_engine_create(const rqa_engine_options* options, rqa_engine** out);
RQA_API void rqa_engine_destroy(rqa_engine* engine);

/* Replaces the knowledge with a JSONL file (see the README for the format).
 * A file with any bad line is refused whole and the engine keeps what it
 * had; the error names each bad line. loaded_entries may be NULL. */
RQA_API rqa_status rqa_engine_load_knowledge(rqa_engine* engine, const char* path, size_t* loaded_entries);

/* Run-time changes; entry_json is one JSON object as on a JSONL line.
 * add: RQA_ALREADY_EXISTS if the id exists; update: RQA_NOT_FOUND if not. */
RQA_API rqa_status rqa_engine_add_entry(rqa_engine* engine, const char* entry_json);
RQA_API rqa_status rqa_engine_update_entry(rqa_engine* engine, const char* entry_json);
RQA_API rqa_status rqa_engine_remove_entry(rqa_engine* engine, const char* entry_id);
RQA_API size_t rqa_engine_entry_count(const rqa_engine* engine);

/* Answers a question. On success *out owns a new answer, released with
 * rqa_answer_destroy. A question nothing matches still succeeds (tier
 * RQA_TIER_FALLBACK); errors are for bad input only. */
RQA_API rqa_status rqa_engine_ask(rqa_engine* engine, const char* question, rqa_answer** out);

/* The same in a cache namespace: tenants never share a cached answer.
 * tenant may be NULL or "" for the default namespace. */
RQA_API rqa_status rqa_engine_ask_tenant(rqa_engine* engine, const char* question, const char* tenant,
                                         rqa_answer** out);

/* Per-request settings. Always initialise with rqa_ask_options_init;
 * fields added later go at the end. */
typedef struct rqa_ask_options {
  size_t struct_size;       /* sizeof(rqa_ask_options), set by init */
  const char* tenant;       /* cache namespace; NULL or "" = the default one. Borrowed during the call */
  int use_cache;            /* zero: bypass every cache tier (1) */
  double timeout_ms;        /* time budget; the engine degrades rather than waits past it. 0 = engine default */
  int priority;             /* in the model's queue: 0 high, 1 normal (default), 2 low */
  float semantic_threshold; /* this request's semantic-cache threshold in (0, 1]; 0 = not overridden */
} rqa_ask_options;

RQA_API void rqa_ask_options_init(rqa_ask_options* options);

/* Answers a question with per-request settings (options may be NULL for
 * the defaults). Load outcomes (a degraded or late answer) are in the
 * answer (rqa_answer_degraded, rqa_answer_degraded_reason), not errors. */
RQA_API rqa_status rqa_engine_ask_with(rqa_engine* engine, const char* question, const rqa_ask_options* options,
                                       rqa_answer** out);

/* Drops every cached answer built from an entry (the entry stays).
 * removed (may be NULL) receives how many; RQA_NOT_FOUND for an unknown id. */
RQA_API rqa_status rqa_engine_invalidate_entry(rqa_engine* engine, const char* entry_id, size_t* removed);

/* Gives a tenant (NULL or "" = the default namespace) its own
 * semantic-cache threshold in (0, 1], or with threshold 0 removes it so the
 * global one applies again. RQA_INVALID_ARGUMENT outside that range. */
RQA_API rqa_status rqa_engine_set_tenant_threshold(rqa_engine* engine, const char* tenant, float threshold);

/* Fixes a wrong cached answer: the answer cached for this exact question in
 * the tenant's namespace (NULL = default) becomes `text`, until the cache
 * TTLs; delete removes it instead (removed may be NULL). */
RQA_API rqa_status rqa_engine_correct_cached_answer(rqa_engine* engine, const char* question, const char* tenant,
                                                    const char* text);
RQA_API rqa_status rqa_engine_delete_cached_answer(rqa_engine* engine, const char* question, const char* tenant,
                                                   size_t* removed);

/* Saves the semantic cache to a snapshot file (atomically), or loads one to
 * preload hot questions. A corrupt, truncated or other-version snapshot is
 * refused (RQA_DATA_LOSS / RQA_FAILED_PRECONDITION) and the cache starts
 * empty. loaded (may be NULL) receives the entries loaded. */
RQA_API rqa_status rqa_engine_save_cache_snapshot(const rqa_engine* engine, const char* path);
RQA_API rqa_status rqa_engine_load_cache_snapshot(rqa_engine* engine, const char* path, size_t* loaded);

/* Warms the caches with the hot questions in a file, one per line, asked
 * in the tenant's namespace (NULL = default). cached (may be NULL) receives
 * how many were answered and cached; RQA_NOT_FOUND when the file cannot be
 * opened. Bad lines are skipped (the questions after them still run). */
RQA_API rqa_status rqa_engine_preload_questions(rqa_engine* engine, const char* path, const char* tenant,
                                                size_t* cached);

/* Encodes text with the engine's encoder (hashing or the user's model)
 * into the caller's buffer of `capacity` floats. *dimension receives the
 * vector length (may be NULL); when capacity is too small nothing is written
 * and RQA_OUT_OF_RANGE is returned with *dimension set, so the caller can
 * retry with a buffer of that size. */
RQA_API rqa_status rqa_engine_encode(const rqa_engine* engine, const char* text, float* out, size_t capacity,
                                     size_t* dimension);

/* The per-stage latency table and counters as text. On success *out is
 * allocated by the library; free it with rqa_free. */
RQA_API rqa_status rqa_engine_metrics_text(const rqa_engine* engine, char** out);
/* Every metric in the Prometheus text exposition format (what a /metrics
 * endpoint serves); *out is allocated by the library, freed with rqa_free. */
RQA_API rqa_status rqa_engine_metrics_prometheus(const rqa_engine* engine, char** out);

/* Answer accessors. Strings are borrowed from the answer. */
RQA_API const char* rqa_answer_text(const rqa_answer* answer);
RQA_API float rqa_answer_score(const rqa_answer* answer);
RQA_API rqa_tier rqa_answer_tier(const rqa_answer* answer);
RQA_API const char* rqa_answer_entry_id(const rqa_answer* answer); /* "" when nothing matched */
RQA_API int rqa_answer_degraded(const rqa_answer* answer);         /* nonzero when degraded */
RQA_API const char* rqa_answer_degraded_reason(const rqa_answer* answer);
RQA_API uint64_t rqa_answer_total_microseconds(const rqa_answer* answer);
/* Releases an answer (NULL is ignored). The answer and every string
 * borrowed from it are invalid afterwards; like free(), destroying the same
 * answer twice is undefined behaviour: set the pointer to NULL after. */
RQA_API void rqa_answer_destroy(rqa_answer* answer);

/* Quantizes the model directory model_dir to INT8 and writes out_dir, a
 * model directory that encoder_model_dir / reader_model_dir can name.
 * mode: "dynamic" or "static" (NULL: dynamic). precision_table: "default",
 * "auto", "int8" or the path of a table file (NULL: default).
 * calibration_file: one text per line, or a knowledge .jsonl (NULL: none;
 * static mode needs one). report (may be NULL): on success the per-layer
 * report, allocated by the library, freed with rqa_free. Nothing is
 * written when the call fails. */
RQA_API rqa_status rqa_quantize_model(const char* model_dir, const char* out_dir, const char* mode,
                                      const char* precision_table, const char* calibration_file, char** report);

RQA_API void rqa_free(void* memory);

/* This thread's message for the last failed call; "" after a success. */
RQA_API const char* rqa_last_error(void);
RQA_API const char* rqa_status_string(rqa_status status);
RQA_API const char* rqa_tier_name(rqa_tier tier);
/* "MAJOR.MINOR.PATCH" of the library actually loaded. */
RQA_API const char* rqa_version(void);

#ifdef __cplusplus
}
#endif

#endif /* RAPIDQA_RAPIDQA_H_ */

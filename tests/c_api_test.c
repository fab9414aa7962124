/* The C ABI exercised from C11, error paths included. */
/* getpid(), for a store file of this run's own. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rapidqa/rapidqa.h>

static int failures = 0;

#define CHECK(cond)                                                   \
  do {                                                                \
    if (!(cond)) {                                                    \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      ++failures;                                                     \
    }                                                                 \
  } while (0)

/* rqa_engine_create refuses *options with `status`, and its error names
   `text` (the field, or what is missing). */
#define CHECK_CREATE_REFUSED(options, engine, status, text)       \
  do {                                                            \
    CHECK(rqa_engine_create((options), (engine)) == (status));    \
    CHECK(strstr(rqa_last_error(), (text)) != NULL);              \
  } while (0)

static void test_version(void) {
  char expected[32];
  snprintf(expected, sizeof expected, "%d.%d.%d", RQA_VERSION_MAJOR, RQA_VERSION_MINOR, RQA_VERSION_PATCH);
  CHECK(strcmp(rqa_version(), expected) == 0);
  CHECK(strcmp(rqa_version(), RAPIDQA_VERSION_STRING) == 0);
  CHECK(strncmp(rqa_components(), "core", 4) == 0);
#if RAPIDQA_HAS_MODELS
  CHECK(strcmp(rqa_components(), "core models tools") == 0);
#endif
  CHECK(strcmp(rqa_status_string(RQA_NOT_FOUND), "not found") == 0);
  CHECK(strcmp(rqa_tier_name(RQA_TIER_SEMANTIC_CACHE), "semantic_cache") == 0);
}

static void test_null_and_bad_options(void) {
  rqa_engine* engine = NULL;
  rqa_engine_options options;
  CHECK(rqa_engine_create(NULL, NULL) == RQA_INVALID_ARGUMENT);
  CHECK(strstr(rqa_last_error(), "out") != NULL);
  rqa_engine_options_init(&options);
  options.struct_size = 3;
  CHECK(rqa_engine_create(&options, &engine) == RQA_INVALID_ARGUMENT);
  CHECK(engine == NULL);
  CHECK(strstr(rqa_last_error(), "struct_size") != NULL);
  rqa_engine_options_init(&options);
  options.semantic_similarity_threshold = 7.0f;
  CHECK(rqa_engine_create(&options, &engine) == RQA_INVALID_ARGUMENT);
  rqa_engine_destroy(NULL);
  rqa_answer_destroy(NULL);
  rqa_free(NULL);
}

static void test_ask_and_change(void) {
  rqa_engine* engine = NULL;
  rqa_answer* answer = NULL;
  rqa_engine_options options;
  size_t loaded = 0;
  char* metrics = NULL;

  rqa_engine_options_init(&options);
  CHECK(options.struct_size == sizeof options);
  CHECK(options.hashing_dimension == 384);
  options.intra_op_threads = 1;
  CHECK(rqa_engine_create(&options, &engine) == RQA_OK);
  CHECK(strcmp(rqa_last_error(), "") == 0);

  CHECK(rqa_engine_load_knowledge(engine, "/no/such/faq.jsonl", &loaded) == RQA_NOT_FOUND);
  CHECK(strstr(rqa_last_error(), "/no/such/faq.jsonl") != NULL);
  CHECK(rqa_engine_load_knowledge(engine, RAPIDQA_SOURCE_DIR "/examples/data/faq.jsonl", &loaded) == RQA_OK);
  CHECK(loaded >= 150);
  CHECK(rqa_engine_entry_count(engine) == loaded);

  CHECK(rqa_engine_ask(engine, "How do I reset my password?", &answer) == RQA_OK);
  CHECK(strcmp(rqa_answer_entry_id(answer), "shop-en-reset-password") == 0);
  CHECK(strncmp(rqa_answer_text(answer), "To reset your password", 22) == 0);
  CHECK(rqa_answer_tier(answer) == RQA_TIER_KNOWLEDGE);
  CHECK(rqa_answer_score(answer) > 0.99f);
  CHECK(rqa_answer_degraded(answer) == 0);
  CHECK(strcmp(rqa_answer_degraded_reason(answer), "") == 0);
  rqa_answer_destroy(answer);
  answer = NULL;

  CHECK(rqa_engine_ask(engine, "How do I reset my password?", &answer) == RQA_OK);
  CHECK(rqa_answer_tier(answer) == RQA_TIER_RESULT_CACHE);
  rqa_answer_destroy(answer);
  answer = NULL;

  CHECK(rqa_engine_ask(engine, "", &answer) == RQA_INVALID_ARGUMENT);
  CHECK(answer == NULL);
  CHECK(strlen(rqa_last_error()) > 0);
  CHECK(rqa_engine_ask(engine, "bad \xff utf8", &answer) == RQA_INVALID_ARGUMENT);
  CHECK(strstr(rqa_last_error(), "UTF-8") != NULL);
  CHECK(rqa_engine_ask(engine, NULL, &answer) == RQA_INVALID_ARGUMENT);
  CHECK(rqa_engine_ask(NULL, "q", &answer) == RQA_INVALID_ARGUMENT);

  CHECK(rqa_engine_add_entry(engine, "{\"id\":\"c-test\",\"question\":\"Do you sell purple umbrellas?\","
                                     "\"answer\":\"Yes, in three sizes.\"}") == RQA_OK);
  CHECK(rqa_engine_add_entry(engine, "{\"id\":\"c-test\",\"question\":\"q\",\"answer\":\"a\"}") ==
        RQA_ALREADY_EXISTS);
  CHECK(rqa_engine_add_entry(engine, "{\"id\":\"c-bad\"") == RQA_INVALID_ARGUMENT);
  CHECK(strstr(rqa_last_error(), "JSON") != NULL);
  CHECK(rqa_engine_ask(engine, "Do you sell purple umbrellas?", &answer) == RQA_OK);
  CHECK(strcmp(rqa_answer_text(answer), "Yes, in three sizes.") == 0);
  rqa_answer_destroy(answer);
  answer = NULL;

  CHECK(rqa_engine_update_entry(engine, "{\"id\":\"c-test\",\"question\":\"Do you sell purple umbrellas?\","
                                        "\"answer\":\"Sold out.\"}") == RQA_OK);
  CHECK(rqa_engine_ask(engine, "Do you sell purple umbrellas?", &answer) == RQA_OK);
  CHECK(strcmp(rqa_answer_text(answer), "Sold out.") == 0);
  rqa_answer_destroy(answer);
  answer = NULL;
  CHECK(rqa_engine_update_entry(engine, "{\"id\":\"nope\",\"question\":\"q\",\"answer\":\"a\"}") == RQA_NOT_FOUND);

  CHECK(rqa_engine_remove_entry(engine, "c-test") == RQA_OK);
  CHECK(rqa_engine_remove_entry(engine, "c-test") == RQA_NOT_FOUND);
  CHECK(strstr(rqa_last_error(), "c-test") != NULL);

  CHECK(rqa_engine_metrics_text(engine, &metrics) == RQA_OK);
  CHECK(metrics != NULL && strstr(metrics, "p99") != NULL);
  rqa_free(metrics);
  CHECK(rqa_engine_metrics_prometheus(engine, &metrics) == RQA_OK);
  CHECK(metrics != NULL && strstr(metrics, "# TYPE rapidqa_stage_latency_seconds histogram") != NULL);
  CHECK(strstr(metrics, "rapidqa_asks_total ") != NULL);
  rqa_free(metrics);
  CHECK(rqa_engine_metrics_prometheus(engine, NULL) == RQA_INVALID_ARGUMENT);

  rqa_engine_destroy(engine);
}

#if RAPIDQA_HAS_MODELS
/* The vector of one text from an engine over a model directory, with the
 * pooling and prompt given (NULL: the directory's); its length, or 0 when
 * create failed. */
static void test_answer_quality_options(void) {
  rqa_engine* engine = NULL;
  rqa_answer* answer = NULL;
  rqa_engine_options options;
  size_t loaded = 0;

  rqa_engine_options_init(&options);
  CHECK(options.min_answer_confidence == 0.0f);
  CHECK(options.semantic_target_error_rate == 0.0f);
  options.semantic_target_error_rate = 0.9f; /* outside (0, 0.5] */
  CHECK_CREATE_REFUSED(&options, &engine, RQA_INVALID_ARGUMENT, "target_error_rate");
  options.semantic_target_error_rate = 0.02f;
  options.min_answer_confidence = 0.9999f;
  CHECK(rqa_engine_create(&options, &engine) == RQA_OK);
  CHECK(rqa_engine_load_knowledge(engine, RAPIDQA_SOURCE_DIR "/examples/data/faq.jsonl", &loaded) == RQA_OK);

  /* One letter: the fallback, with the reason. */
  CHECK(rqa_engine_ask(engine, "q", &answer) == RQA_OK);
  CHECK(rqa_answer_tier(answer) == RQA_TIER_FALLBACK);
  CHECK(strstr(rqa_answer_fallback_reason(answer), "too little to match") != NULL);
  rqa_answer_destroy(answer);
  answer = NULL;
  /* A paraphrase under the confidence threshold; its confidence is a probability. */
  CHECK(rqa_engine_ask(engine, "I can't remember the password of my account, what now?", &answer) == RQA_OK);
  CHECK(rqa_answer_tier(answer) == RQA_TIER_FALLBACK);
  CHECK(rqa_answer_confidence(answer) >= 0.0f && rqa_answer_confidence(answer) < 0.9999f);
  CHECK(strstr(rqa_answer_fallback_reason(answer), "min_answer_confidence") != NULL);
  CHECK(rqa_answer_cache_decision(answer) != NULL);
  rqa_answer_destroy(answer);
  answer = NULL;
  /* A stored phrasing is certain, and the semantic tier says what it decided. */
  CHECK(rqa_engine_ask(engine, "I forgot my password", &answer) == RQA_OK);
  CHECK(rqa_answer_tier(answer) == RQA_TIER_KNOWLEDGE);
  CHECK(rqa_answer_confidence(answer) == 1.0f);
  CHECK(strcmp(rqa_answer_fallback_reason(answer), "") == 0);
  rqa_answer_destroy(answer);
  answer = NULL;
  CHECK(rqa_engine_ask(engine, "I forgot the password", &answer) == RQA_OK);
  CHECK(strlen(rqa_answer_cache_decision(answer)) > 0);
  rqa_answer_destroy(answer);
  CHECK(rqa_answer_confidence(NULL) == -1.0f);
  rqa_engine_destroy(engine);
  engine = NULL;

  /* Retrieval's ranking and word list. */
  rqa_engine_options_init(&options);
  options.retrieval_fusion = "bm25";
  CHECK_CREATE_REFUSED(&options, &engine, RQA_INVALID_ARGUMENT, "retrieval_fusion");
  options.retrieval_fusion = "rrf";
  options.word_dictionary = "/no/such/dict.txt";
  CHECK_CREATE_REFUSED(&options, &engine, RQA_NOT_FOUND, "word_dictionary");
  options.retrieval_fusion = "dense";
  options.word_dictionary = NULL;
  CHECK(rqa_engine_create(&options, &engine) == RQA_OK);
  CHECK(rqa_engine_load_knowledge(engine, RAPIDQA_SOURCE_DIR "/examples/data/faq.jsonl", &loaded) == RQA_OK);
  CHECK(rqa_engine_ask(engine, "How do I reset my password?", &answer) == RQA_OK);
  CHECK(strcmp(rqa_answer_entry_id(answer), "shop-en-reset-password") == 0);
  rqa_answer_destroy(answer);
  CHECK(strcmp(rqa_answer_fallback_reason(NULL), "") == 0);
  rqa_engine_destroy(engine);
}

static size_t encode_with(const char* model, const char* pooling, const char* prompt, float* vector) {
  rqa_engine* engine = NULL;
  rqa_engine_options options;
  size_t dimension = 0;
  rqa_engine_options_init(&options);
  options.encoder_model_dir = model;
  options.encoder_pooling = pooling;
  options.encoder_prompt = prompt;
  if (rqa_engine_create(&options, &engine) != RQA_OK) return 0;
  CHECK(rqa_engine_encode(engine, "how do i reset my password", vector, 64, &dimension) == RQA_OK);
  rqa_engine_destroy(engine);
  return dimension;
}

/* A sentence-transformers directory decides pooling and prompt unless the
 * caller does. */
static void test_sentence_transformers_choices(void) {
  float from_model[64], no_prompt[64], same_prompt[64];
  const char* prompts = RAPIDQA_TINY_MODELS "/st-mean-prompts";
  const char* dense = RAPIDQA_TINY_MODELS "/st-dense-legacy-layout";
  CHECK(encode_with(dense, NULL, NULL, from_model) == 24); /* its Dense module's width */
  CHECK(encode_with(dense, "mean", NULL, from_model) == 0);
  CHECK(strstr(rqa_last_error(), "the Dense module takes 64 values but pooling (mean) gives 32") != NULL);
  CHECK(encode_with(dense, "median", NULL, from_model) == 0);
  CHECK(strstr(rqa_last_error(), "encoder_pooling: 'median'") != NULL);
  CHECK(encode_with(prompts, NULL, NULL, from_model) == 32);
  CHECK(encode_with(prompts, NULL, "", no_prompt) == 32);
  CHECK(encode_with(prompts, "mean", "query: ", same_prompt) == 32);
  CHECK(memcmp(from_model, same_prompt, sizeof(float) * 32) == 0);
  CHECK(memcmp(from_model, no_prompt, sizeof(float) * 32) != 0);
}

static void test_models_and_encode(void) {
  rqa_engine* engine = NULL;
  rqa_engine* hashing = NULL;
  rqa_answer* answer = NULL;
  rqa_engine_options options;
  float small[4];
  float vector[64];
  size_t dimension = 0;
  double norm = 0;
  size_t i;

  rqa_engine_options_init(&options);
  options.encoder_model_dir = RAPIDQA_TINY_MODELS "/bert-tiny";
  options.reader_model_dir = RAPIDQA_TINY_MODELS "/bert-tiny-qa";
  options.enable_semantic_cache = 0;
  options.min_answer_score = -1.0f;
  CHECK(rqa_engine_create(&options, &engine) == RQA_OK);
  CHECK(rqa_engine_load_knowledge(engine, RAPIDQA_SOURCE_DIR "/tests/data/context_faq.jsonl", NULL) == RQA_OK);
  CHECK(rqa_engine_ask(engine, "Where is my order?", &answer) == RQA_OK);
  CHECK(strcmp(rqa_answer_entry_id(answer), "order-status") == 0);
  CHECK(strstr("Your order shipped yesterday and will arrive soon. The tracking link is in the confirmation email.",
               rqa_answer_text(answer)) != NULL);
  rqa_answer_destroy(answer);

  CHECK(rqa_engine_encode(engine, "where is my order", small, 4, &dimension) == RQA_OUT_OF_RANGE);
  CHECK(dimension == 32);
  CHECK(strstr(rqa_last_error(), "needs 32") != NULL);
  CHECK(rqa_engine_encode(engine, "where is my order", vector, 64, &dimension) == RQA_OK);
  for (i = 0; i < dimension; ++i) norm += (double)vector[i] * vector[i];
  CHECK(norm > 0.999 && norm < 1.001);
  rqa_engine_destroy(engine);

  CHECK(rqa_engine_create(NULL, &hashing) == RQA_OK);
  CHECK(rqa_engine_encode(hashing, "", vector, 64, &dimension) == RQA_OUT_OF_RANGE);
  CHECK(dimension == 384);
  rqa_engine_destroy(hashing);

  rqa_engine_options_init(&options);
  options.encoder_model_dir = "/no/such/model";
  engine = NULL;
  CHECK(rqa_engine_create(&options, &engine) == RQA_NOT_FOUND);
  CHECK(engine == NULL);
  CHECK(strstr(rqa_last_error(), "/no/such/model") != NULL);
  rqa_engine_options_init(&options);
  options.reader_model_dir = RAPIDQA_TINY_MODELS "/bert-tiny";
  CHECK_CREATE_REFUSED(&options, &engine, RQA_INVALID_ARGUMENT, "qa_outputs");
  test_sentence_transformers_choices();
}

#else
/* Built without the models component: model directories and quantization
 * are refused with a message that says why; the hashing encoder answers. */
static void test_models_and_encode(void) {
  rqa_engine* engine = NULL;
  rqa_engine_options options;

  CHECK(strstr(rqa_components(), "models") == NULL);
  rqa_engine_options_init(&options);
  options.encoder_model_dir = "/any/model";
  CHECK(rqa_engine_create(&options, &engine) == RQA_FAILED_PRECONDITION);
  CHECK(engine == NULL);
  CHECK(strstr(rqa_last_error(), "encoder_model_dir") != NULL);
  CHECK(strstr(rqa_last_error(), "models component") != NULL);
  options.encoder_model_dir = NULL;
  options.reader_model_dir = "/any/reader";
  CHECK_CREATE_REFUSED(&options, &engine, RQA_FAILED_PRECONDITION, "reader_model_dir");
  CHECK(rqa_quantize_model("/any/model", "/any/out", NULL, NULL, NULL, NULL) == RQA_FAILED_PRECONDITION);
  CHECK(strstr(rqa_last_error(), "rqa_quantize_model") != NULL);
}
#endif

static void test_tenants_and_corrections(void) {
  rqa_engine* engine = NULL;
  rqa_answer* answer = NULL;
  size_t removed = 0;
  CHECK(rqa_engine_create(NULL, &engine) == RQA_OK);
  CHECK(rqa_engine_load_knowledge(engine, RAPIDQA_SOURCE_DIR "/examples/data/faq.jsonl", NULL) == RQA_OK);

  CHECK(rqa_engine_ask_tenant(engine, "How do I reset my password?", "a", &answer) == RQA_OK);
  CHECK(rqa_answer_tier(answer) == RQA_TIER_KNOWLEDGE);
  rqa_answer_destroy(answer);
  CHECK(rqa_engine_ask_tenant(engine, "How do I reset my password?", "b", &answer) == RQA_OK);
  CHECK(rqa_answer_tier(answer) == RQA_TIER_KNOWLEDGE); /* tenant b never sees tenant a's cache */
  rqa_answer_destroy(answer);

  CHECK(rqa_engine_correct_cached_answer(engine, "How do I reset my password?", "a", "Call us.") == RQA_OK);
  CHECK(rqa_engine_ask_tenant(engine, "how do i reset my password", "a", &answer) == RQA_OK);
  CHECK(strcmp(rqa_answer_text(answer), "Call us.") == 0);
  CHECK(rqa_answer_tier(answer) == RQA_TIER_RESULT_CACHE);
  rqa_answer_destroy(answer);
  CHECK(rqa_engine_ask_tenant(engine, "How do I reset my password?", "b", &answer) == RQA_OK);
  CHECK(strcmp(rqa_answer_text(answer), "Call us.") != 0);
  rqa_answer_destroy(answer);
  CHECK(rqa_engine_correct_cached_answer(engine, "How do I reset my password?", "a", "  ") == RQA_INVALID_ARGUMENT);

  CHECK(rqa_engine_delete_cached_answer(engine, "How do I reset my password?", "a", &removed) == RQA_OK);
  CHECK(removed == 2); /* both tiers */
  CHECK(rqa_engine_ask_tenant(engine, "How do I reset my password?", "a", &answer) == RQA_OK);
  CHECK(strncmp(rqa_answer_text(answer), "To reset your password", 22) == 0);
  rqa_answer_destroy(answer);

  CHECK(rqa_engine_invalidate_entry(engine, "shop-en-reset-password", &removed) == RQA_OK);
  CHECK(removed >= 2);
  CHECK(rqa_engine_invalidate_entry(engine, "no-such-entry", &removed) == RQA_NOT_FOUND);

  CHECK(rqa_engine_ask_tenant(engine, "How do I reset my password?", "a", &answer) == RQA_OK);
  rqa_answer_destroy(answer);
  {
    rqa_ask_options ask;
    rqa_ask_options_init(&ask);
    ask.tenant = "a";
    ask.use_cache = 0;
    ask.timeout_ms = 500;
    CHECK(rqa_engine_ask_with(engine, "How do I reset my password?", &ask, &answer) == RQA_OK);
    CHECK(rqa_answer_tier(answer) == RQA_TIER_KNOWLEDGE); /* the cache was bypassed */
    CHECK(rqa_answer_degraded(answer) == 0);
    rqa_answer_destroy(answer);
    ask.timeout_ms = 1.0 / 0.0;
    CHECK(rqa_engine_ask_with(engine, "How do I reset my password?", &ask, &answer) == RQA_INVALID_ARGUMENT);
    ask.timeout_ms = 500;
    ask.priority = 7;
    CHECK(rqa_engine_ask_with(engine, "How do I reset my password?", &ask, &answer) == RQA_INVALID_ARGUMENT);
    CHECK(strstr(rqa_last_error(), "priority") != NULL);
    ask.struct_size = 4;
    CHECK(rqa_engine_ask_with(engine, "How do I reset my password?", &ask, &answer) == RQA_INVALID_ARGUMENT);
    CHECK(rqa_engine_ask_with(engine, "How do I reset my password?", NULL, &answer) == RQA_OK);
    rqa_answer_destroy(answer);
  }
  CHECK(rqa_engine_preload_questions(engine, "/no/such/questions.txt", "c", &removed) == RQA_NOT_FOUND);
  CHECK(rqa_engine_preload_questions(engine, NULL, "c", &removed) == RQA_INVALID_ARGUMENT);

  /* A tenant's own semantic threshold lets a looser paraphrase hit. */
  CHECK(rqa_engine_set_tenant_threshold(engine, "a", 1.5f) == RQA_INVALID_ARGUMENT);
  CHECK(rqa_engine_set_tenant_threshold(engine, "a", 0.5f) == RQA_OK);
  CHECK(rqa_engine_ask_tenant(engine, "how can I reset my password", "a", &answer) == RQA_OK);
  CHECK(rqa_answer_tier(answer) == RQA_TIER_SEMANTIC_CACHE);
  rqa_answer_destroy(answer);
  CHECK(rqa_engine_set_tenant_threshold(engine, "a", 0.0f) == RQA_OK);
  CHECK(rqa_engine_delete_cached_answer(engine, "how can I reset my password", "a", NULL) == RQA_OK);

  CHECK(rqa_engine_save_cache_snapshot(engine, "rapidqa-c-api-test.snap") == RQA_OK);
  CHECK(rqa_engine_load_cache_snapshot(engine, "rapidqa-c-api-test.snap", &removed) == RQA_OK);
  CHECK(removed == 2); /* tenant a's answer and the default namespace's */
  CHECK(rqa_engine_load_cache_snapshot(engine, "/no/such.snap", NULL) == RQA_NOT_FOUND);
  remove("rapidqa-c-api-test.snap");
  rqa_engine_destroy(engine);
}

/* Redis sync from C: a host that does not answer still gives an engine
 * that answers (it logs and retries); a bad port is refused; a caller
 * built before the Redis fields existed gets none. */
#if RAPIDQA_HAS_REDIS
static void test_redis_options(void) {
  rqa_engine* engine = NULL;
  rqa_answer* answer = NULL;
  rqa_engine_options options;

  rqa_engine_options_init(&options);
  CHECK(options.redis_host == NULL);
  CHECK(options.redis_port == 6379);
  options.redis_host = "127.0.0.1";
  options.redis_port = 0;
  CHECK_CREATE_REFUSED(&options, &engine, RQA_INVALID_ARGUMENT, "redis.port");

  options.redis_port = 1; /* nothing listens there: refused at once */
  CHECK(rqa_engine_create(&options, &engine) == RQA_OK);
  CHECK(rqa_engine_load_knowledge(engine, RAPIDQA_SOURCE_DIR "/examples/data/faq.jsonl", NULL) == RQA_OK);
  CHECK(rqa_engine_ask(engine, "How do I reset my password?", &answer) == RQA_OK);
  CHECK(strcmp(rqa_answer_entry_id(answer), "shop-en-reset-password") == 0);
  rqa_answer_destroy(answer);
  rqa_engine_destroy(engine);
  engine = NULL;

  options.struct_size = offsetof(rqa_engine_options, redis_host);
  options.redis_port = 0; /* past the caller's struct: not read */
  CHECK(rqa_engine_create(&options, &engine) == RQA_OK);
  rqa_engine_destroy(engine);
}

/* Background events reach the callback set with rqa_log_set: here the
 * relay's report that Redis cannot be reached. */
struct log_capture {
  int messages;
  rqa_log_level last_level;
  char last[512];
};

static void capture_log(rqa_log_level level, const char* message, void* user_data) {
  struct log_capture* capture = (struct log_capture*)user_data;
  ++capture->messages;
  capture->last_level = level;
  snprintf(capture->last, sizeof capture->last, "%s", message);
}

static void test_log_callback(void) {
  struct log_capture capture;
  rqa_engine* engine = NULL;
  rqa_engine_options options;

  memset(&capture, 0, sizeof capture);
  rqa_log_set(capture_log, &capture);
  rqa_engine_options_init(&options);
  options.redis_host = "127.0.0.1";
  options.redis_port = 1; /* nothing listens there */
  CHECK(rqa_engine_create(&options, &engine) == RQA_OK);
  rqa_engine_destroy(engine); /* joins the relay: capture is stable after */
  rqa_log_set(NULL, NULL);
  CHECK(capture.messages > 0);
  CHECK(capture.last_level == RQA_LOG_WARNING || capture.last_level == RQA_LOG_ERROR);
  CHECK(strstr(capture.last, "edis") != NULL);

  /* The discard callback silences; it takes any arguments. */
  rqa_log_set(rqa_log_discard, NULL);
  rqa_log_discard(RQA_LOG_ERROR, "ignored", NULL);
  rqa_log_set(NULL, NULL);
}
#else
static void test_redis_options(void) {
  rqa_engine* engine = NULL;
  rqa_engine_options options;

  rqa_engine_options_init(&options);
  options.redis_host = "127.0.0.1";
  CHECK_CREATE_REFUSED(&options, &engine, RQA_FAILED_PRECONDITION, "RAPIDQA_WITH_REDIS");
}
static void test_log_callback(void) {}
#endif

#if RAPIDQA_HAS_MODELS
/* A model quantized through the C ABI, then answered with. */
static void test_quantize_model(void) {
  const char* out_dir = RAPIDQA_QUANTIZED_DIR;
  rqa_engine* engine = NULL;
  rqa_answer* answer = NULL;
  rqa_engine_options options;
  char* report = NULL;

  CHECK(rqa_quantize_model(NULL, out_dir, NULL, NULL, NULL, &report) == RQA_INVALID_ARGUMENT);
  CHECK(report == NULL);
  CHECK(rqa_quantize_model(RAPIDQA_TINY_MODELS "/bert-tiny", out_dir, "int4", NULL, NULL, NULL) ==
        RQA_INVALID_ARGUMENT);
  CHECK(strstr(rqa_last_error(), "int4") != NULL);
  CHECK(rqa_quantize_model(RAPIDQA_TINY_MODELS "/bert-tiny", out_dir, "static", NULL, NULL, NULL) ==
        RQA_INVALID_ARGUMENT);
  CHECK(strstr(rqa_last_error(), "calibration") != NULL);
  CHECK(rqa_quantize_model(RAPIDQA_TINY_MODELS "/bert-tiny", out_dir, "static", "int8",
                           RAPIDQA_SOURCE_DIR "/tests/data/context_faq.jsonl", &report) == RQA_OK);
  CHECK(report != NULL && strstr(report, "int8-static") != NULL);
  rqa_free(report);

  rqa_engine_options_init(&options);
  options.encoder_model_dir = out_dir;
  options.enable_semantic_cache = 0;
  options.min_answer_score = -1.0f;
  CHECK(rqa_engine_create(&options, &engine) == RQA_OK);
  CHECK(rqa_engine_load_knowledge(engine, RAPIDQA_SOURCE_DIR "/tests/data/context_faq.jsonl", NULL) == RQA_OK);
  CHECK(rqa_engine_ask(engine, "Where is my order?", &answer) == RQA_OK);
  CHECK(strcmp(rqa_answer_entry_id(answer), "order-status") == 0);
  rqa_answer_destroy(answer);
  rqa_engine_destroy(engine);
}
#else
static void test_quantize_model(void) {}
#endif

/* An engine on a knowledge store: a change survives the engine, the
 * history lists it, a rollback makes a new version, an export writes the
 * entries, and a second engine on the same file is refused. */
/* A remote encoder's options are checked at create; an engine nobody
 * serves is RQA_UNAVAILABLE (the answering path is tested against a real
 * rapidqa-server in remote_server_test.cpp). */
static void test_remote_encoder_errors(void) {
  rqa_engine_options options;
  rqa_engine* engine = NULL;
  rqa_engine_options_init(&options);
  options.remote_encoder_url = "http://127.0.0.1:1";
  options.remote_encoder_model = "m";
  options.remote_encoder_protocol = "grpc";
  CHECK_CREATE_REFUSED(&options, &engine, RQA_INVALID_ARGUMENT, "remote_encoder_protocol");
  options.remote_encoder_protocol = "kserve";
  options.remote_encoder_model = NULL;
  CHECK(rqa_engine_create(&options, &engine) == RQA_INVALID_ARGUMENT);
  options.remote_encoder_model = "m";
  CHECK_CREATE_REFUSED(&options, &engine, RQA_UNAVAILABLE, "127.0.0.1:1");
  CHECK(engine == NULL);
}

static void test_knowledge_store(void) {
  char path[256];
  char uri[300];
  char exported_path[300];
  snprintf(path, sizeof path, "/tmp/rapidqa-c-api-store-%ld.db", (long)getpid());
  snprintf(uri, sizeof uri, "sqlite:%s", path);
  snprintf(exported_path, sizeof exported_path, "%s.jsonl", path);
  rqa_engine_options options;
  rqa_engine_options_init(&options);
  options.knowledge_store = uri;
  rqa_engine* engine = NULL;
  CHECK(rqa_engine_create(&options, &engine) == RQA_OK);
  CHECK(rqa_engine_add_entry(engine, "{\"id\":\"hours\",\"question\":\"When are you open?\",\"answer\":\"9 to 5\"}") ==
        RQA_OK);
  CHECK(rqa_engine_update_entry(engine, "{\"id\":\"hours\",\"question\":\"When are you open?\",\"answer\":\"8 to 6\"}") ==
        RQA_OK);
  rqa_engine* second = NULL;
  CHECK(rqa_engine_create(&options, &second) == RQA_FAILED_PRECONDITION);
  CHECK(second == NULL);
  CHECK(strstr(rqa_last_error(), "open for writing") != NULL);
  rqa_engine_destroy(engine);

  /* The retrieval index kept where named. */
  char snapshot_path[300];
  snprintf(snapshot_path, sizeof snapshot_path, "%s.snapshot", path);
  options.index_snapshot = snapshot_path;
  engine = NULL;
  CHECK(rqa_engine_create(&options, &engine) == RQA_OK);
  CHECK(rqa_engine_entry_count(engine) == 1);
  char* history = NULL;
  CHECK(rqa_engine_entry_history(engine, "hours", &history) == RQA_OK);
  CHECK(history != NULL && strstr(history, "\"version\":2") != NULL && strstr(history, "9 to 5") != NULL);
  rqa_free(history);
  CHECK(rqa_engine_entry_history(engine, "never", &history) == RQA_NOT_FOUND);
  uint64_t version = 0;
  CHECK(rqa_engine_rollback_entry(engine, "hours", 1, &version) == RQA_OK);
  CHECK(version == 3);
  rqa_answer* answer = NULL;
  CHECK(rqa_engine_ask(engine, "When are you open?", &answer) == RQA_OK);
  CHECK(strcmp(rqa_answer_text(answer), "9 to 5") == 0);
  rqa_answer_destroy(answer);
  size_t exported = 0;
  CHECK(rqa_engine_export_knowledge(engine, exported_path, &exported) == RQA_OK);
  CHECK(exported == 1);
  rqa_engine_destroy(engine);

  char extra_path[340];
  snprintf(extra_path, sizeof extra_path, "%s.labels", snapshot_path);
  FILE* labels = fopen(extra_path, "rb");
  CHECK(labels != NULL); /* saved at close: the rollback changed the index */
  if (labels) fclose(labels);

  rqa_engine* memory_only = NULL;
  CHECK(rqa_engine_create(NULL, &memory_only) == RQA_OK);
  CHECK(rqa_engine_rollback_entry(memory_only, "hours", 1, NULL) == RQA_FAILED_PRECONDITION);
  rqa_engine_destroy(memory_only);
  remove(path);
  remove(exported_path);
  const char* suffixes[] = {".lock", ".index", ".index.labels", ".snapshot", ".snapshot.labels"};
  for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; ++i) {
    snprintf(extra_path, sizeof extra_path, "%s%s", path, suffixes[i]);
    remove(extra_path);
  }
}

int main(void) {
  test_version();
  test_null_and_bad_options();
  test_ask_and_change();
  test_answer_quality_options();
  test_redis_options();
  test_log_callback();
  test_models_and_encode();
  test_tenants_and_corrections();
  test_quantize_model();
  test_knowledge_store();
  test_remote_encoder_errors();
  if (failures == 0) printf("c api: all checks passed\n");
  return failures == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

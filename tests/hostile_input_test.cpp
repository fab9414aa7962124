// Hostile input: every case a hostile user, file or peer tried gets a clean
// error (never a crash, a hang, unbounded memory or a poisoned answer), and
// the engine answers correctly afterwards.
#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "cache/cached_answer.h"
#include "cache/change_message.h"
#include "cache/snapshot_codec.h"
#include "common/bounded_json.h"
#include "common/line_reader.h"
#include "rapidqa/qa_engine.h"
#include "rapidqa/rapidqa.h"
#include "test_support.h"

using rapidqa::AnswerTier;
using rapidqa::AskOptions;
using rapidqa::EngineOptions;
using rapidqa::QAEngine;
using rapidqa::StatusCode;
using json = nlohmann::json;

namespace {

constexpr const char* kPasswordEntry = "shop-en-reset-password";

std::filesystem::path scratch_dir() {
  static const std::filesystem::path dir = [] {
    auto d = std::filesystem::temp_directory_path() / ("rapidqa-hostile-" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}

std::string scratch(const std::string& name) { return (scratch_dir() / name).string(); }

std::unique_ptr<QAEngine> faq_engine(EngineOptions options = {}) {
  auto engine = QAEngine::create(std::move(options));
  REQUIRE(engine.is_ok());
  REQUIRE((*engine)->load_knowledge(rapidqa::testing::bundled_faq()).is_ok());
  return std::move(engine).value();
}

// The check every case ends with: the engine still gives the right answer,
// from knowledge, to a question and to an unrelated one.
void still_answers_correctly(QAEngine& engine, const AskOptions& options = {}) {
  auto answer = engine.ask("How do I reset my password?", options);
  REQUIRE(answer.is_ok());
  CHECK(answer->entry_id() == kPasswordEntry);
  CHECK(std::isfinite(answer->score));
  auto other = engine.ask("How do I delete my Northwind Shop account?", options);
  REQUIRE(other.is_ok());
  CHECK(other->entry_id() == "shop-en-delete-account");
}

std::string write_file(const std::string& name, const std::string& content) {
  const std::string path = scratch(name);
  std::ofstream(path, std::ios::binary) << content;
  return path;
}

// A snapshot file with a valid frame and checksum around any payload, as an
// attacker who knows the format would write it.
std::string write_snapshot(const std::string& name, const std::vector<std::uint8_t>& payload) {
  const std::string path = scratch(name);
  REQUIRE(rapidqa::cache::write_snapshot_file(path, payload).is_ok());
  return path;
}

json snapshot_entry(const std::vector<float>& vector, const json& answer, const std::string& question = "anything") {
  const auto* bytes = reinterpret_cast<const std::uint8_t*>(vector.data());
  return {{"tenant", ""},
          {"question", question},
          {"ttl_ms", 600000},
          {"answer_ttl_ms", 600000},
          {"vector", json::binary(std::vector<std::uint8_t>(bytes, bytes + vector.size() * sizeof(float)))},
          {"answer", answer}};
}

json knowledge_answer(const std::string& text = "Poisoned answer") {
  return {{"text", text},
          {"score", 0.99},
          {"matches", json::array({{{"id", kPasswordEntry}, {"score", 0.99}, {"version", 1}}})},
          {"tier", static_cast<int>(AnswerTier::kKnowledge)}};
}

std::vector<std::uint8_t> snapshot_payload(std::size_t dimension, const json& entries) {
  return json::to_cbor(json{{"dimension", dimension}, {"entries", entries}});
}

std::vector<float> unit_vector(std::size_t dimension, std::size_t hot = 0) {
  std::vector<float> v(dimension, 0.0f);
  v[hot % dimension] = 1.0f;
  return v;
}

}  // namespace

// ---- parsers ----

TEST_CASE("Bounded JSON refuses deep nesting, duplicate keys and huge numbers with short messages", "[hostile]") {
  const std::string deep(200000, '[');
  auto nested = rapidqa::detail::parse_json_bounded(deep);
  REQUIRE_FALSE(nested.is_ok());
  CHECK(nested.status().message().find("nested deeper than") != std::string::npos);

  auto duplicate = rapidqa::detail::parse_json_bounded(R"({"id": "a", "id": "b"})");
  REQUIRE_FALSE(duplicate.is_ok());
  CHECK(duplicate.status().message().find("duplicate key 'id'") != std::string::npos);

  const std::string digits(400, '9');
  auto huge = rapidqa::detail::parse_json_bounded("{\"x\": " + digits + "}");
  REQUIRE_FALSE(huge.is_ok());
  CHECK(huge.status().message().size() < 300);

  // Deep CBOR (one-element arrays nested 200,000 times) is refused before
  // the recursive reader can exhaust the stack.
  std::vector<std::uint8_t> cbor(200000, 0x81);
  cbor.push_back(0xf6);
  auto deep_cbor = rapidqa::detail::parse_cbor_bounded(cbor);
  REQUIRE_FALSE(deep_cbor.is_ok());
  CHECK(deep_cbor.status().code() == StatusCode::kDataLoss);

  CHECK(rapidqa::detail::parse_json_bounded(R"({"a": [1, {"b": null}], "c": "d"})").is_ok());
}

TEST_CASE("clip_for_message bounds and escapes what it quotes", "[hostile]") {
  const std::string clipped = rapidqa::detail::clip_for_message(std::string(10000, 'x'), 64);
  CHECK(clipped.size() < 100);
  CHECK(clipped.find("10000 bytes") != std::string::npos);
  CHECK(rapidqa::detail::clip_for_message("a\xff\x01" "b") == "a\\xff\\x01b");
  CHECK(rapidqa::detail::clip_for_message("密码") == "密码");
  // Overlong forms and surrogates are not UTF-8: escaped too.
  CHECK(rapidqa::detail::clip_for_message("\xc0\xaf") == "\\xc0\\xaf");
  CHECK(rapidqa::detail::clip_for_message("\xed\xa0\x80") == "\\xed\\xa0\\x80");
}

// ---- snapshots ----

TEST_CASE("A snapshot whose CBOR nests deeply is refused, not a stack overflow", "[hostile]") {
  auto engine = faq_engine();
  std::vector<std::uint8_t> payload(200000, 0x81);
  payload.push_back(0xf6);
  const auto path = write_snapshot("deep.snapshot", payload);
  auto loaded = engine->load_cache_snapshot(path);
  REQUIRE_FALSE(loaded.is_ok());
  CHECK(loaded.status().code() == StatusCode::kDataLoss);
  CHECK(loaded.status().message().find("nested deeper") != std::string::npos);
  still_answers_correctly(*engine);
}

TEST_CASE("Snapshot entries with poisoned vectors are refused and never answer", "[hostile]") {
  auto engine = faq_engine();
  const std::size_t d = engine->encoder().dimension();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  struct Case {
    const char* name;
    std::vector<float> vector;
    const char* reason;
  };
  std::vector<float> huge = unit_vector(d);
  huge[0] = 1e30f;
  std::vector<float> zero(d, 0.0f);
  const std::vector<Case> cases = {{"NaN", std::vector<float>(d, nan), "is nan"},
                                   {"Inf", std::vector<float>(d, inf), "is inf"},
                                   {"huge norm", huge, "length"},
                                   {"zero", zero, "length"}};
  for (const auto& c : cases) {
    DYNAMIC_SECTION(c.name) {
      const json entries = json::array({snapshot_entry(unit_vector(d, 7), knowledge_answer("fine"), "fine"),
                                        snapshot_entry(c.vector, knowledge_answer())});
      const auto path = write_snapshot("poisoned.snapshot", snapshot_payload(d, entries));
      auto loaded = engine->load_cache_snapshot(path);
      REQUIRE_FALSE(loaded.is_ok());
      CHECK(loaded.status().code() == StatusCode::kDataLoss);
      CHECK(loaded.status().message().find("entry 2") != std::string::npos);
      CHECK(loaded.status().message().find(c.reason) != std::string::npos);
      // Nothing from the file is served, and nothing spreads into the
      // result tier: unrelated questions get their own answers.
      auto answer = engine->ask("Where is my order?");
      REQUIRE(answer.is_ok());
      CHECK(answer->text != "Poisoned answer");
      still_answers_correctly(*engine);
    }
  }
}

TEST_CASE("Snapshot answers without provenance or with unknown tiers are refused", "[hostile]") {
  auto engine = faq_engine();
  const std::size_t d = engine->encoder().dimension();
  json no_matches = knowledge_answer();
  no_matches["matches"] = json::array();
  json empty_id = knowledge_answer();
  empty_id["matches"][0]["id"] = "";
  json unknown_tier = knowledge_answer();
  unknown_tier["tier"] = 42;
  json fallback = knowledge_answer();
  fallback["tier"] = static_cast<int>(AnswerTier::kFallback);
  json nan_score = knowledge_answer();
  nan_score["score"] = 1e39;  // beyond float: reads as inf
  json inverted_span = knowledge_answer();
  inverted_span["extracted"] = {{"id", kPasswordEntry}, {"begin", 10}, {"end", 2}, {"score", 1.0}, {"probability", 0.5}};
  const std::vector<std::pair<const char*, json>> cases = {
      {"no matches", no_matches}, {"empty entry id", empty_id},        {"unknown answer tier", unknown_tier},
      {"fallback", fallback},     {"not finite", nan_score},          {"extracted span begins", inverted_span}};
  for (const auto& [reason, answer] : cases) {
    DYNAMIC_SECTION(reason) {
      const auto path = write_snapshot("provenance.snapshot",
                                       snapshot_payload(d, json::array({snapshot_entry(unit_vector(d), answer)})));
      auto loaded = engine->load_cache_snapshot(path);
      REQUIRE_FALSE(loaded.is_ok());
      CHECK(loaded.status().message().find(reason) != std::string::npos);
      still_answers_correctly(*engine);
    }
  }
}

TEST_CASE("A snapshot of many identical vectors keeps one entry and loads quickly", "[hostile]") {
  auto cache = rapidqa::SemanticCache::create({});
  REQUIRE(cache.is_ok());
  const std::size_t d = (*cache)->dimension();
  json entries = json::array();
  for (int i = 0; i < 8000; ++i) entries.push_back(snapshot_entry(unit_vector(d), knowledge_answer("same"), "same"));
  const auto path = write_snapshot("identical.snapshot", snapshot_payload(d, entries));
  auto loaded = (*cache)->load_snapshot(path);
  REQUIRE(loaded.is_ok());
  CHECK((*cache)->stats().size == 1);
}

TEST_CASE("Snapshot TTLs are clamped, and entries expired when saved are skipped", "[hostile]") {
  auto cache = rapidqa::SemanticCache::create({});
  REQUIRE(cache.is_ok());
  const std::size_t d = (*cache)->dimension();
  json huge = snapshot_entry(unit_vector(d, 1), knowledge_answer("huge"), "huge");
  huge["ttl_ms"] = std::numeric_limits<std::int64_t>::max();
  huge["answer_ttl_ms"] = std::numeric_limits<std::int64_t>::max();
  json expired = snapshot_entry(unit_vector(d, 2), knowledge_answer("old"), "old");
  expired["ttl_ms"] = 0;
  expired.erase("answer_ttl_ms");  // as snapshots written before that field existed
  const auto path = write_snapshot("ttl.snapshot", snapshot_payload(d, json::array({huge, expired})));
  auto loaded = (*cache)->load_snapshot(path);
  REQUIRE(loaded.is_ok());
  CHECK(loaded.value() == 1);
}

TEST_CASE("The semantic tier works with encoders that do not normalise", "[hostile]") {
  auto cache = rapidqa::SemanticCache::create({});
  REQUIRE(cache.is_ok());
  const std::size_t d = (*cache)->dimension();
  std::vector<float> scaled = unit_vector(d, 3);
  for (float& x : scaled) x *= 7.5f;
  (*cache)->insert(scaled.data(), "q", rapidqa::testing::answer_for("e", "A"));
  CHECK((*cache)->stats().size == 1);
  auto hit = (*cache)->lookup(unit_vector(d, 3).data(), "q");
  REQUIRE(hit.answer);
  CHECK(hit.answer->text == "A");
  CHECK(hit.nearest_similarity == Approx(1.0f));
  // NaN and zero vectors neither enter nor hit.
  std::vector<float> zero(d, 0.0f);
  (*cache)->insert(zero.data(), "z", rapidqa::testing::answer_for("e", "Z"));
  CHECK((*cache)->stats().size == 1);
  CHECK_FALSE((*cache)->lookup(std::vector<float>(d, std::nanf("")).data(), "q").answer);
}

TEST_CASE("A valid snapshot still round-trips through the engine", "[hostile]") {
  auto engine = faq_engine();
  REQUIRE(engine->ask("How do I reset my password?").is_ok());
  const auto path = scratch("valid.snapshot");
  REQUIRE(engine->save_cache_snapshot(path).is_ok());
  auto fresh = faq_engine();
  auto loaded = fresh->load_cache_snapshot(path);
  REQUIRE(loaded.is_ok());
  CHECK(loaded.value() == 1);
}

TEST_CASE("A keyed engine loads only snapshots written with its key", "[hostile]") {
  EngineOptions keyed;
  keyed.semantic_cache.snapshot_key = "correct horse battery staple";
  auto writer = faq_engine(keyed);
  REQUIRE(writer->ask("How do I reset my password?").is_ok());
  const auto path = scratch("keyed.snapshot");
  REQUIRE(writer->save_cache_snapshot(path).is_ok());

  auto same_key = faq_engine(keyed);
  auto loaded = same_key->load_cache_snapshot(path);
  REQUIRE(loaded.is_ok());
  CHECK(loaded.value() == 1);

  EngineOptions other;
  other.semantic_cache.snapshot_key = "another key";
  auto wrong = faq_engine(other)->load_cache_snapshot(path);
  REQUIRE_FALSE(wrong.is_ok());
  CHECK(wrong.status().message().find("MAC does not match") != std::string::npos);

  // A file anyone could write (no MAC, valid checksum) is refused unparsed.
  const std::size_t d = writer->encoder().dimension();
  const auto forged = write_snapshot("forged.snapshot",
                                     snapshot_payload(d, json::array({snapshot_entry(unit_vector(d), knowledge_answer())})));
  auto refused = same_key->load_cache_snapshot(forged);
  REQUIRE_FALSE(refused.is_ok());
  CHECK(refused.status().code() == StatusCode::kFailedPrecondition);

  // One changed byte in a keyed file: the MAC no longer matches.
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  bytes[40] ^= 1;
  const auto tampered = write_file("tampered.snapshot", bytes);
  auto changed = same_key->load_cache_snapshot(tampered);
  REQUIRE_FALSE(changed.is_ok());
  CHECK(changed.status().message().find("MAC") != std::string::npos);
  still_answers_correctly(*same_key);

  // Without a key the keyed file still loads (its fields are validated).
  auto unkeyed = faq_engine()->load_cache_snapshot(path);
  CHECK(unkeyed.is_ok());
}

// ---- memory bounds ----

TEST_CASE("A long answer cached under many questions is held once", "[hostile]") {
  EngineOptions options;
  options.min_answer_score = -1.0f;  // every question gets the entry
  auto engine = QAEngine::create(options);
  REQUIRE(engine.is_ok());
  rapidqa::KnowledgeEntry big;
  big.id = "big";
  big.question = "What does the long policy say?";
  big.answer = std::string(1 << 20, 'p');
  REQUIRE((*engine)->load_entries({big}).is_ok());
  const std::size_t texts_before = rapidqa::cache::SharedTextPool::instance().size();
  for (int i = 0; i < 200; ++i) {
    auto answer = (*engine)->ask("long policy question number " + std::to_string(i));
    REQUIRE(answer.is_ok());
    REQUIRE(answer->text.size() == big.answer.size());
  }
  // Three tiers, 200 questions, one text.
  CHECK(rapidqa::cache::SharedTextPool::instance().size() <= texts_before + 1);
  const auto metrics = (*engine)->metrics();
  CHECK(metrics.caches.entries >= 200);
}

TEST_CASE("Default options bound every tier by bytes", "[hostile]") {
  const EngineOptions defaults;
  CHECK(defaults.result_cache.capacity_bytes > 0);
  CHECK(defaults.knowledge_cache.capacity_bytes > 0);
  CHECK(defaults.semantic_cache.capacity_bytes > 0);
  rapidqa::ResultCacheOptions small;
  small.capacity_bytes = 8u << 20;
  small.shards = 1;
  auto owned_cache = rapidqa::ResultCache::create(small).value();
  rapidqa::ResultCache& cache = *owned_cache;
  for (int i = 0; i < 64; ++i) {
    cache.insert("q" + std::to_string(i), rapidqa::testing::answer_for("e", std::string(1 << 20, 'x')));
  }
  CHECK(cache.stats().bytes <= small.capacity_bytes);
  CHECK(cache.stats().size < 64);
}

TEST_CASE("Tenant names are bounded and free of control characters", "[hostile]") {
  auto engine = faq_engine();
  AskOptions options;
  options.tenant = std::string(1 << 20, 't');
  auto answer = engine->ask("How do I reset my password?", options);
  REQUIRE_FALSE(answer.is_ok());
  CHECK(answer.status().code() == StatusCode::kInvalidArgument);
  CHECK(answer.status().message().size() < 200);
  options.tenant = std::string("a\x1f" "b");
  CHECK(engine->ask("How do I reset my password?", options).status().code() == StatusCode::kInvalidArgument);
  options.tenant = "\xff";
  CHECK(engine->ask("How do I reset my password?", options).status().code() == StatusCode::kInvalidArgument);
  CHECK(engine->correct_cached_answer("reset password", "x", options).code() == StatusCode::kInvalidArgument);
  CHECK(engine->delete_cached_answer("reset password", options).status().code() == StatusCode::kInvalidArgument);
  CHECK(engine->set_tenant_semantic_threshold(std::string(300, 't'), 0.9f).code() == StatusCode::kInvalidArgument);
  options.tenant = std::string(256, 't');  // at the limit: fine
  still_answers_correctly(*engine, options);
}

TEST_CASE("Endless lines are refused, not read into memory", "[hostile]") {
  auto engine = faq_engine();
  auto kb = engine->load_knowledge("/dev/zero");
  REQUIRE_FALSE(kb.is_ok());
  CHECK(kb.status().code() == StatusCode::kOutOfRange);
  CHECK(kb.status().message().find("line 1") != std::string::npos);
  auto preload = engine->preload_questions_file("/dev/zero");
  REQUIRE_FALSE(preload.is_ok());
  CHECK(preload.status().code() == StatusCode::kOutOfRange);
  still_answers_correctly(*engine);
}

// ---- options ----

TEST_CASE("Engine options out of range are refused with the field named", "[hostile]") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  auto refused = [](EngineOptions o, const std::string& field) {
    auto engine = QAEngine::create(std::move(o));
    REQUIRE_FALSE(engine.is_ok());
    CHECK(engine.status().code() == StatusCode::kInvalidArgument);
    CHECK(engine.status().message().find(field) != std::string::npos);
  };
  EngineOptions o;
  o.min_answer_score = nan;
  refused(o, "min_answer_score");
  o = {};
  o.top_k = 0;
  refused(o, "top_k");
  o = {};
  o.result_cache.ttl = std::chrono::milliseconds(-5);
  refused(o, "result_cache.ttl");
  o = {};
  o.knowledge_cache.shards = 0;
  refused(o, "knowledge_cache.shards");
  o = {};
  o.semantic_cache.similarity_threshold = nan;
  refused(o, "threshold");
  o = {};
  o.hashing.dimension = std::size_t{1} << 40;
  refused(o, "hashing.dimension");
  o = {};
  o.degradation.max_staleness = std::chrono::milliseconds(-1);
  refused(o, "max_staleness");
  o = {};
  o.encoder_batching.workers = 100000;
  refused(o, "encoder_batching.workers");
  o = {};
  o.auto_tune = true;
  o.tuner.grow_factor = std::numeric_limits<double>::quiet_NaN();
  refused(o, "grow_factor");
}

TEST_CASE("Ask options out of range are refused and the engine keeps answering", "[hostile]") {
  auto engine = faq_engine();
  auto refused = [&](AskOptions o, const std::string& field) {
    auto answer = engine->ask("How do I reset my password?", o);
    REQUIRE_FALSE(answer.is_ok());
    CHECK(answer.status().code() == StatusCode::kInvalidArgument);
    CHECK(answer.status().message().find(field) != std::string::npos);
  };
  AskOptions o;
  o.top_k = 0;
  refused(o, "top_k");
  o = {};
  o.min_answer_score = std::numeric_limits<float>::quiet_NaN();
  refused(o, "min_answer_score");
  o = {};
  o.semantic_threshold = std::numeric_limits<float>::infinity();
  refused(o, "semantic_threshold");
  o = {};
  o.timeout = std::chrono::milliseconds(-1);
  refused(o, "timeout");
  still_answers_correctly(*engine);
}

TEST_CASE("The C ABI refuses non-finite and absurd options", "[hostile]") {
  rqa_engine_options options;
  rqa_engine_options_init(&options);
  options.result_cache_ttl_seconds = std::nan("");
  rqa_engine* engine = nullptr;
  CHECK(rqa_engine_create(&options, &engine) == RQA_INVALID_ARGUMENT);
  CHECK(engine == nullptr);
  CHECK(std::string(rqa_last_error()).find("result_cache_ttl_seconds") != std::string::npos);
  rqa_engine_options_init(&options);
  options.semantic_cache_ttl_seconds = 1e300;
  CHECK(rqa_engine_create(&options, &engine) == RQA_INVALID_ARGUMENT);
  rqa_engine_options_init(&options);
  options.min_answer_score = std::nanf("");
  CHECK(rqa_engine_create(&options, &engine) == RQA_INVALID_ARGUMENT);
  rqa_engine_options_init(&options);
  options.intra_op_threads = 1000;
  CHECK(rqa_engine_create(&options, &engine) == RQA_INVALID_ARGUMENT);
  CHECK(std::string(rqa_last_error()).find("intra_op") != std::string::npos);

  // A TTL of 0 still means "cache nothing": the tier is off.
  rqa_engine_options_init(&options);
  options.result_cache_ttl_seconds = 0;
  REQUIRE(rqa_engine_create(&options, &engine) == RQA_OK);
  rqa_engine_destroy(engine);
  engine = nullptr;

  rqa_engine_options_init(&options);
  REQUIRE(rqa_engine_create(&options, &engine) == RQA_OK);
  REQUIRE(rqa_engine_load_knowledge(engine, rapidqa::testing::bundled_faq().c_str(), nullptr) == RQA_OK);
  rqa_ask_options ask;
  rqa_ask_options_init(&ask);
  ask.timeout_ms = std::nan("");
  rqa_answer* answer = nullptr;
  CHECK(rqa_engine_ask_with(engine, "reset password", &ask, &answer) == RQA_INVALID_ARGUMENT);
  CHECK(answer == nullptr);
  rqa_ask_options_init(&ask);
  ask.semantic_threshold = std::nanf("");
  CHECK(rqa_engine_ask_with(engine, "reset password", &ask, &answer) == RQA_INVALID_ARGUMENT);
  const std::string long_tenant(4096, 't');
  CHECK(rqa_engine_ask_tenant(engine, "reset password", long_tenant.c_str(), &answer) == RQA_INVALID_ARGUMENT);
  // An escaped NUL in an id would make the entry unreachable from C.
  CHECK(rqa_engine_add_entry(engine, R"({"id": "a\u0000b", "question": "q", "answer": "a"})") ==
        RQA_INVALID_ARGUMENT);
  CHECK(std::string(rqa_last_error()).find("control character") != std::string::npos);
  CHECK(rqa_engine_add_entry(engine, R"({"id": "dup", "question": "q", "answer": "a", "answer": "b"})") ==
        RQA_INVALID_ARGUMENT);
  CHECK(std::string(rqa_last_error()).find("duplicate key") != std::string::npos);

  REQUIRE(rqa_engine_ask(engine, "How do I reset my password?", &answer) == RQA_OK);
  CHECK(std::string(rqa_answer_entry_id(answer)) == kPasswordEntry);
  rqa_answer_destroy(answer);
  rqa_engine_destroy(engine);
}

// ---- knowledge files ----

TEST_CASE("Bad knowledge lines are named by line, quoted briefly, and the rest still loads", "[hostile]") {
  const std::string good = R"({"id": "a", "question": "What is a?", "answer": "A."})";
  const std::string digits(400, '9');
  const std::string file = write_file("hostile.jsonl", good + "\n" +
                                                           R"({"id": "b", "question": "q", "answer": "b", "cache_ttl_seconds": )" +
                                                           digits + "}\n" + std::string(100000, '[') + "\n" +
                                                           R"({"id": "c", "id": "d", "question": "q", "answer": "c"})" +
                                                           "\n" + R"({"id": "e\u0001", "question": "q", "answer": "e"})" +
                                                           "\n" + R"({")" + std::string(100000, 'k') +
                                                           R"(": 1, "id": "f", "question": "q", "answer": "f"})" + "\n");
  auto refused = rapidqa::read_knowledge_file(file);
  REQUIRE_FALSE(refused.is_ok());
  const std::string message = refused.status().message();
  for (const char* line : {"line 2:", "line 3:", "line 4:", "line 5:", "line 6:"}) {
    CHECK(message.find(line) != std::string::npos);
  }
  CHECK(message.find(digits) == std::string::npos);
  CHECK(message.size() < 2000);

  rapidqa::KnowledgeFileOptions skip;
  skip.skip_invalid_lines = true;
  auto kept = rapidqa::read_knowledge_file(file, skip);
  REQUIRE(kept.is_ok());
  REQUIRE(kept->entries.size() == 1);
  CHECK(kept->entries[0].id == "a");
  CHECK(kept->skipped.size() == 5);
}

TEST_CASE("Line limits: a CRLF line at the limit fits, a zero limit is refused", "[hostile]") {
  std::istringstream crlf(std::string(8, 'x') + "\r\n" + std::string(9, 'y') + "\n");
  std::string line;
  CHECK(rapidqa::detail::read_bounded_line(crlf, line, 8) == rapidqa::detail::LineRead::kLine);
  CHECK(line == std::string(8, 'x'));
  CHECK(rapidqa::detail::read_bounded_line(crlf, line, 8) == rapidqa::detail::LineRead::kTooLong);
  rapidqa::KnowledgeFileOptions zero;
  zero.max_line_bytes = 0;
  std::istringstream empty("");
  CHECK(rapidqa::parse_knowledge_jsonl(empty, "empty", zero).status().code() == StatusCode::kInvalidArgument);
}

TEST_CASE("A long question is refused without echoing it", "[hostile]") {
  auto engine = faq_engine();
  const std::string question(50u << 20, 'q');
  auto answer = engine->ask(question);
  REQUIRE_FALSE(answer.is_ok());
  CHECK(answer.status().code() == StatusCode::kOutOfRange);
  CHECK(answer.status().message().size() < 200);
  still_answers_correctly(*engine);
}

// ---- peers ----

TEST_CASE("Hostile change messages from Redis are refused as malformed", "[hostile]") {
  using rapidqa::cache::parse_change_message;
  CHECK_FALSE(parse_change_message(std::string(100000, '[')).is_ok());
  auto duplicate = parse_change_message(R"({"v": 1, "origin": "x", "origin": "y", "kind": "remove", "entry_id": "a"})");
  REQUIRE_FALSE(duplicate.is_ok());
  CHECK(duplicate.status().message().find("duplicate key") != std::string::npos);
  auto long_kind = parse_change_message(R"({"v": 1, "origin": "x", "kind": ")" + std::string(100000, 'k') + R"("})");
  REQUIRE_FALSE(long_kind.is_ok());
  CHECK(long_kind.status().message().size() < 300);
}

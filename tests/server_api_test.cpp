// rapidqa-server's routes, called without a socket: what every protocol
// answers, its errors and its checks (the transports are tested with real
// clients in tests/server/).
#include <chrono>
#include <cstring>
#include <string>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <openssl/evp.h>

#include "server_api.h"

using nlohmann::json;
using rapidqa::server::ServerApi;
using rapidqa::server::ServerApiOptions;
using rapidqa::server::ServerRequest;
using rapidqa::server::ServerResponse;
using rapidqa::server::TenantRateLimiter;

namespace {

const char* kToken = "test-token-0123456789";

std::unique_ptr<rapidqa::QAEngine> faq_engine() {
  auto engine = rapidqa::QAEngine::create();
  REQUIRE(engine);
  auto loaded = (*engine)->load_knowledge(RAPIDQA_TEST_FAQ);
  REQUIRE(loaded);
  return std::move(engine).value();
}

ServerRequest request(const std::string& method, const std::string& path, const std::string& body = "",
                      const std::string& authorization = "") {
  ServerRequest r;
  r.method = method;
  r.path = path;
  r.body = body;
  r.authorization = authorization;
  r.request_id = "test";
  return r;
}

std::string bearer() { return std::string("Bearer ") + kToken; }

json body_of(const ServerResponse& r) {
  json parsed = json::parse(r.body, nullptr, false);
  REQUIRE_FALSE(parsed.is_discarded());
  return parsed;
}

std::string error_code(const ServerResponse& r) { return body_of(r)["error"]["code"].get<std::string>(); }

struct Fixture {
  explicit Fixture(ServerApiOptions options = with_token()) : engine(faq_engine()), api(*engine, std::move(options)) {
    api.set_ready(true);
  }
  static ServerApiOptions with_token() {
    ServerApiOptions o;
    o.admin_token = kToken;
    return o;
  }
  std::unique_ptr<rapidqa::QAEngine> engine;
  ServerApi api;
};

}  // namespace

TEST_CASE("ask answers a FAQ question with its tier matches and stage timings", "[server]") {
  Fixture f;
  ServerResponse r = f.api.handle(request("POST", "/v1/ask", R"({"question": "How do I reset my password?"})"));
  REQUIRE(r.status == 200);
  json a = body_of(r);
  CHECK(a["entry_id"] == "shop-en-reset-password");
  CHECK(a["tier"] == "knowledge");
  CHECK(a["matches"].size() >= 1);
  CHECK(a["matches"][0]["version"] == 1);
  CHECK(a["stage_us"]["total"].get<double>() > 0);
  CHECK(a["degraded"] == false);
  CHECK(r.tier == "knowledge");

  // The same question again is a result-cache hit; another tenant's is not.
  CHECK(body_of(f.api.handle(request("POST", "/v1/ask", R"({"question": "How do I reset my password?"})")))["tier"] ==
        "result_cache");
  ServerResponse other =
      f.api.handle(request("POST", "/v1/ask", R"({"question": "How do I reset my password?", "tenant": "b"})"));
  CHECK(body_of(other)["tier"] == "knowledge");
  CHECK(other.tenant == "b");
}

TEST_CASE("ask carries the confidence, a confidence threshold and the fallback's reason", "[server]") {
  Fixture f;
  json a = body_of(f.api.handle(
      request("POST", "/v1/ask", R"({"question": "I can't remember the password of my account, what now?"})")));
  CHECK(a["tier"] == "knowledge");
  CHECK(a["confidence"].get<double>() > 0.0);
  CHECK(a["fallback_reason"] == "");
  json strict = body_of(f.api.handle(request(
      "POST", "/v1/ask",
      R"({"question": "I can't remember the password of my account, what now?", "min_answer_confidence": 0.9999})")));
  CHECK(strict["tier"] == "fallback");
  CHECK(strict["fallback_reason"].get<std::string>().find("min_answer_confidence") != std::string::npos);
  json short_question = body_of(f.api.handle(request("POST", "/v1/ask", R"({"question": "q"})")));
  CHECK(short_question["tier"] == "fallback");
  CHECK(short_question["fallback_reason"].get<std::string>().find("too little to match") != std::string::npos);
  ServerResponse bad = f.api.handle(request("POST", "/v1/ask", R"({"question": "hello there", "min_answer_confidence": 2})"));
  CHECK(bad.status == 400);
}

TEST_CASE("ask refuses malformed bodies with a message that names the problem", "[server]") {
  Fixture f;
  auto refuse = [&](const std::string& body, const std::string& says) {
    ServerResponse r = f.api.handle(request("POST", "/v1/ask", body));
    INFO(body << " -> " << r.body);
    CHECK(r.status == 400);
    CHECK(error_code(r) == "invalid_argument");
    CHECK(body_of(r)["error"]["message"].get<std::string>().find(says) != std::string::npos);
  };
  refuse("{not json", "not valid JSON");
  refuse("[1, 2]", "JSON object");
  refuse(R"({"question": "hi", "questoin": "typo"})", "unknown field 'questoin'");
  refuse(R"({"question": 42})", "'question' must be a string");
  refuse(R"({"tenant": "a"})", "'question' is required");
  refuse(R"({"question": "hi", "top_k": -1})", "'top_k'");
  refuse(R"({"question": "hi", "top_k": 0})", "'top_k' must be between");
  refuse(R"({"question": "hi", "timeout_ms": 0})", "'timeout_ms'");
  refuse(R"({"question": "hi", "priority": "urgent"})", "'priority'");
  refuse(R"({"question": "hi", "use_cache": "yes"})", "'use_cache'");
  refuse(R"({"question": ""})", "");
  // Invalid UTF-8 in the question is the engine's refusal, passed on.
  ServerResponse bad_utf8 = f.api.handle(request("POST", "/v1/ask", "{\"question\": \"\xff\xfe\"}"));
  CHECK(bad_utf8.status == 400);
}

TEST_CASE("ask takes the tighter of the header deadline and the body's", "[server]") {
  Fixture f;
  ServerRequest r = request("POST", "/v1/ask", R"({"question": "When are you open?", "timeout_ms": 5000})");
  r.timeout = std::chrono::milliseconds(50);
  CHECK(f.api.handle(r).status == 200);
}

TEST_CASE("ask batch answers each question and refuses one larger than the limit", "[server]") {
  ServerApiOptions options = Fixture::with_token();
  options.max_batch = 3;
  Fixture f(options);
  ServerResponse r = f.api.handle(
      request("POST", "/v1/ask:batch", R"({"questions": ["How do I reset my password?", "", "When are you open?"]})"));
  REQUIRE(r.status == 200);
  json answers = body_of(r)["answers"];
  REQUIRE(answers.size() == 3);
  CHECK(answers[0]["entry_id"] == "shop-en-reset-password");
  CHECK(answers[1]["error"]["code"] == "invalid_argument");
  CHECK(answers[2].contains("answer"));
  ServerResponse too_many = f.api.handle(request("POST", "/v1/ask:batch", R"({"questions": ["a", "b", "c", "d"]})"));
  CHECK(too_many.status == 413);
  CHECK(f.api.handle(request("POST", "/v1/ask:batch", R"({"question": "a"})")).status == 400);
}

TEST_CASE("administration needs the bearer token and is off without one", "[server]") {
  Fixture f;
  CHECK(f.api.handle(request("GET", "/v1/entries/shop-en-reset-password")).status == 401);
  CHECK(f.api.handle(request("GET", "/v1/entries/shop-en-reset-password", "", "Bearer wrong")).status == 401);
  CHECK(f.api.handle(request("GET", "/v1/entries/shop-en-reset-password", "", kToken)).status == 401);
  CHECK(f.api.handle(request("GET", "/v1/entries/shop-en-reset-password", "", bearer() + "x")).status == 401);
  CHECK(f.api.handle(request("GET", "/v1/entries/shop-en-reset-password", "", bearer())).status == 200);
  CHECK(f.api.handle(request("POST", "/v1/cache:invalidate", R"({"entry_id": "x"})")).status == 401);
  // Asking stays open unless protect_ask.
  CHECK(f.api.handle(request("POST", "/v1/ask", R"({"question": "hi"})")).status == 200);

  Fixture no_token(ServerApiOptions{});
  ServerResponse off = no_token.api.handle(request("GET", "/v1/entries/shop-en-reset-password", "", "Bearer "));
  CHECK(off.status == 403);
  CHECK(error_code(off) == "permission_denied");

  ServerApiOptions protect = Fixture::with_token();
  protect.protect_ask = true;
  Fixture protected_ask(protect);
  CHECK(protected_ask.api.handle(request("POST", "/v1/ask", R"({"question": "hi"})")).status == 401);
  CHECK(protected_ask.api.handle(request("POST", "/v1/ask", R"({"question": "hi"})", bearer())).status == 200);
  CHECK(protected_ask.api.handle(request("POST", "/v1/embeddings", R"({"input": "hi"})")).status == 401);
  CHECK(protected_ask.api.handle(request("GET", "/healthz")).status == 200);
}

TEST_CASE("entries are created updated read and deleted over the API", "[server]") {
  Fixture f;
  const std::string entry =
      R"({"question": "Do you rent out kayaks on weekends?", "answer": "Yes, from 10 to 500 euros.", "alternates": ["kayak rental"]})";
  ServerResponse created = f.api.handle(request("PUT", "/v1/entries/kayaks", entry, bearer()));
  REQUIRE(created.status == 201);
  CHECK(body_of(created)["version"] == 1);
  CHECK(body_of(f.api.handle(request("POST", "/v1/ask", R"({"question": "Do you rent out kayaks on weekends?"})")))["entry_id"] ==
        "kayaks");

  ServerResponse updated = f.api.handle(request(
      "PUT", "/v1/entries/kayaks",
      R"({"id": "kayaks", "question": "Do you rent out kayaks on weekends?", "answer": "Yes, from 5 euros."})", bearer()));
  REQUIRE(updated.status == 200);
  CHECK(body_of(updated)["version"] == 2);
  // The cached answer went with the old version.
  CHECK(body_of(f.api.handle(request("POST", "/v1/ask", R"({"question": "Do you rent out kayaks on weekends?"})")))["answer"] ==
        "Yes, from 5 euros.");
  CHECK(body_of(f.api.handle(request("GET", "/v1/entries/kayaks", "", bearer())))["answer"] == "Yes, from 5 euros.");

  CHECK(f.api.handle(request("PUT", "/v1/entries/kayaks", R"({"id": "other", "question": "q", "answer": "a"})",
                             bearer()))
            .status == 400);
  CHECK(f.api.handle(request("PUT", "/v1/entries/kayaks", R"({"question": ""})", bearer())).status == 400);
  CHECK(f.api.handle(request("DELETE", "/v1/entries/kayaks", "", bearer())).status == 200);
  CHECK(f.api.handle(request("GET", "/v1/entries/kayaks", "", bearer())).status == 404);
  CHECK(f.api.handle(request("DELETE", "/v1/entries/kayaks", "", bearer())).status == 404);
  CHECK(f.api.handle(request("POST", "/v1/entries/kayaks", entry, bearer())).status == 405);
}

TEST_CASE("import adds new entries and updates known ones and a bad file changes nothing", "[server]") {
  Fixture f;
  const std::size_t before = f.engine->entry_count();
  ServerResponse r = f.api.handle(request(
      "POST", "/v1/entries:import",
      "{\"id\": \"imp-1\", \"question\": \"Is parking free?\", \"answer\": \"Yes.\"}\n"
      "{\"id\": \"shop-en-reset-password\", \"question\": \"How do I reset my password?\", \"answer\": \"Ask us.\"}\n",
      bearer()));
  REQUIRE(r.status == 200);
  CHECK(body_of(r)["added"] == 1);
  CHECK(body_of(r)["updated"] == 1);
  CHECK(f.engine->entry_count() == before + 1);
  ServerResponse bad = f.api.handle(request("POST", "/v1/entries:import", "{\"id\": \"imp-2\"\nnot json\n", bearer()));
  CHECK(bad.status == 400);
  CHECK(f.engine->entry_count() == before + 1);
}

TEST_CASE("cache administration corrects deletes and invalidates cached answers", "[server]") {
  Fixture f;
  const std::string ask = R"({"question": "How do I reset my password?"})";
  REQUIRE(f.api.handle(request("POST", "/v1/ask", ask)).status == 200);
  CHECK(f.api.handle(request("POST", "/v1/cache:correct",
                             R"({"question": "How do I reset my password?", "answer": "Corrected."})", bearer()))
            .status == 200);
  json corrected = body_of(f.api.handle(request("POST", "/v1/ask", ask)));
  CHECK(corrected["answer"] == "Corrected.");
  ServerResponse deleted =
      f.api.handle(request("POST", "/v1/cache:delete", R"({"question": "How do I reset my password?"})", bearer()));
  REQUIRE(deleted.status == 200);
  CHECK(body_of(deleted)["dropped"].get<int>() >= 1);
  CHECK(body_of(f.api.handle(request("POST", "/v1/ask", ask)))["tier"] == "knowledge");
  ServerResponse invalidated =
      f.api.handle(request("POST", "/v1/cache:invalidate", R"({"entry_id": "shop-en-reset-password"})", bearer()));
  REQUIRE(invalidated.status == 200);
  CHECK(body_of(invalidated)["dropped"].get<int>() >= 1);
  CHECK(f.api.handle(request("POST", "/v1/cache:flush", "{}", bearer())).status == 404);
  CHECK(f.api.handle(request("POST", "/v1/cache:correct", R"({"question": "q"})", bearer())).status == 400);
}

TEST_CASE("readiness health and metrics routes", "[server]") {
  Fixture f;
  f.api.set_ready(false);
  CHECK(f.api.handle(request("GET", "/healthz")).status == 200);
  ServerResponse not_ready = f.api.handle(request("GET", "/readyz"));
  CHECK(not_ready.status == 503);
  CHECK(not_ready.retry_after_seconds > 0);
  CHECK(f.api.handle(request("POST", "/v1/ask", R"({"question": "hi"})")).status == 503);
  CHECK(f.api.handle(request("GET", "/v2/health/ready")).status == 503);
  f.api.set_ready(true);
  CHECK(f.api.handle(request("GET", "/readyz")).status == 200);
  REQUIRE(f.api.handle(request("POST", "/v1/ask", R"({"question": "hi"})")).status == 200);
  ServerResponse metrics = f.api.handle(request("GET", "/metrics"));
  CHECK(metrics.status == 200);
  CHECK(metrics.content_type.find("text/plain") == 0);
  CHECK(metrics.body.find("# TYPE") != std::string::npos);
  CHECK(f.api.handle(request("POST", "/metrics")).status == 405);
  CHECK(f.api.handle(request("GET", "/v1/nothing")).status == 404);
}

TEST_CASE("OpenAI embeddings return one vector per input in float or base64", "[server]") {
  Fixture f;
  const std::size_t dim = f.engine->encoder().dimension();
  ServerResponse r = f.api.handle(
      request("POST", "/v1/embeddings", R"({"input": ["reset my password", "opening hours"], "model": "rapidqa-encoder"})"));
  REQUIRE(r.status == 200);
  json b = body_of(r);
  CHECK(b["object"] == "list");
  REQUIRE(b["data"].size() == 2);
  CHECK(b["data"][1]["index"] == 1);
  CHECK(b["data"][0]["embedding"].size() == dim);
  CHECK(b["model"] == "rapidqa-encoder");

  ServerResponse encoded =
      f.api.handle(request("POST", "/v1/embeddings", R"({"input": "reset my password", "encoding_format": "base64"})"));
  REQUIRE(encoded.status == 200);
  const std::string text = body_of(encoded)["data"][0]["embedding"].get<std::string>();
  std::string bytes(text.size(), '\0');
  const int decoded = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(bytes.data()),
                                      reinterpret_cast<const unsigned char*>(text.data()), static_cast<int>(text.size()));
  REQUIRE(decoded >= static_cast<int>(dim * sizeof(float)));
  float first = 0;
  std::memcpy(&first, bytes.data(), sizeof first);
  CHECK(first == Approx(b["data"][0]["embedding"][0].get<float>()));

  CHECK(f.api.handle(request("POST", "/v1/embeddings", R"({"input": "x", "model": "gpt"})")).status == 404);
  CHECK(f.api.handle(request("POST", "/v1/embeddings", R"({"input": []})")).status == 400);
  CHECK(f.api.handle(request("POST", "/v1/embeddings", R"({"input": [1]})")).status == 400);
  CHECK(f.api.handle(request("POST", "/v1/embeddings", R"({"input": "x", "encoding_format": "hex"})")).status == 400);
  CHECK(f.api.handle(request("POST", "/v1/embeddings", R"({"input": "x", "dimensions": 3})")).status == 400);
}

TEST_CASE("KServe v2 metadata readiness and inference", "[server]") {
  Fixture f;
  const std::size_t dim = f.engine->encoder().dimension();
  CHECK(body_of(f.api.handle(request("GET", "/v2")))["name"] == "rapidqa");
  CHECK(f.api.handle(request("GET", "/v2/health/live")).status == 200);
  CHECK(f.api.handle(request("GET", "/v2/models/rapidqa-encoder/ready")).status == 200);
  json meta = body_of(f.api.handle(request("GET", "/v2/models/rapidqa-encoder")));
  CHECK(meta["inputs"][0]["datatype"] == "BYTES");
  CHECK(meta["outputs"][0]["shape"][1] == dim);
  CHECK(f.api.handle(request("GET", "/v2/models/other")).status == 404);

  ServerResponse r = f.api.handle(request("POST", "/v2/models/rapidqa-encoder/versions/1/infer", R"({
      "id": "req-7",
      "inputs": [{"name": "text", "datatype": "BYTES", "shape": [2], "data": ["reset my password", "hours"]}]})"));
  REQUIRE(r.status == 200);
  json out = body_of(r);
  CHECK(out["id"] == "req-7");
  CHECK(out["outputs"][0]["datatype"] == "FP32");
  CHECK(out["outputs"][0]["shape"] == json({2, dim}));
  CHECK(out["outputs"][0]["data"].size() == 2 * dim);

  // The numbers read back as the floats they were (shortest round-trip text).
  std::vector<float> vectors;
  REQUIRE(f.engine->embed({"reset my password", "hours"}, vectors).is_ok());
  for (std::size_t i = 0; i < vectors.size(); ++i) CHECK(out["outputs"][0]["data"][i].get<float>() == vectors[i]);

  // Binary tensor data: asked for the whole request or for the output, the
  // JSON header says its length and the output's size, the vectors' bytes follow.
  CHECK(body_of(f.api.handle(request("GET", "/v2")))["extensions"] == json({"binary_tensor_data"}));
  for (const char* binary_request :
       {R"({"inputs": [{"name": "text", "datatype": "BYTES", "shape": [2], "data": ["reset my password", "hours"]}],
            "parameters": {"binary_data_output": true}})",
        R"({"inputs": [{"name": "text", "datatype": "BYTES", "shape": [2], "data": ["reset my password", "hours"]}],
            "outputs": [{"name": "embedding", "parameters": {"binary_data": true}}]})"}) {
    ServerResponse b = f.api.handle(request("POST", "/v2/models/rapidqa-encoder/infer", binary_request));
    REQUIRE(b.status == 200);
    REQUIRE(b.headers.size() == 1);
    CHECK(b.headers[0].first == "inference-header-content-length");
    const std::size_t json_length = std::stoul(b.headers[0].second);
    const json header = json::parse(b.body.substr(0, json_length));
    CHECK(header["outputs"][0]["shape"] == json({2, dim}));
    CHECK(header["outputs"][0]["parameters"]["binary_data_size"] == 2 * dim * sizeof(float));
    CHECK_FALSE(header["outputs"][0].contains("data"));
    REQUIRE(b.body.size() == json_length + 2 * dim * sizeof(float));
    CHECK(std::memcmp(b.body.data() + json_length, vectors.data(), 2 * dim * sizeof(float)) == 0);
  }
  // An output's own binary_data: false wins over the request's true.
  ServerResponse numbers = f.api.handle(request("POST", "/v2/models/rapidqa-encoder/infer", R"({
      "inputs": [{"name": "text", "datatype": "BYTES", "shape": [1], "data": ["hours"]}],
      "parameters": {"binary_data_output": true}, "outputs": [{"name": "embedding", "parameters": {"binary_data": false}}]})"));
  REQUIRE(numbers.status == 200);
  CHECK(numbers.headers.empty());
  CHECK(body_of(numbers)["outputs"][0]["data"].size() == dim);

  auto infer = [&](const std::string& body) { return f.api.handle(request("POST", "/v2/models/rapidqa-encoder/infer", body)).status; };
  CHECK(infer(R"({"inputs": [{"name": "t", "datatype": "BYTES", "data": ["a"]}], "outputs": [{"name": "other"}]})") == 400);
  CHECK(infer(R"({"inputs": [{"name": "t", "datatype": "BYTES", "data": ["a"]}], "parameters": {"binary_data_output": 1}})") == 400);
  CHECK(infer(R"({"inputs": [{"name": "t", "datatype": "BYTES", "data": ["a"]}], "parameters": []})") == 400);
  CHECK(infer(R"({"inputs": [{"name": "t", "datatype": "FP32", "shape": [1], "data": [1.0]}]})") == 400);
  CHECK(infer(R"({"inputs": [{"name": "t", "datatype": "BYTES", "shape": [3], "data": ["a"]}]})") == 400);
  CHECK(infer(R"({"inputs": []})") == 400);
  CHECK(infer(R"({"inputs": [{"name": "t", "datatype": "BYTES", "data": [7]}]})") == 400);
  CHECK(f.api.handle(request("POST", "/v2/models/rapidqa-encoder/versions/2/infer", "{}")).status == 404);
}

TEST_CASE("the tenant rate limit admits a burst then refuses with the wait and refills", "[server]") {
  TenantRateLimiter limiter({/*questions_per_second=*/2, /*burst=*/4});
  const auto t0 = TenantRateLimiter::Clock::time_point{} + std::chrono::hours(1);
  for (int i = 0; i < 4; ++i) CHECK(limiter.admit("a", 1, t0) == 0);
  CHECK(limiter.admit("a", 1, t0) == 1);
  CHECK(limiter.admit("a", 8, t0) == 4);  // (8 - 0) / 2 per second
  CHECK(limiter.admit("b", 1, t0) == 0);  // tenants are separate
  CHECK(limiter.admit("a", 1, t0 + std::chrono::milliseconds(500)) == 0);
  CHECK(limiter.admit("a", 1, t0 + std::chrono::milliseconds(500)) == 1);

  TenantRateLimiter unlimited({});
  for (int i = 0; i < 100; ++i) CHECK(unlimited.admit("a", 1, t0) == 0);

  ServerApiOptions options = Fixture::with_token();
  options.rate_limit = {1, 1};
  Fixture f(options);
  CHECK(f.api.handle(request("POST", "/v1/ask", R"({"question": "hi", "tenant": "t"})")).status == 200);
  ServerResponse limited = f.api.handle(request("POST", "/v1/ask", R"({"question": "hi", "tenant": "t"})"));
  CHECK(limited.status == 429);
  CHECK(limited.retry_after_seconds >= 1);
}

TEST_CASE("ask_cached answers result-cache hits for the event loop and leaves the rest to handle", "[server]") {
  ServerApiOptions options = Fixture::with_token();
  options.rate_limit = {1, 2};
  Fixture f(options);
  const std::string body = R"({"question": "How do I reset my password?", "tenant": "t"})";
  CHECK_FALSE(f.api.ask_cached(request("POST", "/v1/ask", body)).has_value());
  REQUIRE(f.api.handle(request("POST", "/v1/ask", body)).status == 200);
  auto hit = f.api.ask_cached(request("POST", "/v1/ask", body));
  REQUIRE(hit.has_value());
  CHECK(hit->status == 200);
  CHECK(body_of(*hit)["tier"] == "result_cache");
  CHECK(hit->tier == "result_cache");
  // The rate limit holds on the fast path too.
  auto limited = f.api.ask_cached(request("POST", "/v1/ask", body));
  REQUIRE(limited.has_value());
  CHECK(limited->status == 429);
  // Anything else is handle()'s: other routes, bad bodies, not ready.
  CHECK_FALSE(f.api.ask_cached(request("POST", "/v1/ask", "{broken")).has_value());
  CHECK_FALSE(f.api.ask_cached(request("POST", "/v1/ask:batch", body)).has_value());
  f.api.set_ready(false);
  CHECK_FALSE(f.api.ask_cached(request("POST", "/v1/ask", body)).has_value());
}

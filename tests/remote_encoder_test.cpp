// RemoteEncoder and its parts: the circuit breaker, the retry budget and
// the endpoint choice with outlier ejection (driven with given times), the
// two protocols' bodies and answers, and every fault against a loopback
// server that answers as the test says (CannedHttpServer). The same
// encoder against real rapidqa-server processes is in
// remote_server_test.cpp.
#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "rapidqa/remote_encoder.h"
#include "remote/circuit_breaker.h"
#include "remote/embedding_protocol.h"
#include "remote/endpoint_set.h"
#include "remote/http_lane.h"
#include "support/canned_http_server.h"
#include "support/free_port.h"

using namespace std::chrono_literals;
using rapidqa::BreakerState;
using rapidqa::RemoteEncoder;
using rapidqa::RemoteEncoderOptions;
using rapidqa::RemoteProtocol;
using rapidqa::StatusCode;
using rapidqa::remote::Admission;
using rapidqa::remote::CircuitBreaker;
using rapidqa::remote::EmbeddingProtocol;
using rapidqa::remote::EndpointSet;
using rapidqa::remote::RequestKind;
using rapidqa::remote::RetryBudget;
using rapidqa::testing::CannedHttpServer;
using rapidqa::testing::CannedReply;
using Time = std::chrono::steady_clock::time_point;

namespace {

std::unique_ptr<CannedHttpServer> canned(CannedReply reply = {}) {
  auto s = CannedHttpServer::start(std::move(reply));
  REQUIRE(s.is_ok());
  return std::move(s).value();
}

// An endpoint nothing listens on: connections are refused.
std::string refusing_endpoint() { return "http://127.0.0.1:" + std::to_string(rapidqa::testing::free_loopback_port()); }

RemoteEncoderOptions options_for(std::vector<std::string> endpoints) {
  RemoteEncoderOptions o;
  o.endpoints = std::move(endpoints);
  o.model = "canned";
  o.request_timeout = 5000ms;
  o.hedge_percentile = 0;  // tests that hedge turn it on
  return o;
}

std::shared_ptr<RemoteEncoder> make(const RemoteEncoderOptions& o) {
  auto e = RemoteEncoder::create(o);
  INFO(e.status().message());
  REQUIRE(e.is_ok());
  return std::move(e).value();
}

CannedReply fixed(int status, std::string body, std::string headers = "") {
  CannedReply r;
  r.mode = CannedReply::Mode::kFixed;
  r.status = status;
  r.body = std::move(body);
  r.headers = std::move(headers);
  return r;
}

CannedReply mode(CannedReply::Mode m) {
  CannedReply r;
  r.mode = m;
  return r;
}

const rapidqa::RemoteEndpointMetrics& endpoint_metrics(const rapidqa::RemoteEngineMetrics& m, const std::string& url) {
  for (const auto& e : m.endpoints) {
    if (e.url == url) return e;
  }
  FAIL("no metrics for " << url);
  return m.endpoints.front();
}

}  // namespace

TEST_CASE("circuit breaker opens on a failure ratio and closes after a good trial", "[remote]") {
  CircuitBreaker breaker({10, 4, 0.5, 100ms});
  const Time t0{};
  for (int i = 0; i < 3; ++i) {
    REQUIRE(breaker.admit(t0) == Admission::kAllowed);
    breaker.record(false, false, t0);
  }
  // Three calls are under min_calls: still closed, though all failed.
  REQUIRE(breaker.state(t0) == BreakerState::kClosed);
  REQUIRE(breaker.admit(t0) == Admission::kAllowed);
  breaker.record(true, false, t0);
  REQUIRE(breaker.state(t0) == BreakerState::kOpen);  // 3 of 4 failed
  REQUIRE(breaker.opens() == 1);
  REQUIRE(breaker.admit(t0 + 50ms) == Admission::kRefused);
  REQUIRE(breaker.refused() == 1);
  // After open_time: one trial at a time.
  REQUIRE(breaker.state(t0 + 100ms) == BreakerState::kHalfOpen);
  REQUIRE(breaker.admit(t0 + 100ms) == Admission::kTrial);
  REQUIRE(breaker.admit(t0 + 101ms) == Admission::kRefused);
  breaker.record(false, true, t0 + 110ms);  // the trial failed: open again, from now
  REQUIRE(breaker.state(t0 + 150ms) == BreakerState::kOpen);
  REQUIRE(breaker.opens() == 2);
  REQUIRE(breaker.admit(t0 + 210ms) == Admission::kTrial);
  breaker.record(true, true, t0 + 215ms);
  REQUIRE(breaker.state(t0 + 215ms) == BreakerState::kClosed);
  REQUIRE(breaker.admit(t0 + 216ms) == Admission::kAllowed);
}

TEST_CASE("circuit breaker forgets outcomes older than its window and ignores late ones", "[remote]") {
  CircuitBreaker breaker({4, 4, 0.75, 1s});
  const Time t0{};
  // Two failures among many successes never reach 3 of the last 4.
  for (int round = 0; round < 5; ++round) {
    breaker.record(false, false, t0);
    breaker.record(true, false, t0);
    breaker.record(true, false, t0);
  }
  REQUIRE(breaker.state(t0) == BreakerState::kClosed);
  breaker.trip(t0);
  REQUIRE(breaker.state(t0) == BreakerState::kOpen);
  // A call admitted before it opened and failing now changes nothing.
  breaker.record(false, false, t0 + 10ms);
  REQUIRE(breaker.opens() == 1);
}

TEST_CASE("retry budget allows a share of the calls plus a reserve", "[remote]") {
  RetryBudget budget(0.1, 2);
  REQUIRE(budget.try_spend());
  REQUIRE(budget.try_spend());
  REQUIRE_FALSE(budget.try_spend());  // the reserve is spent
  for (int i = 0; i < 10; ++i) budget.deposit();
  REQUIRE(budget.try_spend());  // ten calls earned one retry
  REQUIRE_FALSE(budget.try_spend());
  REQUIRE(budget.refusals() == 2);
}

TEST_CASE("endpoint set: round robin, least loaded, ejection that grows and ends", "[remote]") {
  rapidqa::remote::EndpointSetOptions o;
  o.choice = rapidqa::EndpointChoice::kRoundRobin;
  o.eject_after_failures = 2;
  o.ejection_time = 100ms;
  EndpointSet set({"a", "b", "c"}, o);
  const Time t0{};
  std::vector<std::size_t> order;
  for (int i = 0; i < 6; ++i) {
    auto p = set.pick({}, RequestKind::kFirst, t0);
    REQUIRE(p);
    order.push_back(*p);
    set.finished(*p, false, false, 1ms, t0);
  }
  REQUIRE(order == std::vector<std::size_t>{0, 1, 2, 0, 1, 2});
  // `avoid` is honoured while another endpoint is there.
  REQUIRE(*set.pick({0, 1}, RequestKind::kRetry, t0) == 2);
  set.finished(2, false, true, {}, t0);
  // Two failures in a row eject b for 100 ms; the second time for 200 ms.
  for (int i = 0; i < 2; ++i) {
    REQUIRE(*set.pick({0, 2}, RequestKind::kFirst, t0) == 1);
    set.finished(1, true, false, 1ms, t0);
  }
  auto m = set.metrics(t0);
  REQUIRE(m[1].ejected);
  REQUIRE(m[1].ejections == 1);
  REQUIRE(m[1].failures == 2);
  for (int i = 0; i < 4; ++i) {
    auto p = set.pick({}, RequestKind::kFirst, t0 + 50ms);
    REQUIRE(*p != 1);
    set.finished(*p, false, false, 1ms, t0 + 50ms);
  }
  REQUIRE_FALSE(set.metrics(t0 + 100ms)[1].ejected);
  for (int i = 0; i < 2; ++i) {
    REQUIRE(*set.pick({0, 2}, RequestKind::kFirst, t0 + 100ms) == 1);
    set.finished(1, true, false, 1ms, t0 + 100ms);
  }
  REQUIRE(set.metrics(t0 + 250ms)[1].ejected);
  REQUIRE_FALSE(set.metrics(t0 + 300ms)[1].ejected);
  // Everyone ejected: nothing to pick.
  rapidqa::remote::EndpointSetOptions one;
  one.eject_after_failures = 1;
  EndpointSet single({"x"}, one);
  single.finished(*single.pick({}, RequestKind::kFirst, t0), true, false, 1ms, t0);
  REQUIRE(single.all_ejected(t0));
  REQUIRE_FALSE(single.pick({}, RequestKind::kFirst, t0));

  // Least loaded: the endpoint with fewer requests in flight.
  rapidqa::remote::EndpointSetOptions least;
  least.choice = rapidqa::EndpointChoice::kLeastLoaded;
  EndpointSet pair({"p", "q"}, least);
  const auto first = *pair.pick({}, RequestKind::kFirst, t0);
  const auto second = *pair.pick({}, RequestKind::kFirst, t0);
  REQUIRE(first != second);
  pair.finished(first, false, false, 1ms, t0);
  REQUIRE(*pair.pick({}, RequestKind::kFirst, t0) == first);  // `second` still has one in flight
}

TEST_CASE("embedding protocols: request bodies and the answers they accept", "[remote]") {
  EmbeddingProtocol openai;
  openai.model = "m";
  REQUIRE(openai.path() == "/v1/embeddings");
  REQUIRE(openai.request_body({"a", "b"}) == R"({"encoding_format":"base64","input":["a","b"],"model":"m"})");
  openai.base64_vectors = false;
  REQUIRE(openai.request_body({"a", "b"}) == R"({"encoding_format":"float","input":["a","b"],"model":"m"})");
  std::size_t dim = 0;
  std::vector<float> out;
  // Items out of order are placed by their index.
  REQUIRE(openai.read_vectors(R"({"data":[{"index":1,"embedding":[3,4]},{"index":0,"embedding":[1,2]}]})", 2, dim, out)
              .is_ok());
  REQUIRE(dim == 2);
  REQUIRE(out == std::vector<float>{1, 2, 3, 4});
  // base64 float32s, little-endian: [1, 2] and [3, 4].
  dim = 0;
  REQUIRE(openai.read_vectors(R"({"data":[{"index":0,"embedding":"AACAPwAAAEA="},{"index":1,"embedding":"AABAQAAAgEA="}]})",
                              2, dim, out)
              .is_ok());
  REQUIRE(out == std::vector<float>{1, 2, 3, 4});
  REQUIRE(openai.read_vectors(R"({"data":[{"index":0,"embedding":"AACAPwAA"}]})", 1, dim, out).code() ==
          StatusCode::kDataLoss);  // 6 bytes: not whole floats
  REQUIRE(openai.read_vectors(R"({"data":[{"index":0,"embedding":"!!!!"}]})", 1, dim, out).code() ==
          StatusCode::kDataLoss);
  dim = 3;
  auto wrong = openai.read_vectors(R"({"data":[{"index":0,"embedding":[1,2]}]})", 1, dim, out);
  REQUIRE(wrong.code() == StatusCode::kDataLoss);
  REQUIRE(wrong.message().find("2 values, not 3") != std::string::npos);
  dim = 0;
  REQUIRE(openai.read_vectors(R"({"data":[]})", 1, dim, out).code() == StatusCode::kDataLoss);
  REQUIRE(openai.read_vectors("not json", 1, dim, out).code() == StatusCode::kDataLoss);
  REQUIRE(openai.read_vectors(R"({"data":[{"index":0,"embedding":[1]},{"index":0,"embedding":[1]}]})", 2, dim, out)
              .code() == StatusCode::kDataLoss);
  REQUIRE(openai.read_vectors(R"({"data":[{"index":0,"embedding":["x"]}]})", 1, dim, out).code() ==
          StatusCode::kDataLoss);

  EmbeddingProtocol kserve;
  kserve.protocol = RemoteProtocol::kKServeV2;
  kserve.model = "my model/v";
  REQUIRE(kserve.path() == "/v2/models/my%20model%2Fv/infer");
  REQUIRE(kserve.request_body({"q"}) ==
          R"({"inputs":[{"data":["q"],"datatype":"BYTES","name":"text","shape":[1]}],"parameters":{"binary_data_output":true}})");
  kserve.kserve_binary_vectors = false;
  REQUIRE(kserve.request_body({"q"}) == R"({"inputs":[{"data":["q"],"datatype":"BYTES","name":"text","shape":[1]}]})");
  dim = 0;
  // Flat data, and nested rows as some servers send them.
  REQUIRE(kserve.read_vectors(R"({"outputs":[{"name":"e","datatype":"FP32","shape":[2,2],"data":[1,2,3,4]}]})", 2, dim,
                              out)
              .is_ok());
  REQUIRE(out == std::vector<float>{1, 2, 3, 4});
  REQUIRE(kserve.read_vectors(R"({"outputs":[{"name":"e","datatype":"FP32","shape":[2,2],"data":[[1,2],[3,4]]}]})", 2,
                              dim, out)
              .is_ok());
  REQUIRE(kserve.read_vectors(R"({"outputs":[{"name":"e","datatype":"FP32","shape":[2,2],"data":[1,2,3]}]})", 2, dim,
                              out)
              .code() == StatusCode::kDataLoss);
  REQUIRE(kserve.read_vectors(R"({"outputs":[{"name":"e","datatype":"INT8","shape":[1,2],"data":[1,2]}]})", 1, dim, out)
              .code() == StatusCode::kDataLoss);
  // Binary tensor data: the JSON, then each binary output's bytes in the
  // order of 'outputs' (here a 2-byte output before the vectors).
  const auto binary_answer = [](const std::string& json, const std::string& bytes) { return json + bytes; };
  const float vectors[] = {1, 2, 3, 4};
  const std::string vector_bytes(reinterpret_cast<const char*>(vectors), sizeof vectors);
  const std::string header =
      R"({"outputs":[{"name":"ids","datatype":"INT8","shape":[2],"parameters":{"binary_data_size":2}},)"
      R"({"name":"e","datatype":"FP32","shape":[2,2],"parameters":{"binary_data_size":16}}]})";
  const std::string answer = binary_answer(header, "xy" + vector_bytes);
  out.clear();
  REQUIRE(kserve.read_vectors(answer, 2, dim, out, header.size()).is_ok());
  REQUIRE(out == std::vector<float>{1, 2, 3, 4});
  // The bytes cut short, a size that is not the shape's, a header longer
  // than the body, and binary data without its header's length: all refused.
  auto cut = kserve.read_vectors(answer.substr(0, answer.size() - 1), 2, dim, out, header.size());
  REQUIRE(cut.code() == StatusCode::kDataLoss);
  REQUIRE(cut.message().find("binary data ends") != std::string::npos);
  std::string wrong_size = header;
  wrong_size.replace(wrong_size.find("16"), 2, "12");
  REQUIRE(kserve.read_vectors(binary_answer(wrong_size, "xy" + vector_bytes), 2, dim, out, wrong_size.size()).code() ==
          StatusCode::kDataLoss);
  REQUIRE(kserve.read_vectors(answer, 2, dim, out, answer.size() + 1).code() == StatusCode::kDataLoss);
  // Sizes that would wrap the offset round to the start of the bytes.
  std::string wrapping = header;
  wrapping.replace(wrapping.find("\"binary_data_size\":2"), 20, "\"binary_data_size\":18446744073709551615");
  wrapping.insert(wrapping.find("{\"name\":\"e\""),
                  R"({"name":"more","datatype":"INT8","shape":[1],"parameters":{"binary_data_size":3}},)");
  REQUIRE(kserve.read_vectors(binary_answer(wrapping, "xy" + vector_bytes), 2, dim, out, wrapping.size()).code() ==
          StatusCode::kDataLoss);
  REQUIRE(kserve.read_vectors(header, 2, dim, out).message().find("Inference-Header-Content-Length") !=
          std::string::npos);
  // A JSON answer with the header's length (an engine that sent numbers) is read as numbers.
  const std::string numbers = R"({"outputs":[{"name":"e","datatype":"FP32","shape":[1,2],"data":[5,6]}]})";
  REQUIRE(kserve.read_vectors(numbers, 1, dim, out, numbers.size()).is_ok());
  REQUIRE(out == std::vector<float>{5, 6});
  kserve.kserve_output = "wanted";
  REQUIRE(kserve.read_vectors(R"({"outputs":[{"name":"e","datatype":"FP32","shape":[1,2],"data":[1,2]}]})", 1, dim, out)
              .message()
              .find("'wanted'") != std::string::npos);
  REQUIRE(rapidqa::remote::error_message(R"({"error":{"message":"too long","type":"invalid_request_error"}})") ==
          "too long");
  REQUIRE(rapidqa::remote::error_message(R"({"error":"no model"})") == "no model");
}

TEST_CASE("header lines: Content-Length read for the body's room, Retry-After in seconds, KServe's JSON length", "[remote]") {
  using rapidqa::remote::content_length_header;
  using rapidqa::remote::retry_after_header;
  const auto length = [](const std::string& line) { return content_length_header(line.data(), line.size()); };
  REQUIRE(length("Content-Length: 138240\r\n") == std::optional<std::size_t>(138240));
  REQUIRE(length("content-length:0\r\n") == std::optional<std::size_t>(0));
  REQUIRE_FALSE(length("Content-Length: -1\r\n"));
  REQUIRE_FALSE(length("Content-Length: many\r\n"));
  REQUIRE_FALSE(length("Content-Type: application/json\r\n"));
  REQUIRE_FALSE(length("Content-Length:"));
  const std::string json_length = "Inference-Header-Content-Length: 120\r\n";
  REQUIRE(rapidqa::remote::inference_header_length_header(json_length.data(), json_length.size()) ==
          std::optional<std::size_t>(120));
  REQUIRE_FALSE(rapidqa::remote::inference_header_length_header("Content-Length: 5\r\n", 19));
  const std::string retry = "Retry-After: 3\r\n";
  REQUIRE(retry_after_header(retry.data(), retry.size()) == std::optional<std::chrono::milliseconds>(3000));
}

TEST_CASE("remote encoder refuses bad options with a clear error", "[remote]") {
  RemoteEncoderOptions o;
  REQUIRE(RemoteEncoder::create(o).status().code() == StatusCode::kInvalidArgument);
  o.endpoints = {"ftp://host"};
  o.model = "m";
  auto bad = RemoteEncoder::create(o);
  REQUIRE(bad.status().code() == StatusCode::kInvalidArgument);
  REQUIRE(bad.status().message().find("ftp://host") != std::string::npos);
  o.endpoints = {"http://127.0.0.1:1"};
  o.model.clear();
  REQUIRE(RemoteEncoder::create(o).status().message().find("model") != std::string::npos);
  o.model = "m";
  o.extra_headers = {"X-Bad\r\nInjected: 1"};
  REQUIRE(RemoteEncoder::create(o).status().code() == StatusCode::kInvalidArgument);
  o.extra_headers.clear();
  o.hedge_percentile = 1.5;
  REQUIRE(RemoteEncoder::create(o).status().code() == StatusCode::kInvalidArgument);
}

TEST_CASE("remote encoder: normalised vectors, headers, the budget sent, batches split", "[remote]") {
  auto server = canned();
  auto o = options_for({server->url() + "/"});
  o.bearer_token = "secret";
  o.extra_headers = {"X-Tenant: t1"};
  o.max_texts_per_request = 2;
  auto encoder = make(o);
  REQUIRE(encoder->dimension() == 4);
  REQUIRE(encoder->name() == "remote-openai:canned");
  REQUIRE_FALSE(encoder->wants_normalized_text());
  std::vector<float> out;
  REQUIRE(encoder->encode_within({"a", "b", "c"}, out, 3s).is_ok());
  REQUIRE(out.size() == 12);
  const double norm = std::sqrt(1 + 4 + 9 + 16);
  for (std::size_t r = 0; r < 3; ++r) REQUIRE(out[r * 4 + 3] == Approx(4 / norm));
  REQUIRE(server->requests() == 3);  // the check at create, then 2 + 1 texts
  const std::string request = server->last_request();
  REQUIRE(request.rfind("POST /v1/embeddings HTTP/1.1", 0) == 0);
  REQUIRE(request.find("Authorization: Bearer secret") != std::string::npos);
  REQUIRE(request.find("X-Tenant: t1") != std::string::npos);
  REQUIRE(request.find("x-request-timeout-ms: ") != std::string::npos);
  REQUIRE(request.find(R"("input":["c"])") != std::string::npos);
  auto m = encoder->metrics();
  REQUIRE(m.endpoints.size() == 1);
  REQUIRE(m.endpoints[0].requests == 3);
  REQUIRE(m.endpoints[0].failures == 0);
  REQUIRE(m.endpoints[0].latency.count == 3);
}

TEST_CASE("remote encoder checks the dimension at create", "[remote]") {
  auto server = canned();
  auto o = options_for({server->url()});
  o.dimension = 8;
  auto made = RemoteEncoder::create(o);
  REQUIRE(made.status().code() == StatusCode::kFailedPrecondition);
  REQUIRE(made.status().message().find("not 8 long") != std::string::npos);
  o = options_for({refusing_endpoint()});
  o.max_retries = 0;
  REQUIRE(RemoteEncoder::create(o).status().code() == StatusCode::kUnavailable);
}

TEST_CASE("remote encoder retries on another endpoint when one refuses or fails", "[remote]") {
  auto good = canned();
  auto failing = canned(fixed(503, R"({"error":{"message":"overloaded"}})"));
  const std::string refused = refusing_endpoint();
  auto o = options_for({refused, failing->url(), good->url()});
  o.choice = rapidqa::EndpointChoice::kRoundRobin;
  o.eject_after_failures = 0;
  o.retry_budget_floor = 100;  // every call may need two retries here
  auto encoder = make(o);
  std::vector<float> out;
  for (int i = 0; i < 6; ++i) REQUIRE(encoder->encode({"q"}, out).is_ok());
  const auto m = encoder->metrics();
  REQUIRE(endpoint_metrics(m, refused).failures == endpoint_metrics(m, refused).requests);
  REQUIRE(endpoint_metrics(m, failing->url()).failures > 0);
  REQUIRE(endpoint_metrics(m, good->url()).retries > 0);
  REQUIRE(m.breaker == BreakerState::kClosed);  // every call succeeded in the end
}

TEST_CASE("remote encoder: retries stop when the retry budget is spent", "[remote]") {
  auto failing = canned();
  auto o = options_for({failing->url()});
  o.eject_after_failures = 0;
  o.max_retries = 3;
  o.retry_budget_floor = 2;
  o.retry_budget_ratio = 0;
  o.breaker_min_calls = 20;
  auto encoder = make(o);
  failing->set_reply(fixed(500, R"({"error":"broken"})"));
  const std::size_t before = failing->requests();
  std::vector<float> out;
  for (int i = 0; i < 5; ++i) REQUIRE(encoder->encode({"q"}, out).code() == StatusCode::kUnavailable);
  // Five calls, two retries in the reserve: seven requests, not twenty.
  REQUIRE(failing->requests() - before == 7);
  REQUIRE(encoder->metrics().retry_budget_spent >= 4);
}

TEST_CASE("remote encoder: a 4xx is the caller's error, not retried, and keeps the breaker closed", "[remote]") {
  auto server = canned();
  auto encoder = make(options_for({server->url()}));
  server->set_reply(fixed(400, R"({"error":{"message":"input is too long","type":"invalid_request_error"}})"));
  const std::size_t before = server->requests();
  std::vector<float> out;
  for (int i = 0; i < 6; ++i) {
    auto s = encoder->encode({"q"}, out);
    REQUIRE(s.code() == StatusCode::kInvalidArgument);
    REQUIRE(s.message().find("input is too long") != std::string::npos);
  }
  REQUIRE(server->requests() == before + 6);
  REQUIRE(encoder->metrics().breaker == BreakerState::kClosed);
  server->set_reply(fixed(401, R"({"error":"bad token"})"));
  REQUIRE(encoder->encode({"q"}, out).code() == StatusCode::kFailedPrecondition);
}

TEST_CASE("remote encoder: 429 with Retry-After leaves the endpoint out until then", "[remote]") {
  auto busy = canned();
  auto other = canned();
  auto o = options_for({busy->url(), other->url()});
  o.choice = rapidqa::EndpointChoice::kRoundRobin;
  auto encoder = make(o);
  busy->set_reply(fixed(429, R"({"error":{"message":"slow down"}})", "Retry-After: 30\r\n"));
  std::vector<float> out;
  for (int i = 0; i < 4; ++i) REQUIRE(encoder->encode({"q"}, out).is_ok());
  const std::size_t busy_requests = busy->requests();
  for (int i = 0; i < 10; ++i) REQUIRE(encoder->encode({"q"}, out).is_ok());
  REQUIRE(busy->requests() == busy_requests);  // nothing more went to it
  REQUIRE(endpoint_metrics(encoder->metrics(), busy->url()).ejected);
}

TEST_CASE("remote encoder: a stalled engine ends at the deadline", "[remote]") {
  auto server = canned();
  auto o = options_for({server->url()});
  auto encoder = make(o);
  server->set_reply(mode(CannedReply::Mode::kStall));
  std::vector<float> out;
  const auto start = std::chrono::steady_clock::now();
  auto s = encoder->encode_within({"q"}, out, 300ms);
  const auto took = std::chrono::steady_clock::now() - start;
  REQUIRE(s.code() == StatusCode::kDeadlineExceeded);
  REQUIRE(took >= 250ms);
  REQUIRE(took < 3s);  // bounded by the budget, not by request_timeout (5 s)
  REQUIRE(encoder->encode_within({"q"}, out, 0ms).code() == StatusCode::kDeadlineExceeded);
}

TEST_CASE("remote encoder: unreadable answers fail and are retried elsewhere", "[remote]") {
  auto good = canned();
  auto broken = canned();
  auto o = options_for({broken->url(), good->url()});
  o.choice = rapidqa::EndpointChoice::kRoundRobin;
  o.eject_after_failures = 0;
  auto encoder = make(o);
  std::vector<float> out;
  for (const std::string& body : {std::string("not json"), std::string(R"({"data":[]})"),
                                   std::string(R"({"data":[{"index":0,"embedding":[0,0,0,0]}]})"),
                                   std::string(R"({"data":[{"index":0,"embedding":[1,2]}]})")}) {
    broken->set_reply(fixed(200, body));
    for (int i = 0; i < 2; ++i) REQUIRE(encoder->encode({"q"}, out).is_ok());
  }
  REQUIRE(endpoint_metrics(encoder->metrics(), broken->url()).failures >= 4);
  // Alone, it fails with the reason.
  auto alone = make(options_for({good->url()}));
  good->set_reply(fixed(200, R"({"data":[{"index":0,"embedding":[1,2]}]})"));
  auto s = alone->encode({"q"}, out);
  REQUIRE(s.code() == StatusCode::kDataLoss);
  REQUIRE(s.message().find("2 values, not 4") != std::string::npos);
}

TEST_CASE("remote encoder: the breaker opens on failures, refuses at once, and closes after a good trial",
          "[remote]") {
  auto server = canned();
  auto o = options_for({server->url()});
  o.max_retries = 0;
  o.eject_after_failures = 0;
  o.breaker_window = 4;
  o.breaker_min_calls = 4;
  o.breaker_failure_ratio = 0.75;
  o.breaker_open_time = 300ms;
  auto encoder = make(o);
  server->set_reply(mode(CannedReply::Mode::kClose));
  std::vector<float> out;
  for (int i = 0; i < 3; ++i) REQUIRE(encoder->encode({"q"}, out).code() == StatusCode::kUnavailable);
  REQUIRE(encoder->metrics().breaker == BreakerState::kOpen);  // 3 of the last 4 (the first succeeded at create)
  const std::size_t requests = server->requests();
  const auto start = std::chrono::steady_clock::now();
  auto refused = encoder->encode({"q"}, out);
  REQUIRE(std::chrono::steady_clock::now() - start < 100ms);
  REQUIRE(refused.code() == StatusCode::kUnavailable);
  REQUIRE(refused.message().find("circuit breaker") != std::string::npos);
  REQUIRE(server->requests() == requests);
  REQUIRE(encoder->metrics().refused_by_breaker == 1);
  server->set_reply({});
  std::this_thread::sleep_for(350ms);
  REQUIRE(encoder->metrics().breaker == BreakerState::kHalfOpen);
  REQUIRE(encoder->encode({"q"}, out).is_ok());
  REQUIRE(encoder->metrics().breaker == BreakerState::kClosed);
  REQUIRE(encoder->metrics().breaker_opens == 1);
}

TEST_CASE("remote encoder: every endpoint ejected opens the breaker", "[remote]") {
  auto server = canned();
  auto o = options_for({server->url()});
  o.max_retries = 0;
  o.eject_after_failures = 1;
  o.ejection_time = 10s;
  auto encoder = make(o);
  server->set_reply(mode(CannedReply::Mode::kClose));
  std::vector<float> out;
  REQUIRE(encoder->encode({"q"}, out).code() == StatusCode::kUnavailable);  // ejects it
  auto s = encoder->encode({"q"}, out);
  REQUIRE(s.code() == StatusCode::kUnavailable);
  REQUIRE(s.message().find("left out") != std::string::npos);
  REQUIRE(encoder->metrics().breaker == BreakerState::kOpen);
}

TEST_CASE("remote encoder hedges a slow request to another endpoint", "[remote]") {
  auto fast = canned();
  auto slow = canned();
  auto o = options_for({fast->url(), slow->url()});
  o.choice = rapidqa::EndpointChoice::kRoundRobin;
  o.hedge_percentile = 0.9;
  o.hedge_min_delay = 20ms;
  auto encoder = make(o);
  std::vector<float> out;
  for (int i = 0; i < 40; ++i) REQUIRE(encoder->encode({"q"}, out).is_ok());  // recent latencies
  CannedReply stall = mode(CannedReply::Mode::kStall);
  slow->set_reply(stall);
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 6; ++i) REQUIRE(encoder->encode_within({"q"}, out, 4s).is_ok());
  // Three of the six went to the stalled endpoint first and were answered
  // by the hedge, long before the budget.
  REQUIRE(std::chrono::steady_clock::now() - start < 3s);
  const auto m = encoder->metrics();
  REQUIRE(endpoint_metrics(m, fast->url()).hedges >= 3);
  REQUIRE(endpoint_metrics(m, slow->url()).in_flight == 0);
}

// RemoteEncoder against real rapidqa-server processes as the model host:
// OpenAI embeddings over HTTP/1.1 and h2c, KServe v2 over HTTP, vectors
// equal to the host's in-process encoder; a QAEngine answering through it;
// and the host killed and restarted under the engine: asks degrade (the
// lexical path) instead of failing, the breaker opens, and answers come
// back from the model once the host is up again.
#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "rapidqa/qa_engine.h"
#include "rapidqa/rapidqa.h"
#include "rapidqa/remote_encoder.h"
#include "rapidqa/text_normalizer.h"
#include "support/child_process.h"
#include "support/free_port.h"

#if defined(RAPIDQA_TEST_SERVER)

using namespace std::chrono_literals;
using rapidqa::AnswerTier;
using rapidqa::AskOptions;
using rapidqa::BreakerState;
using rapidqa::EngineOptions;
using rapidqa::QAEngine;
using rapidqa::RemoteEncoder;
using rapidqa::RemoteEncoderOptions;
using rapidqa::RemoteProtocol;
using rapidqa::testing::ChildProcess;

namespace {

// A rapidqa-server on the bundled FAQ, plain HTTP on two given ports.
class ModelHost {
 public:
  ModelHost()
      : port_(rapidqa::testing::free_loopback_port()),
        h2_port_(rapidqa::testing::free_loopback_port()),
        grpc_port_(rapidqa::testing::free_loopback_port()) {
    log_ = std::string(RAPIDQA_TEST_WORK) + "/remote-host-" + std::to_string(port_) + ".log";
    start();
  }
  void start() {
    std::ofstream(log_, std::ios::trunc).close();
    rapidqa::testing::ChildOptions o;
    o.output_file = log_;
    auto child = ChildProcess::start({RAPIDQA_TEST_SERVER, "--plain", "--port", std::to_string(port_), "--h2-port",
                                      std::to_string(h2_port_), "--grpc-port", std::to_string(grpc_port_), "--kb",
                                      RAPIDQA_TEST_FAQ},
                                     o);
    REQUIRE(child.is_ok());
    child_ = std::move(child).value();
    const auto until = std::chrono::steady_clock::now() + 30s;
    while (std::chrono::steady_clock::now() < until) {
      std::ifstream in(log_);
      std::stringstream text;
      text << in.rdbuf();
      if (text.str().find("ready:") != std::string::npos) return;
      REQUIRE(child_->running());
      std::this_thread::sleep_for(20ms);
    }
    FAIL("rapidqa-server did not become ready; see " << log_);
  }
  void kill() { child_->kill_and_wait(); }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::string h2_url() const { return "http://127.0.0.1:" + std::to_string(h2_port_); }
  std::string grpc_url() const { return "http://127.0.0.1:" + std::to_string(grpc_port_); }

 private:
  int port_, h2_port_, grpc_port_;
  std::string log_;
  std::unique_ptr<ChildProcess> child_;
};

std::unique_ptr<QAEngine> local_engine() {
  auto engine = QAEngine::create({});
  REQUIRE(engine.is_ok());
  REQUIRE((*engine)->load_knowledge(RAPIDQA_TEST_FAQ).is_ok());
  return std::move(engine).value();
}

std::shared_ptr<RemoteEncoder> remote(RemoteEncoderOptions o) {
  auto e = RemoteEncoder::create(std::move(o));
  INFO(e.status().message());
  REQUIRE(e.is_ok());
  return std::move(e).value();
}

}  // namespace

TEST_CASE("remote encoders over rapidqa-server give the host model's vectors", "[remote][server]") {
  ModelHost host;
  auto local = local_engine();
  const std::vector<std::string> texts = {"How do I reset my password?", "退货需要多久", "a text the FAQ never saw"};
  std::vector<std::string> normalized;
  for (const auto& t : texts) normalized.push_back(rapidqa::normalize_text(t).value());
  std::vector<float> expected;
  REQUIRE(local->encoder().encode(normalized, expected).is_ok());

  RemoteEncoderOptions openai;
  openai.endpoints = {host.url()};
  openai.model = "rapidqa-encoder";
  openai.dimension = local->encoder().dimension();
  RemoteEncoderOptions h2 = openai;
  h2.endpoints = {host.h2_url()};
  h2.http_version = rapidqa::RemoteHttpVersion::kHttp2;
  RemoteEncoderOptions kserve = openai;
  kserve.protocol = RemoteProtocol::kKServeV2;
  RemoteEncoderOptions kserve_grpc = kserve;  // the host's gRPC inference service
  kserve_grpc.protocol = RemoteProtocol::kKServeV2Grpc;
  kserve_grpc.endpoints = {host.grpc_url()};
  RemoteEncoderOptions kserve_numbers = kserve;  // the vectors as JSON numbers, not binary tensor data
  kserve_numbers.kserve_binary_vectors = false;
  RemoteEncoderOptions kserve_named = kserve;  // the output asked for by name
  kserve_named.kserve_output = "embedding";
  RemoteEncoderOptions kserve_h2 = kserve;
  kserve_h2.endpoints = h2.endpoints;
  kserve_h2.http_version = rapidqa::RemoteHttpVersion::kHttp2;
  for (const auto& options : {openai, h2, kserve, kserve_numbers, kserve_named, kserve_h2, kserve_grpc}) {
    auto encoder = remote(options);
    std::vector<float> got;
    const auto encoded = encoder->encode(texts, got);
    INFO(encoded.message());
    REQUIRE(encoded.is_ok());
    REQUIRE(got.size() == expected.size());
    for (std::size_t i = 0; i < got.size(); ++i) REQUIRE(got[i] == Approx(expected[i]).margin(1e-5));
  }
  // Answers larger than one write: the host writes HTTP/1.1 bodies 1 MiB at
  // a time (as numbers, 256 vectors are over 1 MB) and HTTP/2 ones in
  // frames of 8 KiB; every vector arrives whole and in its place.
  std::vector<std::string> many, many_normalized;
  for (std::size_t i = 0; i < 256; ++i) {
    many.push_back(texts[i % texts.size()] + " " + std::to_string(i));
    many_normalized.push_back(rapidqa::normalize_text(many.back()).value());
  }
  std::vector<float> many_expected;
  REQUIRE(local->encoder().encode(many_normalized, many_expected).is_ok());
  RemoteEncoderOptions as_numbers = openai;
  as_numbers.base64_vectors = false;
  for (auto options : {openai, as_numbers, h2, kserve, kserve_numbers, kserve_h2}) {
    options.max_texts_per_request = many.size();  // one request, one answer
    std::vector<float> got;
    const auto encoded = remote(options)->encode(many, got);
    INFO(encoded.message());
    REQUIRE(encoded.is_ok());
    REQUIRE(got.size() == many_expected.size());
    for (std::size_t i = 0; i < got.size(); ++i) REQUIRE(got[i] == Approx(many_expected[i]).margin(1e-5));
  }
  // A model the host does not serve is named in the error.
  RemoteEncoderOptions unknown = kserve;
  unknown.model = "no-such-model";
  auto refused = RemoteEncoder::create(unknown);
  REQUIRE(refused.status().code() == rapidqa::StatusCode::kNotFound);
  REQUIRE(refused.status().message().find("no-such-model") != std::string::npos);
  unknown.protocol = RemoteProtocol::kKServeV2Grpc;
  unknown.endpoints = {host.grpc_url()};
  refused = RemoteEncoder::create(unknown);
  INFO(refused.status().message());
  REQUIRE(refused.status().code() == rapidqa::StatusCode::kNotFound);
  REQUIRE(refused.status().message().find("no-such-model") != std::string::npos);
  // A batch larger than one request carries is split, over gRPC too.
  kserve_grpc.max_texts_per_request = 2;
  std::vector<float> got;
  REQUIRE(remote(kserve_grpc)->encode(texts, got).is_ok());
  REQUIRE(got.size() == expected.size());
  for (std::size_t i = 0; i < got.size(); ++i) REQUIRE(got[i] == Approx(expected[i]).margin(1e-5));
}

TEST_CASE("an engine answers through a remote host, degrades while it is down, and recovers", "[remote][server]") {
  const bool over_grpc = GENERATE(false, true);  // OpenAI embeddings over HTTP, or KServe v2 over gRPC
  INFO((over_grpc ? "KServe v2 over gRPC" : "OpenAI embeddings over HTTP"));
  ModelHost host;
  RemoteEncoderOptions o;
  o.endpoints = {over_grpc ? host.grpc_url() : host.url()};
  if (over_grpc) o.protocol = RemoteProtocol::kKServeV2Grpc;
  o.model = "rapidqa-encoder";
  o.max_retries = 1;
  o.connect_timeout = 200ms;
  o.breaker_window = 6;
  o.breaker_min_calls = 3;
  o.breaker_open_time = 500ms;
  o.ejection_time = 100ms;
  auto encoder = remote(o);
  EngineOptions e;
  e.encoder = encoder;
  auto made = QAEngine::create(e);
  REQUIRE(made.is_ok());
  auto engine = std::move(made).value();
  REQUIRE(engine->load_knowledge(RAPIDQA_TEST_FAQ).is_ok());
  AskOptions ask;
  ask.use_cache = false;  // every ask reaches the encoder
  ask.timeout = 2000ms;
  auto answer = engine->ask("How can I reset my password", ask);
  REQUIRE(answer.is_ok());
  REQUIRE_FALSE(answer->degraded);
  REQUIRE(answer->tier == AnswerTier::kKnowledge);
  const std::string entry = answer->entry_id();
  REQUIRE_FALSE(entry.empty());

  host.kill();
  for (int i = 0; i < 6; ++i) {
    const auto start = std::chrono::steady_clock::now();
    auto down = engine->ask("How can I reset my password", ask);
    REQUIRE(down.is_ok());
    REQUIRE(down->degraded);
    REQUIRE(down->entry_id() == entry);  // the lexical path finds it too
    REQUIRE(std::chrono::steady_clock::now() - start < 2500ms);
  }
  auto m = engine->metrics();
  REQUIRE(m.remote_engines.size() == 1);
  REQUIRE(m.remote_engines[0].breaker == BreakerState::kOpen);
  REQUIRE(m.remote_engines[0].refused_by_breaker > 0);
  const std::string engine_name = over_grpc ? "remote-kserve-grpc:rapidqa-encoder" : "remote-openai:rapidqa-encoder";
  REQUIRE(m.format_prometheus().find("rapidqa_remote_breaker_state{engine=\"" + engine_name + "\"} 1") !=
          std::string::npos);

  host.start();
  bool recovered = false;
  for (int i = 0; i < 100 && !recovered; ++i) {
    auto up = engine->ask("How can I reset my password", ask);
    REQUIRE(up.is_ok());
    recovered = !up->degraded;
    if (!recovered) std::this_thread::sleep_for(50ms);
  }
  REQUIRE(recovered);
  REQUIRE(engine->metrics().remote_engines[0].breaker == BreakerState::kClosed);
}

TEST_CASE("the C ABI answers through a remote encoder", "[remote][server]") {
  const bool over_grpc = GENERATE(false, true);
  ModelHost host;
  rqa_engine_options options;
  rqa_engine_options_init(&options);
  // The first refuses: a retry goes to the second.
  const std::string urls = "http://127.0.0.1:1," + (over_grpc ? host.grpc_url() : host.url());
  options.remote_encoder_url = urls.c_str();
  options.remote_encoder_protocol = over_grpc ? "kserve-grpc" : "kserve";
  options.remote_encoder_model = "rapidqa-encoder";
  options.remote_encoder_dimension = local_engine()->encoder().dimension();
  rqa_engine* engine = nullptr;
  INFO(rqa_last_error());
  REQUIRE(rqa_engine_create(&options, &engine) == RQA_OK);
  size_t loaded = 0;
  REQUIRE(rqa_engine_load_knowledge(engine, RAPIDQA_TEST_FAQ, &loaded) == RQA_OK);
  REQUIRE(loaded > 0);
  rqa_answer* answer = nullptr;
  REQUIRE(rqa_engine_ask(engine, "How can I reset my password", &answer) == RQA_OK);
  CHECK(rqa_answer_degraded(answer) == 0);
  CHECK(rqa_answer_tier(answer) == RQA_TIER_KNOWLEDGE);
  CHECK(std::string(rqa_answer_entry_id(answer)) == local_engine()->ask("How can I reset my password")->entry_id());
  rqa_answer_destroy(answer);
  rqa_engine_destroy(engine);
}

#endif  // RAPIDQA_TEST_SERVER

// RemoteGenerator and generated answers: the chat-completions stream reader
// on bytes split anywhere; the generator against the protocol-faithful test
// engine (tests/support/chat_completions_server.py) in each fault mode,
// every one ending within its deadline; and QAEngine answering with
// generations: provenance, streaming to the caller, the cache tiers and
// their invalidation, tenants, the FAQ fallback before the first token, a
// failed ask after it with nothing cached, and the breaker with an engine
// that is killed and restarted.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "rapidqa/generator.h"
#include "rapidqa/qa_engine.h"
#include "rapidqa/rapidqa.h"
#include "remote/chat_stream.h"
#include "support/chat_server.h"
#include "test_support.h"

using namespace std::chrono_literals;
using rapidqa::AnswerTier;
using rapidqa::AskOptions;
using rapidqa::EngineOptions;
using rapidqa::GenerationResult;
using rapidqa::GenerationSource;
using rapidqa::QAEngine;
using rapidqa::RemoteGenerator;
using rapidqa::RemoteGeneratorOptions;
using rapidqa::Status;
using rapidqa::StatusCode;
using rapidqa::remote::ChatStreamReader;
using rapidqa::testing::ChatServer;
using Clock = std::chrono::steady_clock;

namespace {

const char* const kStream =
    ": keep-alive comment\n"
    "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,"
    "\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"logprobs\":null,\"finish_reason\":null}],\"usage\":null}\n\n"
    "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,"
    "\"delta\":{\"content\":\"Hel\"},\"logprobs\":null,\"finish_reason\":null}],\"usage\":null}\n\n"
    "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,"
    "\"delta\":{\"content\":\"lo \\u4f60\\u597d\"},\"logprobs\":null,\"finish_reason\":null}],\"usage\":null}\r\n\r\n"
    "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,"
    "\"delta\":{},\"logprobs\":null,\"finish_reason\":\"stop\"}],\"usage\":null}\n\n"
    "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[],"
    "\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":3,\"total_tokens\":15}}\n\n"
    "data: [DONE]\n\n";

std::unique_ptr<ChatServer> chat_server(const std::string& token = "") {
  auto server = ChatServer::start(RAPIDQA_TEST_PYTHON, RAPIDQA_CHAT_SERVER, token);
  INFO(server.status().message());
  REQUIRE(server.is_ok());
  return std::move(server).value();
}

RemoteGeneratorOptions generator_options(const ChatServer& server, const std::string& model) {
  RemoteGeneratorOptions o;
  o.endpoints = {server.url()};
  o.model = model;
  o.stall_timeout = 500ms;
  return o;
}

std::shared_ptr<RemoteGenerator> generator(RemoteGeneratorOptions o) {
  auto g = RemoteGenerator::create(std::move(o));
  INFO(g.status().message());
  REQUIRE(g.is_ok());
  return std::move(g).value();
}

const std::vector<GenerationSource> kSources = {
    {"e1", "How do I reset my password?", "Use the reset link we email you.", ""},
    {"e2", "How do I change my password?", "Go to My Account > Security.", "The security page."}};

std::unique_ptr<QAEngine> engine_with(std::shared_ptr<RemoteGenerator> g, EngineOptions options = {}) {
  options.generator = std::move(g);
  auto engine = QAEngine::create(std::move(options));
  INFO(engine.status().message());
  REQUIRE(engine.is_ok());
  REQUIRE((*engine)->load_knowledge(rapidqa::testing::bundled_faq()).is_ok());
  return std::move(engine).value();
}

// Ask options with a deadline whose on_token appends every piece to `text`.
AskOptions collecting(std::string& text, std::chrono::milliseconds timeout) {
  AskOptions options;
  options.timeout = timeout;
  options.on_token = [&text](std::string_view piece) {
    text.append(piece.data(), piece.size());
    return true;
  };
  return options;
}

const char* const kQuestion = "How do I reset my password?";
const char* const kFaqAnswer =
    "To reset your password, click \"Forgot password?\" on the Northwind Shop sign-in page and enter the email "
    "address on your account. We will email you a reset link that is valid for 30 minutes.";

}  // namespace

TEST_CASE("the chat stream reader reads the documented chunks split at any byte", "[remote][generator]") {
  const std::string stream = kStream;
  for (std::size_t split = 0; split <= stream.size(); ++split) {
    ChatStreamReader reader;
    std::string text;
    std::vector<std::string> pieces;
    auto on_piece = [&](std::string_view p) {
      pieces.emplace_back(p);
      text.append(p.data(), p.size());
      return true;
    };
    REQUIRE(reader.feed(std::string_view(stream).substr(0, split), on_piece).is_ok());
    REQUIRE(reader.feed(std::string_view(stream).substr(split), on_piece).is_ok());
    REQUIRE(text == "Hello 你好");
    REQUIRE(pieces.size() == 2);
    REQUIRE(reader.done());
    REQUIRE(reader.finish_reason() == "stop");
    REQUIRE(reader.prompt_tokens() == 12);
    REQUIRE(reader.completion_tokens() == 3);
  }
  // One byte at a time.
  ChatStreamReader reader;
  std::string text;
  for (char c : stream) {
    REQUIRE(reader.feed(std::string_view(&c, 1), [&](std::string_view p) {
                    text.append(p.data(), p.size());
                    return true;
                  }).is_ok());
  }
  REQUIRE(text == "Hello 你好");
}

TEST_CASE("the chat stream reader refuses what the API does not document and stops when asked", "[remote][generator]") {
  auto read = [](const std::string& bytes) {
    ChatStreamReader reader;
    return reader.feed(bytes, [](std::string_view) { return true; });
  };
  REQUIRE(read("data: {\"choices\":[{\"delta\":\n\n").code() == StatusCode::kDataLoss);
  REQUIRE(read("data: [1,2]\n\n").code() == StatusCode::kDataLoss);
  REQUIRE(read("data: {\"id\":\"x\"}\n\n").code() == StatusCode::kDataLoss);
  REQUIRE(read("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":7}}]}\n\n").code() == StatusCode::kDataLoss);
  REQUIRE(read("data: {\"choices\":[{\"index\":0,\"delta\":\"text\"}]}\n\n").code() == StatusCode::kDataLoss);
  const Status error = read("data: {\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\"}}\n\n");
  REQUIRE(error.code() == StatusCode::kUnavailable);
  REQUIRE(error.message().find("out of memory") != std::string::npos);
  REQUIRE(read(std::string(2u << 20, 'x')).code() == StatusCode::kDataLoss);  // a line without end
  // Another choice than the first is not this answer's text.
  ChatStreamReader reader;
  std::string text;
  REQUIRE(reader.feed("data: {\"choices\":[{\"index\":1,\"delta\":{\"content\":\"no\"}},{\"index\":0,\"delta\":{"
                      "\"content\":\"yes\"}}]}\n\n",
                      [&](std::string_view p) {
                        text.append(p.data(), p.size());
                        return true;
                      })
              .is_ok());
  REQUIRE(text == "yes");
  ChatStreamReader stopping;
  REQUIRE(stopping.feed(kStream, [](std::string_view) { return false; }).is_ok());
  REQUIRE(stopping.stopped());
}

TEST_CASE("remote generator options are checked without a request", "[remote][generator]") {
  RemoteGeneratorOptions o;
  o.model = "m";
  REQUIRE(RemoteGenerator::create(o).status().code() == StatusCode::kInvalidArgument);  // no endpoint
  o.endpoints = {"http://127.0.0.1:1"};
  REQUIRE(RemoteGenerator::create(o).is_ok());  // nothing listens, and nothing was asked
  auto bad = o;
  bad.model.clear();
  REQUIRE(RemoteGenerator::create(bad).status().code() == StatusCode::kInvalidArgument);
  bad = o;
  bad.prompt_template = "no placeholder";
  REQUIRE(RemoteGenerator::create(bad).status().code() == StatusCode::kInvalidArgument);
  bad = o;
  bad.max_tokens = 0;
  REQUIRE(RemoteGenerator::create(bad).status().code() == StatusCode::kInvalidArgument);
  bad = o;
  bad.endpoints = {"ftp://host"};
  REQUIRE(RemoteGenerator::create(bad).status().code() == StatusCode::kInvalidArgument);
}

TEST_CASE("the prompt shows the sources and the question once each", "[remote][generator]") {
  RemoteGeneratorOptions o;
  o.endpoints = {"http://127.0.0.1:1"};
  o.model = "m";
  auto g = generator(o);
  const std::string prompt = g->render_prompt("what is {sources}?", kSources);
  REQUIRE(prompt ==
          "Knowledge:\n[1] Question: How do I reset my password?\nAnswer: Use the reset link we email you.\n\n"
          "[2] Question: How do I change my password?\nAnswer: Go to My Account > Security.\nContext: The security "
          "page.\n\nQuestion: what is {sources}?");
}

TEST_CASE("remote generator streams a grounded answer with its usage", "[remote][generator]") {
  auto server = chat_server("secret");
  auto o = generator_options(*server, "test-model");
  o.bearer_token = "secret";
  auto g = generator(o);
  std::vector<std::string> pieces;
  GenerationResult result;
  bool streamed = false;
  const Status s = g->generate(
      "how do I reset it?", kSources, 10s,
      [&](std::string_view p) {
        pieces.emplace_back(p);
        return true;
      },
      result, streamed);
  INFO(s.message());
  REQUIRE(s.is_ok());
  REQUIRE(streamed);
  REQUIRE(result.text == "From [1]: Use the reset link we email you.");
  REQUIRE(pieces.size() == 9);  // one word a chunk
  REQUIRE(result.finish_reason == "stop");
  REQUIRE(result.completion_tokens == 9);
  REQUIRE(result.prompt_tokens > 20);
  REQUIRE(result.time_to_first_token.count() > 0);

  // max_tokens is sent: the engine stops at it and says why.
  auto short_options = o;
  short_options.max_tokens = 3;
  REQUIRE(generator(short_options)->generate("q", kSources, 10s, {}, result, streamed).is_ok());
  REQUIRE(result.text == "From [1]: Use");
  REQUIRE(result.finish_reason == "length");

  rapidqa::MetricsSnapshot m;
  g->add_metrics(m);
  REQUIRE(m.generation.generations == 1);
  REQUIRE(m.generation.completion_tokens == 9);
  REQUIRE(m.generation.time_to_first_token.count == 1);
  REQUIRE(m.remote_engines.size() == 1);
  REQUIRE(m.remote_engines[0].name == "remote-chat:test-model");

  // A wrong token is the caller's error: named, not retried.
  o.bearer_token = "wrong";
  const Status refused = generator(o)->generate("q", kSources, 10s, {}, result, streamed);
  REQUIRE(refused.code() != StatusCode::kOk);
  REQUIRE(refused.message().find("401") != std::string::npos);
  REQUIRE_FALSE(streamed);
}

TEST_CASE("every fault of the engine ends the generation within its deadline", "[remote][generator]") {
  auto server = chat_server();
  struct Fault {
    std::string model;
    std::chrono::milliseconds deadline;
    StatusCode code;
    bool streamed;
    const char* says;
  };
  const std::vector<Fault> faults = {
      {"slow-first-token-3000", 400ms, StatusCode::kDeadlineExceeded, false, "deadline"},
      {"token-delay-300", 700ms, StatusCode::kDeadlineExceeded, true, "deadline"},
      // A stall is noticed within about a second of the stall timeout
      // (curl's progress calls), and one before the first token is retried.
      {"stall-after-0", 4s, StatusCode::kDeadlineExceeded, false, "sent nothing"},
      {"stall-after-2", 3s, StatusCode::kDeadlineExceeded, true, "sent nothing"},
      {"reset-after-0", 5s, StatusCode::kUnavailable, false, ""},
      {"reset-after-3", 5s, StatusCode::kUnavailable, true, ""},
      {"status-429", 5s, StatusCode::kUnavailable, false, "429"},
      {"status-500", 5s, StatusCode::kUnavailable, false, "500"},
      {"status-400", 5s, StatusCode::kInvalidArgument, false, "context length"},
      {"malformed-after-0", 5s, StatusCode::kDataLoss, false, "not a JSON object"},
      {"malformed-after-2", 5s, StatusCode::kDataLoss, true, "not a JSON object"},
      {"error-after-2", 5s, StatusCode::kUnavailable, true, "ran out of memory"},
  };
  for (const auto& f : faults) {
    auto g = generator(generator_options(*server, f.model));
    std::string seen;
    GenerationResult result;
    bool streamed = false;
    const auto began = Clock::now();
    const Status s = g->generate(
        kQuestion, kSources, f.deadline,
        [&](std::string_view p) {
          seen.append(p.data(), p.size());
          return true;
        },
        result, streamed);
    const auto took = Clock::now() - began;
    INFO(f.model << ": " << rapidqa::status_code_name(s.code()) << " " << s.message());
    REQUIRE(s.code() == f.code);
    REQUIRE(s.message().find(f.says) != std::string::npos);
    REQUIRE(streamed == f.streamed);
    REQUIRE(streamed == !seen.empty());
    REQUIRE(took < f.deadline + 300ms);
  }
}

TEST_CASE("a caller that stops the stream ends the generation", "[remote][generator]") {
  auto server = chat_server();
  auto g = generator(generator_options(*server, "token-delay-20"));
  int calls = 0;
  GenerationResult result;
  bool streamed = false;
  const Status s = g->generate(kQuestion, kSources, 10s, [&](std::string_view) { return ++calls < 2; }, result, streamed);
  REQUIRE(s.code() == StatusCode::kFailedPrecondition);
  REQUIRE(calls == 2);
  REQUIRE(streamed);
}

TEST_CASE("the engine answers with a generation and caches it like any answer", "[remote][generator][engine]") {
  auto server = chat_server();
  auto engine = engine_with(generator(generator_options(*server, "test-model")));
  std::string streamed_text;
  int pieces = 0;
  AskOptions options;
  options.on_token = [&](std::string_view p) {
    streamed_text.append(p.data(), p.size());
    ++pieces;
    return true;
  };
  auto first = engine->ask(kQuestion, options);
  REQUIRE(first.is_ok());
  REQUIRE(first->tier == AnswerTier::kKnowledge);
  REQUIRE(first->generated);
  REQUIRE_FALSE(first->degraded);
  REQUIRE(first->text == std::string("From [1]: ") + kFaqAnswer);
  REQUIRE(streamed_text == first->text);
  REQUIRE(pieces > 10);
  // The provenance: the entries the generator read, best first, with versions.
  REQUIRE_FALSE(first->matches.empty());
  REQUIRE(first->matches[0].entry_id == "shop-en-reset-password");
  REQUIRE(first->matches[0].version == 1);

  // Asked again: the cached generation, whole, in one piece.
  streamed_text.clear();
  pieces = 0;
  auto again = engine->ask(kQuestion, options);
  REQUIRE(again.is_ok());
  REQUIRE(again->tier == AnswerTier::kResultCache);
  REQUIRE(again->generated);
  REQUIRE(again->text == first->text);
  REQUIRE(streamed_text == first->text);
  REQUIRE(pieces == 1);
  REQUIRE(engine->metrics().generation.generations == 1);

  // Another tenant never shares it.
  AskOptions other = options;
  other.tenant = "other";
  auto theirs = engine->ask(kQuestion, other);
  REQUIRE(theirs.is_ok());
  REQUIRE(theirs->tier == AnswerTier::kKnowledge);
  REQUIRE(engine->metrics().generation.generations == 2);

  // A changed source entry drops the generation built from it (the hot
  // questions' rebuild may write the new one before the next ask).
  rapidqa::KnowledgeEntry changed;
  changed.id = "shop-en-reset-password";
  changed.question = kQuestion;
  changed.answer = "Use the link on the sign-in page.";
  REQUIRE(engine->update_entry(changed).is_ok());
  engine->wait_for_rebuilds();
  auto fresh = engine->ask(kQuestion);
  REQUIRE(fresh.is_ok());
  REQUIRE(fresh->generated);
  REQUIRE(fresh->text == "From [1]: Use the link on the sign-in page.");
  REQUIRE(fresh->matches[0].version == 2);
  const auto generations = engine->metrics().generation.generations;
  REQUIRE(generations >= 3);

  // A question nothing matches gets the fallback, never a generation.
  auto nothing = engine->ask("zzzz qqqq xxxx");
  REQUIRE(nothing.is_ok());
  REQUIRE(nothing->tier == AnswerTier::kFallback);
  REQUIRE_FALSE(nothing->generated);
  REQUIRE(engine->metrics().generation.generations == generations);

  const std::string prometheus = engine->metrics().format_prometheus();
  REQUIRE(prometheus.find("rapidqa_generations_total{outcome=\"ok\"} " + std::to_string(generations)) !=
          std::string::npos);
  REQUIRE(prometheus.find("rapidqa_generation_time_to_first_token_seconds") != std::string::npos);
  REQUIRE(prometheus.find("rapidqa_generation_tokens_total{kind=\"completion\"}") != std::string::npos);
}

TEST_CASE("a paraphrase is answered from the semantic tier with the generation", "[remote][generator][engine]") {
  auto server = chat_server();
  EngineOptions options;
  options.semantic_cache.similarity_threshold = 0.5f;
  auto engine = engine_with(generator(generator_options(*server, "test-model")), options);
  auto first = engine->ask("How do I reset my password?");
  REQUIRE(first.is_ok());
  REQUIRE(first->generated);
  auto paraphrase = engine->ask("how do i reset my password please");
  REQUIRE(paraphrase.is_ok());
  INFO(paraphrase->nearest_cached_similarity << " " << paraphrase->near_miss_reason);
  REQUIRE(paraphrase->tier == AnswerTier::kSemanticCache);
  REQUIRE(paraphrase->text == first->text);
  REQUIRE(engine->metrics().generation.generations == 1);
}

TEST_CASE("a generation that fails before its first token falls back to the FAQ answer", "[remote][generator][engine]") {
  auto server = chat_server();
  for (const std::string model : {"status-500", "status-429", "reset-after-0", "malformed-after-0", "stall-after-0",
                                  "slow-first-token-5000"}) {
    INFO(model);
    auto engine = engine_with(generator(generator_options(*server, model)));
    std::string streamed_text;
    const AskOptions options = collecting(streamed_text, 700ms);
    const auto began = Clock::now();
    auto answer = engine->ask(kQuestion, options);
    REQUIRE(Clock::now() - began < 700ms + 400ms);
    REQUIRE(answer.is_ok());
    REQUIRE(answer->tier == AnswerTier::kKnowledge);
    REQUIRE(answer->degraded);
    REQUIRE_FALSE(answer->generated);
    REQUIRE(answer->degraded_reason.find("generation failed") != std::string::npos);
    REQUIRE(answer->text == kFaqAnswer);
    REQUIRE(streamed_text == kFaqAnswer);  // the caller sees the one answer it gets
    // Not cached: the next ask tries the generator again.
    auto again = engine->ask(kQuestion, options);
    REQUIRE(again.is_ok());
    REQUIRE(again->tier == AnswerTier::kKnowledge);
  }
}

TEST_CASE("a generation that breaks after its first token fails the ask and caches nothing", "[remote][generator][engine]") {
  auto server = chat_server();
  for (const std::string model : {"reset-after-3", "stall-after-3", "malformed-after-3", "error-after-3",
                                  "token-delay-200"}) {
    INFO(model);
    auto engine = engine_with(generator(generator_options(*server, model)));
    std::string streamed_text;
    const AskOptions options = collecting(streamed_text, 1500ms);
    const auto began = Clock::now();
    auto answer = engine->ask(kQuestion, options);
    REQUIRE(Clock::now() - began < 1500ms + 400ms);
    REQUIRE_FALSE(answer.is_ok());
    INFO(answer.status().message());
    REQUIRE(answer.status().message().find("after it began") != std::string::npos);
    REQUIRE_FALSE(streamed_text.empty());
    const auto before = engine->metrics();
    // Nothing half-streamed was cached: asked again, it is generated again.
    streamed_text.clear();
    auto again = engine->ask(kQuestion, options);
    REQUIRE_FALSE(again.is_ok());
    REQUIRE(engine->metrics().generation.failures == before.generation.failures + 1);
  }
}

TEST_CASE("a generator killed and restarted: the breaker opens, asks fall back, then generations return",
          "[remote][generator][engine]") {
  auto server = chat_server();
  auto o = generator_options(*server, "test-model");
  o.breaker_min_calls = 3;
  o.breaker_open_time = 500ms;
  o.ejection_time = 200ms;
  o.max_ejection_time = 500ms;
  auto engine = engine_with(generator(o));
  AskOptions fresh;
  fresh.use_cache = false;
  REQUIRE(engine->ask(kQuestion, fresh)->generated);

  server->kill();
  bool opened = false;
  for (int i = 0; i < 10; ++i) {
    auto answer = engine->ask(kQuestion, fresh);
    REQUIRE(answer.is_ok());
    REQUIRE(answer->degraded);
    REQUIRE(answer->text == kFaqAnswer);
    if (answer->degraded_reason.find("circuit breaker") != std::string::npos) opened = true;
  }
  REQUIRE(opened);
  const auto metrics = engine->metrics();
  REQUIRE(metrics.remote_engines.size() == 1);
  REQUIRE(metrics.remote_engines[0].breaker != rapidqa::BreakerState::kClosed);

  REQUIRE(server->restart().is_ok());
  bool recovered = false;
  const auto until = Clock::now() + 10s;
  while (!recovered && Clock::now() < until) {
    auto answer = engine->ask(kQuestion, fresh);
    REQUIRE(answer.is_ok());
    recovered = answer->generated && !answer->degraded;
    if (!recovered) std::this_thread::sleep_for(100ms);
  }
  REQUIRE(recovered);
}

namespace {

struct CollectedPieces {
  std::string text;
  int calls = 0;
  int stop_after = -1;  // stop once this many pieces arrived; -1 = never
};

int collect_piece(const char* piece, size_t length, void* user_data) {
  auto* c = static_cast<CollectedPieces*>(user_data);
  REQUIRE(std::strlen(piece) == length);
  c->text.append(piece, length);
  ++c->calls;
  return c->stop_after < 0 || c->calls < c->stop_after;
}

}  // namespace

TEST_CASE("the C ABI streams generated answers through a callback", "[remote][generator][capi]") {
  auto server = chat_server("c-token");
  rqa_engine_options options;
  rqa_engine_options_init(&options);
  const std::string urls = "http://127.0.0.1:1," + server->url();  // the first refuses: the retry goes on
  options.generator_url = urls.c_str();
  options.generator_model = "test-model";
  options.generator_token = "c-token";
  options.generator_sources = 2;
  rqa_engine* engine = nullptr;
  INFO(rqa_last_error());
  REQUIRE(rqa_engine_create(&options, &engine) == RQA_OK);
  REQUIRE(rqa_engine_load_knowledge(engine, rapidqa::testing::bundled_faq().c_str(), nullptr) == RQA_OK);

  rqa_ask_options ask;
  rqa_ask_options_init(&ask);
  CollectedPieces pieces;
  ask.on_token = &collect_piece;
  ask.on_token_user_data = &pieces;
  rqa_answer* answer = nullptr;
  REQUIRE(rqa_engine_ask_with(engine, kQuestion, &ask, &answer) == RQA_OK);
  REQUIRE(rqa_answer_generated(answer) == 1);
  REQUIRE(rqa_answer_degraded(answer) == 0);
  REQUIRE(std::string(rqa_answer_text(answer)) == std::string("From [1]: ") + kFaqAnswer);
  REQUIRE(pieces.text == rqa_answer_text(answer));
  REQUIRE(pieces.calls > 10);
  rqa_answer_destroy(answer);

  // Cached: the whole text in one call.
  pieces = CollectedPieces{};
  REQUIRE(rqa_engine_ask_with(engine, kQuestion, &ask, &answer) == RQA_OK);
  REQUIRE(rqa_answer_tier(answer) == RQA_TIER_RESULT_CACHE);
  REQUIRE(rqa_answer_generated(answer) == 1);
  REQUIRE(pieces.calls == 1);
  rqa_answer_destroy(answer);

  // A caller that stops the stream ends the ask with the reason.
  pieces = CollectedPieces{};
  pieces.stop_after = 2;
  ask.use_cache = 0;
  REQUIRE(rqa_engine_ask_with(engine, kQuestion, &ask, &answer) != RQA_OK);
  REQUIRE(answer == nullptr);
  REQUIRE(std::string(rqa_last_error()).find("stopped") != std::string::npos);
  REQUIRE(pieces.calls == 2);
  rqa_engine_destroy(engine);

  // A generator without a model is refused at create.
  options.generator_model = nullptr;
  REQUIRE(rqa_engine_create(&options, &engine) == RQA_INVALID_ARGUMENT);
  REQUIRE(std::string(rqa_last_error()).find("model") != std::string::npos);
}

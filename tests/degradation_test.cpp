// Graceful degradation with a model encoder behind the DynamicBatcher: the
// lexical path when the budget is below the predicted model latency or the
// queue is saturated, a recently expired cached answer once the deadline
// has passed, and never a call that waits past its deadline.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <future>
#include <memory>
#include <mutex>
#include <thread>

#include "rapidqa/hashing_encoder.h"
#include "rapidqa/qa_engine.h"

using namespace std::chrono_literals;
using rapidqa::AnswerTier;
using rapidqa::AskOptions;
using rapidqa::EngineOptions;
using rapidqa::KnowledgeEntry;
using rapidqa::ManualClock;
using rapidqa::QAEngine;

namespace {

// Stands in for a transformer: hashing vectors (so answers are right), but
// not lightweight, so the engine batches it and may degrade around it. Each
// call costs `cost` of the manual clock's time, and can be held at a gate.
class SlowModel final : public rapidqa::Encoder {
 public:
  // Each call moves the clock by cost, and by per_text for each text.
  SlowModel(std::shared_ptr<ManualClock> clock, std::chrono::milliseconds cost,
            std::chrono::milliseconds per_text = std::chrono::milliseconds(0))
      : clock_(std::move(clock)), cost_(cost), per_text_(per_text) {}
  std::size_t dimension() const override { return inner_->dimension(); }
  std::string name() const override { return "slow-model"; }
  rapidqa::Status encode(const std::vector<std::string>& texts, std::vector<float>& out) const override {
    {
      std::unique_lock<std::mutex> lock(mu_);
      ++waiting_;
      cv_.notify_all();
      cv_.wait(lock, [&] { return open_; });
      --waiting_;
    }
    if (clock_) clock_->advance(cost_ + per_text_ * static_cast<int>(texts.size()));
    return inner_->encode(texts, out);
  }
  void adapt(const std::vector<std::string>& corpus) override { inner_->adapt(corpus); }

  void close() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = false;
  }
  void open() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = true;
    cv_.notify_all();
  }
  bool await_waiting(int n) const {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, 10s, [&] { return waiting_ >= n; });
  }

 private:
  std::unique_ptr<rapidqa::HashingEncoder> inner_ = rapidqa::HashingEncoder::create().value();
  std::shared_ptr<ManualClock> clock_;
  std::chrono::milliseconds cost_, per_text_;
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  mutable int waiting_ = 0;
  bool open_ = true;
};

KnowledgeEntry entry(std::string id, std::string question, std::string answer) {
  KnowledgeEntry e;
  e.id = std::move(id);
  e.question = std::move(question);
  e.answer = std::move(answer);
  return e;
}

std::vector<KnowledgeEntry> shop() {
  return {entry("reset", "How do I reset my password?", "Use the reset link"),
          entry("refund", "How do I get a refund?", "Open the order and ask for a refund"),
          entry("hours", "What are your opening hours?", "9 to 5")};
}

std::unique_ptr<QAEngine> engine_with(std::shared_ptr<SlowModel> model, EngineOptions options) {
  options.encoder = std::move(model);
  auto engine = QAEngine::create(std::move(options));
  REQUIRE(engine.is_ok());
  REQUIRE((*engine)->load_entries(shop()).is_ok());
  return std::move(engine).value();
}

AskOptions within(std::chrono::milliseconds timeout, bool cache = false) {
  AskOptions o;
  o.timeout = timeout;
  o.use_cache = cache;
  return o;
}

// Asks while the model is held at its gate: the ask queues behind the held
// request, then the engine's clock moves to just inside the ask's budget,
// past the model's share of it, so the ask gives up on the model and
// degrades.
rapidqa::Result<rapidqa::Answer> ask_past_held_model(QAEngine& engine, ManualClock& clock, const std::string& question,
                                                     const AskOptions& options) {
  // The model holds the batcher's one worker, so nothing leaves the queue:
  // an earlier ask that gave up may still be in it. Only when this ask's
  // request joins it has the ask read the clock its budget counts from.
  const std::size_t queued_before = engine.metrics().batcher.queue_depth;
  auto pending = std::async(std::launch::async, [&] { return engine.ask(question, options); });
  for (int i = 0; i < 10000 && engine.metrics().batcher.queue_depth <= queued_before; ++i) {
    std::this_thread::sleep_for(1ms);
  }
  clock.advance(options.timeout - 500us);
  // Should the ask still be waiting (a bug), move time far on so the test
  // fails on the answer rather than hanging.
  if (pending.wait_for(30s) != std::future_status::ready) clock.advance(1h);
  return pending.get();
}

// Reopens a closed model however a test ends: a failed REQUIRE would
// otherwise leave the batcher's worker inside encode() and the engine's
// destructor waiting for it forever.
struct ReopenAtExit {
  SlowModel& model;
  ~ReopenAtExit() { model.open(); }
};

// Moves the manual clock far on however a test ends, so no ask waits forever.
struct MoveOnAtExit {
  ManualClock& clock;
  ~MoveOnAtExit() { clock.advance(1h); }
};

}  // namespace

TEST_CASE("A budget below the predicted model latency is answered by lexical retrieval - and says so", "[engine][degradation]") {
  auto clock = std::make_shared<ManualClock>();
  auto model = std::make_shared<SlowModel>(clock, 20ms);
  EngineOptions options;
  options.clock = clock;
  options.encoder_batching.max_queue_delay = 0us;
  auto engine = engine_with(model, options);
  // The batcher learns what a forward pass costs (20 ms of the clock).
  for (int i = 0; i < 4; ++i) REQUIRE_FALSE(engine->ask("How do I get a refund?", within(0ms))->degraded);

  const auto hurried = engine->ask("How do I reset my password?", within(5ms));
  REQUIRE(hurried.is_ok());
  CHECK(hurried->degraded);
  CHECK(hurried->entry_id() == "reset");
  CHECK(hurried->tier == AnswerTier::kKnowledge);
  INFO(hurried->degraded_reason);
  CHECK(hurried->degraded_reason.find("5.0 ms left, the model needs about") != std::string::npos);
  CHECK(hurried->degraded_reason.find("lexical retrieval") != std::string::npos);

  const auto patient = engine->ask("How do I reset my password?", within(100ms));
  CHECK_FALSE(patient->degraded);
  CHECK(patient->entry_id() == "reset");
  CHECK(engine->metrics().degraded_answers == 1);
}

TEST_CASE("A saturated model queue sends new asks down the lexical path at once", "[engine][degradation]") {
  auto model = std::make_shared<SlowModel>(nullptr, 0ms);
  EngineOptions options;
  options.encoder_batching.workers = 1;  // one ask at the model, the rest queued
  options.encoder_batching.max_batch_size = 1;
  options.encoder_batching.max_queue_delay = 0us;
  options.encoder_batching.queue_capacity = 4;
  options.degradation.queue_saturation = 0.5;
  auto engine = engine_with(model, options);
  model->close();
  std::vector<std::future<rapidqa::Result<rapidqa::Answer>>> waiting;
  waiting.push_back(std::async(std::launch::async, [&] { return engine->ask("How do I get a refund?", within(0ms)); }));
  REQUIRE(model->await_waiting(1));  // one running, held at the gate
  for (int i = 0; i < 2; ++i) {
    waiting.push_back(std::async(std::launch::async, [&] { return engine->ask("What are your opening hours?", within(0ms)); }));
  }
  for (int i = 0; i < 10000 && engine->metrics().batcher.queue_depth < 2; ++i) std::this_thread::sleep_for(1ms);
  REQUIRE(engine->metrics().batcher.queue_depth == 2);

  const auto shed = engine->ask("How do I reset my password?", within(0ms));
  CHECK(shed->degraded);
  CHECK(shed->entry_id() == "reset");
  CHECK(shed->degraded_reason.find("saturated") != std::string::npos);
  model->open();
  for (auto& w : waiting) {
    const auto a = w.get();
    CHECK_FALSE(a->degraded);
  }
}

TEST_CASE("Past the deadline a recently expired cached answer is served, marked degraded", "[engine][degradation]") {
  auto clock = std::make_shared<ManualClock>();
  auto model = std::make_shared<SlowModel>(clock, 0ms);
  EngineOptions options;
  options.clock = clock;
  options.enable_knowledge_cache = false;
  options.enable_semantic_cache = false;
  options.encoder_batching.max_batch_size = 1;
  options.encoder_batching.max_queue_delay = 0us;
  options.degradation.lexical_min_score = 1.01f;  // the lexical path never answers: only the cache can
  options.degradation.max_staleness = 10min;
  auto engine = engine_with(model, options);
  REQUIRE(engine->ask("What are your opening hours?")->tier == AnswerTier::kKnowledge);
  clock->advance(6min);  // the result tier's 5 minutes are over

  model->close();  // the model stops answering
  auto blocked = std::async(std::launch::async, [&] { return engine->ask("How do I get a refund?", within(0ms)); });
  REQUIRE(model->await_waiting(1));
  const auto stale = ask_past_held_model(*engine, *clock, "What are your opening hours?", within(20ms, true));
  REQUIRE(stale.is_ok());
  CHECK(stale->degraded);
  CHECK(stale->text == "9 to 5");
  CHECK(stale->tier == AnswerTier::kResultCache);
  CHECK(stale->degraded_reason.find("past its TTL") != std::string::npos);

  // Too old for max_staleness: the fallback, still degraded, never an error.
  clock->advance(10min);
  const auto too_old = ask_past_held_model(*engine, *clock, "What are your opening hours?", within(20ms, true));
  CHECK(too_old->tier == AnswerTier::kFallback);
  CHECK(too_old->degraded);
  model->open();
  CHECK_FALSE(blocked.get()->degraded);
}

TEST_CASE("No ask waits past its deadline while the model is stuck", "[engine][degradation]") {
  // The engine gives up on the model at the budget less the lexical
  // reserve, on its own clock: moved to just inside the deadline, every
  // ask (the one the model holds and those queued behind it) returns by
  // itself, answered by the lexical path in the time left.
  auto clock = std::make_shared<ManualClock>();
  auto model = std::make_shared<SlowModel>(nullptr, 0ms);
  EngineOptions options;
  options.clock = clock;
  options.encoder_batching.workers = 1;  // one ask at the model, three queued
  options.encoder_batching.max_batch_size = 1;
  options.encoder_batching.max_queue_delay = 0us;
  options.degradation.default_timeout = 30ms;
  auto engine = engine_with(model, options);
  model->close();
  const ReopenAtExit reopen{*model};
  std::vector<std::future<rapidqa::Result<rapidqa::Answer>>> asks;
  const MoveOnAtExit move_on{*clock};
  for (int i = 0; i < 4; ++i) {
    asks.push_back(std::async(std::launch::async, [&] { return engine->ask("How do I reset my password?", within(0ms)); }));
  }
  REQUIRE(model->await_waiting(1));  // one running, held at the gate
  for (int i = 0; i < 10000 && engine->metrics().batcher.queue_depth < 3; ++i) std::this_thread::sleep_for(1ms);
  REQUIRE(engine->metrics().batcher.queue_depth == 3);  // the rest queued: every budget counts from before the move
  clock->advance(29500us);  // past the model's share (30 ms less the 1 ms reserve), before the deadline
  for (auto& a : asks) {
    REQUIRE(a.wait_for(10s) == std::future_status::ready);
    const auto answer = a.get();
    REQUIRE(answer.is_ok());
    CHECK(answer->degraded);
    INFO(answer->degraded_reason);
    CHECK(answer->entry_id() == "reset");
  }
}

TEST_CASE("The wait for the model is measured on the engine's clock, not in real time", "[engine][degradation][clock]") {
  auto clock = std::make_shared<ManualClock>();
  auto model = std::make_shared<SlowModel>(nullptr, 0ms);
  EngineOptions options;
  options.clock = clock;
  options.encoder_batching.max_batch_size = 1;
  options.encoder_batching.max_queue_delay = 0us;
  auto engine = engine_with(model, options);
  model->close();
  const ReopenAtExit reopen{*model};
  auto held = std::async(std::launch::async, [&] { return engine->ask("How do I reset my password?", within(50ms)); });
  const MoveOnAtExit move_on{*clock};
  REQUIRE(model->await_waiting(1));
  // Six times the budget passes in real time, none of it on the engine's
  // clock: the ask is still waiting for the model.
  CHECK(held.wait_for(300ms) == std::future_status::timeout);
  // The engine's clock reaches the model's share of the budget (50 ms less
  // the 1 ms lexical reserve): the ask gives up and degrades at once.
  clock->advance(49500us);
  REQUIRE(held.wait_for(10s) == std::future_status::ready);
  const auto answer = held.get();
  REQUIRE(answer.is_ok());
  CHECK(answer->degraded);
  INFO(answer->degraded_reason);
  CHECK(answer->degraded_reason.find("the model did not answer within the budget") != std::string::npos);
  CHECK(answer->degraded_reason.find("lexical retrieval") != std::string::npos);
  CHECK(answer->entry_id() == "reset");
}

TEST_CASE("The engine's own AutoTuner steers the encoder batcher from its p99 and QPS", "[engine][tuner]") {
  auto clock = std::make_shared<ManualClock>();
  auto model = std::make_shared<SlowModel>(nullptr, 0ms);
  EngineOptions options;
  options.clock = clock;
  options.encoder_batching.max_queue_delay = 0us;
  options.encoder_batching.max_batch_size = 1;  // every batch full: the limit binds, so growing it helps
  options.auto_tune = true;
  options.tuner.interval = 1s;
  options.tuner.hysteresis = 1;
  auto engine = engine_with(model, options);
  for (int i = 0; i < 10; ++i) REQUIRE(engine->ask("How do I get a refund?", within(0ms)).is_ok());
  clock->advance(1s);  // one interval: 10 asks at 10 qps, p99 far under 200 ms -> grow
  for (int i = 0; i < 10000 && engine->metrics().batcher.tuner_moves == 0; ++i) std::this_thread::sleep_for(1ms);
  const auto m = engine->metrics();
  REQUIRE(m.batcher.tuner_moves == 1);
  CHECK(m.batcher.max_batch_size == 2);  // 1 + 15%, at least one more
  const auto history = engine->tuning().tuner_history();
  REQUIRE(history.size() == 1);
  CHECK(history.front().observed.requests == 10);
  CHECK(history.front().reason.find("grow") != std::string::npos);
  CHECK(m.format_prometheus().find("rapidqa_autotuner_moves_total 1\n") != std::string::npos);
}

TEST_CASE("The engine's load sample says what share of a batch is fixed cost, learned from its batches",
          "[engine][tuner]") {
  // Every batch costs 8 ms plus 1 ms a question on the engine's clock: at
  // the limit of 32 a batch is 8 / (8 + 32) = 20% fixed cost.
  auto clock = std::make_shared<ManualClock>();
  auto model = std::make_shared<SlowModel>(clock, 8ms, 1ms);
  EngineOptions options;
  options.clock = clock;
  options.encoder_batching.workers = 1;
  options.encoder_batching.max_queue_delay = 0us;
  options.encoder_batching.max_batch_size = 32;
  auto engine = engine_with(model, options);
  CHECK(engine->tuning().recent_load().batch_fixed_share < 0);  // no batch yet: unknown
  const ReopenAtExit reopen{*model};
  // Rounds of one ask held at the model while `company` more queue behind
  // it: batches of 1, then `company`.
  for (int company = 2; company <= 5; ++company) {
    model->close();
    std::vector<std::future<rapidqa::Result<rapidqa::Answer>>> asks;
    asks.push_back(std::async(std::launch::async, [&] { return engine->ask("How do I get a refund?", within(0ms)); }));
    REQUIRE(model->await_waiting(1));
    for (int i = 0; i < company; ++i) {
      asks.push_back(std::async(std::launch::async, [&] { return engine->ask("How do I get a refund?", within(0ms)); }));
    }
    for (int i = 0; i < 10000 && engine->metrics().batcher.queue_depth < static_cast<std::size_t>(company); ++i) {
      std::this_thread::sleep_for(1ms);
    }
    REQUIRE(engine->metrics().batcher.queue_depth == static_cast<std::size_t>(company));
    model->open();
    for (auto& ask : asks) REQUIRE(ask.get().is_ok());
  }
  const rapidqa::LoadSample sample = engine->tuning().recent_load();
  CHECK(sample.requests == 18);
  CHECK(sample.batch_fixed_share == Approx(0.2).margin(0.01));
}

TEST_CASE("A model engine refuses bad batcher and tuner options by name instead of fixing them", "[engine][degradation]") {
  auto refusal = [](auto change) {
    EngineOptions options;
    options.encoder = std::make_shared<SlowModel>(nullptr, 0ms);
    change(options);
    auto engine = QAEngine::create(std::move(options));
    REQUIRE_FALSE(engine.is_ok());
    CHECK(engine.status().code() == rapidqa::StatusCode::kInvalidArgument);
    return engine.status().message();
  };
  CHECK_THAT(refusal([](auto& o) { o.encoder_batching.latency_forgetting = 2.0; }),
             Catch::Contains("encoder_batching.latency_forgetting"));
  CHECK_THAT(refusal([](auto& o) { o.encoder_batching.max_queue_delay = -1us; }),
             Catch::Contains("encoder_batching.max_queue_delay"));
  CHECK_THAT(refusal([](auto& o) {
               o.auto_tune = true;
               o.tuner.interval = std::chrono::milliseconds(0);
             }),
             Catch::Contains("tuner.interval"));
  CHECK_THAT(refusal([](auto& o) {
               o.auto_tune = true;
               o.tuner.max_step = 0;
             }),
             Catch::Contains("tuner.max_step"));
}

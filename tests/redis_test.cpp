// Sharing knowledge changes between engine instances through Redis: the
// wire format and the change-log rules on their own, then real engines in
// two processes (this one and rapidqa-redis-peer) around a private
// redis-server that the tests kill and restart.
#include <catch2/catch.hpp>

#include <signal.h>

#include <chrono>
#include <mutex>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "cache/change_log.h"
#include "cache/change_message.h"
#include "cache/redis_client.h"
#include "rapidqa/qa_engine.h"
#include "support/redis_server.h"
#include "test_support.h"

using namespace std::chrono_literals;
using nlohmann::json;
using rapidqa::AnswerTier;
using rapidqa::EngineOptions;
using rapidqa::KnowledgeEntry;
using rapidqa::LogLevel;
using rapidqa::QAEngine;
using rapidqa::StatusCode;
using rapidqa::cache::ChangeLogState;
using rapidqa::cache::KnowledgeChange;
using rapidqa::cache::StreamId;
using rapidqa::testing::ChildProcess;
using rapidqa::testing::RedisServer;

namespace {

// Bounds for every wait on another process: generous, for a loaded 2-core
// machine; a healthy run takes milliseconds.
constexpr auto kWait = std::chrono::milliseconds(20000);

const std::string kResetQuestion = "How do I reset my password?";
const std::string kResetId = "shop-en-reset-password";
const std::string kChangeQuestion = "How do I change my password while logged in?";
const std::string kChangeId = "shop-en-change-password";
const std::string kCreateQuestion = "How do I create a Northwind Shop account?";
const std::string kCreateId = "shop-en-create-account";
// Its answer is built from shipping entries only, so password changes leave it cached.
const std::string kShippingQuestion = "How much does shipping cost?";

std::unique_ptr<RedisServer> start_redis() {
  const std::string binary = RAPIDQA_REDIS_SERVER;
  INFO("redis-server was not found when the build was configured: install it (scripts/setup.sh does) and "
       "configure again; the [redis] tests need a real server");
  REQUIRE_FALSE(binary.empty());
  auto server = RedisServer::start(binary);
  INFO(server.status().to_string());
  REQUIRE(server.is_ok());
  return std::move(server).value();
}

// Waits, polling, until condition() holds; false if it never did in time.
template <typename Condition>
bool eventually(Condition condition, std::chrono::milliseconds timeout = kWait) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (condition()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(5ms);
  }
}

// Collects what an engine logs.
class CapturedLog {
 public:
  rapidqa::LogSink sink() {
    return [this](LogLevel level, const std::string& message) {
      std::lock_guard<std::mutex> lock(mu_);
      lines_.emplace_back(level, message);
    };
  }
  bool contains(LogLevel level, const std::string& fragment) const {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [l, m] : lines_) {
      if (l == level && m.find(fragment) != std::string::npos) return true;
    }
    return false;
  }
  std::string all() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::string out;
    for (const auto& [l, m] : lines_) out += std::string(rapidqa::log_level_name(l)) + ": " + m + "\n";
    return out;
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::pair<LogLevel, std::string>> lines_;
};

EngineOptions synced_options(int port, CapturedLog& log, const std::string& client_name) {
  EngineOptions o;
  o.redis.host = "127.0.0.1";
  o.redis.port = port;
  o.redis.client_name = client_name;
  o.redis.connect_timeout = 2000ms;
  o.redis.command_timeout = 2000ms;
  o.redis.reconnect_interval = 100ms;
  o.log = log.sink();
  return o;
}

std::unique_ptr<QAEngine> synced_engine(EngineOptions options) {
  auto engine = QAEngine::create(std::move(options));
  INFO(engine.status().to_string());
  REQUIRE(engine.is_ok());
  REQUIRE((*engine)->load_knowledge(rapidqa::testing::bundled_faq()).is_ok());
  return std::move(engine).value();
}

std::string ask_text(QAEngine& engine, const std::string& question) {
  auto answer = engine.ask(question);
  REQUIRE(answer.is_ok());
  return answer->text;
}

// The stored entry with a new answer.
KnowledgeEntry with_answer(const QAEngine& engine, const std::string& id, const std::string& answer) {
  auto stored = engine.entry(id);
  REQUIRE(stored.is_ok());
  KnowledgeEntry e = *stored;
  e.answer = answer;
  return e;
}

// The other engine instance: rapidqa-redis-peer in its own process.
class Peer {
 public:
  Peer(int port, const std::string& client_name) {
    auto child = ChildProcess::start({RAPIDQA_REDIS_PEER, "--port", std::to_string(port), "--kb",
                                      rapidqa::testing::bundled_faq(), "--client-name", client_name},
                                     {/*pipe_stdio=*/true, ""});
    INFO(child.status().to_string());
    REQUIRE(child.is_ok());
    process_ = std::move(child).value();
    const auto ready = process_->read_line(kWait);
    INFO("rapidqa-redis-peer did not start");
    REQUIRE(ready.has_value());
    REQUIRE(json::parse(*ready).value("ready", false));
  }
  ~Peer() {
    if (process_->running()) {
      (void)process_->write_line("quit");
      if (!process_->wait_for_exit(kWait)) process_->kill_and_wait();
    }
  }

  json command(const std::string& line) {
    REQUIRE(process_->write_line(line));
    const auto reply = process_->read_line(kWait);
    INFO("no reply from rapidqa-redis-peer to: " << line);
    REQUIRE(reply.has_value());
    return json::parse(*reply);
  }
  json ask(const std::string& question) { return command("ask " + question); }
  std::string ask_text(const std::string& question) { return ask(question).at("text").get<std::string>(); }
  json metrics() { return command("metrics"); }
  void update(const KnowledgeEntry& entry) {
    const json reply = command("update " + rapidqa::knowledge_entry_to_json(entry));
    INFO(reply.dump());
    REQUIRE(reply.value("ok", false));
  }
  ChildProcess& process() { return *process_; }

 private:
  std::unique_ptr<ChildProcess> process_;
};

rapidqa::cache::RedisConnection redis_client(int port) {
  auto connection = rapidqa::cache::RedisConnection::connect("127.0.0.1", port, 2000ms, 5000ms);
  INFO(connection.status().to_string());
  REQUIRE(connection.is_ok());
  return std::move(connection).value();
}

// Closes every connection whose CLIENT LIST name starts with prefix, as a
// network failure between that instance and Redis would; returns how many.
std::size_t kill_connections(int port, const std::string& prefix) {
  auto client = redis_client(port);
  auto list = client.command({"CLIENT", "LIST"});
  REQUIRE(list.is_ok());
  std::istringstream lines(list->text);
  std::string line;
  std::size_t killed = 0;
  while (std::getline(lines, line)) {
    std::string id, name;
    std::istringstream fields(line);
    std::string field;
    while (fields >> field) {
      if (field.rfind("id=", 0) == 0) id = field.substr(3);
      if (field.rfind("name=", 0) == 0) name = field.substr(5);
    }
    if (!name.empty() && name.rfind(prefix, 0) == 0) {
      auto reply = client.command({"CLIENT", "KILL", "ID", id});
      REQUIRE(reply.is_ok());
      if (reply->integer == 1) ++killed;
    }
  }
  return killed;
}

}  // namespace

TEST_CASE("Stream ids parse, order and step like Redis's", "[redis]") {
  const auto id = StreamId::parse("1700000000123-7");
  REQUIRE(id.has_value());
  CHECK(id->ms == 1700000000123u);
  CHECK(id->seq == 7u);
  CHECK(id->to_string() == "1700000000123-7");
  CHECK(id->next().to_string() == "1700000000123-8");
  CHECK((StreamId{5, 18446744073709551615u}.next() == StreamId{6, 0}));
  CHECK((StreamId{1, 9} < StreamId{2, 0}));
  CHECK((StreamId{2, 1} > StreamId{2, 0}));
  for (const char* bad : {"", "12", "12-", "-3", "a-1", "1-2-3", "1 -2"}) {
    INFO(bad);
    CHECK_FALSE(StreamId::parse(bad).has_value());
  }
}

TEST_CASE("A replay is complete only while the log still holds the cursor", "[redis]") {
  const StreamId cursor{100, 0};
  ChangeLogState log;
  log.exists = true;
  log.length = 3;
  log.first_entry = {90, 0};
  log.last_generated = {120, 0};
  CHECK(rapidqa::cache::missed_changes_reason(cursor, log).empty());

  SECTION("trimmed past the cursor") {
    log.first_entry = {110, 0};
    CHECK_THAT(rapidqa::cache::missed_changes_reason(cursor, log), Catch::Contains("trimmed past change 100-0"));
  }
  SECTION("an entry after the cursor was deleted (Redis 7 reports it)") {
    log.max_deleted = StreamId{105, 0};
    CHECK_FALSE(rapidqa::cache::missed_changes_reason(cursor, log).empty());
    log.max_deleted = StreamId{95, 0};
    CHECK(rapidqa::cache::missed_changes_reason(cursor, log).empty());
  }
  SECTION("the log is gone, or older than what was seen") {
    CHECK_FALSE(rapidqa::cache::missed_changes_reason(cursor, ChangeLogState{}).empty());
    CHECK(rapidqa::cache::missed_changes_reason(StreamId{}, ChangeLogState{}).empty());
    log.last_generated = {99, 0};
    CHECK_THAT(rapidqa::cache::missed_changes_reason(cursor, log), Catch::Contains("older copy"));
  }
  SECTION("emptied after the cursor") {
    log.length = 0;
    CHECK_FALSE(rapidqa::cache::missed_changes_reason(cursor, log).empty());
    log.last_generated = cursor;
    CHECK(rapidqa::cache::missed_changes_reason(cursor, log).empty());
  }
  SECTION("from the very start, Redis 7's count of entries ever added decides") {
    log.entries_added = 3;
    CHECK(rapidqa::cache::missed_changes_reason(StreamId{}, log).empty());
    log.entries_added = 4;
    CHECK_FALSE(rapidqa::cache::missed_changes_reason(StreamId{}, log).empty());
    log.entries_added.reset();  // an older Redis cannot tell, so it counts as missed
    CHECK_FALSE(rapidqa::cache::missed_changes_reason(StreamId{}, log).empty());
  }
}

TEST_CASE("Change messages round-trip and every malformed one is refused with a reason", "[redis]") {
  KnowledgeChange change;
  change.kind = KnowledgeChange::Kind::kUpsert;
  change.entry_id = "faq-1";
  change.version = 3;
  change.origin = "instance-a";
  KnowledgeEntry entry;
  entry.id = "faq-1";
  entry.question = "Where is my order?";
  entry.alternates = {"order status"};
  entry.answer = "See My Orders.";
  entry.cache_ttl = 60000ms;
  change.entry = entry;

  const std::string text = rapidqa::cache::encode_change_message(change);
  CHECK(text.rfind("{\"v\":1,", 0) == 0);
  auto parsed = rapidqa::cache::parse_change_message(text);
  REQUIRE(parsed.is_ok());
  CHECK(parsed->change.kind == KnowledgeChange::Kind::kUpsert);
  CHECK(parsed->change.origin == "instance-a");
  CHECK(parsed->change.version == 3);
  REQUIRE(parsed->change.entry.has_value());
  CHECK(parsed->change.entry->alternates == entry.alternates);
  CHECK(parsed->change.entry->cache_ttl == 60000ms);
  CHECK(parsed->change.entry->version == 3);
  CHECK_FALSE(parsed->origin_dropped_changes);

  // What the publish script puts on the channel.
  auto live = rapidqa::cache::parse_change_message("{\"stream_id\":\"5-1\"," + text.substr(1));
  REQUIRE(live.is_ok());
  CHECK(live->stream_id == "5-1");

  auto gap = rapidqa::cache::parse_change_message(rapidqa::cache::encode_gap_message("instance-b"));
  REQUIRE(gap.is_ok());
  CHECK(gap->origin_dropped_changes);
  CHECK(gap->change.origin == "instance-b");

  const std::pair<const char*, const char*> bad[] = {
      {"", "not valid JSON"},
      {"{broken", "not valid JSON"},
      {"[1,2]", "expected a JSON object"},
      {R"({"origin":"a","kind":"remove","entry_id":"x"})", "'v'"},
      {R"({"v":2,"origin":"a","kind":"remove","entry_id":"x"})", "format version 2"},
      {R"({"v":1,"kind":"remove","entry_id":"x"})", "'origin'"},
      {R"({"v":1,"origin":"a","kind":"rename","entry_id":"x"})", "unknown kind 'rename'"},
      {R"({"v":1,"origin":"a","kind":"remove"})", "'entry_id'"},
      {R"({"v":1,"origin":"a","kind":"remove","entry_id":7})", "'entry_id'"},
      {R"({"v":1,"origin":"a","kind":"remove","entry_id":"x","version":-1})", "'version'"},
      {R"({"v":1,"origin":"a","kind":"upsert","entry_id":"x","version":2})", "'entry'"},
      {R"({"v":1,"origin":"a","kind":"upsert","entry_id":"x","entry":{"id":"x","question":"q"}})", "'answer'"},
      {R"({"v":1,"origin":"a","kind":"upsert","entry_id":"x","entry":{"id":"y","question":"q","answer":"a"}})",
       "differs"},
  };
  for (const auto& [message, reason] : bad) {
    INFO(message);
    auto refused = rapidqa::cache::parse_change_message(message);
    REQUIRE_FALSE(refused.is_ok());
    CHECK(refused.status().code() == StatusCode::kInvalidArgument);
    CHECK_THAT(refused.status().message(), Catch::Contains(reason));
  }
}

TEST_CASE("Bad Redis options are refused when the engine is created", "[redis]") {
  auto refused = [](void (*change)(rapidqa::RedisSyncOptions&)) {
    EngineOptions o;
    o.redis.host = "127.0.0.1";
    change(o.redis);
    auto engine = QAEngine::create(std::move(o));
    REQUIRE_FALSE(engine.is_ok());
    CHECK(engine.status().code() == StatusCode::kInvalidArgument);
    return engine.status().message();
  };
  CHECK_THAT(refused([](auto& r) { r.port = 0; }), Catch::Contains("redis.port"));
  CHECK_THAT(refused([](auto& r) { r.port = 70000; }), Catch::Contains("redis.port"));
  CHECK_THAT(refused([](auto& r) { r.channel_prefix.clear(); }), Catch::Contains("channel_prefix"));
  CHECK_THAT(refused([](auto& r) { r.client_name = "two words"; }), Catch::Contains("client_name"));
  CHECK_THAT(refused([](auto& r) { r.command_timeout = 0ms; }), Catch::Contains("command_timeout"));
  CHECK_THAT(refused([](auto& r) { r.reconnect_interval = -1ms; }), Catch::Contains("reconnect_interval"));
  CHECK_THAT(refused([](auto& r) { r.max_queued_changes = 0; }), Catch::Contains("max_queued_changes"));
  CHECK_THAT(refused([](auto& r) { r.change_log_length = 0; }), Catch::Contains("change_log_length"));
}

TEST_CASE("An update on one process invalidates the other's cached answer", "[redis]") {
  auto redis = start_redis();
  CapturedLog log;
  auto a = synced_engine(synced_options(redis->port(), log, "engine-a"));
  Peer b(redis->port(), "peer-b");
  REQUIRE(a->metrics().relay.connected);

  const std::string old_text = ask_text(*a, kResetQuestion);
  REQUIRE(b.ask(kResetQuestion).at("tier") == "knowledge");
  const json cached = b.ask(kResetQuestion);
  REQUIRE(cached.at("tier") == "result_cache");
  REQUIRE(cached.at("text") == old_text);

  const std::string new_text = "Use the reset link we email you; it is valid for 15 minutes.";
  REQUIRE(a->update_entry(with_answer(*a, kResetId, new_text)).is_ok());

  CHECK(eventually([&] { return b.ask_text(kResetQuestion) == new_text; }));
  // The peer's knowledge changed, not only its cache: it keeps the new answer.
  const json after = b.ask(kResetQuestion);
  CHECK(after.at("entry") == kResetId);
  CHECK(after.at("text") == new_text);
  const json m = b.metrics();
  CHECK(m.at("changes_received") == 1);
  CHECK(m.at("redis_gaps") == 0);
  // Redis publishes to the channel before it replies to the script: the
  // peer may have the change before this instance's relay has read the
  // reply that counts it.
  CHECK(eventually([&] { return a->metrics().relay.published == 1; }));
  CHECK(a->metrics().relay.received == 0);  // its own change does not come back
  INFO(log.all());
  CHECK_FALSE(log.contains(LogLevel::kWarning, ""));
}

TEST_CASE("Changes flow both ways between the processes, removals included", "[redis]") {
  auto redis = start_redis();
  CapturedLog log;
  auto a = synced_engine(synced_options(redis->port(), log, "engine-a"));
  Peer b(redis->port(), "peer-b");

  // Both cache what they will later be told to change.
  (void)ask_text(*a, kChangeQuestion);
  REQUIRE(a->ask(kChangeQuestion)->tier == AnswerTier::kResultCache);
  REQUIRE(a->ask(kCreateQuestion)->entry_id() == kCreateId);
  (void)b.ask(kResetQuestion);
  REQUIRE(b.ask(kResetQuestion).at("tier") == "result_cache");

  const std::string from_b = "Open My Account > Security and choose a new password.";
  b.update(with_answer(*a, kChangeId, from_b));
  const std::string from_a = "Click Forgot password and follow the emailed link.";
  REQUIRE(a->update_entry(with_answer(*a, kResetId, from_a)).is_ok());
  REQUIRE(b.command("remove " + kCreateId).value("ok", false));

  CHECK(eventually([&] { return ask_text(*a, kChangeQuestion) == from_b; }));
  CHECK(eventually([&] { return b.ask_text(kResetQuestion) == from_a; }));
  CHECK(eventually([&] { return a->ask(kCreateQuestion)->entry_id() != kCreateId; }));
  CHECK(a->entry(kCreateId).status().code() == StatusCode::kNotFound);
  // Versions travel with the change, so both hold the same version.
  CHECK(a->entry(kChangeId)->version == 2);
  CHECK(a->metrics().relay.received == 2);
  CHECK(b.metrics().at("changes_received") == 1);
}

TEST_CASE("Both processes keep answering through a Redis outage and resynchronise after it", "[redis]") {
  auto redis = start_redis();
  CapturedLog log;
  auto a = synced_engine(synced_options(redis->port(), log, "engine-a"));
  Peer b(redis->port(), "peer-b");
  const std::string old_text = ask_text(*a, kResetQuestion);
  (void)b.ask(kResetQuestion);
  REQUIRE(b.ask(kResetQuestion).at("tier") == "result_cache");

  redis->kill();
  REQUIRE(eventually([&] { return !a->metrics().relay.connected; }));
  CHECK(eventually([&] { return b.metrics().at("redis_connected") == false; }));
  INFO(log.all());
  CHECK(log.contains(LogLevel::kWarning, "is unreachable"));

  // Both answer as before; the update stays local and waits for Redis.
  CHECK(ask_text(*a, kResetQuestion) == old_text);
  CHECK(b.ask_text(kResetQuestion) == old_text);
  const std::string new_text = "Reset links are now valid for one hour.";
  REQUIRE(a->update_entry(with_answer(*a, kResetId, new_text)).is_ok());
  CHECK(ask_text(*a, kResetQuestion) == new_text);
  CHECK(a->metrics().relay.queued == 1);
  CHECK(a->metrics().relay.published == 0);
  CHECK(b.ask_text(kResetQuestion) == old_text);  // bounded by its TTL, not by Redis

  const auto restarted = redis->restart();
  INFO(restarted.to_string());
  REQUIRE(restarted.is_ok());
  CHECK(eventually([&] { return b.ask_text(kResetQuestion) == new_text; }));
  CHECK(eventually([&] { return a->metrics().relay.connected && a->metrics().relay.queued == 0; }));
  CHECK(a->metrics().relay.published == 1);
  CHECK(a->metrics().relay.outages == 1);
  CHECK(log.contains(LogLevel::kInfo, "is reachable again"));
  // The restarted Redis lost the change log, which each instance notices.
  CHECK(log.contains(LogLevel::kWarning, "Redis lost its data"));
  // It applies the replayed change while still resynchronising.
  CHECK(eventually([&] { return b.metrics().at("redis_connected") == true; }));
  CHECK(b.metrics().at("redis_outages") == 1);
}

TEST_CASE("A process cut off from Redis replays the change it missed from the log", "[redis]") {
  auto redis = start_redis();
  CapturedLog log;
  auto a = synced_engine(synced_options(redis->port(), log, "engine-a"));
  Peer b(redis->port(), "peer-b");
  (void)b.ask(kResetQuestion);
  (void)b.ask(kShippingQuestion);
  REQUIRE(b.ask(kShippingQuestion).at("tier") == "result_cache");

  // Frozen while its connections are cut, the peer cannot reconnect before
  // the change is made: it can only learn it from the log.
  b.process().send_signal(SIGSTOP);
  CHECK(kill_connections(redis->port(), "peer-b") == 2);
  const std::string new_text = "Password reset links now arrive by text message.";
  REQUIRE(a->update_entry(with_answer(*a, kResetId, new_text)).is_ok());
  REQUIRE(eventually([&] { return a->metrics().relay.published == 1; }));
  b.process().send_signal(SIGCONT);

  CHECK(eventually([&] { return b.ask_text(kResetQuestion) == new_text; }));
  const json m = b.metrics();
  CHECK(m.at("changes_replayed") == 1);
  CHECK(m.at("changes_received") == 0);
  CHECK(m.at("redis_outages") == 1);
  // The log was complete, so nothing else was dropped from its caches.
  CHECK(m.at("redis_gaps") == 0);
  CHECK(b.ask(kShippingQuestion).at("tier") == "result_cache");
}

TEST_CASE("Malformed messages on the channel or in the log are logged and skipped", "[redis]") {
  auto redis = start_redis();
  CapturedLog log;
  auto a = synced_engine(synced_options(redis->port(), log, "engine-a"));
  Peer b(redis->port(), "peer-b");
  (void)ask_text(*a, kChangeQuestion);
  REQUIRE(a->ask(kChangeQuestion)->tier == AnswerTier::kResultCache);

  auto client = redis_client(redis->port());
  for (const std::string garbage : {"not json", R"({"v":99,"origin":"x","kind":"upsert"})",
                                    R"({"v":1,"origin":"x","kind":"remove","entry_id":"e"})",  // no stream_id
                                    R"({"stream_id":"1-1","v":1,"origin":"x","kind":"upsert","entry_id":"e"})"}) {
    auto published = client.command({"PUBLISH", "rapidqa:changes", garbage});
    REQUIRE(published.is_ok());
    CHECK(published->integer == 2);  // both instances received it
  }
  REQUIRE(eventually([&] { return a->metrics().relay.malformed == 4; }));

  // A bad entry in the log is read on the next replay.
  REQUIRE(client.command({"XADD", "rapidqa:changelog", "*", "change", "{broken"}).is_ok());
  CHECK(kill_connections(redis->port(), "engine-a") == 2);
  REQUIRE(eventually([&] { return a->metrics().relay.malformed == 5 && a->metrics().relay.connected; }));
  CHECK(a->metrics().relay.gaps == 0);  // the log was complete; a bad entry in it is no gap

  // Still listening: the next real change arrives and applies.
  const std::string from_b = "Security settings now live under My Account > Sign-in.";
  b.update(with_answer(*a, kChangeId, from_b));
  CHECK(eventually([&] { return ask_text(*a, kChangeQuestion) == from_b; }));
  INFO(log.all());
  CHECK(log.contains(LogLevel::kWarning, "skipped a change message from the channel"));
  CHECK(log.contains(LogLevel::kWarning, "format version 99"));
  CHECK(log.contains(LogLevel::kWarning, "skipped a change message from the change log"));
  CHECK(b.metrics().at("changes_malformed") == 4);
}

TEST_CASE("An engine started while Redis is down answers, retries, and drops its caches once connected", "[redis]") {
  auto redis = start_redis();
  redis->kill();
  CapturedLog log;
  auto a = synced_engine(synced_options(redis->port(), log, "engine-a"));
  auto m = a->metrics();
  CHECK_FALSE(m.relay.connected);
  CHECK(m.relay.outages == 1);
  CHECK(log.contains(LogLevel::kWarning, "is unreachable"));
  CHECK(a->ask(kResetQuestion)->entry_id() == kResetId);
  REQUIRE(a->ask(kResetQuestion)->tier == AnswerTier::kResultCache);

  REQUIRE(redis->restart().is_ok());
  REQUIRE(eventually([&] { return a->metrics().relay.connected; }));
  CHECK(a->metrics().relay.gaps == 1);
  INFO(log.all());
  CHECK(log.contains(LogLevel::kWarning, "started while Redis was unreachable"));
  // It could not tell what it missed, so its cached answers went.
  CHECK(a->ask(kResetQuestion)->tier == AnswerTier::kKnowledge);
}

TEST_CASE("A full change queue drops the oldest change and makes the peers drop their caches", "[redis]") {
  auto redis = start_redis();
  CapturedLog log_a, log_b;
  EngineOptions options_a = synced_options(redis->port(), log_a, "engine-a");
  options_a.redis.max_queued_changes = 2;
  options_a.redis.command_timeout = 300ms;
  EngineOptions options_b = synced_options(redis->port(), log_b, "engine-b");
  options_b.redis.command_timeout = 300ms;
  options_b.redis.heartbeat_interval = 200ms;
  auto a = synced_engine(options_a);
  auto b = synced_engine(options_b);
  (void)ask_text(*b, kCreateQuestion);
  REQUIRE(b->ask(kCreateQuestion)->tier == AnswerTier::kResultCache);

  // A frozen Redis: connections open, nothing answers. Its data survives,
  // so only the dropped change can make B drop its caches.
  REQUIRE(redis->freeze().is_ok());
  for (const auto& [id, text] : {std::pair{kResetId, "reset 2"}, std::pair{kChangeId, "change 2"},
                                 std::pair{kResetId, "reset 3"}}) {
    REQUIRE(a->update_entry(with_answer(*a, id, text)).is_ok());
  }
  CHECK(a->metrics().relay.dropped == 1);
  CHECK(a->metrics().relay.queued == 2);
  redis->thaw();

  CHECK(eventually([&] { return b->ask(kCreateQuestion)->tier != AnswerTier::kResultCache; }));
  CHECK(b->metrics().relay.gaps >= 1);
  INFO(log_b.all());
  CHECK(log_b.contains(LogLevel::kWarning, "dropped changes it could not send"));
  // The newest changes arrived.
  CHECK(eventually([&] { return ask_text(*b, kResetQuestion) == "reset 3"; }));
  CHECK(ask_text(*b, kChangeQuestion) == "change 2");
}

TEST_CASE("An engine shuts down while Redis hangs in the middle of a send", "[redis]") {
  auto redis = start_redis();
  CapturedLog log;
  EngineOptions options = synced_options(redis->port(), log, "engine-a");
  options.redis.command_timeout = 500ms;
  auto a = synced_engine(options);
  REQUIRE(redis->freeze().is_ok());
  REQUIRE(a->update_entry(with_answer(*a, kResetId, "sent to a hung server")).is_ok());
  // The relay's thread is now waiting for a reply that cannot come; the
  // destructor must still return (after at most the command timeout).
  a.reset();
  redis->thaw();
  CHECK(redis->running());
}

// Sharing knowledge changes through Redis, against a private redis-server
// this file starts on a free loopback port (skipped, with the reason, when
// redis-server is not on PATH).
//
// BM_RedisPropagation: two engines on the same generated 500-entry knowledge
// base (1.5k phrasings, exact search, so storing an entry is cheap and the
// transport dominates), both connected to the server. Each
// iteration updates one entry on A and measures, from update_entry
// returning, until B's relay hands the change to B's engine
// (delivered_p50_us, delivered_p99_us: the cost of going through Redis) and
// until B no longer serves the old answer from its cache (p50_us, p99_us:
// delivery plus B storing the entry, re-encoding and re-indexing it, and
// dropping its cached answers), and from update_entry being called
// (end_to_end_p50_us, end_to_end_p99_us: A's own update included). B is
// polled from this thread with a yield between polls, so the poll leaves
// the cores to the relay threads and to redis-server. On a machine with
// fewer free cores than busy threads the scheduler may run B's work before
// A's update_entry returns, so "from returning" can read near zero; the
// end-to-end figures do not depend on that.
//
// BM_UpdateEntry/redis:0|1: what update_entry costs on the updating side
// without and with a relay (its own channel, no peers, so nobody else's
// work runs on the cores); compare the two rows. BM_RelayPublish: the part
// the relay adds, alone: encoding one change and queueing it for the
// relay's thread, which sends it meanwhile.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bench_data.h"
#include "cache/redis_relay.h"
#include "rapidqa/qa_engine.h"
#include "support/redis_server.h"

namespace {

using rapidqa::QAEngine;
using SteadyClock = std::chrono::steady_clock;

constexpr std::size_t kEntries = 500;
constexpr std::size_t kChangedEntry = 17;

double percentile_us(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const auto rank = static_cast<std::size_t>(p * static_cast<double>(values.size() - 1) + 0.5);
  return values[std::min(rank, values.size() - 1)];
}

struct RedisSetup {
  std::unique_ptr<rapidqa::testing::RedisServer> server;  // first: outlives the engines
  std::unique_ptr<QAEngine> a, b;   // peers on one channel
  std::unique_ptr<QAEngine> solo;   // connected, on a channel of its own
  std::unique_ptr<QAEngine> local;  // no Redis
  std::string error;
};

std::unique_ptr<QAEngine> loaded_engine(const std::string& redis_prefix, int port, std::string& error) {
  rapidqa::EngineOptions options;
  if (!redis_prefix.empty()) {
    options.redis.host = "127.0.0.1";
    options.redis.port = port;
    options.redis.channel_prefix = redis_prefix;
  }
  auto engine = QAEngine::create(options);
  if (!engine) {
    error = "creating an engine: " + engine.status().to_string();
    return nullptr;
  }
  auto loaded = (*engine)->load_entries(rapidqa::bench::generated_entries(kEntries, 2));
  if (!loaded) {
    error = "loading the generated knowledge: " + loaded.status().to_string();
    return nullptr;
  }
  if (!redis_prefix.empty() && !(*engine)->metrics().relay.connected) {
    error = "an engine did not connect to the private redis-server";
    return nullptr;
  }
  return std::move(engine).value();
}

// Built once, on first use; error says why not.
RedisSetup& setup() {
  static RedisSetup s = [] {
    RedisSetup made;
    const std::string binary = rapidqa::testing::redis_server_on_path();
    if (binary.empty()) {
      made.error = "redis-server is not on PATH (scripts/setup.sh installs it); Redis benchmarks skipped";
      return made;
    }
    auto server = rapidqa::testing::RedisServer::start(binary);
    if (!server) {
      made.error = "starting redis-server: " + server.status().to_string();
      return made;
    }
    made.server = std::move(server).value();
    const int port = made.server->port();
    // Stops at the first engine that fails, with made.error saying why.
    (void)((made.a = loaded_engine("bench", port, made.error)) && (made.b = loaded_engine("bench", port, made.error)) &&
           (made.solo = loaded_engine("bench-solo", port, made.error)) &&
           (made.local = loaded_engine("", port, made.error)));
    return made;
  }();
  return s;
}

rapidqa::KnowledgeEntry changed_entry(const QAEngine& engine, std::uint64_t round) {
  auto stored = engine.entry("gen-" + std::to_string(kChangedEntry));
  rapidqa::KnowledgeEntry entry = *stored;
  entry.answer = "updated answer, round " + std::to_string(round);
  return entry;
}

void BM_RedisPropagation(benchmark::State& state) {
  RedisSetup& s = setup();
  if (!s.error.empty()) {
    state.SkipWithError(s.error.c_str());
    return;
  }
  const std::string question = s.a->entry("gen-" + std::to_string(kChangedEntry))->question;
  std::vector<double> propagation_us, delivered_us, end_to_end_us, update_us;
  std::uint64_t round = 0;
  std::uint64_t received = s.b->metrics().relay.received;
  for (auto _ : state) {
    // B serves the current answer from its result cache.
    (void)s.b->ask(question);
    const auto cached = s.b->ask(question);
    if (!cached || cached->tier != rapidqa::AnswerTier::kResultCache) {
      state.SkipWithError("B did not cache the answer before the update");
      return;
    }
    const auto entry = changed_entry(*s.a, ++round);
    const auto started = SteadyClock::now();
    if (!s.a->update_entry(entry).is_ok()) {
      state.SkipWithError("update_entry failed");
      return;
    }
    const auto updated = SteadyClock::now();
    const auto give_up = updated + std::chrono::seconds(10);
    // B's relay counts a change just before handing it to the engine.
    while (s.b->metrics().relay.received == received) {
      if (SteadyClock::now() > give_up) {
        state.SkipWithError("B's relay did not deliver the change within 10 s");
        return;
      }
      std::this_thread::yield();
    }
    ++received;
    delivered_us.push_back(std::chrono::duration<double, std::micro>(SteadyClock::now() - updated).count());
    while (s.b->ask(question)->text != entry.answer) {
      if (SteadyClock::now() > give_up) {
        state.SkipWithError("B still served the old answer 10 s after the update");
        return;
      }
      std::this_thread::yield();
    }
    const auto seen = SteadyClock::now();
    const double us = std::chrono::duration<double, std::micro>(seen - updated).count();
    propagation_us.push_back(us);
    end_to_end_us.push_back(std::chrono::duration<double, std::micro>(seen - started).count());
    update_us.push_back(std::chrono::duration<double, std::micro>(updated - started).count());
    state.SetIterationTime(us / 1e6);
    // B's background re-answer of the hot question must not overlap the next round.
    s.b->wait_for_rebuilds();
  }
  state.counters["p50_us"] = percentile_us(propagation_us, 0.50);
  state.counters["p99_us"] = percentile_us(propagation_us, 0.99);
  state.counters["max_us"] = percentile_us(propagation_us, 1.0);
  state.counters["delivered_p50_us"] = percentile_us(delivered_us, 0.50);
  state.counters["delivered_p99_us"] = percentile_us(delivered_us, 0.99);
  state.counters["end_to_end_p50_us"] = percentile_us(end_to_end_us, 0.50);
  state.counters["end_to_end_p99_us"] = percentile_us(end_to_end_us, 0.99);
  state.counters["update_p50_us"] = percentile_us(update_us, 0.50);
}
BENCHMARK(BM_RedisPropagation)->Iterations(400)->UseManualTime()->Unit(benchmark::kMicrosecond);

void BM_UpdateEntry(benchmark::State& state) {
  RedisSetup& s = setup();
  if (!s.error.empty()) {
    state.SkipWithError(s.error.c_str());
    return;
  }
  QAEngine& engine = state.range(0) ? *s.solo : *s.local;
  std::vector<double> update_us;
  std::uint64_t round = 0;
  for (auto _ : state) {
    // The copy is counted by Google Benchmark's time, not by p50_us/p99_us.
    const auto entry = changed_entry(engine, ++round);
    const auto started = SteadyClock::now();
    if (!engine.update_entry(entry).is_ok()) {
      state.SkipWithError("update_entry failed");
      return;
    }
    update_us.push_back(std::chrono::duration<double, std::micro>(SteadyClock::now() - started).count());
  }
  state.counters["p50_us"] = percentile_us(update_us, 0.50);
  state.counters["p99_us"] = percentile_us(update_us, 0.99);
  if (state.range(0)) {
    state.counters["published"] = static_cast<double>(engine.metrics().relay.published);
  }
}
BENCHMARK(BM_UpdateEntry)->ArgName("redis")->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

void BM_RelayPublish(benchmark::State& state) {
  RedisSetup& s = setup();
  if (!s.error.empty()) {
    state.SkipWithError(s.error.c_str());
    return;
  }
  rapidqa::RedisSyncOptions options;
  options.host = "127.0.0.1";
  options.port = s.server->port();
  options.channel_prefix = "bench-publish";
  options.max_queued_changes = 1000000;  // measure queueing, never dropping
  auto relay = rapidqa::cache::RedisRelay::start(options, "bench-publisher", {});
  if (!relay) {
    state.SkipWithError(relay.status().to_string().c_str());
    return;
  }
  rapidqa::cache::KnowledgeChange change;
  change.kind = rapidqa::cache::KnowledgeChange::Kind::kUpsert;
  change.entry = changed_entry(*s.local, 1);
  change.entry_id = change.entry->id;
  change.version = 2;
  change.origin = "bench-publisher";
  for (auto _ : state) (*relay)->publish(change);
  state.counters["dropped"] = static_cast<double>((*relay)->stats().dropped);
}
BENCHMARK(BM_RelayPublish)->Unit(benchmark::kMicrosecond);

}  // namespace

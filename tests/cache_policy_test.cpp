// Expiry and eviction shared by the tiers: sliding and per-answer TTLs,
// entry and byte bounds, LRU against LFU, per-tenant thresholds and
// displacement by a better entry.
#include <catch2/catch.hpp>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "rapidqa/result_cache.h"
#include "rapidqa/semantic_cache.h"
#include "test_support.h"

using namespace std::chrono_literals;
using rapidqa::Answer;
using rapidqa::EvictionPolicy;
using rapidqa::ExpiryMode;
using rapidqa::ManualClock;
using rapidqa::testing::answer_for;
using rapidqa::testing::unit;

namespace {

rapidqa::ResultCacheOptions one_shard(std::size_t capacity) {
  rapidqa::ResultCacheOptions o;
  o.capacity = capacity;
  o.shards = 1;
  return o;
}

}  // namespace

TEST_CASE("Sliding expiry keeps a hot answer and drops an idle one, absolute expiry drops both", "[cache][policy]") {
  for (const auto mode : {ExpiryMode::kAbsolute, ExpiryMode::kSliding}) {
    auto clock = std::make_shared<ManualClock>();
    auto options = one_shard(10);
    options.ttl = 5min;
    options.expiry = mode;
    options.clock = clock;
    auto owned_cache = rapidqa::ResultCache::create(options).value();
    rapidqa::ResultCache& cache = *owned_cache;
    cache.insert("hot", answer_for("e", "H"));
    cache.insert("idle", answer_for("e", "I"));
    for (int i = 0; i < 3; ++i) {
      clock->advance(2min);
      CHECK(cache.lookup("hot").has_value() == (mode == ExpiryMode::kSliding || i < 2));
    }
    // 6 minutes in: the idle answer has expired in both modes.
    CHECK_FALSE(cache.lookup("idle").has_value());
    clock->advance(5min);
    CHECK_FALSE(cache.lookup("hot").has_value());  // sliding too: 5 min without a hit
  }
}

TEST_CASE("An answer can ask for a shorter TTL than its tier, never a longer one", "[cache][policy]") {
  auto clock = std::make_shared<ManualClock>();
  auto options = one_shard(10);
  options.ttl = 5min;
  options.clock = clock;
  auto owned_cache = rapidqa::ResultCache::create(options).value();
  rapidqa::ResultCache& cache = *owned_cache;
  cache.insert("volatile", answer_for("e", "V"), 30s);
  cache.insert("greedy", answer_for("e", "G"), 24h);
  clock->advance(31s);
  CHECK_FALSE(cache.lookup("volatile").has_value());
  CHECK(cache.lookup("greedy").has_value());
  clock->advance(5min);
  CHECK_FALSE(cache.lookup("greedy").has_value());
  CHECK(cache.stats().expirations == 2);
}

TEST_CASE("LRU and LFU evict different answers from the same history", "[cache][policy]") {
  for (const auto policy : {EvictionPolicy::kLeastRecentlyUsed, EvictionPolicy::kLeastFrequentlyUsed}) {
    auto options = one_shard(3);
    options.eviction = policy;
    auto owned_cache = rapidqa::ResultCache::create(options).value();
    rapidqa::ResultCache& cache = *owned_cache;
    cache.insert("a", answer_for("e", "A"));
    cache.insert("b", answer_for("e", "B"));
    cache.insert("c", answer_for("e", "C"));
    // a: two hits, long ago; b and c: one hit each, c the most recent.
    REQUIRE(cache.lookup("a"));
    REQUIRE(cache.lookup("a"));
    REQUIRE(cache.lookup("b"));
    REQUIRE(cache.lookup("c"));
    cache.insert("d", answer_for("e", "D"));
    const bool lru = policy == EvictionPolicy::kLeastRecentlyUsed;
    CHECK(cache.lookup("a").has_value() == !lru);  // LRU: a was used longest ago
    CHECK(cache.lookup("b").has_value() == lru);   // LFU: b is among the least used, and older than c
    CHECK(cache.lookup("c").has_value());
    CHECK(cache.lookup("d").has_value());
    CHECK(cache.stats().evictions == 1);
  }
}

TEST_CASE("A byte bound holds fewer long answers than short ones and counts its evictions", "[cache][policy]") {
  auto options = one_shard(1000);
  options.capacity_bytes = 16 * 1024;
  auto owned_cache = rapidqa::ResultCache::create(options).value();
  rapidqa::ResultCache& cache = *owned_cache;
  for (int i = 0; i < 200; ++i) cache.insert("short " + std::to_string(i), answer_for("e", "ok"));
  const auto short_stats = cache.stats();
  CHECK(short_stats.bytes <= options.capacity_bytes);
  cache.clear();
  for (int i = 0; i < 200; ++i) cache.insert("long " + std::to_string(i), answer_for("e", std::string(1000, 'x')));
  const auto long_stats = cache.stats();
  CHECK(long_stats.bytes <= options.capacity_bytes);
  CHECK(long_stats.size < short_stats.size);
  CHECK(long_stats.size >= 8);  // ~1.3 KB each: the bound is used, not wasted
  CHECK(long_stats.evictions >= 200 - long_stats.size);
  // An answer that can never fit is not stored (and evicts nothing)...
  const auto before = cache.stats();
  cache.insert("huge", answer_for("e", std::string(64 * 1024, 'x')));
  CHECK_FALSE(cache.lookup("huge").has_value());
  CHECK(cache.stats().size == before.size);
  // ...and replacing an answer with one that cannot fit still removes the old one.
  cache.insert("long 199", answer_for("e", std::string(64 * 1024, 'y')));
  CHECK_FALSE(cache.lookup("long 199").has_value());
}

TEST_CASE("A large tier stays within its bounds under sampled eviction", "[cache][policy]") {
  for (const auto policy : {EvictionPolicy::kLeastRecentlyUsed, EvictionPolicy::kLeastFrequentlyUsed}) {
    auto options = one_shard(500);
    options.eviction = policy;
    auto owned_cache = rapidqa::ResultCache::create(options).value();
    rapidqa::ResultCache& cache = *owned_cache;
    // A hot set asked again and again between a stream of one-off questions.
    for (int i = 0; i < 20000; ++i) {
      const std::string hot = "hot " + std::to_string(i % 20);
      if (!cache.lookup(hot)) cache.insert(hot, answer_for("e", "H"));
      cache.insert("once " + std::to_string(i), answer_for("e", "O"));
    }
    const auto stats = cache.stats();
    CHECK(stats.size <= 500);
    CHECK(stats.evictions >= 20000 - 500);
    int hot_kept = 0;
    for (int h = 0; h < 20; ++h) hot_kept += cache.lookup("hot " + std::to_string(h)).has_value() ? 1 : 0;
    CHECK(hot_kept >= 18);  // sampling finds the cold ones: the hot set survives the stream
  }
}

TEST_CASE("Semantic cache: byte bound, sliding expiry and per-answer TTL", "[cache][semantic][policy]") {
  auto clock = std::make_shared<ManualClock>();
  rapidqa::SemanticCacheOptions options;
  options.dimension = 4;
  options.capacity_bytes = 1;  // smaller than any entry: nothing is stored
  options.clock = clock;
  auto tiny = rapidqa::SemanticCache::create(options);
  REQUIRE(tiny.is_ok());
  const auto a = unit({1, 0, 0, 0}), b = unit({0, 1, 0, 0}), c = unit({0, 0, 1, 0});
  (*tiny)->insert(a.data(), "q", answer_for("e", "A"));
  CHECK((*tiny)->stats().size == 0);

  options.capacity_bytes = 0;
  options.expiry = ExpiryMode::kSliding;
  options.ttl = 10min;
  auto cache = rapidqa::SemanticCache::create(options);
  REQUIRE(cache.is_ok());
  (*cache)->insert(a.data(), "q", answer_for("e", "A"));
  (*cache)->insert(b.data(), "q", answer_for("e", "B"));
  (*cache)->insert(c.data(), "q", answer_for("e", "C"), "", 1min);
  clock->advance(61s);
  CHECK_FALSE((*cache)->lookup(c.data(), "q").answer);  // its own TTL
  for (int i = 0; i < 3; ++i) {
    clock->advance(6min);
    CHECK((*cache)->lookup(a.data(), "q").answer);  // hit every 6 min: kept alive
  }
  CHECK_FALSE((*cache)->lookup(b.data(), "q").answer);  // idle for 18 min
  const auto stats = (*cache)->stats();
  CHECK(stats.bytes > 0);
  CHECK(stats.bytes < 8 * 1024);
}

TEST_CASE("Semantic threshold: request over tenant over global", "[cache][semantic][tenant]") {
  rapidqa::SemanticCacheOptions options;
  options.dimension = 4;
  options.similarity_threshold = 0.95f;
  options.tenant_thresholds = {{"lenient", 0.7f}};
  auto cache = rapidqa::SemanticCache::create(options);
  REQUIRE(cache.is_ok());
  const auto cached = unit({1, 0, 0, 0}), query = unit({1, 0.6f, 0, 0});  // cosine 0.857
  for (const char* tenant : {"", "lenient", "strict"}) (*cache)->insert(cached.data(), "q", answer_for("e", tenant), tenant);
  rapidqa::SemanticQuery q;
  q.tenant = "lenient";
  CHECK((*cache)->lookup(query.data(), "q", q).answer->text == "lenient");
  q.tenant = "strict";
  CHECK_FALSE((*cache)->lookup(query.data(), "q", q).answer);
  q.similarity_threshold = 0.8f;
  CHECK((*cache)->lookup(query.data(), "q", q).answer->text == "strict");
  REQUIRE((*cache)->set_tenant_threshold("strict", 0.99f).is_ok());
  q.similarity_threshold.reset();
  CHECK_FALSE((*cache)->lookup(query.data(), "q", q).answer);
  REQUIRE((*cache)->set_tenant_threshold("lenient", std::nullopt).is_ok());
  q.tenant = "lenient";
  CHECK_FALSE((*cache)->lookup(query.data(), "q", q).answer);  // back to the global 0.95
  CHECK((*cache)->set_tenant_threshold("x", 1.5f).code() == rapidqa::StatusCode::kInvalidArgument);
  options.tenant_thresholds = {{"bad", 0.0f}};
  CHECK(rapidqa::SemanticCache::create(options).status().message().find("tenant 'bad'") != std::string::npos);
}

TEST_CASE("An added entry displaces exactly the cached answers it beats", "[cache][semantic]") {
  rapidqa::SemanticCacheOptions options;
  options.dimension = 4;
  auto cache = rapidqa::SemanticCache::create(options);
  REQUIRE(cache.is_ok());
  const auto weak = unit({1, 0, 0, 0}), strong = unit({0, 1, 0, 0}), far = unit({0, 0, 1, 0});
  (*cache)->insert(weak.data(), "weakly answered", answer_for("old", "W", 0.5f), "t1");
  (*cache)->insert(strong.data(), "well answered", answer_for("old", "S", 0.95f), "t2");
  (*cache)->insert(far.data(), "unrelated", answer_for("old", "F", 0.9f), "t1");
  // A new phrasing at cosine 0.8 to both the weak and the strong question.
  const auto phrasing = unit({0.8f, 0.8f, 0.2f, 0});
  const auto displaced = (*cache)->displace(phrasing.data(), 1, 0.35f);
  REQUIRE(displaced.size() == 1);
  CHECK(displaced.front().tenant == "t1");
  CHECK(displaced.front().question == "weakly answered");
  rapidqa::SemanticQuery t1, t2;
  t1.tenant = "t1";
  t2.tenant = "t2";
  CHECK_FALSE((*cache)->lookup(weak.data(), "weakly answered", t1).answer);
  CHECK((*cache)->lookup(strong.data(), "well answered", t2).answer);
  CHECK((*cache)->lookup(far.data(), "unrelated", t1).answer);
  CHECK((*cache)->stats().displacements == 1);
}

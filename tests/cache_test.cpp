#include <catch2/catch.hpp>

#include <atomic>
#include <cmath>
#include <memory>
#include <thread>

#include "rapidqa/result_cache.h"
#include "cache/near_miss_guard.h"
#include "rapidqa/semantic_cache.h"
#include "test_support.h"

using namespace std::chrono_literals;
using rapidqa::Answer;
using rapidqa::ManualClock;
using rapidqa::testing::answer_for;
using rapidqa::testing::unit;

TEST_CASE("Result cache serves until the TTL and never after", "[cache][result]") {
  auto clock = std::make_shared<ManualClock>();
  rapidqa::ResultCacheOptions options;
  options.ttl = 5min;
  options.clock = clock;
  auto owned_cache = rapidqa::ResultCache::create(options).value();
  rapidqa::ResultCache& cache = *owned_cache;
  cache.insert("reset password", answer_for("e1", "A"));
  clock->advance(4min + 59s);
  REQUIRE(cache.lookup("reset password").has_value());
  CHECK(cache.lookup("reset password")->text == "A");
  clock->advance(1s);
  CHECK_FALSE(cache.lookup("reset password").has_value());
  const auto stats = cache.stats();
  CHECK(stats.hits == 2);
  CHECK(stats.misses == 1);
  CHECK(stats.expirations == 1);
  CHECK(stats.size == 0);
}

TEST_CASE("Result cache evicts the least recently used entry", "[cache][result]") {
  rapidqa::ResultCacheOptions options;
  options.capacity = 3;
  options.shards = 1;
  auto owned_cache = rapidqa::ResultCache::create(options).value();
  rapidqa::ResultCache& cache = *owned_cache;
  cache.insert("a", answer_for("e", "A"));
  cache.insert("b", answer_for("e", "B"));
  cache.insert("c", answer_for("e", "C"));
  REQUIRE(cache.lookup("a"));  // a is now the most recent; b the least
  cache.insert("d", answer_for("e", "D"));
  CHECK(cache.lookup("a"));
  CHECK_FALSE(cache.lookup("b"));
  CHECK(cache.lookup("c"));
  CHECK(cache.lookup("d"));
  CHECK(cache.stats().evictions == 1);
  CHECK(cache.stats().size == 3);
}

TEST_CASE("Result cache invalidates answers built from a changed entry", "[cache][result]") {
  auto owned_cache = rapidqa::ResultCache::create().value();
  rapidqa::ResultCache& cache = *owned_cache;
  cache.insert("q1", answer_for("e1", "A"));
  cache.insert("q2", answer_for("e2", "B"));
  cache.insert("q3", answer_for("e1", "C"));
  CHECK(cache.invalidate_entry("e1") == 2);
  CHECK_FALSE(cache.lookup("q1"));
  CHECK(cache.lookup("q2"));
  CHECK_FALSE(cache.lookup("q3"));
  CHECK(cache.erase("q2"));
  CHECK_FALSE(cache.erase("q2"));
}

TEST_CASE("Semantic cache hits above the threshold and reports the nearest similarity", "[cache][semantic]") {
  rapidqa::SemanticCacheOptions options;
  options.dimension = 4;
  options.similarity_threshold = 0.9f;
  auto cache = rapidqa::SemanticCache::create(options);
  REQUIRE(cache.is_ok());
  const auto stored = unit({1, 0, 0, 0});
  (*cache)->insert(stored.data(), "q", answer_for("e1", "A"));

  const auto close = unit({1, 0.2f, 0, 0});  // cosine ~0.98
  auto hit = (*cache)->lookup(close.data(), "q");
  REQUIRE(hit.answer.has_value());
  CHECK(hit.answer->text == "A");
  CHECK(hit.nearest_similarity == Approx(0.98).epsilon(0.01));

  const auto far = unit({1, 1, 0, 0});  // cosine ~0.71
  auto miss = (*cache)->lookup(far.data(), "q");
  CHECK_FALSE(miss.answer.has_value());
  CHECK(miss.nearest_similarity == Approx(0.707).epsilon(0.01));
}

TEST_CASE("Semantic cache expires by TTL and drops invalidated entries", "[cache][semantic]") {
  auto clock = std::make_shared<ManualClock>();
  rapidqa::SemanticCacheOptions options;
  options.dimension = 4;
  options.ttl = 1h;
  options.clock = clock;
  auto cache = rapidqa::SemanticCache::create(options);
  REQUIRE(cache.is_ok());
  const auto a = unit({1, 0, 0, 0});
  const auto b = unit({0, 1, 0, 0});
  (*cache)->insert(a.data(), "q", answer_for("e1", "A"));
  (*cache)->insert(b.data(), "q", answer_for("e2", "B"));
  CHECK((*cache)->invalidate_entry("e2") == 1);
  CHECK_FALSE((*cache)->lookup(b.data(), "q").answer);
  clock->advance(59min);
  CHECK((*cache)->lookup(a.data(), "q").answer);
  clock->advance(1min);
  const auto expired = (*cache)->lookup(a.data(), "q");
  CHECK_FALSE(expired.answer);
  CHECK(expired.nearest_similarity == -1.0f);  // nothing live left
}

TEST_CASE("Semantic cache stays within capacity - oldest out first", "[cache][semantic]") {
  rapidqa::SemanticCacheOptions options;
  options.dimension = 4;
  options.capacity = 2;
  auto cache = rapidqa::SemanticCache::create(options);
  REQUIRE(cache.is_ok());
  const auto a = unit({1, 0, 0, 0}), b = unit({0, 1, 0, 0}), c = unit({0, 0, 1, 0});
  (*cache)->insert(a.data(), "q", answer_for("e", "A"));
  (*cache)->insert(b.data(), "q", answer_for("e", "B"));
  (*cache)->insert(c.data(), "q", answer_for("e", "C"));
  CHECK_FALSE((*cache)->lookup(a.data(), "q").answer);
  CHECK((*cache)->lookup(b.data(), "q").answer);
  CHECK((*cache)->lookup(c.data(), "q").answer);
  CHECK((*cache)->stats().evictions == 1);
  CHECK((*cache)->stats().size == 2);
}

TEST_CASE("Semantic cache refuses bad options", "[cache][semantic]") {
  rapidqa::SemanticCacheOptions options;
  options.dimension = 0;
  CHECK(rapidqa::SemanticCache::create(options).status().code() == rapidqa::StatusCode::kInvalidArgument);
  options.dimension = 4;
  options.similarity_threshold = 1.5f;
  const auto r = rapidqa::SemanticCache::create(options);
  CHECK(r.status().code() == rapidqa::StatusCode::kInvalidArgument);
  CHECK(r.status().message().find("similarity_threshold") != std::string::npos);
  options.similarity_threshold = 0.9f;
  options.hnsw_search_breadth = 0;
  CHECK(rapidqa::SemanticCache::create(options).status().message().find("efSearch 0") != std::string::npos);
}

TEST_CASE("Semantic cache: an HNSW index with its own parameters still finds each cached question", "[cache][semantic]") {
  rapidqa::SemanticCacheOptions options;
  options.dimension = 8;
  options.exact_index_limit = 16;  // HNSW from the 17th question on
  options.hnsw_neighbors = 8;
  options.hnsw_build_breadth = 40;
  options.hnsw_search_breadth = 128;
  auto cache = rapidqa::SemanticCache::create(options);
  REQUIRE(cache.is_ok());
  std::vector<std::vector<float>> vectors;
  for (int i = 0; i < 64; ++i) {
    std::vector<float> v(8, 0.0f);
    v[i % 8] = 1.0f;
    v[(i / 8) % 8] += 0.5f + 0.01f * static_cast<float>(i);
    vectors.push_back(unit(v));
    (*cache)->insert(vectors.back().data(), "q" + std::to_string(i), answer_for("e" + std::to_string(i), "A"));
  }
  int found = 0;
  for (int i = 0; i < 64; ++i) {
    const auto hit = (*cache)->lookup(vectors[i].data(), "q" + std::to_string(i));
    if (hit.answer && hit.answer->entry_id() == "e" + std::to_string(i)) ++found;
  }
  CHECK(found >= 60);
}

TEST_CASE("The near-miss guard refuses opposite questions and passes paraphrases", "[cache][semantic][guard]") {
  const rapidqa::cache::NearMissGuard guard;
  CHECK(guard.conflict("how do i open an account", "how do i close an account") == "open/close");
  CHECK(guard.conflict("如何开户", "如何销户") == "开户/销户");
  CHECK(guard.conflict("为什么不能登录", "为什么能登录") == "negation");
  CHECK(guard.conflict("why cant i log in", "why can i log in") == "negation");
  CHECK(guard.conflict("how do i increase my card limit", "how do i lower my card limit") == "increase/decrease");
  CHECK(guard.conflict("transfer 100 dollars", "transfer 1000 dollars") == "number");
  CHECK(guard.conflict("how do i freeze my card", "how do i unfreeze my card") == "activate/deactivate");
  CHECK(guard.conflict("how do i open an account", "how can i open a new account") == "");
  CHECK(guard.conflict("如何重置密码", "忘记密码怎么重置") == "");
  CHECK(guard.conflict("why cant i log in", "i cannot log in") == "");
}

TEST_CASE("Semantic cache refuses a near miss above the threshold but serves a paraphrase", "[cache][semantic][guard]") {
  rapidqa::SemanticCacheOptions options;
  options.dimension = 4;
  options.similarity_threshold = 0.9f;
  auto cache = rapidqa::SemanticCache::create(options);
  REQUIRE(cache.is_ok());
  const auto open = unit({1, 0.1f, 0, 0});
  (*cache)->insert(open.data(), "how do i open an account", answer_for("open", "Open online."));
  const auto close = unit({1, 0.12f, 0, 0});  // nearly the same vector
  const auto refused = (*cache)->lookup(close.data(), "how do i close an account");
  CHECK_FALSE(refused.answer);
  CHECK(refused.refused_reason == "open/close");
  CHECK(refused.nearest_similarity > 0.99f);
  const auto paraphrase = (*cache)->lookup(close.data(), "how can i open a new account");
  REQUIRE(paraphrase.answer);
  CHECK(paraphrase.answer->text == "Open online.");
  CHECK((*cache)->stats().near_miss_refusals == 1);
  rapidqa::SemanticQuery strict;
  strict.similarity_threshold = 0.999999f;
  CHECK_FALSE((*cache)->lookup(close.data(), "how can i open a new account", strict).answer);
}

TEST_CASE("Semantic cache namespaces never answer for each other - even under concurrent writes",
          "[cache][semantic][tenant]") {
  rapidqa::SemanticCacheOptions options;
  options.dimension = 8;
  options.similarity_threshold = 0.5f;
  auto created = rapidqa::SemanticCache::create(options);
  REQUIRE(created.is_ok());
  rapidqa::SemanticCache& cache = **created;
  const auto v = unit({1, 1, 0, 0, 0, 0, 0, 0});
  std::atomic<bool> stop{false};
  std::atomic<int> leaks{0}, hits{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    const std::string tenant = "tenant-" + std::to_string(t);
    threads.emplace_back([&, tenant] {  // writer: the same question, its own answer
      for (int i = 0; i < 300; ++i) cache.insert(v.data(), "q", answer_for("e", tenant), tenant);
    });
    threads.emplace_back([&, tenant] {  // reader: must only ever see its own answer
      rapidqa::SemanticQuery query;
      query.tenant = tenant;
      // Bounded as well as stopped: a reader-preferring lock must not let
      // endless lookups starve the writers this test waits for.
      for (int i = 0; i < 20000 && !stop.load(); ++i) {
        const auto found = cache.lookup(v.data(), "q", query);
        if (found.answer) {
          ++hits;
          if (found.answer->text != tenant) ++leaks;
        }
      }
    });
  }
  for (std::size_t i = 0; i < threads.size(); i += 2) threads[i].join();
  stop = true;
  for (std::size_t i = 1; i < threads.size(); i += 2) threads[i].join();
  CHECK(leaks.load() == 0);
  CHECK(hits.load() > 0);
  rapidqa::SemanticQuery other;
  other.tenant = "nobody";
  CHECK_FALSE(cache.lookup(v.data(), "q", other).answer);
  CHECK(cache.lookup(v.data(), "q", other).nearest_similarity == -1.0f);
}

TEST_CASE("Bad result cache options are refused by name, not fixed", "[cache]") {
  rapidqa::ResultCacheOptions options;
  options.shards = 0;
  auto made = rapidqa::ResultCache::create(options);
  REQUIRE_FALSE(made.is_ok());
  CHECK(made.status().message().find("shards") != std::string::npos);
  options = {};
  options.ttl = std::chrono::milliseconds(0);
  made = rapidqa::ResultCache::create(options);
  REQUIRE_FALSE(made.is_ok());
  CHECK(made.status().message().find("ttl") != std::string::npos);
  options = {};
  options.stale_grace = std::chrono::milliseconds(-1);
  made = rapidqa::ResultCache::create(options);
  REQUIRE_FALSE(made.is_ok());
  CHECK(made.status().message().find("stale_grace") != std::string::npos);
  CHECK(rapidqa::ResultCache::create({}).is_ok());
}

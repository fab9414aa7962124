#include <catch2/catch.hpp>

#include <cmath>
#include <memory>

#include "rapidqa/result_cache.h"
#include "rapidqa/semantic_cache.h"

using namespace std::chrono_literals;
using rapidqa::Answer;
using rapidqa::ManualClock;

namespace {

Answer answer_for(const std::string& entry, const std::string& text) {
  Answer a;
  a.text = text;
  a.matches.push_back({entry, 0.9f});
  a.tier = rapidqa::AnswerTier::kKnowledge;
  return a;
}

std::vector<float> unit(std::vector<float> v) {
  float n = 0;
  for (float x : v) n += x * x;
  for (float& x : v) x /= std::sqrt(n);
  return v;
}

}  // namespace

TEST_CASE("Result cache serves until the TTL and never after", "[cache][result]") {
  auto clock = std::make_shared<ManualClock>();
  rapidqa::ResultCacheOptions options;
  options.ttl = 5min;
  options.clock = clock;
  rapidqa::ResultCache cache(options);
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
  rapidqa::ResultCache cache(options);
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
  rapidqa::ResultCache cache;
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
  (*cache)->insert(stored.data(), answer_for("e1", "A"));

  const auto close = unit({1, 0.2f, 0, 0});  // cosine ~0.98
  auto hit = (*cache)->lookup(close.data());
  REQUIRE(hit.answer.has_value());
  CHECK(hit.answer->text == "A");
  CHECK(hit.nearest_similarity == Approx(0.98).epsilon(0.01));

  const auto far = unit({1, 1, 0, 0});  // cosine ~0.71
  auto miss = (*cache)->lookup(far.data());
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
  (*cache)->insert(a.data(), answer_for("e1", "A"));
  (*cache)->insert(b.data(), answer_for("e2", "B"));
  CHECK((*cache)->invalidate_entry("e2") == 1);
  CHECK_FALSE((*cache)->lookup(b.data()).answer);
  clock->advance(59min);
  CHECK((*cache)->lookup(a.data()).answer);
  clock->advance(1min);
  const auto expired = (*cache)->lookup(a.data());
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
  (*cache)->insert(a.data(), answer_for("e", "A"));
  (*cache)->insert(b.data(), answer_for("e", "B"));
  (*cache)->insert(c.data(), answer_for("e", "C"));
  CHECK_FALSE((*cache)->lookup(a.data()).answer);
  CHECK((*cache)->lookup(b.data()).answer);
  CHECK((*cache)->lookup(c.data()).answer);
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
}

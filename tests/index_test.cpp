#include <catch2/catch.hpp>

#include <cmath>
#include <random>

#include "index/vector_index.h"

using rapidqa::index::VectorIndex;
using rapidqa::index::VectorIndexOptions;

namespace {

std::vector<float> random_unit_vectors(std::size_t n, std::size_t dim, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  std::vector<float> v(n * dim);
  for (std::size_t i = 0; i < n; ++i) {
    float norm = 0;
    for (std::size_t j = 0; j < dim; ++j) {
      v[i * dim + j] = normal(rng);
      norm += v[i * dim + j] * v[i * dim + j];
    }
    for (std::size_t j = 0; j < dim; ++j) v[i * dim + j] /= std::sqrt(norm);
  }
  return v;
}

std::vector<std::int64_t> labels_from(std::int64_t first, std::size_t n) {
  std::vector<std::int64_t> labels(n);
  for (std::size_t i = 0; i < n; ++i) labels[i] = first + static_cast<std::int64_t>(i);
  return labels;
}

}  // namespace

TEST_CASE("Exact index finds each stored vector as its own nearest", "[index]") {
  const std::size_t dim = 32, n = 200;
  VectorIndex index(VectorIndexOptions{dim, 1000});
  const auto vectors = random_unit_vectors(n, dim, 1);
  index.add_batch(labels_from(100, n), vectors.data());
  CHECK_FALSE(index.is_approximate());
  CHECK(index.size() == n);
  for (std::size_t i = 0; i < n; i += 17) {
    const auto hits = index.search(vectors.data() + i * dim, 3);
    REQUIRE(hits.size() == 3);
    CHECK(hits[0].label == static_cast<std::int64_t>(100 + i));
    CHECK(hits[0].similarity == Approx(1.0f).epsilon(1e-4));
    CHECK(hits[0].similarity >= hits[1].similarity);
  }
}

TEST_CASE("Removed and replaced labels are never returned stale", "[index]") {
  const std::size_t dim = 16;
  VectorIndex index(VectorIndexOptions{dim, 1000});
  const auto vectors = random_unit_vectors(3, dim, 2);
  index.upsert(1, vectors.data());
  index.upsert(2, vectors.data() + dim);
  CHECK(index.remove(1));
  CHECK_FALSE(index.remove(1));
  auto hits = index.search(vectors.data(), 5);
  REQUIRE(hits.size() == 1);
  CHECK(hits[0].label == 2);
  // Replacing label 2 with another vector moves it.
  index.upsert(2, vectors.data() + 2 * dim);
  hits = index.search(vectors.data() + 2 * dim, 5);
  REQUIRE(hits.size() == 1);
  CHECK(hits[0].label == 2);
  CHECK(hits[0].similarity == Approx(1.0f).epsilon(1e-4));
}

TEST_CASE("Many removals compact the index and searches keep returning k live labels", "[index]") {
  const std::size_t dim = 16, n = 400;
  VectorIndex index(VectorIndexOptions{dim, 10000});
  const auto vectors = random_unit_vectors(n, dim, 3);
  index.add_batch(labels_from(0, n), vectors.data());
  for (std::int64_t label = 0; label < 300; ++label) REQUIRE(index.remove(label));
  CHECK(index.size() == 100);
  const auto hits = index.search(vectors.data(), 10);
  REQUIRE(hits.size() == 10);
  for (const auto& h : hits) CHECK(h.label >= 300);
  REQUIRE(index.vector_of(350) != nullptr);
  CHECK(std::equal(vectors.begin() + 350 * dim, vectors.begin() + 351 * dim, index.vector_of(350)));
}

TEST_CASE("Above the exact limit the index switches to HNSW with high recall", "[index]") {
  const std::size_t dim = 64, n = 3000;
  VectorIndexOptions options{dim, 1000};
  VectorIndex approximate(options);
  options.exact_limit = 1000000;
  VectorIndex exact(options);
  const auto vectors = random_unit_vectors(n, dim, 4);
  approximate.add_batch(labels_from(0, n), vectors.data());
  exact.add_batch(labels_from(0, n), vectors.data());
  CHECK(approximate.is_approximate());
  CHECK_FALSE(exact.is_approximate());

  const auto queries = random_unit_vectors(200, dim, 5);
  int agree = 0;
  for (std::size_t q = 0; q < 200; ++q) {
    const auto a = approximate.search(queries.data() + q * dim, 1);
    const auto e = exact.search(queries.data() + q * dim, 1);
    REQUIRE(a.size() == 1);
    agree += a[0].label == e[0].label ? 1 : 0;
  }
  CHECK(agree >= 196);  // recall@1 >= 0.98 on random data, harder than real text

  // Tombstones in an HNSW index are skipped during the search.
  for (std::int64_t label = 0; label < 100; ++label) approximate.remove(label);
  const auto hits = approximate.search(vectors.data(), 5);
  REQUIRE(hits.size() == 5);
  for (const auto& h : hits) CHECK(h.label >= 100);
}

TEST_CASE("Batch search returns one result list per query", "[index]") {
  const std::size_t dim = 8;
  VectorIndex index(VectorIndexOptions{dim, 100});
  const auto vectors = random_unit_vectors(20, dim, 6);
  index.add_batch(labels_from(0, 20), vectors.data());
  const auto results = index.search_batch(vectors.data(), 4, 2);
  REQUIRE(results.size() == 4);
  for (std::size_t q = 0; q < 4; ++q) CHECK(results[q][0].label == static_cast<std::int64_t>(q));
}

namespace {

bool holds_vector(const VectorIndex& index, std::int64_t label, const std::vector<float>& vectors, std::size_t row,
                  std::size_t dim) {
  const float* stored = index.vector_of(label);
  return stored != nullptr && std::equal(vectors.begin() + static_cast<std::ptrdiff_t>(row * dim),
                                         vectors.begin() + static_cast<std::ptrdiff_t>((row + 1) * dim), stored);
}

}  // namespace

TEST_CASE("vector_of returns each label's vector across mode switches and compactions", "[index]") {
  const std::size_t dim = 16, n = 600;
  VectorIndex index(VectorIndexOptions{dim, 400});
  const auto vectors = random_unit_vectors(n, dim, 7);
  // One by one, so the switch to HNSW happens in the middle of the inserts.
  for (std::size_t i = 0; i < n; ++i) index.upsert(static_cast<std::int64_t>(i), vectors.data() + i * dim);
  REQUIRE(index.is_approximate());
  for (std::size_t i = 0; i < n; i += 7) CHECK(holds_vector(index, static_cast<std::int64_t>(i), vectors, i, dim));

  // A quarter tombstoned: compacted, still HNSW.
  for (std::int64_t label = 0; label < 200; ++label) REQUIRE(index.remove(label));
  REQUIRE(index.is_approximate());
  CHECK(index.vector_of(0) == nullptr);
  for (std::size_t i = 200; i < n; i += 7) CHECK(holds_vector(index, static_cast<std::int64_t>(i), vectors, i, dim));

  // Well below the limit: back to exact search.
  for (std::int64_t label = 200; label < 450; ++label) REQUIRE(index.remove(label));
  REQUIRE_FALSE(index.is_approximate());
  for (std::size_t i = 450; i < n; ++i) CHECK(holds_vector(index, static_cast<std::int64_t>(i), vectors, i, dim));

  // Added after the switch back, then a compaction in exact mode.
  index.upsert(1000, vectors.data());
  CHECK(holds_vector(index, 1000, vectors, 0, dim));
  for (std::int64_t label = 450; label < 530; ++label) REQUIRE(index.remove(label));
  REQUIRE_FALSE(index.is_approximate());
  CHECK(holds_vector(index, 1000, vectors, 0, dim));
  for (std::size_t i = 530; i < n; ++i) CHECK(holds_vector(index, static_cast<std::int64_t>(i), vectors, i, dim));
  const auto hits = index.search(vectors.data() + 599 * dim, 1);
  REQUIRE(hits.size() == 1);
  CHECK(hits[0].label == 599);
}

TEST_CASE("An exact index stores each vector once", "[index]") {
  const std::size_t dim = 64, n = 2000;
  VectorIndex index(VectorIndexOptions{dim, 100000});
  const auto vectors = random_unit_vectors(n, dim, 8);
  index.add_batch(labels_from(0, n), vectors.data());
  REQUIRE_FALSE(index.is_approximate());
  const std::size_t float_bytes = n * dim * sizeof(float);
  CHECK(index.memory_bytes() >= float_bytes);
  CHECK(index.memory_bytes() < float_bytes * 3 / 2);  // a second copy would make it 2x
}

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <random>

#include "index/int8_code_scorer.h"
#include "index/int8_rows.h"
#include "index/simd_flat_index.h"
#include "index/vector_index.h"
#include "index_test_support.h"
#include "runtime/work_pool.h"

using rapidqa::index::VectorIndex;
using rapidqa::index::VectorIndexOptions;
using rapidqa::testing::labels_from;
using rapidqa::testing::random_unit_vectors;

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
  // -1 marks a removed row inside the index: no label may be negative.
  CHECK_THROWS_AS(index.upsert(-1, vectors.data()), std::invalid_argument);
  CHECK(index.size() == 1);
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

TEST_CASE("An exact index stores each vector once in float, beside its int8 codes", "[index]") {
  const std::size_t dim = 64, n = 2000;
  VectorIndex index(VectorIndexOptions{dim, 100000});
  const auto vectors = random_unit_vectors(n, dim, 8);
  index.add_batch(labels_from(0, n), vectors.data());
  REQUIRE_FALSE(index.is_approximate());
  const std::size_t float_bytes = n * dim * sizeof(float);
  CHECK(index.memory_bytes() >= float_bytes);
  // Floats, plus a quarter for the int8 codes and 8 bytes a row for their
  // scale and sum; a second float copy would make it 2x.
  CHECK(index.memory_bytes() < float_bytes * 3 / 2);
}

namespace {

using rapidqa::index::Int8Rows;
using rapidqa::index::ScanKernel;

// The kernels this CPU can run, the portable one first.
std::vector<ScanKernel> runnable_kernels() {
  std::vector<ScanKernel> kernels;
  for (auto k : {ScanKernel::kPortable, ScanKernel::kAvx2, ScanKernel::kAvx512Vnni}) {
    if (k <= rapidqa::index::best_scan_kernel_for_cpu()) kernels.push_back(k);
  }
  return kernels;
}

// Restores the process's scan kernel when a test that forces one ends.
struct ScanKernelRestorer {
  ScanKernel saved = rapidqa::index::scan_kernel();
  ~ScanKernelRestorer() { rapidqa::index::set_scan_kernel(saved); }
};

}  // namespace

TEST_CASE("The graph's code scorer computes the integer reference exactly", "[index][scan]") {
  // Run again by index_on_avx2: the AVX2 scorer (the query's sign moved
  // onto the code) against the same integers. Dimensions below, at and
  // past whole 32- and 64-byte steps.
  for (const std::size_t dim : {7u, 32u, 63u, 64u, 100u, 384u}) {
    CAPTURE(dim);
    const auto vectors = random_unit_vectors(20, dim, 31);
    const auto query = random_unit_vectors(1, dim, 32);
    const rapidqa::index::Int8CodeScorer scorer(query.data(), dim);
    const rapidqa::index::QueryCode code = rapidqa::index::quantize_query(query.data(), dim, rapidqa::index::scan_kernel());
    for (std::size_t r = 0; r < 20; ++r) {
      // Int8FlatIP's layout: d codes, then the float scale.
      std::vector<std::uint8_t> stored(dim + sizeof(float));
      const float scale = rapidqa::index::quantize_row(vectors.data() + r * dim, dim,
                                                       reinterpret_cast<std::int8_t*>(stored.data()));
      std::memcpy(stored.data() + dim, &scale, sizeof scale);
      float expected = 0;
      if (rapidqa::index::scan_kernel() == ScanKernel::kPortable) {
        for (std::size_t j = 0; j < dim; ++j) expected += query[j] * static_cast<std::int8_t>(stored[j]);
        expected *= scale;
        CHECK(std::abs(scorer.score(stored.data()) - expected) < 1e-5f);
      } else {
        std::int32_t dot = 0;
        for (std::size_t j = 0; j < dim; ++j) {
          dot += (static_cast<std::int32_t>(code.bytes[j]) - code.offset) * static_cast<std::int8_t>(stored[j]);
        }
        expected = static_cast<float>(dot) * scale * code.scale;
        CHECK(scorer.score(stored.data()) == expected);
      }
      float exact = 0;
      for (std::size_t j = 0; j < dim; ++j) exact += query[j] * vectors[r * dim + j];
      CHECK(std::abs(scorer.score(stored.data()) - exact) < 0.05f);
    }
  }
}

TEST_CASE("Every scan kernel computes the integer reference exactly, for 1 to 4 queries", "[index][scan]") {
  // 70 dimensions (not a multiple of 4) and 101 rows (not a multiple of 16)
  // exercise the padding; one row of zeros and one of extreme values.
  const std::size_t dim = 70, n = 101;
  auto vectors = random_unit_vectors(n, dim, 21);
  std::fill(vectors.begin() + 5 * dim, vectors.begin() + 6 * dim, 0.0f);
  for (std::size_t j = 0; j < dim; ++j) vectors[7 * dim + j] = j % 2 ? 1e30f : -1e-30f;
  Int8Rows rows(dim);
  rows.append(60, vectors.data());  // two appends: the second fills a partly used block
  rows.append(n - 60, vectors.data() + 60 * dim);
  REQUIRE(rows.rows() == n);
  const auto queries = random_unit_vectors(4, dim, 22);
  for (const ScanKernel kernel : runnable_kernels()) {
    CAPTURE(rapidqa::index::scan_kernel_name(kernel));
    std::vector<rapidqa::index::QueryCode> codes;
    for (std::size_t q = 0; q < 4; ++q) codes.push_back(rapidqa::index::quantize_query(queries.data() + q * dim, dim, kernel));
    for (std::size_t nq = 1; nq <= 4; ++nq) {
      CAPTURE(nq);
      std::vector<const rapidqa::index::QueryCode*> code_of;
      for (std::size_t q = 0; q < nq; ++q) code_of.push_back(&codes[q]);
      const std::size_t stride = rows.blocks() * Int8Rows::kBlockRows;
      std::vector<float> scores(nq * stride, std::numeric_limits<float>::quiet_NaN());
      // Two calls (blocks 0-2, then the rest) as a chunked scan makes them.
      rows.score(code_of.data(), nq, 0, 3, scores.data(), stride, kernel);
      rows.score(code_of.data(), nq, 3, rows.blocks() - 3, scores.data() + 3 * Int8Rows::kBlockRows, stride, kernel);
      for (std::size_t q = 0; q < nq; ++q) {
        for (std::size_t r = 0; r < n; ++r) {
          const float expected =
              static_cast<float>(rows.reference_dot(codes[q], r)) * rows.row_scale(r) * codes[q].scale;
          REQUIRE(scores[q * stride + r] == expected);
          if (r != 7) {  // the extreme row is no unit vector
            float exact = 0;
            for (std::size_t j = 0; j < dim; ++j) exact += queries[q * dim + j] * vectors[r * dim + j];
            CHECK(std::abs(scores[q * stride + r] - exact) < 0.03f);
          }
        }
      }
    }
  }
}

TEST_CASE("Exact search returns the float scan's top k with exact scores on every kernel", "[index][scan]") {
  ScanKernelRestorer restore;
  const std::size_t dim = 384, n = 3000, k = 12, nq = 9;
  const auto vectors = random_unit_vectors(n, dim, 23);
  const auto queries = random_unit_vectors(nq, dim, 24);
  VectorIndex index(VectorIndexOptions{dim, 100000});
  index.add_batch(labels_from(0, n), vectors.data());
  REQUIRE_FALSE(index.is_approximate());
  for (const ScanKernel kernel : runnable_kernels()) {
    CAPTURE(rapidqa::index::scan_kernel_name(kernel));
    rapidqa::index::set_scan_kernel(kernel);
    // Nine queries at once: two full passes of four and one of one.
    const auto batch = index.search_batch(queries.data(), nq, k);
    REQUIRE(batch.size() == nq);
    for (std::size_t q = 0; q < nq; ++q) {
      std::vector<std::pair<float, std::int64_t>> truth;
      for (std::size_t r = 0; r < n; ++r) {
        truth.emplace_back(rapidqa::index::inner_product(queries.data() + q * dim, vectors.data() + r * dim, dim),
                           static_cast<std::int64_t>(r));
      }
      std::sort(truth.begin(), truth.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
      const auto single = index.search(queries.data() + q * dim, k);
      REQUIRE(batch[q].size() == k);
      REQUIRE(single.size() == k);
      for (std::size_t j = 0; j < k; ++j) {
        CHECK(batch[q][j].label == truth[j].second);
        CHECK(batch[q][j].similarity == truth[j].first);
        CHECK(single[j].label == batch[q][j].label);
      }
    }
  }
}

TEST_CASE("The scan kernel follows the CPU and the environment's cap", "[index][scan]") {
  const auto best = rapidqa::index::best_scan_kernel_for_cpu();
  CHECK(rapidqa::index::scan_kernel() <= best);
  // ctest runs this case again with ONEDNN_MAX_CPU_ISA=AVX2, the variable
  // that also pins the model runtime: the scan must then leave AVX-512.
  if (const char* isa = std::getenv("ONEDNN_MAX_CPU_ISA"); isa && std::string(isa) == "AVX2") {
    CHECK(rapidqa::index::scan_kernel() == std::min(best, ScanKernel::kAvx2));
  }
  ScanKernelRestorer restore;
  rapidqa::index::set_scan_kernel(ScanKernel::kAvx512Vnni);
  CHECK(rapidqa::index::scan_kernel() == best);  // clamped to what the CPU runs
  rapidqa::index::set_scan_kernel(ScanKernel::kPortable);
  CHECK(rapidqa::index::scan_kernel() == ScanKernel::kPortable);
}

TEST_CASE("Exact and graph searches skip removed rows and still return the live top k", "[index]") {
  const std::size_t dim = 96, n = 3000, k = 10;
  const auto vectors = random_unit_vectors(n, dim, 25);
  const auto queries = random_unit_vectors(6, dim, 26);
  for (const bool graph : {false, true}) {
    CAPTURE(graph);
    VectorIndex index(VectorIndexOptions{dim, graph ? std::size_t{100} : std::size_t{100000}, 32, 80, 256});
    index.add_batch(labels_from(0, n), vectors.data());
    // Every fifth label removed: too few for a compaction (a quarter), so
    // the searches must skip them on the way.
    for (std::size_t i = 0; i < n; i += 5) index.remove(static_cast<std::int64_t>(i));
    REQUIRE(index.is_approximate() == graph);
    const auto batch = index.search_batch(queries.data(), queries.size() / dim, k);
    for (std::size_t q = 0; q < batch.size(); ++q) {
      std::vector<std::pair<float, std::int64_t>> truth;
      for (std::size_t r = 0; r < n; ++r) {
        if (r % 5 == 0) continue;
        truth.emplace_back(rapidqa::index::inner_product(queries.data() + q * dim, vectors.data() + r * dim, dim),
                           static_cast<std::int64_t>(r));
      }
      std::sort(truth.begin(), truth.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
      REQUIRE(batch[q].size() == k);
      for (const auto& hit : batch[q]) CHECK(hit.label % 5 != 0);
      // Exact: the float scan's top k. Graph: its nearest at least.
      if (!graph) {
        for (std::size_t j = 0; j < k; ++j) CHECK(batch[q][j].label == truth[j].second);
      } else {
        CHECK(batch[q][0].label == truth[0].second);
      }
    }
  }
}

TEST_CASE("Batched searches spread over the search pool return what single searches return", "[index]") {
  const std::size_t dim = 64, n = 2500, k = 5, nq = 11;
  const auto vectors = random_unit_vectors(n, dim, 27);
  const auto queries = random_unit_vectors(nq, dim, 28);
  rapidqa::runtime::resize_search_pool(2);
  for (const bool graph : {false, true}) {
    CAPTURE(graph);
    VectorIndex index(VectorIndexOptions{dim, graph ? std::size_t{100} : std::size_t{100000}});
    index.add_batch(labels_from(0, n), vectors.data());
    const auto batch = index.search_batch(queries.data(), nq, k);
    REQUIRE(batch.size() == nq);
    for (std::size_t q = 0; q < nq; ++q) {
      const auto single = index.search(queries.data() + q * dim, k);
      REQUIRE(batch[q].size() == single.size());
      for (std::size_t j = 0; j < single.size(); ++j) {
        CHECK(batch[q][j].label == single[j].label);
        CHECK(batch[q][j].similarity == single[j].similarity);
      }
    }
  }
  rapidqa::runtime::resize_search_pool(1);
}

TEST_CASE("Rows quantize to the same codes on every kernel", "[index][scan]") {
  // The graph's int8 rows are made again from the floats at every load:
  // the AVX-512 path must give the scalar path's codes and scales exactly,
  // non-finite elements (coded 0) and zero vectors included.
  using rapidqa::index::ScanKernel;
  const ScanKernel before = rapidqa::index::scan_kernel();
  for (const std::size_t dim : {std::size_t{7}, std::size_t{16}, std::size_t{384}, std::size_t{390}}) {
    CAPTURE(dim);
    auto vectors = random_unit_vectors(64, dim, 41);
    for (std::size_t j = 0; j < dim; ++j) vectors[j] = 0.0f;  // a zero row
    vectors[dim + 3] = std::numeric_limits<float>::infinity();
    vectors[2 * dim + 1] = std::numeric_limits<float>::quiet_NaN();
    vectors[3 * dim + dim - 1] = -1000.0f;  // one element dominates the scale
    for (std::size_t j = 0; j < dim; ++j) vectors[4 * dim + j] = 1e-38f * static_cast<float>(j % 3);  // subnormal scale
    for (std::size_t row = 0; row < 64; ++row) {
      std::vector<std::int8_t> portable(dim);
      rapidqa::index::set_scan_kernel(ScanKernel::kPortable);
      const float portable_scale = rapidqa::index::quantize_row(vectors.data() + row * dim, dim, portable.data());
      for (const ScanKernel kernel : {ScanKernel::kAvx2, ScanKernel::kAvx512Vnni}) {
        CAPTURE(rapidqa::index::scan_kernel_name(kernel));
        std::vector<std::int8_t> codes(dim);
        rapidqa::index::set_scan_kernel(kernel);  // clamped to what this CPU runs
        const float scale = rapidqa::index::quantize_row(vectors.data() + row * dim, dim, codes.data());
        CHECK(portable_scale == scale);
        CHECK(portable == codes);
      }
      // Queries take the same symmetric quantizer (8-bit on AVX-512, as
      // the portable kernel scores them).
      const auto portable_query = rapidqa::index::quantize_query(vectors.data() + row * dim, dim, ScanKernel::kPortable);
      const auto best_query = rapidqa::index::quantize_query(vectors.data() + row * dim, dim, ScanKernel::kAvx512Vnni);
      if (rapidqa::index::best_scan_kernel_for_cpu() == ScanKernel::kAvx512Vnni) {
        CHECK(portable_query.scale == best_query.scale);
        CHECK(portable_query.bytes == best_query.bytes);
      }
      // The AVX2 scan's queries have 63 levels a side (two u8 x s8
      // products must fit 16 bits): its vector quantizer against the same
      // rule written out here.
      const float* query = vectors.data() + row * dim;
      float largest = 0;
      for (std::size_t j = 0; j < dim; ++j) {
        if (std::isfinite(query[j])) largest = std::max(largest, std::abs(query[j]));
      }
      const float scale = largest > 0 ? largest / 63.0f : 1.0f;
      std::vector<std::uint8_t> expected((dim + 63) / 64 * 64, 64);
      for (std::size_t j = 0; j < dim; ++j) {
        const float scaled = query[j] * (1.0f / scale);
        const int level = std::isfinite(scaled) ? static_cast<int>(std::nearbyint(scaled)) : 0;
        expected[j] = static_cast<std::uint8_t>(std::clamp(level, -63, 63) + 64);
      }
      const auto avx2_query = rapidqa::index::quantize_query(query, dim, ScanKernel::kAvx2);
      if (rapidqa::index::best_scan_kernel_for_cpu() >= ScanKernel::kAvx2) {
        CHECK(avx2_query.scale == scale);
        CHECK(avx2_query.bytes == expected);
      }
    }
  }
  rapidqa::index::set_scan_kernel(before);
}

// SimdFlatIP: FAISS's flat inner-product index, searched by rapidqa's own
// kernels. Debian's FAISS is built for baseline x86-64, where one
// 384-dimensional inner product costs about 200 ns, one vector at a time.
// Here each vector is also kept as int8 codes (Int8Rows: a quarter of the
// bytes, sixteen vectors scored per instruction, several queries per pass);
// the scan keeps the best few candidates by those approximate scores and
// re-ranks them with the float vectors, so the scores returned are exact
// float inner products. The candidates are chosen by the int8 scores, so a
// row whose float score lies within about 1e-3 of the k-th best could in
// principle be ranked out (recall@1 against a float scan measured 1.0 at
// 10k and 100k vectors: docs/search-performance.md). FAISS code that walks
// the index through its distance computer gets the AVX2 float kernel.
#pragma once

#include <faiss/IndexFlat.h>

#include <cstddef>
#include <cstdint>

#include "index/inner_product.h"
#include "index/int8_rows.h"

namespace rapidqa::index {

struct SimdFlatIP final : faiss::IndexFlatIP {
  explicit SimdFlatIP(idx_t d) : faiss::IndexFlatIP(d), int8_rows(static_cast<std::size_t>(d)) {}

  void add(idx_t n, const float* x) override;
  void reset() override;
  std::size_t remove_ids(const faiss::IDSelector& sel) override;

  // Top-k by inner product, exact scores; honours params->sel. Up to
  // Int8Rows::kMaxQueries queries share one pass over the codes.
  void search(idx_t n, const float* x, idx_t k, float* distances, idx_t* labels,
              const faiss::SearchParameters* params = nullptr) const override;

  faiss::FlatCodesDistanceComputer* get_FlatCodesDistanceComputer() const override;

  // Bytes of the float vectors and the int8 codes.
  std::size_t memory_bytes() const;

  Int8Rows int8_rows;  // the same rows as int8 codes, kept in step by add/reset/remove_ids
};

// Int8FlatIP: each vector stored as d signed bytes and one float scale
// (symmetric, max-abs per vector): a quarter of the memory of float32, so a
// graph walk that touches thousands of scattered vectors moves a quarter of
// the bytes. Scores are within about 1% of float32; VectorIndex uses it as
// HNSW storage and re-ranks the final candidates with the exact vectors.
struct Int8FlatIP final : faiss::IndexFlatCodes {
  explicit Int8FlatIP(idx_t d);

  void search(idx_t n, const float* x, idx_t k, float* distances, idx_t* labels,
              const faiss::SearchParameters* params = nullptr) const override;
  void sa_encode(idx_t n, const float* x, std::uint8_t* bytes) const override;
  void sa_decode(idx_t n, const std::uint8_t* bytes, float* x) const override;
  faiss::FlatCodesDistanceComputer* get_FlatCodesDistanceComputer() const override;
};

}  // namespace rapidqa::index

// SimdFlatIP: FAISS's flat inner-product index with the distance kernel
// compiled for AVX2 and FMA when the CPU has them. Debian's FAISS is built
// for baseline x86-64, where one 384-dimensional inner product costs about
// 200 ns; with AVX2 it costs a tenth of that. HNSW indexes built over this
// storage use the same kernel, for search and for construction, through
// FAISS's distance-computer interface.
#pragma once

#include <faiss/IndexFlat.h>

#include <cstddef>
#include <cstdint>

namespace rapidqa::index {

// Inner product of two float vectors of length d (AVX2/FMA when available).
float inner_product(const float* a, const float* b, std::size_t d);

struct SimdFlatIP final : faiss::IndexFlatIP {
  explicit SimdFlatIP(idx_t d) : faiss::IndexFlatIP(d) {}

  // Exact top-k by inner product; honours params->sel.
  void search(idx_t n, const float* x, idx_t k, float* distances, idx_t* labels,
              const faiss::SearchParameters* params = nullptr) const override;

  faiss::FlatCodesDistanceComputer* get_FlatCodesDistanceComputer() const override;
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

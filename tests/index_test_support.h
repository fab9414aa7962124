// Helpers shared by the index tests (index_test.cpp, index_snapshot_test.cpp).
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace rapidqa::testing {

// n random vectors of `dim` floats, each L2-normalised, row after row.
inline std::vector<float> random_unit_vectors(std::size_t n, std::size_t dim, unsigned seed) {
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

// first, first + 1, ..., first + n - 1.
inline std::vector<std::int64_t> labels_from(std::int64_t first, std::size_t n) {
  std::vector<std::int64_t> labels(n);
  for (std::size_t i = 0; i < n; ++i) labels[i] = first + static_cast<std::int64_t>(i);
  return labels;
}

}  // namespace rapidqa::testing

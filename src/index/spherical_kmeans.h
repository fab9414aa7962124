// Spherical k-means over unit-length vectors: the semantic cache groups its
// cached questions into intents with it. FAISS's Clustering does the
// iterations, rapidqa's own flat scan (SimdFlatIP) the assignment step, so
// callers above index/ never see FAISS.
#pragma once

#include <cstddef>
#include <vector>

namespace rapidqa::index {

struct KMeansOptions {
  int iterations = 25;
  int restarts = 8;  // k-means from one start is brittle on few points: keep the best of several
  int seed = 1234;   // fixed, so the same vectors give the same intents
};

// `vectors` holds n rows of d floats, each of unit length. Returns
// min(k, n) centroids, row after row (d floats each), also of unit length;
// empty when n or k is 0.
std::vector<float> spherical_kmeans(const float* vectors, std::size_t n, std::size_t d, std::size_t k,
                                    const KMeansOptions& options = {});

}  // namespace rapidqa::index

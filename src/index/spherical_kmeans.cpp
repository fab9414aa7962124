#include "index/spherical_kmeans.h"

#include <faiss/Clustering.h>

#include <algorithm>

#include "index/simd_flat_index.h"

namespace rapidqa::index {

std::vector<float> spherical_kmeans(const float* vectors, std::size_t n, std::size_t d, std::size_t k,
                                    const KMeansOptions& options) {
  k = std::min(k, n);
  if (k == 0 || d == 0) return {};
  faiss::ClusteringParameters params;
  params.spherical = true;  // the vectors are unit length: cluster by cosine
  params.niter = options.iterations;
  params.nredo = options.restarts;
  params.seed = options.seed;
  params.min_points_per_centroid = 1;
  params.verbose = false;
  faiss::Clustering clustering(static_cast<int>(d), static_cast<int>(k), params);
  SimdFlatIP assign(static_cast<faiss::Index::idx_t>(d));
  clustering.train(static_cast<faiss::Index::idx_t>(n), vectors, assign);
  return std::move(clustering.centroids);
}

}  // namespace rapidqa::index

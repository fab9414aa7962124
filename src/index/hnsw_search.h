// The search walk over a FAISS HNSW graph whose storage is Int8FlatIP,
// written for the int8 codes: the query is quantized once
// (Int8CodeScorer), every unvisited neighbour of an expanded node is
// gathered and its code prefetched before any is scored, and the visited
// marks and heaps are per-thread buffers reused across searches. FAISS
// 1.7.3's own walk scores one neighbour at a time through a virtual call,
// with no prefetching, and allocates a visited table per query; its graph,
// built by FAISS, is used unchanged.
//
// The walk is FAISS's: greedy descent through the upper levels, then a
// best-first search of level 0 keeping the `breadth` (efSearch) best.
//
// Thread safety: any number of searches may run concurrently over one
// graph that is not being changed (each thread has its own scratch).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace faiss {
struct IndexHNSW;
struct IDSelector;
}  // namespace faiss

namespace rapidqa::index {

struct GraphHit {
  float similarity;  // the int8 approximation of the inner product
  std::int64_t row;
};

// Up to `count` rows nearest to `query`, best first, among rows `sel`
// admits (all when null). `index` must store Int8FlatIP codes.
std::vector<GraphHit> search_int8_graph(const faiss::IndexHNSW& index, const float* query, std::size_t count,
                                        int breadth, const faiss::IDSelector* sel);

}  // namespace rapidqa::index

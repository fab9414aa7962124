// VectorIndex: inner-product search over L2-normalised vectors with stable
// int64 labels that can be removed and replaced. It wraps FAISS: an exact
// flat index while small, an HNSW graph once it holds more than
// exact_limit vectors (exact search over tens of thousands of vectors costs
// milliseconds; HNSW stays under one). The graph walks int8 copies of the
// vectors (a quarter of the memory traffic) and its candidates are
// re-ranked with the exact float vectors, so returned similarities are
// exact either way. Each vector is stored once in float: in FAISS's flat
// storage in exact mode, in a float copy beside the int8 graph storage in
// HNSW mode.
// Removed vectors become tombstones that searches skip; the index is rebuilt
// without them once they make up a quarter of it.
//
// save() and load() keep the whole index in one file (index_snapshot.h
// has the format), so a restart reads a built graph back instead of
// rebuilding it: a 100k-vector HNSW graph takes minutes to build and well
// under a second to load (BM_IndexLoad in benchmarks/).
//
// Thread safety: thread-compatible. search() is const and may run
// concurrently with other search() calls; everything else needs exclusive
// access (the owners hold a reader/writer lock).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "rapidqa/status.h"

namespace faiss { struct Index; struct HNSW; }

namespace rapidqa::detail { class MappedFile; }

namespace rapidqa::index {

struct VectorIndexOptions {
  std::size_t dimension = 0;
  std::size_t exact_limit = 2048;  // live vectors above which HNSW is used
  int hnsw_neighbors = 32;         // HNSW M: graph degree
  int hnsw_build_breadth = 80;     // efConstruction
  int hnsw_search_breadth = 128;   // efSearch
};

struct Neighbor {
  std::int64_t label;
  float similarity;  // inner product (cosine for normalised vectors)
};

class VectorIndex {
 public:
  explicit VectorIndex(VectorIndexOptions options);
  ~VectorIndex();
  VectorIndex(VectorIndex&&) noexcept;
  VectorIndex& operator=(VectorIndex&&) noexcept;

  // Adds or replaces the vector stored under label (non-negative: a
  // negative one throws std::invalid_argument, as add_batch does).
  void upsert(std::int64_t label, const float* vector);
  // Adds many at once (labels must be new and distinct); builds the index
  // in one pass, which is much faster than one upsert per vector.
  void add_batch(const std::vector<std::int64_t>& labels, const float* vectors);
  // Returns whether label was present.
  bool remove(std::int64_t label);
  void clear();

  // Up to k nearest live labels, most similar first. breadth: this
  // search's efSearch when positive (an HNSW index; an exact one ignores
  // it), else the index's.
  std::vector<Neighbor> search(const float* query, std::size_t k, int breadth = 0) const;
  // Searches n queries at once; results[i] belongs to query i.
  std::vector<std::vector<Neighbor>> search_batch(const float* queries, std::size_t n, std::size_t k,
                                                  int breadth = 0) const;

  std::size_t size() const { return label_to_row_.size(); }
  bool contains(std::int64_t label) const { return label_to_row_.count(label) != 0; }
  // The row holding label (-1 when absent), and the rows removed ones
  // included: for checks over what a snapshot lists.
  std::int64_t row_of(std::int64_t label) const {
    const auto it = label_to_row_.find(label);
    return it == label_to_row_.end() ? -1 : it->second;
  }
  std::size_t row_count() const { return row_label_.size(); }
  bool is_approximate() const { return approximate_; }
  std::size_t dimension() const { return options_.dimension; }
  const VectorIndexOptions& options() const { return options_; }
  // The stored copy of a label's vector (nullptr when absent). Owned by the
  // index; valid until the next non-const call.
  const float* vector_of(std::int64_t label) const;
  // Bytes held by the index: vectors, graph, label maps (allocated
  // capacity, not only what is in use).
  std::size_t memory_bytes() const;
  // efSearch of later searches of an HNSW index (an exact one ignores it):
  // wider is slower and misses the true nearest less often. Lets one
  // graph be measured at several breadths without rebuilding it.
  void set_search_breadth(int breadth);
  // The HNSW graph (nullptr in exact mode), rows as labels: for benchmarks
  // that walk this very graph with FAISS's own search beside rapidqa's.
  const faiss::HNSW* graph() const;

  // Writes the whole index to `path`: options, mode, labels, removed rows,
  // vectors and the HNSW graph. The bytes go to "<path>.partial", which is
  // synced and renamed over `path` only when complete, so `path` always
  // holds a whole snapshot (the previous one until the rename). kIoError when
  // the file cannot be written; no partial file is left behind. Runs
  // concurrently with search() (it only reads); one save per path at a time.
  [[nodiscard]] Status save(const std::string& path) const;

  // The index saved at `path`, answering every search as the saved one did
  // and open to further changes. Refused, with nothing half-loaded:
  //   kNotFound           no file at `path` (a first start: build the index)
  //   kFailedPrecondition the file is another format version, or was saved
  //                       with other options than `expected` (dimension,
  //                       exact_limit, hnsw_neighbors, hnsw_build_breadth):
  //                       rebuild from the vectors' source
  //   kDataLoss           not a snapshot, truncated, or damaged (checksum
  //                       mismatch, inconsistent contents): rebuild
  //   kIoError            the file exists but cannot be read
  //   kInvalidArgument    `expected` itself is unusable (dimension 0, or
  //                       for a graph hnsw_neighbors outside 2..65536)
  //   kResourceExhausted  not enough memory for it
  // expected.hnsw_search_breadth applies to later searches whatever the
  // file says (it shapes no saved state). The file's contents are checked
  // before use (sizes against the file's size, labels, graph links), so a
  // hostile file is refused, never followed out of bounds.
  [[nodiscard]] static Result<VectorIndex> load(const std::string& path, const VectorIndexOptions& expected);

 private:
  void rebuild(bool approximate);
  void maybe_compact_or_grow();
  std::unique_ptr<faiss::Index> make_index(bool approximate) const;
  // The float vector of a row, wherever this mode keeps it.
  const float* row_vector(std::int64_t row) const;
  void drop_mapping();

  VectorIndexOptions options_;
  std::unique_ptr<faiss::Index> index_;   // rows are labelled 0..rows-1
  // HNSW mode only: row-major float copy of every row, for re-ranking and
  // rebuilds (the graph stores int8). Empty in exact mode, where the flat
  // index's own storage holds the floats. After load(), the first
  // mapped_row_count_ rows are read where the snapshot file holds them
  // (mapped, not copied: gigabytes at a million entries) and vectors_ holds
  // the rows added since; a rebuild copies them all back in here. The file
  // is replaced by rename, never rewritten, so the mapping stays valid.
  std::vector<float> vectors_;
  std::shared_ptr<const detail::MappedFile> mapped_file_;
  const float* mapped_rows_ = nullptr;
  std::size_t mapped_row_count_ = 0;
  bool approximate_ = false;
  std::vector<std::int64_t> row_label_;   // row -> label, -1 for a tombstone
  std::unordered_map<std::int64_t, std::int64_t> label_to_row_;
  std::size_t tombstones_ = 0;
};

}  // namespace rapidqa::index

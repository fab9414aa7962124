#include "index/vector_index.h"

#include <faiss/IndexFlat.h>
#include <faiss/IndexHNSW.h>
#include <faiss/impl/IDSelector.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "common/guard.h"
#include "common/mapped_file.h"
#include "index/hnsw_search.h"
#include "index/index_snapshot.h"
#include "index/int8_rows.h"
#include "index/simd_flat_index.h"
#include "runtime/work_pool.h"

namespace rapidqa::index {
namespace {

// Lets FAISS skip tombstoned rows during the search itself, so a query
// still gets k live results however many rows were removed.
struct LiveRows final : faiss::IDSelector {
  explicit LiveRows(const std::vector<std::int64_t>& row_label) : row_label(row_label) {}
  bool is_member(faiss::Index::idx_t row) const override {
    return row >= 0 && static_cast<std::size_t>(row) < row_label.size() && row_label[row] >= 0;
  }
  const std::vector<std::int64_t>& row_label;
};

}  // namespace

VectorIndex::VectorIndex(VectorIndexOptions options) : options_(options) {
  if (options_.dimension == 0) throw std::invalid_argument("VectorIndex: dimension must be positive");
  index_ = make_index(false);
}

VectorIndex::~VectorIndex() = default;
VectorIndex::VectorIndex(VectorIndex&&) noexcept = default;
VectorIndex& VectorIndex::operator=(VectorIndex&&) noexcept = default;

std::unique_ptr<faiss::Index> VectorIndex::make_index(bool approximate) const {
  const auto d = static_cast<faiss::Index::idx_t>(options_.dimension);
  if (!approximate) return std::make_unique<SimdFlatIP>(d);
  // HNSW over int8 storage (see the header comment), searched by
  // search_int8_graph.
  auto hnsw = std::make_unique<faiss::IndexHNSW>(new Int8FlatIP(d), options_.hnsw_neighbors);
  hnsw->own_fields = true;
  hnsw->is_trained = true;
  hnsw->hnsw.efConstruction = options_.hnsw_build_breadth;
  hnsw->hnsw.efSearch = options_.hnsw_search_breadth;
  return hnsw;
}

const faiss::HNSW* VectorIndex::graph() const {
  const auto* hnsw = approximate_ ? dynamic_cast<const faiss::IndexHNSW*>(index_.get()) : nullptr;
  return hnsw ? &hnsw->hnsw : nullptr;
}

void VectorIndex::upsert(std::int64_t label, const float* vector) {
  // -1 marks a removed row: a negative label would read as one.
  if (label < 0) throw std::invalid_argument("VectorIndex: labels must be non-negative");
  remove(label);
  const auto row = static_cast<std::int64_t>(row_label_.size());
  row_label_.push_back(label);
  label_to_row_[label] = row;
  if (approximate_) vectors_.insert(vectors_.end(), vector, vector + options_.dimension);
  index_->add(1, vector);
  maybe_compact_or_grow();
}

void VectorIndex::add_batch(const std::vector<std::int64_t>& labels, const float* vectors) {
  if (labels.empty()) return;
  for (auto label : labels) {
    if (label < 0) throw std::invalid_argument("VectorIndex: labels must be non-negative");
    if (contains(label)) remove(label);
  }
  const auto first_row = static_cast<std::int64_t>(row_label_.size());
  for (std::size_t i = 0; i < labels.size(); ++i) {
    row_label_.push_back(labels[i]);
    label_to_row_[labels[i]] = first_row + static_cast<std::int64_t>(i);
  }
  if (approximate_) vectors_.insert(vectors_.end(), vectors, vectors + labels.size() * options_.dimension);
  index_->add(static_cast<faiss::Index::idx_t>(labels.size()), vectors);
  maybe_compact_or_grow();
}

bool VectorIndex::remove(std::int64_t label) {
  const auto it = label_to_row_.find(label);
  if (it == label_to_row_.end()) return false;
  row_label_[static_cast<std::size_t>(it->second)] = -1;
  label_to_row_.erase(it);
  ++tombstones_;
  maybe_compact_or_grow();
  return true;
}

void VectorIndex::clear() {
  vectors_ = {};
  drop_mapping();
  row_label_.clear();
  label_to_row_.clear();
  tombstones_ = 0;
  approximate_ = false;
  index_ = make_index(false);
}

void VectorIndex::maybe_compact_or_grow() {
  const bool want_approximate = label_to_row_.size() > options_.exact_limit;
  const bool too_many_tombstones = tombstones_ > 64 && tombstones_ * 4 > row_label_.size();
  // Switch back to exact search only well below the limit, so an index
  // hovering around it does not rebuild on every change.
  const bool shrink = approximate_ && label_to_row_.size() * 2 < options_.exact_limit;
  if ((want_approximate && !approximate_) || shrink || too_many_tombstones) {
    rebuild(shrink ? false : (approximate_ || want_approximate));
  }
}

void VectorIndex::rebuild(bool approximate) {
  std::vector<float> live_vectors;
  std::vector<std::int64_t> live_labels;
  live_vectors.reserve(label_to_row_.size() * options_.dimension);
  live_labels.reserve(label_to_row_.size());
  for (std::size_t row = 0; row < row_label_.size(); ++row) {
    if (row_label_[row] < 0) continue;
    live_labels.push_back(row_label_[row]);
    const float* v = row_vector(static_cast<std::int64_t>(row));
    live_vectors.insert(live_vectors.end(), v, v + options_.dimension);
  }
  auto fresh = make_index(approximate);
  if (!live_labels.empty()) fresh->add(static_cast<faiss::Index::idx_t>(live_labels.size()), live_vectors.data());
  index_ = std::move(fresh);
  approximate_ = approximate;
  // Exact mode reads the flat index's own copy: keeping ours too would
  // double the memory.
  vectors_ = approximate ? std::move(live_vectors) : std::vector<float>();
  drop_mapping();
  row_label_ = std::move(live_labels);
  label_to_row_.clear();
  for (std::size_t row = 0; row < row_label_.size(); ++row) label_to_row_[row_label_[row]] = static_cast<std::int64_t>(row);
  tombstones_ = 0;
}

std::vector<Neighbor> VectorIndex::search(const float* query, std::size_t k, int breadth) const {
  auto batch = search_batch(query, 1, k, breadth);
  return std::move(batch.front());
}

std::vector<std::vector<Neighbor>> VectorIndex::search_batch(const float* queries, std::size_t n, std::size_t k,
                                                             int breadth) const {
  if (breadth <= 0) breadth = options_.hnsw_search_breadth;
  std::vector<std::vector<Neighbor>> results(n);
  if (n == 0 || k == 0 || label_to_row_.empty()) return results;
  k = std::min(k, label_to_row_.size());
  // The graph ranks by int8 scores: fetch a few more candidates than asked
  // and let the exact scores decide the final order.
  const std::size_t fetch = approximate_ ? std::min(label_to_row_.size(), std::max(2 * k, k + 16)) : k;
  std::vector<float> similarities(approximate_ ? 0 : n * fetch);  // exact mode's scores
  std::vector<faiss::Index::idx_t> rows(n * fetch);
  LiveRows live(row_label_);
  faiss::IDSelector* sel = tombstones_ > 0 ? &live : nullptr;  // FAISS 1.7.3 takes it non-const
  // Queries in groups of the scan's width (one pass over the codes serves a
  // group), the groups spread over the search pool.
  constexpr std::size_t kGroup = Int8Rows::kMaxQueries;
  const auto groups = static_cast<std::int64_t>((n + kGroup - 1) / kGroup);
  const auto search_group = [&](std::int64_t g) {
    const std::size_t first = static_cast<std::size_t>(g) * kGroup, count = std::min(kGroup, n - first);
    const float* group_queries = queries + first * options_.dimension;
    if (!approximate_) {
      faiss::SearchParameters params;
      params.sel = sel;
      index_->search(static_cast<faiss::Index::idx_t>(count), group_queries, static_cast<faiss::Index::idx_t>(fetch),
                     similarities.data() + first * fetch, rows.data() + first * fetch, &params);
      return;
    }
    const auto& graph = static_cast<const faiss::IndexHNSW&>(*index_);
    for (std::size_t q = first; q < first + count; ++q) {
      const auto hits =
          search_int8_graph(graph, queries + q * options_.dimension, fetch, breadth, sel);
      // Only the rows: their exact similarities are computed below.
      for (std::size_t j = 0; j < fetch; ++j) rows[q * fetch + j] = j < hits.size() ? hits[j].row : -1;
    }
  };
  // One group (every single-query search) stays off the pool: no pool
  // lock and no OpenMP setting on the hot path.
  if (groups == 1) {
    search_group(0);
  } else {
    runtime::search_pool()->run(groups, search_group);
  }
  for (std::size_t q = 0; q < n; ++q) {
    auto& out = results[q];
    out.reserve(fetch);
    for (std::size_t j = 0; j < fetch; ++j) {
      const faiss::Index::idx_t row = rows[q * fetch + j];
      if (row < 0 || static_cast<std::size_t>(row) >= row_label_.size()) continue;
      const std::int64_t label = row_label_[static_cast<std::size_t>(row)];
      if (label < 0) continue;
      const float similarity = approximate_
          ? inner_product(queries + q * options_.dimension, row_vector(row), options_.dimension)
          : similarities[q * fetch + j];
      // NaN (a non-finite vector) would break the sort's ordering below.
      out.push_back({label, std::isnan(similarity) ? -std::numeric_limits<float>::infinity() : similarity});
    }
    if (approximate_) {
      std::sort(out.begin(), out.end(), [](const Neighbor& a, const Neighbor& b) { return a.similarity > b.similarity; });
    }
    if (out.size() > k) out.resize(k);
  }
  return results;
}

void VectorIndex::set_search_breadth(int breadth) {
  options_.hnsw_search_breadth = breadth;
  // Kept in FAISS's field too, so the graph reads as it is searched.
  if (approximate_) static_cast<faiss::IndexHNSW&>(*index_).hnsw.efSearch = breadth;
}

Status VectorIndex::save(const std::string& path) const {
  return detail::guarded("VectorIndex::save", [&]() -> Status {
    IndexSnapshotView view;
    view.options = options_;
    view.approximate = approximate_;
    view.row_labels = &row_label_;
    const std::size_t rows = row_label_.size();
    view.first_rows = approximate_ ? std::min(mapped_row_count_, rows) : 0;
    view.first_vectors = mapped_rows_;
    view.vectors = view.first_rows < rows ? row_vector(static_cast<std::int64_t>(view.first_rows)) : nullptr;
    if (approximate_) view.graph = &static_cast<const faiss::IndexHNSW&>(*index_).hnsw;
    return write_index_snapshot(path, view);
  });
}

Result<VectorIndex> VectorIndex::load(const std::string& path, const VectorIndexOptions& expected) {
  return detail::guarded("VectorIndex::load", [&]() -> Result<VectorIndex> {
    auto read = read_index_snapshot(path, expected);
    if (!read.is_ok()) return read.status();
    IndexSnapshotContents& saved = read.value();
    VectorIndex index(saved.options);
    const auto rows = static_cast<faiss::Index::idx_t>(saved.row_labels.size());
    if (!saved.approximate) {
      // The flat index keeps the floats and derives its int8 rows from them.
      if (rows > 0) index.index_->add(rows, saved.vectors);
    } else {
      index.index_ = index.make_index(true);
      auto& hnsw = static_cast<faiss::IndexHNSW&>(*index.index_);
      // The int8 codes are the storage's encoding of the floats: recomputing
      // them costs about what reading them would.
      auto& codes = static_cast<faiss::IndexFlatCodes&>(*hnsw.storage).codes;
      codes.reserve(saved.row_labels.size() * hnsw.storage->sa_code_size());
      prefer_huge_pages(codes.data(), codes.capacity());
      if (rows > 0) hnsw.storage->add(rows, saved.vectors);
      hnsw.ntotal = rows;
      faiss::HNSW& graph = hnsw.hnsw;
      graph.levels = std::move(saved.levels);
      graph.offsets = std::move(saved.offsets);
      graph.neighbors = std::move(saved.neighbors);
      graph.entry_point = saved.entry_point;
      graph.max_level = saved.max_level;
      graph.rng.mt = saved.level_generator;
      index.mapped_file_ = std::move(saved.file);
      index.mapped_rows_ = saved.vectors;
      index.mapped_row_count_ = saved.row_labels.size();
      index.approximate_ = true;
    }
    index.row_label_ = std::move(saved.row_labels);
    index.label_to_row_ = std::move(saved.label_to_row);
    index.tombstones_ = saved.tombstones;
    return index;
  });
}

void VectorIndex::drop_mapping() {
  mapped_file_.reset();
  mapped_rows_ = nullptr;
  mapped_row_count_ = 0;
}

const float* VectorIndex::row_vector(std::int64_t row) const {
  if (!approximate_) {
    return static_cast<const SimdFlatIP&>(*index_).get_xb() + static_cast<std::size_t>(row) * options_.dimension;
  }
  const auto r = static_cast<std::size_t>(row);
  if (r < mapped_row_count_) return mapped_rows_ + r * options_.dimension;
  return vectors_.data() + (r - mapped_row_count_) * options_.dimension;
}

const float* VectorIndex::vector_of(std::int64_t label) const {
  const auto it = label_to_row_.find(label);
  return it == label_to_row_.end() ? nullptr : row_vector(it->second);
}

std::size_t VectorIndex::memory_bytes() const {
  // A libstdc++ hash node (next pointer, key, value: 24 bytes) takes a
  // 32-byte malloc chunk.
  constexpr std::size_t kLabelNodeBytes = 32;
  // The mapped rows count too: they are resident once read (as page
  // cache, shared and reclaimable).
  std::size_t bytes = row_label_.capacity() * sizeof(std::int64_t) +
                      (vectors_.capacity() + mapped_row_count_ * options_.dimension) * sizeof(float) +
                      label_to_row_.size() * kLabelNodeBytes + label_to_row_.bucket_count() * sizeof(void*);
  if (approximate_) {
    const auto& hnsw = static_cast<const faiss::IndexHNSW&>(*index_);
    const auto& graph = hnsw.hnsw;
    bytes += static_cast<const faiss::IndexFlatCodes&>(*hnsw.storage).codes.capacity() +
             graph.neighbors.capacity() * sizeof(faiss::HNSW::storage_idx_t) +
             graph.offsets.capacity() * sizeof(std::size_t) + graph.levels.capacity() * sizeof(int);
  } else {
    bytes += static_cast<const SimdFlatIP&>(*index_).memory_bytes();
  }
  return bytes;
}

}  // namespace rapidqa::index

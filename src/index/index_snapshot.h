// The VectorIndex snapshot file (VectorIndex::save / VectorIndex::load): what
// an index holds, written so that a restart reads its HNSW graph back in
// seconds instead of rebuilding it for minutes.
//
// Layout, every number little-endian:
//   header (32 bytes): magic "RQAVINDX", format version (u32, 2), zero (u32),
//     body length in bytes (u64), the body's checksum (u64): XXH64 (seed 0)
//     of the XXH64s of its 16 MiB chunks in order (the last one shorter),
//     so a reader verifies gigabytes on every core at once; format 1, still
//     read, held the XXH64 of the whole body
//   body:
//     options: dimension (u64), exact_limit (u64), hnsw_neighbors,
//       hnsw_build_breadth, hnsw_search_breadth (i32 each), mode (u32: 0 exact,
//       1 HNSW)
//     rows (u64); then each row's label (i64, -1 for a removed row)
//     each row's float vector (rows x dimension f32), tombstones included;
//       at offset 72 + 8 x rows, so aligned for floats in a mapping
//     HNSW mode only, FAISS's graph as faiss::HNSW holds it:
//       entry point (i32), top level (i32), each row's level count (i32:
//       FAISS's `levels`, the node's top level + 1), the neighbour count (u64)
//       and the neighbour table (i32 each, -1 for an empty slot), then the
//       level generator's state (u64 length, std::mt19937 in its text form)
//
// Why not faiss::write_index: FAISS 1.7.3 cannot write a graph over our int8
// storage (Int8FlatIP; it throws "don't know how to serialize this type of
// index"), and its reader trusts the sizes in a file (up to 2^40 elements)
// and never checks neighbour ids, which the graph walk would follow out of
// bounds. The int8 codes are not stored: they are recomputed from the float
// vectors, which is as fast as reading them and leaves nothing to disagree.
//
// The checksum catches damage (a torn or truncated copy, a flipped bit), not
// an attacker, who can recompute it. So the reader also bounds every count by
// the bytes left before it allocates, and checks everything the search and
// later inserts rely on: labels distinct, each neighbour id a row, each
// neighbour list packed (ids, then empty slots: FAISS's inserts read a
// hole as row -1), each upper-level neighbour present on that level, the
// entry point on the top level. A file that fails any check is refused
// whole.
//
// Thread safety: free functions; writing reads the borrowed index (callers
// keep it unchanged meanwhile).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "index/vector_index.h"
#include "rapidqa/status.h"

namespace faiss { struct HNSW; }
namespace rapidqa::detail { class MappedFile; }

namespace rapidqa::index {

inline constexpr std::uint32_t kIndexSnapshotVersion = 2;
inline constexpr std::size_t kChecksumChunkBytes = std::size_t{16} << 20;

// A body's checksum as format 2 records it (see the layout above), its
// chunks hashed on up to `threads` threads (0: one per core).
std::uint64_t snapshot_body_checksum(const std::uint8_t* body, std::size_t size, unsigned threads = 0);

// An index's state as save() hands it to the writer, borrowed.
struct IndexSnapshotView {
  VectorIndexOptions options;
  bool approximate = false;
  const std::vector<std::int64_t>* row_labels = nullptr;  // -1 for a removed row
  // The rows' vectors, row_labels->size() x dimension: the first
  // first_rows from first_vectors, the rest from vectors.
  std::size_t first_rows = 0;
  const float* first_vectors = nullptr;
  const float* vectors = nullptr;
  const faiss::HNSW* graph = nullptr;                      // approximate only
};

Status write_index_snapshot(const std::string& path, const IndexSnapshotView& view);

// A snapshot file named without reading its body: its size and the body
// checksum its header records (which reading it verifies), so a file
// saved beside it can say which save it belongs to. kNotFound without the
// file; kDataLoss when it is shorter than a header or not a snapshot.
struct IndexSnapshotIdentity {
  std::uint64_t file_size = 0;
  std::uint64_t body_checksum = 0;
  std::uint32_t format_version = 0;  // below kIndexSnapshotVersion: worth saving again
};
Result<IndexSnapshotIdentity> index_snapshot_identity(const std::string& path);

// A snapshot read back and checked, ready to be installed in an index.
struct IndexSnapshotContents {
  VectorIndexOptions options;  // the file's, with `expected`'s search breadth
  bool approximate = false;
  std::vector<std::int64_t> row_labels;
  std::unordered_map<std::int64_t, std::int64_t> label_to_row;
  std::size_t tombstones = 0;
  // The rows' float vectors, row_labels.size() x dimension, where the
  // mapped file holds them (kept alive by `file`).
  std::shared_ptr<const detail::MappedFile> file;
  const float* vectors = nullptr;
  // HNSW mode only: the graph in faiss::HNSW's own fields.
  std::int32_t entry_point = -1;
  std::int32_t max_level = -1;
  std::vector<int> levels;
  std::vector<std::size_t> offsets;  // recomputed from levels
  std::vector<int> neighbors;
  std::mt19937 level_generator;
};

// Asks the kernel to back the whole 2 MiB pages inside [data, data + bytes)
// with transparent huge pages, before they are first written. Filling a
// fresh allocation of hundreds of megabytes is dominated by page faults
// (one per 4 KiB); with huge pages (Linux's default THP mode "madvise" gives
// them only where asked) a 100k-vector load takes about half the time, and
// later random reads of the vectors miss the TLB less. Advice only.
void prefer_huge_pages(void* data, std::size_t bytes);

// kNotFound: no file. kIoError: it cannot be read. kDataLoss: not a
// snapshot, truncated, damaged, or inconsistent. kFailedPrecondition: another
// format version, or options other than `expected` (dimension, exact_limit,
// hnsw_neighbors, hnsw_build_breadth; the search breadth only steers later
// searches and is taken from `expected`). kInvalidArgument: `expected` has
// dimension 0, or the file holds a graph and hnsw_neighbors is outside
// 2..65536 (FAISS's level layout for such an M is no graph).
Result<IndexSnapshotContents> read_index_snapshot(const std::string& path, const VectorIndexOptions& expected);

}  // namespace rapidqa::index

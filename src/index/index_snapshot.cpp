#include "index/index_snapshot.h"

#include <faiss/impl/HNSW.h>

#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <sstream>
#include <type_traits>

#include <fmt/format.h>

#include "common/atomic_file.h"
#include "common/checksum.h"
#include "common/mapped_file.h"
#include "common/parallel_parts.h"

namespace rapidqa::index {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "the snapshot stores numbers little-endian by copying memory; a big-endian port must swap them");
static_assert(sizeof(faiss::HNSW::storage_idx_t) == sizeof(std::int32_t), "neighbour ids are stored as i32");

constexpr char kMagic[8] = {'R', 'Q', 'A', 'V', 'I', 'N', 'D', 'X'};
constexpr std::size_t kHeaderBytes = 32;
constexpr std::uint32_t kExactMode = 0, kHnswMode = 1;
// std::mt19937's text form is 625 numbers of at most 10 digits: a longer
// one is not a generator state.
constexpr std::uint64_t kMaxGeneratorStateBytes = 16 * 1024;
// HNSW's per-level neighbour counts are ints built from M: bound M so they
// cannot overflow (the index's own defaults use 32).
constexpr int kMaxNeighbors = 1 << 16;

}  // namespace

void prefer_huge_pages(void* data, std::size_t bytes) {
#ifdef MADV_HUGEPAGE
  constexpr std::uintptr_t kHugePage = std::uintptr_t{2} << 20;
  const auto start = reinterpret_cast<std::uintptr_t>(data);
  const std::uintptr_t first = (start + kHugePage - 1) & ~(kHugePage - 1);
  const std::uintptr_t last = (start + bytes) & ~(kHugePage - 1);
  // Advice only: where the kernel has none to give, small pages serve.
  if (last > first) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE);
#else
  (void)data, (void)bytes;
#endif
}

namespace {

// The body's bytes go through here: to the file and into the checksum of
// the chunk they fall in.
class BodyWriter {
 public:
  explicit BodyWriter(detail::AtomicFileWriter& file) : file_(file) {}

  Status bytes(const void* data, std::size_t size) {
    const auto* p = static_cast<const std::uint8_t*>(data);
    for (std::size_t left = size; left > 0;) {
      const std::size_t take = std::min(left, kChecksumChunkBytes - in_chunk_);
      chunk_.update(p, take);
      in_chunk_ += take, p += take, left -= take;
      if (in_chunk_ == kChecksumChunkBytes) end_chunk();
    }
    size_ += size;
    return file_.append(data, size);
  }
  template <typename T>
  Status scalar(T value) {
    static_assert(std::is_arithmetic_v<T>);
    return bytes(&value, sizeof value);
  }
  template <typename T>
  Status array(const T* data, std::size_t count) {
    return bytes(data, count * sizeof(T));
  }

  std::uint64_t size() const { return size_; }
  std::uint64_t checksum() {
    if (in_chunk_ > 0) end_chunk();
    return detail::xxh64(chunk_sums_.data(), chunk_sums_.size() * sizeof(std::uint64_t));
  }

 private:
  void end_chunk() {
    chunk_sums_.push_back(chunk_.digest());
    chunk_ = detail::Xxh64();
    in_chunk_ = 0;
  }

  detail::AtomicFileWriter& file_;
  detail::Xxh64 chunk_;
  std::size_t in_chunk_ = 0;
  std::vector<std::uint64_t> chunk_sums_;
  std::uint64_t size_ = 0;
};

// Reads the body front to back and never past its end: each count read
// from the file is checked against the bytes left before anything is
// allocated for it.
class BodyReader {
 public:
  BodyReader(const std::uint8_t* data, std::size_t size) : p_(data), left_(size) {}

  template <typename T>
  bool scalar(T& value) {
    static_assert(std::is_arithmetic_v<T>);
    if (left_ < sizeof value) return false;
    std::memcpy(&value, p_, sizeof value);
    p_ += sizeof value, left_ -= sizeof value;
    return true;
  }
  // `count` elements into `out`; false (nothing allocated) when the body
  // holds fewer.
  template <typename T>
  bool array(std::vector<T>& out, std::uint64_t count) {
    if (count > left_ / sizeof(T)) return false;
    out.clear();
    out.reserve(static_cast<std::size_t>(count));
    prefer_huge_pages(out.data(), static_cast<std::size_t>(count) * sizeof(T));
    const std::size_t bytes = static_cast<std::size_t>(count) * sizeof(T);
    // Copied in as the elements are made: no zero fill first (gigabytes
    // at a million entries, on pages the kernel has just zeroed anyway).
    const auto* first = reinterpret_cast<const T*>(p_);
    if (reinterpret_cast<std::uintptr_t>(p_) % alignof(T) == 0) {
      out.insert(out.end(), first, first + count);
    } else {
      out.resize(static_cast<std::size_t>(count));
      if (bytes > 0) std::memcpy(out.data(), p_, bytes);
    }
    p_ += bytes, left_ -= bytes;
    return true;
  }
  // `count` elements of T where they lie, or null when the body holds
  // fewer or they are not aligned for T.
  template <typename T>
  const T* view(std::uint64_t count) {
    if (count > left_ / sizeof(T) || reinterpret_cast<std::uintptr_t>(p_) % alignof(T) != 0) return nullptr;
    const auto* first = reinterpret_cast<const T*>(p_);
    p_ += count * sizeof(T), left_ -= count * sizeof(T);
    return first;
  }
  bool text(std::string& out, std::uint64_t size) {
    if (size > left_) return false;
    out.assign(reinterpret_cast<const char*>(p_), static_cast<std::size_t>(size));
    p_ += size, left_ -= size;
    return true;
  }
  std::size_t left() const { return left_; }

 private:
  const std::uint8_t* p_;
  std::size_t left_;
};

template <typename T>
void put_header_field(std::uint8_t* header, std::size_t offset, T value) {
  std::memcpy(header + offset, &value, sizeof value);
}

template <typename T>
T header_field(const std::uint8_t* header, std::size_t offset) {
  T value;
  std::memcpy(&value, header + offset, sizeof value);
  return value;
}

Status write_body(BodyWriter& out, const IndexSnapshotView& view) {
  const VectorIndexOptions& o = view.options;
  const std::vector<std::int64_t>& labels = *view.row_labels;
  Status s = out.scalar<std::uint64_t>(o.dimension);
  if (s.is_ok()) s = out.scalar<std::uint64_t>(o.exact_limit);
  if (s.is_ok()) s = out.scalar<std::int32_t>(o.hnsw_neighbors);
  if (s.is_ok()) s = out.scalar<std::int32_t>(o.hnsw_build_breadth);
  if (s.is_ok()) s = out.scalar<std::int32_t>(o.hnsw_search_breadth);
  if (s.is_ok()) s = out.scalar<std::uint32_t>(view.approximate ? kHnswMode : kExactMode);
  if (s.is_ok()) s = out.scalar<std::uint64_t>(labels.size());
  if (s.is_ok()) s = out.array(labels.data(), labels.size());
  if (s.is_ok()) s = out.array(view.first_vectors, view.first_rows * o.dimension);
  if (s.is_ok()) s = out.array(view.vectors, (labels.size() - view.first_rows) * o.dimension);
  if (!s.is_ok() || !view.approximate) return s;
  const faiss::HNSW& graph = *view.graph;
  std::ostringstream generator;
  generator << graph.rng.mt;
  const std::string state = generator.str();
  s = out.scalar<std::int32_t>(graph.entry_point);
  if (s.is_ok()) s = out.scalar<std::int32_t>(graph.max_level);
  if (s.is_ok()) s = out.array(graph.levels.data(), graph.levels.size());
  if (s.is_ok()) s = out.scalar<std::uint64_t>(graph.neighbors.size());
  if (s.is_ok()) s = out.array(graph.neighbors.data(), graph.neighbors.size());
  if (s.is_ok()) s = out.scalar<std::uint64_t>(state.size());
  if (s.is_ok()) s = out.bytes(state.data(), state.size());
  return s;
}

// What is wrong with a graph read from a file, or "" when the search walk
// and FAISS's inserts can use it: every node's level within what M allows,
// the neighbour table exactly the size those levels need, every neighbour
// id a row or -1, each list's ids before its empty slots, every neighbour
// on an upper level present on that level, and the entry point a node of
// the top level.
std::string graph_problem(const IndexSnapshotContents& c, const std::vector<int>& per_level) {
  const std::size_t rows = c.row_labels.size();
  if (rows == 0) {
    return c.entry_point == -1 && c.max_level == -1 ? "" : "an empty graph with an entry point";
  }
  if (c.entry_point < 0 || static_cast<std::size_t>(c.entry_point) >= rows) {
    return fmt::format("entry point {} is not one of the {} rows", c.entry_point, rows);
  }
  if (c.max_level != c.levels[static_cast<std::size_t>(c.entry_point)] - 1) {
    return fmt::format("top level {} is not the entry point's ({})", c.max_level,
                       c.levels[static_cast<std::size_t>(c.entry_point)] - 1);
  }
  const auto last_row = static_cast<int>(rows - 1);
  for (std::size_t node = 0; node < rows; ++node) {
    const int node_levels = c.levels[node];
    for (int level = 0; level < node_levels; ++level) {
      const int* first = c.neighbors.data() + c.offsets[node] + per_level[static_cast<std::size_t>(level)];
      const int* last = c.neighbors.data() + c.offsets[node] + per_level[static_cast<std::size_t>(level) + 1];
      bool past_end = false;  // an empty slot was seen: the rest must be empty too
      for (const int* it = first; it != last; ++it) {
        if (*it == -1) {
          past_end = true;
          continue;
        }
        if (*it < -1 || *it > last_row) return fmt::format("row {} has neighbour {}, not a row", node, *it);
        // FAISS's inserts assume a list packed at its front: where the last
        // slot is taken they score every slot, an empty one as row -1.
        if (past_end) return fmt::format("row {} has a neighbour after an empty slot on level {}", node, level);
        if (level > 0 && c.levels[static_cast<std::size_t>(*it)] <= level) {
          return fmt::format("row {} links to row {} on level {}, where that row is absent", node, *it, level);
        }
      }
    }
  }
  return "";
}

// Reads the HNSW part of the body into `c` and checks it.
Status read_graph(BodyReader& in, IndexSnapshotContents& c, const std::string& path) {
  const auto damaged = [&path](const std::string& what) { return Status::data_loss(path + ": " + what); };
  const int neighbors_m = c.options.hnsw_neighbors;
  if (neighbors_m < 2 || neighbors_m > kMaxNeighbors) {
    return Status::invalid_argument(
        fmt::format("hnsw_neighbors {} cannot describe a graph (2 to {})", neighbors_m, kMaxNeighbors));
  }
  // The neighbour slots per level follow from M alone, as FAISS lays them
  // out (2M on level 0, M above): built here, never read from the file.
  const faiss::HNSW shape(neighbors_m);
  const std::vector<int>& per_level = shape.cum_nneighbor_per_level;
  const int most_levels = static_cast<int>(per_level.size()) - 1;
  const std::size_t rows = c.row_labels.size();
  std::uint64_t neighbor_count = 0, state_bytes = 0;
  std::string state;
  if (!in.scalar(c.entry_point) || !in.scalar(c.max_level) || !in.array(c.levels, rows)) {
    return damaged("the graph's levels are cut short");
  }
  c.offsets.assign(rows + 1, 0);
  for (std::size_t node = 0; node < rows; ++node) {
    const int node_levels = c.levels[node];
    if (node_levels < 1 || node_levels > most_levels) {
      return damaged(fmt::format("row {} has {} graph levels; M {} allows 1 to {}", node, node_levels,
                                 neighbors_m, most_levels));
    }
    c.offsets[node + 1] = c.offsets[node] + static_cast<std::size_t>(per_level[static_cast<std::size_t>(node_levels)]);
  }
  if (!in.scalar(neighbor_count) || neighbor_count != c.offsets[rows]) {
    return damaged(fmt::format("the neighbour table holds {} ids, the levels need {}", neighbor_count, c.offsets[rows]));
  }
  if (!in.array(c.neighbors, neighbor_count)) return damaged("the neighbour table is cut short");
  if (!in.scalar(state_bytes) || state_bytes > kMaxGeneratorStateBytes || !in.text(state, state_bytes)) {
    return damaged("the level generator's state is missing or oversized");
  }
  std::istringstream generator(state);
  generator >> c.level_generator;
  if (generator.fail()) return damaged("the level generator's state does not parse");
  if (const std::string problem = graph_problem(c, per_level); !problem.empty()) return damaged("graph: " + problem);
  return Status::ok();
}

Status check_options(const VectorIndexOptions& saved, const VectorIndexOptions& expected, const std::string& path) {
  const auto differs = [&path](const char* field, auto in_file, auto wanted) {
    return Status::failed_precondition(
        fmt::format("{}: snapshot has {} {}, this index expects {}", path, field, in_file, wanted));
  };
  if (saved.dimension != expected.dimension) return differs("dimension", saved.dimension, expected.dimension);
  if (saved.exact_limit != expected.exact_limit) return differs("exact_limit", saved.exact_limit, expected.exact_limit);
  if (saved.hnsw_neighbors != expected.hnsw_neighbors) {
    return differs("hnsw_neighbors", saved.hnsw_neighbors, expected.hnsw_neighbors);
  }
  if (saved.hnsw_build_breadth != expected.hnsw_build_breadth) {
    return differs("hnsw_build_breadth", saved.hnsw_build_breadth, expected.hnsw_build_breadth);
  }
  return Status::ok();
}

Status read_body(BodyReader& in, IndexSnapshotContents& c, const VectorIndexOptions& expected,
                 const std::string& path) {
  const auto damaged = [&path](const std::string& what) { return Status::data_loss(path + ": " + what); };
  std::uint64_t dimension = 0, exact_limit = 0, rows = 0;
  std::uint32_t mode = 0;
  VectorIndexOptions& o = c.options;
  if (!in.scalar(dimension) || !in.scalar(exact_limit) || !in.scalar(o.hnsw_neighbors) ||
      !in.scalar(o.hnsw_build_breadth) || !in.scalar(o.hnsw_search_breadth) || !in.scalar(mode)) {
    return damaged("the options are cut short");
  }
  o.dimension = static_cast<std::size_t>(dimension);
  o.exact_limit = static_cast<std::size_t>(exact_limit);
  if (auto s = check_options(o, expected, path); !s.is_ok()) return s;
  o.hnsw_search_breadth = expected.hnsw_search_breadth;
  if (mode != kExactMode && mode != kHnswMode) return damaged(fmt::format("unknown index mode {}", mode));
  c.approximate = mode == kHnswMode;

  const std::size_t row_bytes = sizeof(std::int64_t) + o.dimension * sizeof(float);
  if (!in.scalar(rows) || rows > in.left() / row_bytes) {
    return damaged(fmt::format("{} rows of {} bytes do not fit in the {} bytes left", rows, row_bytes, in.left()));
  }
  if (!in.array(c.row_labels, rows)) return damaged("the rows are cut short");
  // Where the file holds them (the layout puts them at a multiple of 8).
  c.vectors = rows > 0 ? in.view<float>(rows * o.dimension) : nullptr;
  if (rows > 0 && !c.vectors) return damaged("the rows are cut short");
  c.label_to_row.reserve(static_cast<std::size_t>(rows));
  for (std::size_t row = 0; row < c.row_labels.size(); ++row) {
    const std::int64_t label = c.row_labels[row];
    if (label == -1) {
      ++c.tombstones;
    } else if (label < 0) {
      return damaged(fmt::format("row {} has label {} (labels are non-negative; -1 marks a removed row)", row, label));
    } else if (!c.label_to_row.emplace(label, static_cast<std::int64_t>(row)).second) {
      return damaged(fmt::format("label {} is stored in two rows", label));
    }
  }
  if (c.approximate) {
    if (auto s = read_graph(in, c, path); !s.is_ok()) return s;
  }
  if (in.left() != 0) return damaged(fmt::format("{} bytes follow the index", in.left()));
  return Status::ok();
}

}  // namespace

Status write_index_snapshot(const std::string& path, const IndexSnapshotView& view) {
  auto file = detail::AtomicFileWriter::create(path);
  if (!file.is_ok()) return file.status();
  std::uint8_t header[kHeaderBytes] = {};
  // The header's length and checksum are known only once the body is
  // written: a placeholder now, the real header just before commit.
  if (auto s = file->append(header, sizeof header); !s.is_ok()) return s;
  BodyWriter body(*file);
  if (auto s = write_body(body, view); !s.is_ok()) return s;
  std::memcpy(header, kMagic, sizeof kMagic);
  put_header_field<std::uint32_t>(header, 8, kIndexSnapshotVersion);
  put_header_field<std::uint32_t>(header, 12, 0);
  put_header_field<std::uint64_t>(header, 16, body.size());
  put_header_field<std::uint64_t>(header, 24, body.checksum());
  if (auto s = file->overwrite(0, header, sizeof header); !s.is_ok()) return s;
  return file->commit();
}

std::uint64_t snapshot_body_checksum(const std::uint8_t* body, std::size_t size, unsigned threads) {
  const std::size_t chunks = (size + kChecksumChunkBytes - 1) / kChecksumChunkBytes;
  std::vector<std::uint64_t> sums(chunks);
  detail::run_parts(chunks, threads ? threads : detail::threads_for(chunks, 1, 16), [&](std::size_t c) {
    const std::size_t begin = c * kChecksumChunkBytes;
    sums[c] = detail::xxh64(body + begin, std::min(kChecksumChunkBytes, size - begin));
  });
  return detail::xxh64(sums.data(), sums.size() * sizeof(std::uint64_t));
}

Result<IndexSnapshotIdentity> index_snapshot_identity(const std::string& path) {
  auto mapped = detail::MappedFile::open(path);
  if (!mapped.is_ok()) return mapped.status();
  if (mapped->size() < kHeaderBytes || std::memcmp(mapped->data(), kMagic, sizeof kMagic) != 0) {
    return Status::data_loss(fmt::format("{}: not a rapidqa vector-index snapshot", path));
  }
  IndexSnapshotIdentity identity;
  identity.file_size = mapped->size();
  identity.body_checksum = header_field<std::uint64_t>(mapped->data(), 24);
  identity.format_version = header_field<std::uint32_t>(mapped->data(), 8);
  return identity;
}

Result<IndexSnapshotContents> read_index_snapshot(const std::string& path, const VectorIndexOptions& expected) {
  if (expected.dimension == 0) return Status::invalid_argument("VectorIndex::load: dimension must be positive");
  auto opened = detail::MappedFile::open(path);
  if (!opened.is_ok()) return opened.status();
  auto mapped = std::make_shared<const detail::MappedFile>(std::move(opened).value());
  const std::uint8_t* file = mapped->data();
  const std::size_t size = mapped->size();
  if (size < kHeaderBytes) {
    return Status::data_loss(fmt::format("{}: {} bytes, shorter than a snapshot header (truncated?)", path, size));
  }
  if (std::memcmp(file, kMagic, sizeof kMagic) != 0) {
    return Status::data_loss(fmt::format("{}: not a rapidqa vector-index snapshot (bad magic)", path));
  }
  const auto version = header_field<std::uint32_t>(file, 8);
  if (version != kIndexSnapshotVersion && version != 1) {
    return Status::failed_precondition(fmt::format(
        "{}: snapshot format version {}; this library reads versions 1 to {}", path, version, kIndexSnapshotVersion));
  }
  const auto reserved = header_field<std::uint32_t>(file, 12);
  const auto body_bytes = header_field<std::uint64_t>(file, 16);
  const auto checksum = header_field<std::uint64_t>(file, 24);
  if (reserved != 0) return Status::data_loss(fmt::format("{}: damaged header (reserved field {})", path, reserved));
  if (body_bytes != size - kHeaderBytes) {
    return Status::data_loss(fmt::format("{}: the header announces {} bytes of index, the file holds {} (truncated?)",
                                         path, body_bytes, size - kHeaderBytes));
  }
  // Before a single field is believed: a damaged file is reported as
  // damaged, not as whatever its flipped bits happen to say.
  const std::uint64_t actual = version == 1 ? detail::xxh64(file + kHeaderBytes, size - kHeaderBytes)
                                            : snapshot_body_checksum(file + kHeaderBytes, size - kHeaderBytes);
  if (actual != checksum) {
    return Status::data_loss(fmt::format("{}: checksum mismatch (the file is damaged)", path));
  }
  IndexSnapshotContents contents;
  BodyReader in(file + kHeaderBytes, size - kHeaderBytes);
  if (auto s = read_body(in, contents, expected, path); !s.is_ok()) return s;
  contents.file = std::move(mapped);
  return contents;
}

}  // namespace rapidqa::index

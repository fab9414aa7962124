// VectorIndex::save and VectorIndex::load (src/index/index_snapshot.h): a
// loaded index answers as the saved one did and keeps working; a missing,
// truncated, damaged, foreign or hostile file is refused with the code the
// engine acts on, and a failed save leaves no file behind.
#include <catch2/catch.hpp>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "common/checksum.h"
#include "index/index_snapshot.h"
#include "index/vector_index.h"
#include "index_test_support.h"

namespace fs = std::filesystem;
using rapidqa::StatusCode;
using rapidqa::index::Neighbor;
using rapidqa::index::VectorIndex;
using rapidqa::index::VectorIndexOptions;
using rapidqa::testing::labels_from;
using rapidqa::testing::random_unit_vectors;

namespace {

// A fresh folder for one test, removed when it ends.
struct ScratchFolder {
  explicit ScratchFolder(const std::string& name)
      : path(fs::temp_directory_path() / ("rapidqa-index-snapshot-" + name + "-" + std::to_string(::getpid()))) {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~ScratchFolder() {
    std::error_code ignored;
    fs::permissions(path, fs::perms::owner_all, ignored);
    fs::remove_all(path, ignored);
  }
  std::string file(const std::string& name) const { return (path / name).string(); }
  fs::path path;
};

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// The header is 32 bytes; the body's checksum sits at bytes 24..31.
constexpr std::size_t kHeaderBytes = 32;

// Rewrites the header's checksum for the (edited) body: the file then
// passes the damage check, and only the reader's own checks stand between
// its contents and the index.
void write_with_valid_checksum(const std::string& path, std::string bytes) {
  const std::uint64_t sum = rapidqa::index::snapshot_body_checksum(
      reinterpret_cast<const std::uint8_t*>(bytes.data()) + kHeaderBytes, bytes.size() - kHeaderBytes);
  std::memcpy(&bytes[24], &sum, sizeof sum);
  write_bytes(path, bytes);
}

template <typename T>
void put_at(std::string& bytes, std::size_t offset, T value) {
  std::memcpy(&bytes[offset], &value, sizeof value);
}

// Every query's results from both indexes, label for label and bit for bit.
void require_same_answers(const VectorIndex& a, const VectorIndex& b, const std::vector<float>& queries,
                          std::size_t dim, std::size_t k) {
  const std::size_t n = queries.size() / dim;
  const auto batch_a = a.search_batch(queries.data(), n, k);
  const auto batch_b = b.search_batch(queries.data(), n, k);
  for (std::size_t q = 0; q < n; ++q) {
    CAPTURE(q);
    const auto single_a = a.search(queries.data() + q * dim, k);
    const auto single_b = b.search(queries.data() + q * dim, k);
    for (const auto& [x, y] : {std::pair{&single_a, &single_b}, std::pair{&batch_a[q], &batch_b[q]}}) {
      REQUIRE(x->size() == y->size());
      for (std::size_t j = 0; j < x->size(); ++j) {
        CHECK((*x)[j].label == (*y)[j].label);
        CHECK((*x)[j].similarity == (*y)[j].similarity);
      }
    }
  }
}

struct Built {
  VectorIndexOptions options;
  std::vector<float> vectors;
  VectorIndex index;
};

// n vectors of dimension `dim` under labels 0..n-1, every seventh removed
// (too few for a compaction, so the tombstones are saved).
Built build(std::size_t n, std::size_t dim, std::size_t exact_limit, unsigned seed) {
  VectorIndexOptions options{dim, exact_limit};
  Built b{options, random_unit_vectors(n, dim, seed), VectorIndex(options)};
  b.index.add_batch(labels_from(0, n), b.vectors.data());
  for (std::size_t i = 0; i < n; i += 7) REQUIRE(b.index.remove(static_cast<std::int64_t>(i)));
  return b;
}

}  // namespace

TEST_CASE("XXH64 matches the reference implementation, whole or in pieces", "[index][snapshot]") {
  using rapidqa::detail::xxh64;
  // Values from the reference library (libxxhash's XXH64, seed 0).
  CHECK(xxh64("", 0) == 0xef46db3751d8e999ULL);
  CHECK(xxh64("abc", 3) == 0x44bc2cf5ad770999ULL);
  const std::string text = "Nobody inspects the spammish repetition";  // 39 bytes: one stripe and a tail
  CHECK(xxh64(text.data(), text.size()) == 0xfbcea83c8a378bf1ULL);
  std::string long_text;
  for (int i = 0; i < 50; ++i) long_text += text;
  const std::uint64_t whole = xxh64(long_text.data(), long_text.size());
  for (const std::size_t piece : {1, 5, 31, 32, 33, 100}) {
    rapidqa::detail::Xxh64 hasher;
    for (std::size_t at = 0; at < long_text.size(); at += piece) {
      hasher.update(long_text.data() + at, std::min(piece, long_text.size() - at));
    }
    CHECK(hasher.digest() == whole);
  }
}

TEST_CASE("A saved index loads back and answers every search as the saved one did", "[index][snapshot]") {
  const std::size_t dim = 64, k = 10;
  const ScratchFolder folder("round-trip");
  const auto queries = random_unit_vectors(300, dim, 91);
  for (const bool graph : {false, true}) {
    CAPTURE(graph);
    // 5,000 vectors over a limit of 100: an HNSW graph. 1,000 under a limit
    // of 10,000: exact.
    Built saved = graph ? build(5000, dim, 100, 90) : build(1000, dim, 10000, 92);
    REQUIRE(saved.index.is_approximate() == graph);
    const std::string path = folder.file(graph ? "graph.snap" : "exact.snap");
    REQUIRE(saved.index.save(path).is_ok());
    CHECK_FALSE(fs::exists(path + ".partial"));

    auto loaded = VectorIndex::load(path, saved.options);
    REQUIRE(loaded.is_ok());
    VectorIndex& index = loaded.value();
    CHECK(index.is_approximate() == graph);
    CHECK(index.size() == saved.index.size());
    CHECK(index.dimension() == dim);
    require_same_answers(saved.index, index, queries, dim, k);
    // Queries on stored vectors too: each finds itself, removed ones stay gone.
    require_same_answers(saved.index, index, std::vector<float>(saved.vectors.begin(), saved.vectors.begin() + 200 * dim),
                         dim, k);
    for (std::int64_t label = 0; label < 200; ++label) {
      CHECK(index.contains(label) == (label % 7 != 0));
      if (label % 7 == 0) continue;
      REQUIRE(index.vector_of(label) != nullptr);
      CHECK(std::memcmp(index.vector_of(label), saved.vectors.data() + label * dim, dim * sizeof(float)) == 0);
    }

    // The same changes on both keep them answering alike: the graph, its
    // level generator and the tombstones came back whole.
    const auto more = random_unit_vectors(40, dim, 93);
    for (VectorIndex* each : {&saved.index, &index}) {
      for (std::size_t i = 0; i < 20; ++i) each->upsert(100000 + static_cast<std::int64_t>(i), more.data() + i * dim);
      each->upsert(3, more.data() + 20 * dim);  // replaces a live label
      CHECK(each->remove(5));
      CHECK_FALSE(each->remove(7));  // removed before the save
    }
    require_same_answers(saved.index, index, queries, dim, k);
    const auto hit = index.search(more.data() + 20 * dim, 1);
    REQUIRE(hit.size() == 1);
    CHECK(hit[0].label == 3);

    // A batch after the load: each new vector is found as its own nearest.
    index.add_batch(labels_from(200000, 19), more.data() + 21 * dim);
    for (std::size_t i = 0; i < 19; ++i) {
      const auto found = index.search(more.data() + (21 + i) * dim, 1);
      REQUIRE(found.size() == 1);
      CHECK(found[0].label == 200000 + static_cast<std::int64_t>(i));
    }
  }
}

TEST_CASE("A loaded graph reads its vectors from the file and keeps them through saves and rebuilds",
          "[index][snapshot]") {
  // A loaded HNSW index reads the saved rows where the file holds them and
  // keeps the rows added later itself: a save (over the very file it reads)
  // and a compaction must carry both.
  const std::size_t dim = 32, k = 5;
  const ScratchFolder folder("mapped");
  const std::string path = folder.file("graph.snap");
  Built saved = build(3000, dim, 100, 17);
  REQUIRE(saved.index.save(path).is_ok());
  auto loaded = VectorIndex::load(path, saved.options);
  REQUIRE(loaded.is_ok());
  VectorIndex& index = loaded.value();
  const auto more = random_unit_vectors(50, dim, 18);
  index.add_batch(labels_from(50000, 50), more.data());
  REQUIRE(index.save(path).is_ok());  // replaces the file its first rows are read from
  const auto expect_vectors = [&](const VectorIndex& each) {
    for (std::int64_t label = 1; label < 3000; label += 97) {
      if (label % 7 == 0) continue;
      REQUIRE(each.vector_of(label) != nullptr);
      CHECK(std::memcmp(each.vector_of(label), saved.vectors.data() + label * dim, dim * sizeof(float)) == 0);
    }
    for (std::int64_t i = 0; i < 50; ++i) {
      REQUIRE(each.vector_of(50000 + i) != nullptr);
      CHECK(std::memcmp(each.vector_of(50000 + i), more.data() + i * dim, dim * sizeof(float)) == 0);
    }
  };
  expect_vectors(index);
  auto again = VectorIndex::load(path, saved.options);
  REQUIRE(again.is_ok());
  expect_vectors(again.value());
  require_same_answers(index, again.value(), random_unit_vectors(100, dim, 19), dim, k);
  // Enough removals for a compaction: every row is copied out of the file.
  for (std::int64_t label = 1; label < 1500; ++label) {
    if (label % 7 != 0 && label % 97 != 1) REQUIRE(index.remove(label));
  }
  expect_vectors(index);
  fs::remove(path);
  expect_vectors(index);
  const auto hit = index.search(more.data() + 7 * dim, 1);
  REQUIRE(hit.size() == 1);
  CHECK(hit[0].label == 50007);
}

TEST_CASE("A snapshot of format 1 (one checksum over the whole body) still loads", "[index][snapshot]") {
  const ScratchFolder folder("format1");
  const std::string path = folder.file("index.snap");
  Built b = build(800, 16, 100, 23);
  REQUIRE(b.index.save(path).is_ok());
  std::string bytes = read_bytes(path);
  CHECK(rapidqa::index::index_snapshot_identity(path)->format_version == rapidqa::index::kIndexSnapshotVersion);
  put_at<std::uint32_t>(bytes, 8, 1);
  put_at<std::uint64_t>(bytes, 24, rapidqa::detail::xxh64(bytes.data() + kHeaderBytes, bytes.size() - kHeaderBytes));
  write_bytes(path, bytes);
  CHECK(rapidqa::index::index_snapshot_identity(path)->format_version == 1);
  auto loaded = VectorIndex::load(path, b.options);
  REQUIRE(loaded.is_ok());
  require_same_answers(b.index, loaded.value(), random_unit_vectors(50, 16, 24), 16, 5);
  // Its checksum is checked as format 1 wrote it.
  bytes[bytes.size() / 2] ^= 0x20;
  write_bytes(path, bytes);
  CHECK(VectorIndex::load(path, b.options).status().code() == StatusCode::kDataLoss);
}

TEST_CASE("An empty index and a save over an older snapshot round-trip", "[index][snapshot]") {
  const ScratchFolder folder("empty");
  const std::string path = folder.file("index.snap");
  const VectorIndexOptions options{16, 100};
  REQUIRE(VectorIndex(options).save(path).is_ok());
  auto empty = VectorIndex::load(path, options);
  REQUIRE(empty.is_ok());
  CHECK(empty->size() == 0);
  CHECK(empty->search(random_unit_vectors(1, 16, 1).data(), 3).empty());

  Built b = build(300, 16, 100, 5);
  REQUIRE(b.index.save(path).is_ok());  // replaces the empty snapshot
  auto loaded = VectorIndex::load(path, options);
  REQUIRE(loaded.is_ok());
  CHECK(loaded->size() == b.index.size());
  CHECK(loaded->is_approximate());
}

TEST_CASE("A loaded index takes the expected search breadth and refuses other options", "[index][snapshot]") {
  const ScratchFolder folder("options");
  const std::string path = folder.file("index.snap");
  Built b = build(600, 32, 100, 7);
  REQUIRE(b.index.save(path).is_ok());

  VectorIndexOptions wider = b.options;
  wider.hnsw_search_breadth = 300;  // steers searches only: accepted
  CHECK(VectorIndex::load(path, wider).is_ok());

  const auto refused = [&](auto change) {
    VectorIndexOptions other = b.options;
    change(other);
    const auto r = VectorIndex::load(path, other);
    REQUIRE_FALSE(r.is_ok());
    INFO(r.status().to_string());
    return r.status().code();
  };
  CHECK(refused([](VectorIndexOptions& o) { o.dimension = 64; }) == StatusCode::kFailedPrecondition);
  CHECK(refused([](VectorIndexOptions& o) { o.exact_limit = 5000; }) == StatusCode::kFailedPrecondition);
  CHECK(refused([](VectorIndexOptions& o) { o.hnsw_neighbors = 16; }) == StatusCode::kFailedPrecondition);
  CHECK(refused([](VectorIndexOptions& o) { o.hnsw_build_breadth = 40; }) == StatusCode::kFailedPrecondition);
  CHECK(refused([](VectorIndexOptions& o) { o.dimension = 0; }) == StatusCode::kInvalidArgument);
  const auto message = VectorIndex::load(path, VectorIndexOptions{64, 100}).status().message();
  CHECK(message.find("dimension 32") != std::string::npos);
}

TEST_CASE("Missing, truncated, damaged and foreign snapshots are refused with their code", "[index][snapshot]") {
  const ScratchFolder folder("refused");
  const std::string path = folder.file("index.snap"), bad = folder.file("bad.snap");
  Built b = build(800, 32, 100, 11);
  REQUIRE(b.index.save(path).is_ok());
  const std::string good = read_bytes(path);
  const auto load_code = [&](const std::string& bytes) {
    write_bytes(bad, bytes);
    const auto r = VectorIndex::load(bad, b.options);
    INFO((r.is_ok() ? std::string("loaded") : r.status().to_string()));
    CHECK_FALSE(r.is_ok());
    return r.is_ok() ? StatusCode::kOk : r.status().code();
  };

  CHECK(VectorIndex::load(folder.file("absent.snap"), b.options).status().code() == StatusCode::kNotFound);
  CHECK(VectorIndex::load(folder.path.string(), b.options).status().code() == StatusCode::kIoError);  // a folder

  for (const std::size_t keep : {std::size_t{0}, std::size_t{10}, kHeaderBytes, kHeaderBytes + 40, good.size() / 2,
                                 good.size() - 1}) {
    CAPTURE(keep);
    CHECK(load_code(good.substr(0, keep)) == StatusCode::kDataLoss);
  }
  CHECK(load_code(good + "x") == StatusCode::kDataLoss);
  for (const std::size_t at : {std::size_t{30}, kHeaderBytes + 3, kHeaderBytes + 100, good.size() / 2, good.size() - 1}) {
    CAPTURE(at);
    std::string flipped = good;
    flipped[at] = static_cast<char>(flipped[at] ^ 0x10);
    CHECK(load_code(flipped) == StatusCode::kDataLoss);
  }
  std::string magic = good;
  magic[0] = 'X';
  CHECK(load_code(magic) == StatusCode::kDataLoss);
  std::string version = good;
  put_at<std::uint32_t>(version, 8, rapidqa::index::kIndexSnapshotVersion + 1);
  CHECK(load_code(version) == StatusCode::kFailedPrecondition);
}

TEST_CASE("A hostile snapshot with a valid checksum is refused, not followed", "[index][snapshot]") {
  const ScratchFolder folder("hostile");
  const std::string path = folder.file("index.snap"), bad = folder.file("bad.snap");
  const std::size_t dim = 32, n = 800;
  Built b = build(n, dim, 100, 13);
  REQUIRE(b.index.save(path).is_ok());
  const std::string good = read_bytes(path);
  const auto load_code = [&](std::string bytes) {
    write_with_valid_checksum(bad, std::move(bytes));
    const auto r = VectorIndex::load(bad, b.options);
    INFO((r.is_ok() ? std::string("loaded") : r.status().to_string()));
    CHECK_FALSE(r.is_ok());
    return r.is_ok() ? StatusCode::kOk : r.status().code();
  };
  // Body offsets: options 32 bytes, then rows (u64), labels, vectors, then
  // the graph: entry point, top level, levels, neighbour count, table.
  const std::size_t rows_at = kHeaderBytes + 32, labels_at = rows_at + 8;
  const std::size_t graph_at = labels_at + n * 8 + n * dim * 4;
  const std::size_t levels_at = graph_at + 8;
  const std::size_t table_at = levels_at + n * 4 + 8;

  std::string s = good;
  put_at<std::uint64_t>(s, rows_at, std::uint64_t{1} << 60);  // would be exabytes
  CHECK(load_code(s) == StatusCode::kDataLoss);
  s = good;
  put_at<std::uint32_t>(s, kHeaderBytes + 28, 7);  // mode
  CHECK(load_code(s) == StatusCode::kDataLoss);
  s = good;
  put_at<std::int64_t>(s, labels_at + 8, 2);  // label 2 now in rows 1 and 2
  CHECK(load_code(s) == StatusCode::kDataLoss);
  s = good;
  put_at<std::int64_t>(s, labels_at + 8, -9);
  CHECK(load_code(s) == StatusCode::kDataLoss);
  s = good;
  put_at<std::int32_t>(s, graph_at, static_cast<std::int32_t>(n));  // entry point past the rows
  CHECK(load_code(s) == StatusCode::kDataLoss);
  s = good;
  put_at<std::int32_t>(s, levels_at + 4, 1000);  // more levels than M allows
  CHECK(load_code(s) == StatusCode::kDataLoss);
  s = good;
  put_at<std::int32_t>(s, table_at, static_cast<std::int32_t>(n + 5));  // a neighbour that is no row
  CHECK(load_code(s) == StatusCode::kDataLoss);
  s = good;
  put_at<std::int32_t>(s, table_at, -7);
  CHECK(load_code(s) == StatusCode::kDataLoss);
  // A hole: FAISS's next insert would score the empty slot as row -1 (found
  // by the fuzzer: tests/fuzz_regressions/index_snapshot/).
  s = good;
  std::int32_t second_neighbour = -1;
  std::memcpy(&second_neighbour, &s[table_at + 4], sizeof second_neighbour);
  REQUIRE(second_neighbour >= 0);
  put_at<std::int32_t>(s, table_at, -1);
  CHECK(load_code(s) == StatusCode::kDataLoss);
  s = good;
  put_at<std::uint64_t>(s, levels_at + n * 4, std::uint64_t{1} << 50);  // neighbour count
  CHECK(load_code(s) == StatusCode::kDataLoss);
  // The untouched file still loads: the edits above were what got refused.
  write_with_valid_checksum(bad, good);
  CHECK(VectorIndex::load(bad, b.options).is_ok());
}

TEST_CASE("A save that cannot complete fails with an I/O error and leaves no file", "[index][snapshot]") {
  const ScratchFolder folder("unwritable");
  Built b = build(300, 16, 100, 17);
  // A folder that is really a file: nothing can be created inside it.
  write_bytes(folder.file("plain-file"), "not a folder");
  const std::string inside_file = folder.file("plain-file") + "/index.snap";
  auto s = b.index.save(inside_file);
  CHECK(s.code() == StatusCode::kIoError);
  CHECK_FALSE(fs::exists(inside_file + ".partial"));

  // The name is taken by a folder: the whole file is written, then the
  // rename fails, and the partial file must go.
  const std::string taken = folder.file("taken");
  fs::create_directories(taken);
  s = b.index.save(taken);
  CHECK(s.code() == StatusCode::kIoError);
  CHECK_FALSE(fs::exists(taken + ".partial"));
  CHECK(fs::is_directory(taken));

  // A read-only folder (root writes anyway, so only checked as a user).
  if (::geteuid() != 0) {
    const fs::path locked = folder.path / "locked";
    fs::create_directories(locked);
    fs::permissions(locked, fs::perms::owner_read | fs::perms::owner_exec);
    s = b.index.save((locked / "index.snap").string());
    CHECK(s.code() == StatusCode::kIoError);
    CHECK(fs::is_empty(locked));
  }
}

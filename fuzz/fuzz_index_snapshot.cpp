// Feeds the vector-index snapshot reader: VectorIndex::load (the header
// and checksum, then options, labels, vectors and the HNSW graph of
// src/index/index_snapshot.h). An input that starts with the magic
// "RQAVINDX" is written as the whole file, so the frame itself is fuzzed;
// any other input is the body, framed here with a correct length and XXH64
// so that the fuzzer reaches the parser and the graph checks (the checksum
// stops nobody who writes the file). After a load the index must answer a
// search, take an upsert and a removal, and save a snapshot that loads
// again. Vectors have 4 dimensions, HNSW M is 4; seeds from make_seeds.cpp.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "common/checksum.h"
#include "fuzz_support.h"
#include "index/vector_index.h"

namespace {

// What the seeds were saved with (make_seeds.cpp, index_snapshot_seeds).
rapidqa::index::VectorIndexOptions fuzz_options() {
  rapidqa::index::VectorIndexOptions options;
  options.dimension = 4;
  options.exact_limit = 8;
  options.hnsw_neighbors = 4;
  options.hnsw_build_breadth = 16;
  options.hnsw_search_breadth = 16;
  return options;
}

// The header of index_snapshot.h: magic, version 1 (u32), zero (u32), body
// length (u64), XXH64 of the body (u64), little-endian.
std::string framed(const std::uint8_t* body, std::size_t size) {
  std::string out = "RQAVINDX";
  auto put = [&out](std::uint64_t value, int bytes) {
    for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
  };
  put(1, 4);
  put(0, 4);
  put(size, 8);
  put(rapidqa::detail::xxh64(body, size), 8);
  out.append(reinterpret_cast<const char*>(body), size);
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using rapidqa::fuzz::check;
  using rapidqa::index::VectorIndex;
  static const std::string dir = rapidqa::fuzz::scratch_dir("index_snapshot");
  const std::string path = dir + "/index.snap";
  if (size >= 8 && std::memcmp(data, "RQAVINDX", 8) == 0) {
    rapidqa::fuzz::write_file(path, data, size);
  } else {
    rapidqa::fuzz::write_file(path, framed(data, size));
  }
  auto loaded = VectorIndex::load(path, fuzz_options());
  if (!loaded.is_ok()) return 0;
  VectorIndex& index = loaded.value();

  const float query[4] = {0.5f, 0.5f, 0.5f, 0.5f};
  const auto hits = index.search(query, 5);
  check(hits.size() <= index.size(), "a search returned more labels than the index holds");
  for (const auto& hit : hits) check(index.contains(hit.label), "a search returned a label the index does not hold");
  const float other[4] = {1, 0, 0, 0};
  index.upsert(1000000, other);
  if (!hits.empty()) check(index.remove(hits.front().label) || hits.front().label == 1000000, "cannot remove a hit");
  (void)index.search(other, 3);

  const std::string again = dir + "/saved.snap";
  check(index.save(again).is_ok(), "cannot save a loaded index");
  auto second = VectorIndex::load(again, fuzz_options());
  check(second.is_ok(), "an index the library saved does not load", second.is_ok() ? "" : second.status().message());
  check(second->size() == index.size(), "a saved index loads with another size");
  return 0;
}

// Feeds the semantic-cache snapshot reader: SemanticCache::load_snapshot
// (read_snapshot_file's frame, then the CBOR payload: dimension, entries,
// answers). An input that starts with the magic "RQASNAP1" is written as the
// whole file, so the frame itself is fuzzed; any other input is the CBOR
// payload, framed here with a correct length and checksum so that the
// fuzzer reaches the decoder. After a load the cache must answer a lookup,
// and what it saves must load again (a snapshot written by the library is
// always readable). A cache with a snapshot key must refuse every input:
// none was written with its key (the keyed seed used another). Vectors have
// 4 dimensions; seeds from make_seeds.cpp.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include "fuzz_support.h"
#include "rapidqa/clock.h"
#include "rapidqa/semantic_cache.h"

namespace {

constexpr std::size_t kDimension = 4;

// The frame of snapshot_codec.h: magic, version 1 (u32), payload length
// (u64), FNV-1a of the payload (u64), little-endian.
std::string framed(const std::uint8_t* payload, std::size_t size) {
  std::string out = "RQASNAP1";
  auto put = [&out](std::uint64_t value, int bytes) {
    for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
  };
  std::uint64_t hash = 0xcbf29ce484222325ULL;
  for (std::size_t i = 0; i < size; ++i) {
    hash ^= payload[i];
    hash *= 0x100000001b3ULL;
  }
  put(1, 4);
  put(size, 8);
  put(hash, 8);
  out.append(reinterpret_cast<const char*>(payload), size);
  return out;
}

std::unique_ptr<rapidqa::SemanticCache> make_cache(const std::string& key = "") {
  rapidqa::SemanticCacheOptions options;
  options.snapshot_key = key;
  options.dimension = kDimension;
  options.capacity = 64;
  options.clock = std::make_shared<rapidqa::ManualClock>();
  auto cache = rapidqa::SemanticCache::create(options);
  rapidqa::fuzz::check(cache.is_ok(), "cannot create the cache");
  return std::move(cache).value();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using rapidqa::fuzz::check;
  static const std::string dir = rapidqa::fuzz::scratch_dir("cache_snapshot");
  static const auto cache = make_cache();
  static const auto reloaded = make_cache();
  static const auto keyed = make_cache("a key no seed and no input was written with");
  const std::string path = dir + "/snapshot.bin";
  if (size >= 8 && std::memcmp(data, "RQASNAP1", 8) == 0) {
    rapidqa::fuzz::write_file(path, data, size);
  } else {
    rapidqa::fuzz::write_file(path, framed(data, size));
  }

  auto forged = keyed->load_snapshot(path);
  check(!forged.is_ok(), "a cache with a snapshot key loaded a file not written with that key");

  std::size_t answers_seen = 0;
  auto loaded = cache->load_snapshot(path, [&](const rapidqa::Answer& a) {
    answers_seen += a.text.size() + a.matches.size();
    return true;
  });
  if (!loaded.is_ok()) {
    check(cache->stats().size == 0, "a refused snapshot left entries in the cache");
    return 0;
  }
  const float unit[kDimension] = {0.5f, 0.5f, 0.5f, 0.5f};
  (void)cache->lookup(unit, "how do i reset my password");
  (void)cache->top_intents(2);

  const std::string again = dir + "/saved.bin";
  check(cache->save_snapshot(again).is_ok(), "cannot save a loaded snapshot");
  auto second = reloaded->load_snapshot(again);
  check(second.is_ok(), "a snapshot the cache saved does not load", second.is_ok() ? "" : second.status().message());
  return 0;
}

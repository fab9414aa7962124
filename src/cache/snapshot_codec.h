// The semantic-cache snapshot format: an 8-byte magic "RQASNAP1", a format
// version (u32), the payload length (u64) and a checksum of the payload
// (u64, FNV-1a), all little-endian, then the payload: CBOR (through
// nlohmann-json) holding the dimension and each entry's namespace, question,
// milliseconds to live, vector (raw float32 bytes) and answer.
//
// A snapshot is data, not trusted code. The checksum catches accidents
// (a torn or truncated copy), not an attacker, who can recompute it: every
// field is therefore validated on load (finite, unit-length vectors; known
// tiers; provenance present; sizes consistent; bounded nesting and text),
// and a file with any bad entry is refused whole, naming the entry.
//
// With a key (SemanticCacheOptions::snapshot_key) the file is format
// version 2: the same frame followed by an HMAC-SHA256 (32 bytes) of header
// and payload. A cache with a key loads only version-2 files whose MAC
// matches, so a file written by anyone without the key is refused before it
// is parsed; a cache without a key reads both versions (MAC unchecked).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "rapidqa/answer.h"
#include "rapidqa/status.h"

namespace rapidqa::cache {

inline constexpr std::uint32_t kSnapshotVersion = 1;       // unkeyed
inline constexpr std::uint32_t kKeyedSnapshotVersion = 2;  // with an HMAC-SHA256 trailer
inline constexpr std::size_t kSnapshotMacBytes = 32;

nlohmann::json answer_to_json(const Answer& answer);
// Throws on a missing or mistyped field (the caller reports the entry).
Answer answer_from_json(const nlohmann::json& j);

// What is wrong with a cached answer read from outside (a snapshot, a
// peer), or "" when it could have been cached by this library: a known tier
// other than the fallback, a finite score, at least one match with an id
// (its provenance: without it, no knowledge change could ever drop it) and
// a consistent extracted span.
std::string cached_answer_problem(const Answer& answer);
// What is wrong with a cached question's vector, or "": every component
// finite and the length 1 (the encoders' vectors are L2-normalised).
std::string cached_vector_problem(const float* vector, std::size_t dimension);

// Frames a payload (with a MAC when key is not empty) and writes it
// atomically (temporary file, fsync, rename).
Status write_snapshot_file(const std::string& path, const std::vector<std::uint8_t>& payload,
                           const std::string& key = "");
// Reads and checks the frame; returns the payload. A file larger than
// max_bytes (0: no limit) is refused before it is read into memory.
// With a key, only a keyed file whose MAC matches is accepted.
Result<std::vector<std::uint8_t>> read_snapshot_file(const std::string& path, std::uint64_t max_bytes = 0,
                                                     const std::string& key = "");

}  // namespace rapidqa::cache

// The semantic-cache snapshot format: an 8-byte magic "RQASNAP1", a format
// version (u32), the payload length (u64) and a checksum of the payload
// (u64, FNV-1a), all little-endian, then the payload: CBOR (through
// nlohmann-json) holding the dimension and each entry's namespace, question,
// milliseconds to live, vector (raw float32 bytes) and answer.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "rapidqa/answer.h"
#include "rapidqa/status.h"

namespace rapidqa::cache {

inline constexpr std::uint32_t kSnapshotVersion = 1;

nlohmann::json answer_to_json(const Answer& answer);
Answer answer_from_json(const nlohmann::json& j);

// Frames a payload and writes it atomically (temporary file, fsync, rename).
Status write_snapshot_file(const std::string& path, const std::vector<std::uint8_t>& payload);
// Reads and checks the frame; returns the payload.
Result<std::vector<std::uint8_t>> read_snapshot_file(const std::string& path);

}  // namespace rapidqa::cache

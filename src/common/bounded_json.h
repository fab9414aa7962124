// Parsing JSON and CBOR from untrusted bytes: knowledge lines, config.json,
// tokenizer.json, safetensors headers, cache snapshots and change messages
// all come from files or peers that may be hostile.
//
// nlohmann's DOM parsers trust their input in two ways that matter here: the
// CBOR reader recurses once per nesting level (a 200 KB payload of nested
// arrays exhausts the stack), and a repeated object key silently keeps the
// last value. These parsers bound the nesting depth, refuse duplicate keys,
// and never throw: every failure is a Status whose message quotes at most a
// short, clipped piece of the input.
//
// Thread safety: free functions, no shared state.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "rapidqa/status.h"

namespace rapidqa::detail {

struct JsonLimits {
  std::size_t max_depth = 64;        // nested arrays and objects; deeper input is refused
  bool reject_duplicate_keys = true; // an object naming one key twice is refused
};

// The deepest nesting any rapidqa document needs is well under 10 levels.
inline constexpr std::size_t kDefaultJsonDepth = 64;

// Parses JSON text. kInvalidArgument with the byte offset and the reason.
Result<nlohmann::json> parse_json_bounded(std::string_view text, const JsonLimits& limits = {});
// Parses a CBOR payload. kDataLoss with the byte offset and the reason.
Result<nlohmann::json> parse_cbor_bounded(const std::vector<std::uint8_t>& bytes, const JsonLimits& limits = {});

// At most max_bytes of text for an error message, cut on a UTF-8 boundary,
// with the total size added when cut; bytes that are not printable ASCII or
// valid UTF-8 are shown as \xNN. Never echo untrusted input unclipped.
std::string clip_for_message(std::string_view text, std::size_t max_bytes = 64);

}  // namespace rapidqa::detail

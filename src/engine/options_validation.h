// The checks an engine's options and a request's options must pass: every
// value out of range is refused with the field's name and the range it must
// lie in, never quietly fixed, so a typo shows up at create() or at the ask
// rather than as a strange engine.
//
// Thread safety: pure functions; thread-safe.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>

#include "rapidqa/qa_engine.h"
#include "rapidqa/status.h"

namespace rapidqa::engine {

// Most matches a request may ask for: retrieval returns them all, sorted.
inline constexpr std::size_t kMaxTopK = 1000;
inline constexpr std::size_t kMaxRetrievalCandidates = 1000;  // per index, per question

// Every EngineOptions field create() relies on. A disabled tier's options
// are not checked (they are never used).
Status validate_engine_options(const EngineOptions& options);

// A request's own settings, its tenant included.
Status validate_ask_options(const AskOptions& options);

// A tenant names a cache namespace: at most 256 bytes of valid UTF-8
// without control characters (they would make keys ambiguous in logs and
// in peers' messages).
Status validate_tenant(const std::string& tenant);

}  // namespace rapidqa::engine

// Whether an encoder answers through the engine: an engine over it with two
// entries, caches off (so the encoder decides), asked the password
// question. Header-only, for the test files that load models (include it
// after LibTorch and Catch, as they do).
#pragma once

#include <catch2/catch.hpp>

#include <memory>
#include <utility>

#include "rapidqa/qa_engine.h"

namespace rapidqa::testing {

// True when the password entry answers; the engine's own failures stop the
// test case.
inline bool password_entry_answered(std::shared_ptr<Encoder> encoder) {
  EngineOptions engine_options;
  engine_options.encoder = std::move(encoder);
  engine_options.min_answer_score = -1.0f;
  auto engine = QAEngine::create(engine_options);
  REQUIRE(engine.is_ok());
  KnowledgeEntry shipping{"ship", "Where is my order?", {}, "It ships in 2 days.", "", {}, 0};
  KnowledgeEntry password{"pw", "How do I reset my password?", {}, "Use the reset link.", "", {}, 0};
  REQUIRE((*engine)->load_entries({shipping, password}).is_ok());
  AskOptions fresh;
  fresh.use_cache = false;
  auto answer = (*engine)->ask("How do I reset my password?", fresh);
  REQUIRE(answer.is_ok());
  return answer->entry_id() == "pw";
}

}  // namespace rapidqa::testing

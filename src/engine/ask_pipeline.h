// AskPipeline: one question's way through the engine, stage by stage:
// normalise -> result tier -> knowledge tier -> encode (through the
// batcher, or the degraded path when the model cannot make the deadline)
// -> semantic tier -> retrieve -> read -> fill the tiers; every stage is
// timed into the Answer and the metrics.
//
// It owns nothing: it is the engine's parts put in order. The parts must
// outlive it.
//
// Thread safety: thread-safe; ask() takes the knowledge lock shared for
// everything from the knowledge tier to the cache fill (except while it
// waits for the model), so a change cannot slip between retrieval and the
// fill and leave an answer from the old version in a cache.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/cache_tiers.h"
#include "engine/degraded_path.h"
#include "engine/encoder_batching.h"
#include "engine/engine_knowledge.h"
#include "metrics/metrics_registry.h"
#include "rapidqa/qa_engine.h"

namespace rapidqa::engine {

class AskPipeline {
 public:
  struct Parts {
    const EngineOptions* options = nullptr;  // clock set
    std::shared_ptr<Encoder> encoder;
    CacheTiers* tiers = nullptr;
    EngineKnowledge* knowledge = nullptr;
    const DegradedPath* degraded = nullptr;
    EncoderBatching* batching = nullptr;     // null: the encoder is called inline
    metrics::MetricsRegistry* metrics = nullptr;
  };
  explicit AskPipeline(Parts parts) : parts_(std::move(parts)) {}

  // Errors are for bad input (and a broken encoder) only: see QAEngine::ask.
  Result<Answer> ask(std::string_view question, const AskOptions& options);
  // The result tier's answer, without the knowledge lock or the model: see
  // QAEngine::ask_cached.
  std::optional<Answer> ask_cached(std::string_view question, const AskOptions& options);

 private:
  struct Request;

  // The fallback, with its reason, for a question with too little to match
  // (EngineOptions::min_question_characters); nullopt for any other.
  std::optional<Answer> refuse_too_short(const Request& request) const;
  std::optional<Answer> lookup_exact_tiers(Request& request);
  // The question's vector, or the request's end: a degraded answer or an
  // error. Called with the knowledge lock held; may release it meanwhile.
  Status encode(Request& request, std::optional<Answer>& degraded);
  std::optional<Answer> lookup_semantic_tier(Request& request);
  Result<Answer> retrieve_and_read(Request& request);
  // Replaces the FAQ answer with the span the reader finds in the context
  // passages of the best entries.
  void read_answer(Request& request, const std::vector<KnowledgeMatch>& matches, Answer& answer) const;
  // The generated answer from the best matches. Releases the knowledge
  // lock while the generator writes (seconds) and takes it again; returns
  // whether the sources are still at the versions it was given (else the
  // answer is not cached). Fails only when text had reached on_token.
  Result<bool> generate_answer(Request& request, const std::vector<KnowledgeMatch>& matches, Answer& answer);
  // The shortest cache_ttl of the entries whose text the answer serves
  // (0: the tiers' own).
  std::chrono::milliseconds cache_ttl_of(const Answer& answer) const;
  Result<Answer> finish(Request& request, Answer answer);
  Status fail(Status why);

  Parts parts_;
};

}  // namespace rapidqa::engine

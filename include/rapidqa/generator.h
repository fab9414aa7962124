// Generator: writes the answer to a question from the knowledge entries
// retrieved for it (retrieval-augmented generation), token by token.
// RemoteGenerator calls an engine that serves the OpenAI chat completions
// API with streaming (vLLM, TGI, llama.cpp server), through the same
// endpoint choice, retries and circuit breaker as RemoteEncoder.
//
// How the engine uses one (EngineOptions::generator): when retrieval finds
// entries good enough, the answer is generated from the best of them; the
// Answer's matches name those entries and their versions (its provenance),
// so a generated answer is cached, invalidated and guarded like any other.
// A failure or a deadline before the first token falls back to the best
// entry's FAQ answer, marked degraded; after tokens have reached the
// caller (AskOptions::on_token), the ask fails instead, and nothing
// half-generated is cached.
//
// Thread safety: implementations are thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "rapidqa/export.h"
#include "rapidqa/metrics.h"
#include "rapidqa/remote_encoder.h"
#include "rapidqa/remote_engine.h"
#include "rapidqa/status.h"

namespace rapidqa {

// One retrieved entry, as the prompt shows it.
struct GenerationSource {
  std::string id;
  std::string question;
  std::string answer;
  std::string context;  // the entry's passage, when it has one
};

// Receives each piece of text as it is generated; returning false stops
// the generation (the caller went away).
using TokenCallback = std::function<bool(std::string_view piece)>;

struct GenerationResult {
  std::string text;
  std::string finish_reason;  // "stop", "length", ... as the engine said
  std::uint64_t prompt_tokens = 0;
  std::uint64_t completion_tokens = 0;
  std::chrono::nanoseconds time_to_first_token{0};
};

class RAPIDQA_EXPORT Generator {
 public:
  virtual ~Generator() = default;
  virtual std::string name() const = 0;
  // Generates within time_left. on_token may be empty. streamed tells, on
  // failure too, whether any text reached on_token: then the caller has
  // seen part of an answer and must not be given another.
  virtual Status generate(const std::string& question, const std::vector<GenerationSource>& sources,
                          std::chrono::nanoseconds time_left, const TokenCallback& on_token,
                          GenerationResult& result, bool& streamed) const = 0;
  // Adds the generator's counters to an engine's metrics.
  virtual void add_metrics(MetricsSnapshot& snapshot) const { (void)snapshot; }
};

// RemoteEngineOptions (endpoints, model, authentication, TLS, timeouts,
// retries before the first token, ejection, the breaker; see
// remote_engine.h) and the generation's own settings.
struct RemoteGeneratorOptions : RemoteEngineOptions {
  RemoteGeneratorOptions() {
    request_timeout = std::chrono::milliseconds(60000);  // generations take seconds
    max_response_bytes = 4u << 20;
    max_retries = 1;
  }
  // The prompt: {question} and {sources} are replaced (the sources as
  // numbered blocks of question, answer and context).
  std::string system_prompt =
      "You answer questions for a help desk. Use only the knowledge given. If it does not answer the question, "
      "say that you do not know.";
  std::string prompt_template = "Knowledge:\n{sources}\n\nQuestion: {question}";
  std::size_t max_tokens = 256;
  double temperature = 0.0;
  // A stream that sends nothing for this long is given up (a stalled
  // engine), even with time left; noticed within about a second of it.
  std::chrono::milliseconds stall_timeout{10000};
};

class RAPIDQA_EXPORT RemoteGenerator final : public Generator {
 public:
  // Checks the options (no request is made: a generation costs money).
  static Result<std::shared_ptr<RemoteGenerator>> create(RemoteGeneratorOptions options);
  ~RemoteGenerator() override;
  RemoteGenerator(const RemoteGenerator&) = delete;
  RemoteGenerator& operator=(const RemoteGenerator&) = delete;

  std::string name() const override;  // "remote-chat:MODEL"
  // kUnavailable (breaker open, no endpoint, every try failed, the stream
  // broke), kDeadlineExceeded (time ran out or the stream stalled),
  // kInvalidArgument (the engine refused the request: 4xx), kDataLoss (a
  // chunk that is not what the API documents), kCancelled-like stops
  // (on_token returned false) as kFailedPrecondition.
  Status generate(const std::string& question, const std::vector<GenerationSource>& sources,
                  std::chrono::nanoseconds time_left, const TokenCallback& on_token, GenerationResult& result,
                  bool& streamed) const override;
  void add_metrics(MetricsSnapshot& snapshot) const override;

  // The prompt's user message for these sources (what generate() sends).
  std::string render_prompt(const std::string& question, const std::vector<GenerationSource>& sources) const;

  struct Impl;

 private:
  explicit RemoteGenerator(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace rapidqa

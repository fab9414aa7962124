// RemoteEncoder: an Encoder whose model runs in another process, behind a
// protocol other engines speak: the OpenAI-compatible embeddings API
// (POST /v1/embeddings: vLLM, text-embeddings-inference, llama.cpp server,
// rapidqa-server) or the KServe v2 inference protocol over HTTP
// (POST /v2/models/{name}/infer: Triton, rapidqa-server) or gRPC
// (GRPCInferenceService/ModelInfer). It needs no
// LibTorch and belongs to rapidqa::core.
//
// One encode() call is one HTTP request per max_texts_per_request texts (the
// engine's DynamicBatcher gathers concurrent asks into one call). In front
// of the endpoints:
// - keep-alive connections (HTTP/2 on request: h2c with prior knowledge,
//   or ALPN over TLS), one set per concurrent caller, reused;
// - the caller's deadline: the request carries it (x-request-timeout-ms)
//   and is abandoned when it passes;
// - retries on another endpoint, only within the deadline and only while
//   the retry budget allows (a share of the requests, so a failing engine
//   is not sent twice the load);
// - hedging: when a request has taken longer than a percentile of recent
//   ones, the same request goes to a second endpoint and the first answer
//   wins;
// - endpoint choice by round robin or fewest requests in flight, with
//   outlier ejection (an endpoint that fails several times in a row is left
//   out for a while, longer each time);
// - a circuit breaker over all endpoints: when most recent calls failed,
//   or no endpoint is left, calls fail at once (kUnavailable) for a while,
//   so the engine answers from its degradation path (lexical retrieval,
//   stale cache) instead of waiting; then one trial call decides whether it
//   closes.
// Every endpoint's requests, failures, latency and ejection, and the
// breaker's state, reach QAEngine::metrics() and its Prometheus text.
//
// Vectors are L2-normalised here whatever the engine returns; a vector of
// the wrong length or with a non-finite value fails the request.
//
// Thread safety: thread-safe; encode() may run on many threads at once.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rapidqa/encoder.h"
#include "rapidqa/export.h"
#include "rapidqa/metrics.h"
#include "rapidqa/remote_engine.h"
#include "rapidqa/status.h"

namespace rapidqa {

enum class RemoteProtocol {
  kOpenAIEmbeddings,  // POST {endpoint}/v1/embeddings
  kKServeV2,          // POST {endpoint}/v2/models/{model}/infer, one BYTES input, one FP32 output
  kKServeV2Grpc,      // inference.GRPCInferenceService/ModelInfer over gRPC (http:// plaintext, https:// TLS)
};
// The protocol's name in the tools and the C ABI ("openai", "kserve",
// "kserve-grpc"), and back; nullopt for a name that is none of them.
RAPIDQA_EXPORT const char* remote_protocol_name(RemoteProtocol protocol) noexcept;
RAPIDQA_EXPORT std::optional<RemoteProtocol> remote_protocol_from_name(std::string_view name) noexcept;

// RemoteEngineOptions (endpoints, model, authentication, TLS, timeouts,
// retries, ejection, the breaker) and the encoder's own settings.
struct RemoteEncoderOptions : RemoteEngineOptions {
  RemoteProtocol protocol = RemoteProtocol::kOpenAIEmbeddings;
  // The vector length. 0: learned from the first answer at create(). Either
  // way create() asks once and fails when the engine's vectors differ.
  std::size_t dimension = 0;
  // Distinguishes this model's vectors from others' of the same name and
  // length (a revision, a checksum); it is part of fingerprint().
  std::string model_revision;
  // Whether the engine is sent normalize_text() output rather than the text
  // as written (an engine that was given normalised text when its knowledge
  // was encoded).
  bool send_normalized_text = false;
  // OpenAI only: ask for vectors as base64 floats (encoding_format
  // "base64", as vLLM, TEI, llama.cpp server and rapidqa-server serve them)
  // instead of JSON numbers, which cost far more to print and to read. An
  // engine that answers with numbers anyway is read as well.
  bool base64_vectors = true;
  // KServe v2 only: the model's input tensor (BYTES, shape [n]) and the
  // output to read (FP32, shape [n, dimension]); empty output: the first
  // FP32 output.
  std::string kserve_input = "text";
  std::string kserve_output;
  // KServe v2 over HTTP only: ask for the vectors as binary tensor data
  // (their bytes after the JSON, as Triton and KServe's servers send them)
  // instead of JSON numbers, which cost far more to print and to read. An
  // engine without the extension answers with numbers, which are read too;
  // turn it off for one that refuses the request's parameter.
  bool kserve_binary_vectors = true;
  std::size_t max_texts_per_request = 64;   // longer encode() calls are split
  // Hedging: when a request has taken longer than this percentile of the
  // recent successful ones (and at least hedge_min_delay), the same
  // request also goes to another endpoint. 0 turns hedging off.
  double hedge_percentile = 0.95;
  std::chrono::milliseconds hedge_min_delay{2};
};

class RAPIDQA_EXPORT RemoteEncoder final : public Encoder {
 public:
  // Checks the options and asks the engine for one vector (the dimension
  // check). kInvalidArgument for bad options, kUnavailable when no endpoint
  // answers, kFailedPrecondition when the engine's vectors are not
  // options.dimension long.
  static Result<std::shared_ptr<RemoteEncoder>> create(RemoteEncoderOptions options);
  ~RemoteEncoder() override;
  RemoteEncoder(const RemoteEncoder&) = delete;
  RemoteEncoder& operator=(const RemoteEncoder&) = delete;

  std::size_t dimension() const override;
  std::string name() const override;  // "remote-openai:MODEL" or "remote-kserve:MODEL"
  std::string fingerprint() const override;
  bool wants_normalized_text() const override;
  // Fails with kUnavailable (breaker open, no endpoint, every try failed),
  // kDeadlineExceeded (the budget ran out) or kInvalidArgument (the engine
  // refused the texts: 4xx); out is then unspecified.
  Status encode(const std::vector<std::string>& texts, std::vector<float>& out) const override;
  Status encode_within(const std::vector<std::string>& texts, std::vector<float>& out,
                       std::chrono::nanoseconds time_left) const override;
  void add_metrics(MetricsSnapshot& snapshot) const override;

  // The same counters add_metrics() reports.
  RemoteEngineMetrics metrics() const;

  struct Impl;

 private:
  explicit RemoteEncoder(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace rapidqa

// ServerApi: what rapidqa-server answers, independent of the wire. One
// request in (method, path, body, the few headers that matter), one
// response out (status, JSON body, Retry-After). The transports (HTTP/1.1,
// HTTP/2, WebSocket, gRPC) only translate to and from these structs, so
// every protocol gives the same answer, the same errors and the same
// checks, and the routes are tested without a socket.
//
// Routes (JSON bodies; errors are {"error": {"code", "message"}}):
//   POST /v1/ask                      {"question", "tenant", "use_cache", "semantic_threshold",
//                                      "top_k", "min_answer_score", "min_answer_confidence",
//                                      "timeout_ms", "priority"}
//                                     (Accept: text/event-stream: streamed, see sse_token_event)
//   POST /v1/ask:batch                the same with "questions": [...]
//   GET|PUT|DELETE /v1/entries/{id}   an entry as in the JSONL knowledge format   (token)
//   POST /v1/entries:import           JSONL body: every line added or updated     (token)
//   POST /v1/cache:invalidate         {"entry_id"}                                (token)
//   POST /v1/cache:correct            {"question", "answer", "tenant"}            (token)
//   POST /v1/cache:delete             {"question", "tenant"}                      (token)
//   GET  /metrics, /healthz, /readyz
//   POST /v1/embeddings               OpenAI embeddings: {"input", "model", "encoding_format"}
//   GET  /v2, /v2/health/live, /v2/health/ready, /v2/models/{m}, /v2/models/{m}/ready
//   POST /v2/models/{m}/infer         KServe v2: a BYTES input of texts, an FP32 output
//
// Thread safety: thread-safe; handle() runs on the server's worker threads
// concurrently. It blocks on the engine, so transports never call it on an
// event loop.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <rapidqa/qa_engine.h>

namespace rapidqa::server {

struct ServerRequest {
  std::string method;         // "GET", "POST", ... as sent
  std::string path;           // without the query string
  std::string body;
  std::string authorization;  // the Authorization header, "" when absent
  std::string request_id;     // x-request-id as sent, or one the server made
  std::chrono::milliseconds timeout{0};  // x-request-timeout-ms (gRPC: grpc-timeout); 0 = none given
  // POST /v1/ask only: the answer's text as it is written (see
  // AskOptions::on_token), for transports that stream it. Empty: none.
  TokenCallback on_token;
};


struct ServerResponse {
  int status = 200;                          // HTTP status
  std::string content_type = "application/json";
  std::string body;
  int retry_after_seconds = 0;               // > 0: send Retry-After
  // More headers to send, as (lower-case name, value).
  std::vector<std::pair<std::string, std::string>> headers;
  // For the access log.
  std::string tenant;
  std::string tier;                          // an ask's answer tier, "" otherwise
};

// Server-sent events for a streamed ask (Accept: text/event-stream):
// "token" events carry {"text"} pieces as they are written, then one
// "answer" event carries the answer's JSON, or an "error" event the error
// body with its HTTP status ({"status", "error"}), and the stream ends.
std::string sse_token_event(std::string_view piece);
std::string sse_final_event(const ServerResponse& response);

// `members` ("\"id\":7,\"status\":200") put in front of a response body's
// JSON object, as text: the API's bodies are one-line objects it made, so
// they are not parsed again. A body that is not an object (or is empty)
// gives just the members.
std::string json_with_members_first(const std::string& members, const std::string& object);

// Requests per second each tenant may ask; a tenant over it gets 429 with
// Retry-After. Buckets of idle tenants are dropped once there are many, so
// a client inventing tenants cannot grow memory without bound.
struct TenantRateLimit {
  double questions_per_second = 0;  // 0 = no limit
  double burst = 0;                 // bucket size in questions; 0 = one second's worth
};

class TenantRateLimiter {
 public:
  using Clock = std::chrono::steady_clock;
  explicit TenantRateLimiter(TenantRateLimit limit) : limit_(limit) {}
  // Takes `questions` tokens from the tenant's bucket at time `now`; on
  // refusal returns the whole seconds until they are there (at least 1),
  // else 0.
  int admit(const std::string& tenant, double questions, Clock::time_point now);

 private:
  struct Bucket {
    double tokens;
    Clock::time_point refilled;
  };
  double capacity() const;
  TenantRateLimit limit_;
  std::mutex mu_;
  std::unordered_map<std::string, Bucket> buckets_;  // guarded by mu_
};

struct ServerApiOptions {
  std::string admin_token;         // bearer token for administration; "" = administration refused
  bool protect_ask = false;        // asking, embeddings and inference need the token too
  std::string model_name = "rapidqa-encoder";  // the name the OpenAI and KServe routes serve
  std::size_t max_batch = 256;     // questions or texts in one request
  TenantRateLimit rate_limit;
};

class ServerApi {
 public:
  ServerApi(QAEngine& engine, ServerApiOptions options);

  ServerResponse handle(const ServerRequest& request);

  // POST /v1/ask answered from the result cache, or nullopt (then
  // handle() it on a worker). Never waits on the model or on a knowledge
  // update (QAEngine::ask_cached), so an event loop may call it: a hit
  // costs a few microseconds instead of two thread hand-offs.
  std::optional<ServerResponse> ask_cached(const ServerRequest& request);

  // POST /v1/ask for binary protocols (gRPC), which want the Answer rather
  // than its JSON: the same checks (readiness, token, body, rate limit).
  // Exactly one of answer and refusal is set. With cached_only, only a
  // result-cache hit (or its rate refusal) is given, else nullopt; without,
  // never nullopt.
  struct AskOutcome {
    std::optional<Answer> answer;
    ServerResponse refusal;  // the error response when there is no answer
    std::string tenant;
  };
  std::optional<AskOutcome> ask_typed(const ServerRequest& request, bool cached_only);

  // Ready once the knowledge is loaded: until then asks and inference
  // answer 503 and /readyz says why.
  void set_ready(bool ready) { ready_.store(ready); }
  bool ready() const { return ready_.load(); }

  // True when the Authorization value carries the admin token. The
  // comparison takes the same time whatever the value.
  bool authorized(std::string_view authorization) const;
  bool ask_needs_token() const { return options_.protect_ask; }

  QAEngine& engine() { return engine_; }
  const std::string& model_name() const { return options_.model_name; }

  // Embeddings for binary protocols (gRPC KServe): the checks of the JSON
  // routes (model name, batch size, readiness, token), the vectors without
  // a text form. On success returns status 200 with an empty body and fills
  // `vectors` (texts x dimension, row-major); otherwise the error response.
  ServerResponse embed(const std::string& model, const std::vector<std::string>& texts,
                       const std::string& authorization, std::vector<float>& vectors);

 private:
  ServerResponse route(const ServerRequest& request);
  ServerResponse ask(const ServerRequest& request);
  ServerResponse answered(const Answer& answer, const std::string& tenant);
  std::optional<ServerResponse> over_rate(const std::string& tenant, double questions);
  ServerResponse ask_batch(const ServerRequest& request);
  ServerResponse entry(const ServerRequest& request, const std::string& id);
  ServerResponse import_entries(const ServerRequest& request);
  ServerResponse cache_admin(const ServerRequest& request, std::string_view action);
  ServerResponse embeddings(const ServerRequest& request);
  ServerResponse kserve(const ServerRequest& request, std::string_view rest);
  ServerResponse kserve_infer(const ServerRequest& request, const std::string& model);

  QAEngine& engine_;
  ServerApiOptions options_;
  std::string admin_token_digest_;  // SHA-256 of admin_token
  TenantRateLimiter limiter_;
  std::atomic<bool> ready_{false};
};

// Helpers the transports share.
ServerResponse error_response(int http_status, std::string_view code, std::string_view message,
                              int retry_after_seconds = 0);
// The HTTP status for a Status code (invalid_argument 400, not_found 404 ...).
int http_status_for(StatusCode code);

}  // namespace rapidqa::server

// HttpLane: one caller's way to a remote engine over libcurl: a curl multi
// handle whose connections (keep-alive, or HTTP/2) stay open between calls,
// and the two transfers a call may run at once: the request and, when it
// is slow, a hedge to another endpoint. Whichever succeeds first wins; the
// other is abandoned and its connection closed by curl.
//
// Thread safety: thread-compatible; a lane serves one call at a time
// (RemoteEncoder keeps a pool of them, one per concurrent caller).
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

struct curl_slist;

namespace rapidqa::remote {

using SteadyTime = std::chrono::steady_clock::time_point;

struct HttpSettings {
  long http_version = 0;  // a CURL_HTTP_VERSION_* value; 0: curl's default
  std::string ca_file;
  bool verify_tls = true;
  std::chrono::milliseconds connect_timeout{1000};
  std::size_t max_response_bytes = 64u << 20;
};

struct HttpRequest {
  std::string url;
  std::string body;                  // POSTed as application/json
  std::vector<std::string> headers;  // "Name: value"
};

struct HttpResponse {
  long status = 0;                   // 0 when no HTTP answer came
  std::string body;
  std::string error;                 // why the transfer failed; empty when an answer came
  bool timed_out = false;            // the deadline passed first
  bool abandoned = false;            // the other transfer won first
  std::optional<std::chrono::milliseconds> retry_after;  // from a Retry-After header in seconds
  // KServe's binary tensor data: the body is this many bytes of JSON, then
  // the tensors' bytes (from an Inference-Header-Content-Length header).
  std::optional<std::size_t> inference_header_length;
  std::chrono::nanoseconds elapsed{0};
  bool succeeded() const { return error.empty() && status >= 200 && status < 300; }
};

// libcurl's global set-up, once per process (before any handle).
void global_init_once();

// The options every request sets on a curl easy handle (a CURL*): URL, a
// JSON POST body and header list (both borrowed: they must outlive the
// transfer), timeouts, TLS, the HTTP version.
void set_post_options(void* easy, const HttpSettings& settings, const std::string& url, const std::string& body,
                      curl_slist* headers, long timeout_ms);
// The delay a "Retry-After: SECONDS" header line asks for (an HTTP date
// is no hint), or nullopt for any other header line.
std::optional<std::chrono::milliseconds> retry_after_header(const char* line, std::size_t length);
// The length a "Content-Length: N" header line gives, or nullopt for any
// other line (and for a negative or missing number).
std::optional<std::size_t> content_length_header(const char* line, std::size_t length);
// The JSON's length an "Inference-Header-Content-Length: N" line gives
// (KServe's binary tensor data), or nullopt for any other line.
std::optional<std::size_t> inference_header_length_header(const char* line, std::size_t length);
// Content-Type: application/json, no Expect, then `extra` ("Name: value").
curl_slist* json_headers(const std::vector<std::string>& extra);

// A hedge to start: the request and a tag the caller knows it by.
struct Hedge {
  HttpRequest request;
  std::size_t tag = 0;
};

// A caller's way to a remote engine: one request and, when it is slow, a
// hedge to another endpoint. HttpLane (libcurl) and GrpcLane (gRPC)
// implement it.
class RequestLane {
 public:
  virtual ~RequestLane() = default;
  // Sends `first` (tagged first_tag). When hedge_after is set and the first
  // has not finished by then, calls make_hedge() and, when it gives a
  // request, sends that too. Returns when a transfer succeeded, when every
  // transfer started has finished, or at the deadline; `finished` is called
  // once per transfer started, with its tag and what came of it.
  virtual void run(const HttpRequest& first, std::size_t first_tag,
                   std::optional<std::chrono::nanoseconds> hedge_after,
                   const std::function<std::optional<Hedge>()>& make_hedge, SteadyTime deadline,
                   const std::function<void(std::size_t tag, HttpResponse&)>& finished) = 0;
};

class HttpLane final : public RequestLane {
 public:
  explicit HttpLane(HttpSettings settings);
  ~HttpLane() override;
  HttpLane(const HttpLane&) = delete;
  HttpLane& operator=(const HttpLane&) = delete;

  void run(const HttpRequest& first, std::size_t first_tag, std::optional<std::chrono::nanoseconds> hedge_after,
           const std::function<std::optional<Hedge>()>& make_hedge, SteadyTime deadline,
           const std::function<void(std::size_t tag, HttpResponse&)>& finished) override;

 private:
  struct Transfer;
  void start(Transfer& transfer, const HttpRequest& request, SteadyTime deadline);

  HttpSettings settings_;
  void* multi_ = nullptr;  // CURLM*
  std::vector<std::unique_ptr<Transfer>> transfers_;  // two, reused
};

}  // namespace rapidqa::remote

#include "remote/http_lane.h"

#include <curl/curl.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <stdexcept>

namespace rapidqa::remote {

void global_init_once() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

struct HttpLane::Transfer {
  CURL* easy = nullptr;
  curl_slist* headers = nullptr;
  std::string body;  // kept alive while curl reads it
  HttpResponse response;
  std::size_t tag = 0;
  std::size_t max_bytes = 0;
  SteadyTime started;
  bool active = false;
  char error[CURL_ERROR_SIZE] = {};

  ~Transfer() {
    if (headers) curl_slist_free_all(headers);
    if (easy) curl_easy_cleanup(easy);
  }

  static size_t on_body(char* data, size_t size, size_t count, void* self_ptr) {
    auto* self = static_cast<Transfer*>(self_ptr);
    const size_t n = size * count;
    if (self->response.body.size() + n > self->max_bytes) return 0;  // curl fails the transfer: too large
    self->response.body.append(data, n);
    return n;
  }

  static size_t on_header(char* data, size_t size, size_t count, void* self_ptr) {
    auto* self = static_cast<Transfer*>(self_ptr);
    if (auto hint = retry_after_header(data, size * count)) self->response.retry_after = hint;
    if (auto json_length = inference_header_length_header(data, size * count)) {
      self->response.inference_header_length = json_length;
    }
    // The body's room made once: grown piece by piece, a batch of vectors
    // was copied over and over as it arrived.
    if (auto length = content_length_header(data, size * count)) {
      constexpr std::size_t kMostReserved = std::size_t{4} << 20;  // a header is no promise: larger bodies grow
      self->response.body.reserve(std::min({*length, self->max_bytes, kMostReserved}));
    }
    return size * count;
  }
};

namespace {

// The unsigned number a "Name: N" header line gives (`lower_name` with its
// colon), or nullopt for another header and for a negative or missing number.
std::optional<std::size_t> number_header(const char* lower_name, const char* data, std::size_t n) {
  const std::size_t prefix = std::strlen(lower_name);
  if (n <= prefix || strncasecmp(data, lower_name, prefix) != 0) return std::nullopt;
  const std::string value(data + prefix, n - prefix);
  char* end = nullptr;
  if (value.find('-') != std::string::npos) return std::nullopt;  // strtoull would wrap it
  const unsigned long long number = std::strtoull(value.c_str(), &end, 10);
  if (end == value.c_str()) return std::nullopt;
  return static_cast<std::size_t>(number);
}

}  // namespace

std::optional<std::size_t> content_length_header(const char* data, std::size_t n) {
  return number_header("content-length:", data, n);
}

std::optional<std::size_t> inference_header_length_header(const char* data, std::size_t n) {
  return number_header("inference-header-content-length:", data, n);
}

std::optional<std::chrono::milliseconds> retry_after_header(const char* data, std::size_t n) {
  static constexpr char kRetryAfter[] = "retry-after:";
  const std::size_t prefix = sizeof(kRetryAfter) - 1;
  if (n <= prefix || strncasecmp(data, kRetryAfter, prefix) != 0) return std::nullopt;
  const std::string value(data + prefix, n - prefix);
  char* end = nullptr;
  const long seconds = std::strtol(value.c_str(), &end, 10);
  // Seconds only; an HTTP date is read as "no hint".
  if (end == value.c_str() || seconds < 0 || seconds >= 86400) return std::nullopt;
  return std::chrono::milliseconds(seconds * 1000);
}

void set_post_options(void* handle, const HttpSettings& settings, const std::string& url, const std::string& body,
                      curl_slist* headers, long timeout_ms) {
  CURL* e = handle;
  curl_easy_setopt(e, CURLOPT_URL, url.c_str());
  curl_easy_setopt(e, CURLOPT_POST, 1L);
  curl_easy_setopt(e, CURLOPT_POSTFIELDS, body.data());
  curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
  curl_easy_setopt(e, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e, CURLOPT_TCP_NODELAY, 1L);
  // A batch of 64 vectors is 135 KB of JSON: read in pieces of 256 KiB
  // rather than curl's 16 KiB, one receive and one callback instead of nine.
  curl_easy_setopt(e, CURLOPT_BUFFERSIZE, 256L * 1024);
  curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, std::max<long>(1, timeout_ms));
  curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(settings.connect_timeout.count()));
  curl_easy_setopt(e, CURLOPT_PIPEWAIT, 1L);
  if (settings.http_version) curl_easy_setopt(e, CURLOPT_HTTP_VERSION, settings.http_version);
  // libcurl before 8.0 fails the second request on a reused h2c
  // prior-knowledge connection ("Error in the HTTP2 framing layer", curl
  // issue 10634): there, such a connection serves one request. h2 over TLS
  // (ALPN) and HTTP/1.1 keep their connections.
  static const bool h2c_reuse_broken = curl_version_info(CURLVERSION_NOW)->version_num < 0x080000;
  if (h2c_reuse_broken && settings.http_version == CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE &&
      url.rfind("http://", 0) == 0) {
    curl_easy_setopt(e, CURLOPT_FORBID_REUSE, 1L);
  }
  if (!settings.ca_file.empty()) curl_easy_setopt(e, CURLOPT_CAINFO, settings.ca_file.c_str());
  curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, settings.verify_tls ? 1L : 0L);
  curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, settings.verify_tls ? 2L : 0L);
  curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
}

curl_slist* json_headers(const std::vector<std::string>& extra) {
  curl_slist* list = curl_slist_append(nullptr, "Content-Type: application/json");
  list = curl_slist_append(list, "Expect:");  // no 100-continue round trip for large bodies
  for (const auto& h : extra) list = curl_slist_append(list, h.c_str());
  return list;
}

HttpLane::HttpLane(HttpSettings settings) : settings_(std::move(settings)) {
  global_init_once();
  multi_ = curl_multi_init();
  if (!multi_) throw std::runtime_error("curl_multi_init failed");
  // Both transfers may share one HTTP/2 connection.
  curl_multi_setopt(static_cast<CURLM*>(multi_), CURLMOPT_PIPELINING, CURLPIPE_MULTIPLEX);
  for (int i = 0; i < 2; ++i) {
    auto t = std::make_unique<Transfer>();
    t->easy = curl_easy_init();
    if (!t->easy) throw std::runtime_error("curl_easy_init failed");
    transfers_.push_back(std::move(t));
  }
}

HttpLane::~HttpLane() {
  for (auto& t : transfers_) {
    if (t->active) curl_multi_remove_handle(static_cast<CURLM*>(multi_), t->easy);
  }
  transfers_.clear();
  curl_multi_cleanup(static_cast<CURLM*>(multi_));
}

void HttpLane::start(Transfer& t, const HttpRequest& request, SteadyTime deadline) {
  CURL* e = t.easy;
  curl_easy_reset(e);
  if (t.headers) curl_slist_free_all(t.headers);
  t.headers = json_headers(request.headers);
  t.body = request.body;
  t.response = HttpResponse{};
  t.max_bytes = settings_.max_response_bytes;
  t.error[0] = '\0';
  t.started = std::chrono::steady_clock::now();
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - t.started).count();
  set_post_options(e, settings_, request.url, t.body, t.headers, static_cast<long>(left));
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, &Transfer::on_body);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, &t);
  curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, &Transfer::on_header);
  curl_easy_setopt(e, CURLOPT_HEADERDATA, &t);
  curl_easy_setopt(e, CURLOPT_ERRORBUFFER, t.error);
  curl_multi_add_handle(static_cast<CURLM*>(multi_), e);
  t.active = true;
}

void HttpLane::run(const HttpRequest& first, std::size_t first_tag, std::optional<std::chrono::nanoseconds> hedge_after,
                   const std::function<std::optional<Hedge>()>& make_hedge, SteadyTime deadline,
                   const std::function<void(std::size_t, HttpResponse&)>& finished) {
  auto* multi = static_cast<CURLM*>(multi_);
  const SteadyTime began = std::chrono::steady_clock::now();
  Transfer& a = *transfers_[0];
  a.tag = first_tag;
  start(a, first, deadline);
  bool hedge_considered = !hedge_after || !make_hedge;
  bool won = false;
  const auto finish = [&](Transfer& t) {
    curl_multi_remove_handle(multi, t.easy);
    t.active = false;
    t.response.elapsed = std::chrono::steady_clock::now() - t.started;
    finished(t.tag, t.response);
  };
  for (;;) {
    int running = 0;
    curl_multi_perform(multi, &running);
    int queued = 0;
    while (CURLMsg* msg = curl_multi_info_read(multi, &queued)) {
      if (msg->msg != CURLMSG_DONE) continue;
      for (auto& t : transfers_) {
        if (!t->active || t->easy != msg->easy_handle) continue;
        if (msg->data.result == CURLE_OK) {
          curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &t->response.status);
        } else {
          t->response.timed_out = msg->data.result == CURLE_OPERATION_TIMEDOUT;
          t->response.error = t->error[0] ? t->error : curl_easy_strerror(msg->data.result);
          if (msg->data.result == CURLE_WRITE_ERROR) {
            t->response.error = "the answer is larger than " + std::to_string(settings_.max_response_bytes) + " bytes";
          }
        }
        const bool ok = t->response.succeeded();
        finish(*t);
        if (ok) won = true;
      }
    }
    const bool any_active = std::any_of(transfers_.begin(), transfers_.end(), [](const auto& t) { return t->active; });
    const SteadyTime now = std::chrono::steady_clock::now();
    // Nothing left to wait for: a first transfer that failed before the
    // hedge time ends the run too (the caller retries by its own policy).
    if (won || !any_active) break;
    if (now >= deadline) {
      for (auto& t : transfers_) {
        if (!t->active) continue;
        t->response.timed_out = true;
        t->response.error = "the deadline passed";
        finish(*t);
      }
      break;
    }
    SteadyTime wake = deadline;
    if (!hedge_considered) {
      const SteadyTime hedge_at = began + *hedge_after;
      if (now >= hedge_at) {
        hedge_considered = true;
        if (a.active) {
          if (std::optional<Hedge> h = make_hedge()) {
            Transfer& b = *transfers_[1];
            b.tag = h->tag;
            start(b, h->request, deadline);
            continue;  // let curl start it before waiting
          }
        }
      } else {
        wake = std::min(wake, hedge_at);
      }
    }
    // Rounded up: rounded down, the last part of a millisecond before a
    // hedge or the deadline was a wait of 0, a loop that spun on the CPU
    // the answer needs.
    const auto wait = std::chrono::ceil<std::chrono::milliseconds>(wake - now).count();
    curl_multi_poll(multi, nullptr, 0, static_cast<int>(std::clamp<long long>(wait, 0, 1000)), nullptr);
  }
  // The loser, if any, is abandoned: its connection goes with it.
  for (auto& t : transfers_) {
    if (!t->active) continue;
    t->response.abandoned = true;
    t->response.error = "abandoned: the other request answered first";
    finish(*t);
  }
}

}  // namespace rapidqa::remote

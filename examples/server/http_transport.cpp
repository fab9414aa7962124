#include "http_transport.h"

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <fstream>
#include <iterator>
#include <mutex>
#include <sstream>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <libwebsockets.h>
#include <nlohmann/json.hpp>

#include "access_log.h"
#include "h2_connection.h"
#include "tls_stream.h"
#include "request_ids.h"
#include "request_workers.h"
#include "tool_support.h"

namespace rapidqa::server {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

constexpr std::size_t kWriteChunk = 8192;  // body bytes per write: below HTTP/2's smallest frame limit
// HTTP/1.1 writes larger pieces: lws keeps what the socket does not take at
// once and sends it before the next writeable callback, and each piece
// costs a trip through the event loop (a batch of 64 embeddings is 135 KB,
// 17 trips in 8 KiB pieces).
constexpr std::size_t kHttp1WriteChunk = std::size_t{1} << 20;
constexpr const char* kWebSocketPath = "/v1/ws";

std::string header(lws* wsi, lws_token_indexes token) {
  const int length = lws_hdr_total_length(wsi, token);
  if (length <= 0) return {};
  std::string value(static_cast<std::size_t>(length) + 1, '\0');
  const int copied = lws_hdr_copy(wsi, value.data(), length + 1, token);
  value.resize(copied > 0 ? static_cast<std::size_t>(copied) : 0);
  return value;
}

// A header lws has no token for; `name` ends in ':'.
std::string custom_header(lws* wsi, const char* name) {
  const int name_length = static_cast<int>(std::strlen(name));
  const int length = lws_hdr_custom_length(wsi, name, name_length);
  if (length <= 0) return {};
  std::string value(static_cast<std::size_t>(length) + 1, '\0');
  const int copied = lws_hdr_custom_copy(wsi, value.data(), length + 1, name, name_length);
  value.resize(copied > 0 ? static_cast<std::size_t>(copied) : 0);
  return value;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace

// One request (HTTP) or one WebSocket connection, owned by Impl::live and
// reached from lws's per-session data by its id. Loop thread only.
struct Exchange {
  std::uint64_t id = 0;
  lws* wsi = nullptr;
  bool websocket = false;
  bool http2 = false;
  const char* protocol = "HTTP/1.1";
  Clock::time_point started;

  // HTTP
  H2Connection* h2 = nullptr;   // set for HTTP/2 streams: their connection, and the stream's id
  std::int32_t stream_id = 0;
  ServerRequest request;
  bool awaiting_body = false;
  bool dispatched = false;      // handed to a worker (or answered by the loop)
  bool refused_body = false;    // answered before the body was read: ignore the rest, then close
  std::optional<ServerResponse> response;
  bool headers_sent = false;
  std::size_t body_written = 0;
  bool close_after = false;

  // WebSocket
  std::string authorization;    // from the upgrade request
  std::string incoming;         // the message being received
  std::deque<std::string> outgoing;  // replies, each with LWS_PRE bytes in front
  std::size_t in_flight = 0;

  // A streamed ask (HTTP with Accept: text/event-stream; WebSocket with
  // "stream": true): the answer's pieces go out as they are written.
  bool sse = false;
  bool sse_started = false;   // 200 and the event-stream headers are out
  bool sse_ended = false;     // the final event is queued
  std::string sse_pending;    // events not yet written (libwebsockets' HTTP/1.1 and HTTP/2)
  // Set when the exchange ends, so a worker still generating for it stops;
  // made for streamed asks only (most requests never need it).
  std::shared_ptr<std::atomic<bool>> gone;
  ~Exchange() {
    if (gone) gone->store(true);
  }
};

// lws's per-session data: zeroed by lws, so only a plain id.
struct SessionData {
  std::uint64_t exchange_id;
};

struct Completion {
  std::uint64_t exchange_id;
  ServerResponse response;  // HTTP
  // WebSocket: the message (without LWS_PRE); a piece of a streamed HTTP
  // answer: its server-sent event.
  std::string message;
  bool websocket = false;
  bool partial = false;     // a piece of a streamed answer: the request is still at its worker
};

struct HttpTransport::Impl final : H2Connection::Listener {
  Impl(ServerApi& api_, RequestWorkers& workers_, AccessLog& access_log_, TransportOptions options_)
      : api(api_), workers(&workers_), access_log(access_log_), options(std::move(options_)) {}

  ServerApi& api;
  RequestWorkers* workers;
  AccessLog& access_log;
  TransportOptions options;
  std::function<void()>* reload_knowledge = nullptr;

  lws_context* context = nullptr;
  lws_vhost* vhost = nullptr;
  int bound_port = 0;
  int bound_h2_port = -1;
  std::shared_ptr<TlsServerContext> h2_tls;
  std::unordered_map<lws*, std::size_t> h2_busy;  // HTTP/2 connection -> its requests at the server's turn  // the HTTP/2 port's TLS, when serving TLS (replaced on reload)
  lws_protocols protocols[3]{};      // the HTTP/1.1 and WebSocket protocol, then HTTP/2
  lws_retry_bo_t retry{};
  std::string alpn = "h2,http/1.1";

  std::atomic<bool> drain_requested{false};
  std::atomic<bool> reload_requested{false};
  bool draining = false;  // loop thread
  Clock::time_point drain_deadline;
  std::thread drain_timer;
  std::mutex timer_mu;
  std::condition_variable timer_cancelled;
  bool timer_stop = false;  // guarded by timer_mu

  // Loop thread only.
  std::uint64_t next_id = 1;
  std::unordered_map<std::uint64_t, std::unique_ptr<Exchange>> live;
  std::size_t in_flight = 0;  // requests and WebSocket questions at the workers
  std::unordered_set<lws*> connections;  // network connections open
  std::unordered_set<lws*> over_limit;   // of those, the ones past max_connections
  std::vector<unsigned char> write_buffer;  // an answer's next piece, LWS_PRE bytes in front

  std::mutex done_mu;
  std::vector<Completion> done;  // guarded by done_mu

  static int callback(lws* wsi, lws_callback_reasons reason, void* user, void* in, std::size_t len);
  static int h2_callback(lws* wsi, lws_callback_reasons reason, void* user, void* in, std::size_t len);

  Exchange* exchange_of(void* user) {
    if (!user) return nullptr;
    auto it = live.find(static_cast<SessionData*>(user)->exchange_id);
    return it == live.end() ? nullptr : it->second.get();
  }
  Exchange& open_exchange(lws* wsi, void* user) {
    auto e = std::make_unique<Exchange>();
    e->id = next_id++;
    e->wsi = wsi;
    e->started = Clock::now();
    e->http2 = lws_get_network_wsi(wsi) != wsi;  // HTTP/2 streams are children of the connection
    e->protocol = e->http2 ? "HTTP/2" : "HTTP/1.1";
    static_cast<SessionData*>(user)->exchange_id = e->id;
    Exchange& ref = *e;
    live.emplace(e->id, std::move(e));
    return ref;
  }
  void close_exchange(void* user) {
    Exchange* e = exchange_of(user);
    if (!e) return;
    // A request still at a worker stays counted until its completion
    // arrives and finds the exchange gone.
    live.erase(e->id);
    static_cast<SessionData*>(user)->exchange_id = 0;
  }

  // HTTP --------------------------------------------------------------
  int on_http(lws* wsi, void* user) {
    Exchange& e = open_exchange(wsi, user);
    char* uri = nullptr;
    int uri_length = 0;
    const int method = lws_http_get_uri_and_method(wsi, &uri, &uri_length);
    switch (method) {
      case LWSHUMETH_GET: e.request.method = "GET"; break;
      case LWSHUMETH_POST: e.request.method = "POST"; break;
      case LWSHUMETH_OPTIONS: e.request.method = "OPTIONS"; break;
      case LWSHUMETH_PUT: e.request.method = "PUT"; break;
      case LWSHUMETH_PATCH: e.request.method = "PATCH"; break;
      case LWSHUMETH_DELETE: e.request.method = "DELETE"; break;
      case LWSHUMETH_HEAD: e.request.method = "HEAD"; break;
      case LWSHUMETH_COLON_PATH: e.request.method = header(wsi, WSI_TOKEN_HTTP_COLON_METHOD); break;
      default: e.request.method = "?"; break;
    }
    e.request.path = uri && uri_length > 0 ? std::string(uri, static_cast<std::size_t>(uri_length)) : "/";
    e.request.path = e.request.path.substr(0, e.request.path.find('?'));
    e.request.authorization = header(wsi, WSI_TOKEN_HTTP_AUTHORIZATION);
    e.request.request_id = request_id_from(custom_header(wsi, "x-request-id:"));
    e.sse = wants_event_stream(e.request, header(wsi, WSI_TOKEN_HTTP_ACCEPT));

    if (over_limit.count(lws_get_network_wsi(wsi))) {
      return answer_now(e, error_response(503, "resource_exhausted",
                                          "too many connections (at most " +
                                              std::to_string(options.max_connections) + ")", 1), true);
    }
    if (draining) return answer_now(e, error_response(503, "unavailable", "the server is shutting down", 1), true);

    if (!read_timeout(e, custom_header(wsi, "x-request-timeout-ms:"))) return 0;

    const bool has_body_method = e.request.method == "POST" || e.request.method == "PUT" || e.request.method == "PATCH";
    const std::string content_length = header(wsi, WSI_TOKEN_HTTP_CONTENT_LENGTH);
    if (!content_length.empty()) {
      char* end = nullptr;
      const unsigned long long declared = std::strtoull(content_length.c_str(), &end, 10);
      if (!end || *end != '\0') {
        return answer_now(e, error_response(400, "invalid_argument", "content-length is not a number"), true);
      }
      if (declared > options.max_body_bytes) {
        e.refused_body = true;
        return answer_now(e, too_large(), true);
      }
      if (declared == 0) return dispatch(e);
    } else if (!has_body_method || !e.http2) {
      // HTTP/1.1 without content-length carries no body (lws refuses chunked uploads).
      return dispatch(e);
    } else {
      // libwebsockets does not tell whether an HTTP/2 stream ended with its
      // headers, so a body must announce its length (every common client does).
      return answer_now(e, error_response(411, "invalid_argument",
                                          "an HTTP/2 request with a body needs a content-length header"), false);
    }
    e.awaiting_body = true;
    lws_set_timeout(wsi, PENDING_TIMEOUT_HTTP_CONTENT, static_cast<int>(options.client_timeout.count()));
    // A client that asked may send its body now (curl asks above 1 MiB,
    // then waits a second). libwebsockets does not answer Expect itself.
    if (!e.http2 && header(wsi, WSI_TOKEN_HTTP_EXPECT) == "100-continue") {
      static const char kContinue[] = "HTTP/1.1 100 Continue\r\n\r\n";
      unsigned char buffer[LWS_PRE + sizeof kContinue];
      std::memcpy(buffer + LWS_PRE, kContinue, sizeof kContinue - 1);
      if (lws_write(wsi, buffer + LWS_PRE, sizeof kContinue - 1, LWS_WRITE_HTTP) < 0) return -1;
    }
    return 0;
  }

  // The x-request-timeout-ms header; false when it was refused (answered).
  bool read_timeout(Exchange& e, const std::string& timeout) {
    if (timeout.empty()) return true;
    char* end = nullptr;
    const long long ms = std::strtoll(timeout.c_str(), &end, 10);
    if (!end || *end != '\0' || ms <= 0 || ms > 3600000) {
      answer_now(e, error_response(400, "invalid_argument", "x-request-timeout-ms must be whole milliseconds, 1 to 3600000"),
                 false);
      return false;
    }
    e.request.timeout = std::chrono::milliseconds(ms);
    return true;
  }

  ServerResponse too_large() const {
    return error_response(413, "out_of_range",
                          "the request body is larger than " + std::to_string(options.max_body_bytes) + " bytes");
  }

  int on_body(void* user, const char* data, std::size_t length) {
    Exchange* e = exchange_of(user);
    if (!e || e->refused_body || e->dispatched) return 0;
    if (e->request.body.size() + length > options.max_body_bytes) {
      e->refused_body = true;
      return answer_now(*e, too_large(), true);
    }
    e->request.body.append(data, length);
    lws_set_timeout(e->wsi, PENDING_TIMEOUT_HTTP_CONTENT, static_cast<int>(options.client_timeout.count()));
    return 0;
  }

  int on_body_complete(void* user) {
    Exchange* e = exchange_of(user);
    if (!e || e->dispatched) return 0;
    lws_set_timeout(e->wsi, NO_PENDING_TIMEOUT, 0);
    e->awaiting_body = false;
    return dispatch(*e);
  }

  // Answer from the loop itself (limits, shutdown): no worker involved.
  int answer_now(Exchange& e, ServerResponse response, bool close_after) {
    server_turn(e);
    e.close_after = close_after;
    log_access(e, response);
    e.response = std::move(response);
    deliver(e);
    return 0;
  }

  // Hands a made response to its connection.
  void deliver(Exchange& e) {
    if (e.sse && e.sse_started) {
      stream_event(e, sse_final_event(*e.response), true);
      return;
    }
    if (e.h2) {
      e.h2->respond(e.stream_id, *e.response, e.request.request_id, e.request.method == "HEAD");
    }
    lws_callback_on_writable(e.wsi);
  }

  static bool wants_event_stream(const ServerRequest& request, const std::string& accept) {
    return request.method == "POST" && request.path == "/v1/ask" && accept.find("text/event-stream") != std::string::npos;
  }

  // Server-sent events: the first piece sends 200 and the headers; the
  // final event ends the stream. An ask refused before any piece gets its
  // plain error response instead (deliver), with its own status.
  void stream_event(Exchange& e, const std::string& event, bool end) {
    if (e.sse_ended) return;
    e.sse_started = true;
    e.sse_ended = end;
    if (e.h2) {
      if (!e.headers_sent) {  // the headers go with the first event
        e.h2->start_stream(e.stream_id, "text/event-stream", e.request.request_id);
        e.headers_sent = true;
      }
      e.h2->append_stream(e.stream_id, event, end);
    } else {
      e.sse_pending += event;
    }
    lws_callback_on_writable(e.wsi);
  }

  // libwebsockets' HTTP/1.1 and HTTP/2: the headers without a length
  // (HTTP/1.1 then closes the connection at the end), then the events.
  int on_sse_writeable(lws* wsi, void* user, Exchange& e) {
    if (!e.headers_sent) {
      std::vector<std::pair<lws_token_indexes, std::string>> extra = {{WSI_TOKEN_HTTP_CACHE_CONTROL, "no-cache"}};
      if (!e.http2) extra.emplace_back(WSI_TOKEN_CONNECTION, "close");
      if (write_headers(wsi, e, 200, "text/event-stream", LWS_ILLEGAL_HTTP_CONTENT_LEN, extra)) return 1;
      lws_callback_on_writable(wsi);
      return 0;
    }
    if (e.sse_pending.empty() && !e.sse_ended) return 0;  // more when the worker has it
    const std::size_t chunk = std::min(kWriteChunk, e.sse_pending.size());
    const bool last = e.sse_ended && chunk == e.sse_pending.size();
    std::vector<unsigned char> buffer(LWS_PRE + chunk);
    std::memcpy(buffer.data() + LWS_PRE, e.sse_pending.data(), chunk);
    if (lws_write(wsi, buffer.data() + LWS_PRE, chunk, last ? LWS_WRITE_HTTP_FINAL : LWS_WRITE_HTTP) <
        static_cast<int>(chunk)) {
      return -1;
    }
    e.sse_pending.erase(0, chunk);
    if (!last) {
      if (!e.sse_pending.empty() || e.sse_ended) lws_callback_on_writable(wsi);
      return 0;
    }
    return end_response(wsi, user, !e.http2);  // HTTP/1.1 sent no length: the close ends the body
  }

  // The headers of a response: status, type, length (LWS_ILLEGAL_HTTP_CONTENT_LEN:
  // none), the request's id, then `extra`. Non-zero when lws refused.
  int write_headers(lws* wsi, Exchange& e, unsigned int status, const char* content_type, lws_filepos_t length,
                    const std::vector<std::pair<lws_token_indexes, std::string>>& extra,
                    const std::vector<std::pair<std::string, std::string>>& named = {}) {
    unsigned char buffer[LWS_PRE + 2048];
    unsigned char* start = buffer + LWS_PRE;
    unsigned char* p = start;
    unsigned char* end = buffer + sizeof buffer - 1;
    if (lws_add_http_common_headers(wsi, status, content_type, length, &p, end)) return 1;
    const std::string& rid = e.request.request_id;
    if (!rid.empty() &&
        lws_add_http_header_by_name(wsi, reinterpret_cast<const unsigned char*>("x-request-id:"),
                                    reinterpret_cast<const unsigned char*>(rid.data()), static_cast<int>(rid.size()),
                                    &p, end)) {
      return 1;
    }
    for (const auto& [token, value] : extra) {
      if (lws_add_http_header_by_token(wsi, token, reinterpret_cast<const unsigned char*>(value.data()),
                                       static_cast<int>(value.size()), &p, end)) {
        return 1;
      }
    }
    for (const auto& [name, value] : named) {
      const std::string with_colon = name + ":";
      if (lws_add_http_header_by_name(wsi, reinterpret_cast<const unsigned char*>(with_colon.c_str()),
                                      reinterpret_cast<const unsigned char*>(value.data()),
                                      static_cast<int>(value.size()), &p, end)) {
        return 1;
      }
    }
    if (lws_finalize_write_http_header(wsi, start, &p, end)) return 1;
    e.headers_sent = true;
    return 0;
  }

  // The response's last bytes are out: forget the exchange, then close the
  // connection or keep it for the next request.
  int end_response(lws* wsi, void* user, bool close) {
    close_exchange(user);
    if (close) return -1;
    return lws_http_transaction_completed(wsi) ? -1 : 0;
  }

  // A worker's callback that sends each piece of a streamed answer to the
  // loop; false (stop generating) once the client has gone.
  TokenCallback piece_sender(Exchange& e, std::function<Completion(std::string_view)> make) {
    if (!e.gone) e.gone = std::make_shared<std::atomic<bool>>(false);
    return [this, id = e.id, gone = e.gone, make = std::move(make)](std::string_view piece) {
      if (gone->load()) return false;
      Completion c = make(piece);
      c.exchange_id = id;
      c.partial = true;
      complete(std::move(c));
      return true;
    };
  }

  int dispatch(Exchange& e) {
    server_turn(e);
    // A result-cache hit is answered here: a hash lookup, no thread hand-off.
    if (auto cached = e.sse ? std::nullopt : api.ask_cached(e.request)) {
      answer_now(e, std::move(*cached), false);
      return 0;
    }
    if (e.sse) {
      e.request.on_token = piece_sender(e, [](std::string_view piece) {
        Completion c{};
        c.message = sse_token_event(piece);
        return c;
      });
    }
    ServerRequest request = std::move(e.request);
    e.request = ServerRequest{};
    e.request.method = request.method;  // kept for HEAD and the log
    e.request.path = request.path;
    e.request.request_id = request.request_id;
    const std::uint64_t id = e.id;
    const Clock::time_point started = e.started;
    const char* protocol = e.protocol;
    const bool queued = workers->try_submit([this, id, started, protocol, request = std::move(request)] {
      ServerResponse response = api.handle(request);
      access_log.write(request.request_id, protocol, request.method, request.path, response, Clock::now() - started);
      complete({id, std::move(response), {}, false});
    });
    if (!queued) {
      return answer_now(e, error_response(503, "resource_exhausted", "the server is busy: too many requests waiting", 1),
                        false);
    }
    ++in_flight;
    return 0;
  }

  // Worker thread: hand a result to the loop.
  void complete(Completion c) {
    {
      std::lock_guard<std::mutex> lock(done_mu);
      done.push_back(std::move(c));
    }
    lws_cancel_service(context);
  }

  int on_http_writeable(lws* wsi, void* user) {
    Exchange* e = exchange_of(user);
    if (e && e->sse && e->sse_started) return on_sse_writeable(wsi, user, *e);
    if (!e || !e->response) return 0;
    ServerResponse& r = *e->response;
    if (!e->headers_sent) {
      std::vector<std::pair<lws_token_indexes, std::string>> extra;
      if (r.retry_after_seconds > 0) extra.emplace_back(WSI_TOKEN_HTTP_RETRY_AFTER, std::to_string(r.retry_after_seconds));
      if (e->close_after && !e->http2 && !e->websocket) extra.emplace_back(WSI_TOKEN_CONNECTION, "close");
      if (write_headers(wsi, *e, static_cast<unsigned int>(r.status), r.content_type.c_str(), r.body.size(), extra,
                        r.headers)) {
        return 1;
      }
      if (e->request.method == "HEAD") r.body.clear();
      lws_callback_on_writable(wsi);
      return 0;
    }
    const std::size_t chunk = std::min(e->http2 ? kWriteChunk : kHttp1WriteChunk, r.body.size() - e->body_written);
    write_buffer.resize(LWS_PRE + chunk);
    unsigned char* buffer = write_buffer.data();
    std::memcpy(buffer + LWS_PRE, r.body.data() + e->body_written, chunk);
    const bool last = e->body_written + chunk == r.body.size();
    if (lws_write(wsi, buffer + LWS_PRE, chunk, last ? LWS_WRITE_HTTP_FINAL : LWS_WRITE_HTTP) != static_cast<int>(chunk)) {
      return 1;
    }
    e->body_written += chunk;
    if (!last) {
      lws_callback_on_writable(wsi);
      return 0;
    }
    return end_response(wsi, user, e->close_after);
  }

  // WebSocket ---------------------------------------------------------
  // The upgrade to WebSocket, refused with an HTTP status that says why
  // (lws writes it; returning 1 tells lws the answer was given).
  int on_upgrade(lws* wsi, const char* to) {
    // An "Upgrade: h2c" goes ahead on libwebsockets' own HTTP/2 (one request
    // then the connection); clients that multiplex use the HTTP/2 port.
    if (!to || std::strcmp(to, "websocket") != 0) return 0;
    const std::string path = header(wsi, WSI_TOKEN_GET_URI);
    unsigned int status = 0;
    const char* why = nullptr;
    if (path.substr(0, path.find('?')) != kWebSocketPath) {
      status = HTTP_STATUS_NOT_FOUND;
      why = "WebSocket sessions are served at /v1/ws";
    } else if (draining) {
      status = HTTP_STATUS_SERVICE_UNAVAILABLE;
      why = "the server is shutting down";
    } else if (over_limit.count(lws_get_network_wsi(wsi))) {
      status = HTTP_STATUS_SERVICE_UNAVAILABLE;
      why = "too many connections";
    } else if (api.ask_needs_token() && !api.authorized(header(wsi, WSI_TOKEN_HTTP_AUTHORIZATION))) {
      status = HTTP_STATUS_UNAUTHORIZED;
      why = "this route needs 'Authorization: Bearer TOKEN'";
    }
    if (!status) return 0;
    return lws_return_http_status(wsi, status, why) ? -1 : 1;
  }

  int on_ws_established(lws* wsi, void* user) {
    Exchange& e = open_exchange(wsi, user);
    e.websocket = true;
    e.protocol = "WebSocket";
    e.authorization = header(wsi, WSI_TOKEN_HTTP_AUTHORIZATION);
    return 0;
  }

  int on_ws_receive(lws* wsi, void* user, const char* data, std::size_t length) {
    Exchange* e = exchange_of(user);
    if (!e) return -1;
    if (e->incoming.size() + length > options.max_ws_message_bytes) {
      const std::string reason = "message larger than " + std::to_string(options.max_ws_message_bytes) + " bytes";
      lws_close_reason(wsi, LWS_CLOSE_STATUS_MESSAGE_TOO_LARGE,
                       reinterpret_cast<unsigned char*>(const_cast<char*>(reason.data())), reason.size());
      return -1;
    }
    e->incoming.append(data, length);
    if (!lws_is_final_fragment(wsi) || lws_remaining_packet_payload(wsi) > 0) return 0;
    std::string message = std::move(e->incoming);
    e->incoming.clear();
    if (lws_frame_is_binary(wsi)) {
      queue_ws_reply(*e, ws_error(json(), "invalid_argument", "send questions as text messages (JSON)"));
      return 0;
    }
    // The id is read here so that a refusal can name it; the rest is the
    // worker's.
    json parsed = json::parse(message, nullptr, false);
    if (parsed.is_discarded() || !parsed.is_object()) {
      queue_ws_reply(*e, ws_error(json(), "invalid_argument", "a message must be a JSON object"));
      return 0;
    }
    json id = parsed.contains("id") ? parsed["id"] : json();
    if (draining) {
      queue_ws_reply(*e, ws_error(id, "unavailable", "the server is shutting down"));
      return 0;
    }
    if (e->in_flight >= options.max_ws_in_flight) {
      queue_ws_reply(*e, ws_error(id, "resource_exhausted",
                                  "at most " + std::to_string(options.max_ws_in_flight) +
                                      " questions unanswered on one connection"));
      return 0;
    }
    parsed.erase("id");
    bool stream = false;
    if (auto it = parsed.find("stream"); it != parsed.end()) {
      if (!it->is_boolean()) {
        queue_ws_reply(*e, ws_error(id, "invalid_argument", "field 'stream' must be true or false"));
        return 0;
      }
      stream = it->get<bool>();
      parsed.erase(it);
    }
    ServerRequest request;
    request.method = "POST";
    request.path = "/v1/ask";
    request.body = parsed.dump();
    request.authorization = e->authorization;
    request.request_id = make_request_id();
    const std::uint64_t exchange_id = e->id;
    const Clock::time_point started = Clock::now();
    if (auto cached = stream ? std::nullopt : api.ask_cached(request)) {
      access_log.write(request.request_id, "WebSocket", request.method, request.path, *cached, Clock::now() - started);
      queue_ws_reply(*e, ws_reply(id, *cached));
      return 0;
    }
    // Streamed: {"id", "token"} messages as the answer is written, then
    // the reply as without streaming.
    if (stream) {
      request.on_token = piece_sender(*e, [id](std::string_view piece) {
        Completion c{};
        c.websocket = true;
        c.message = tools::json_line({{"id", id}, {"token", piece}});
        return c;
      });
    }
    const bool queued = workers->try_submit([this, exchange_id, started, id, request = std::move(request)] {
      ServerResponse response = api.handle(request);
      access_log.write(request.request_id, "WebSocket", request.method, request.path, response, Clock::now() - started);
      complete({exchange_id, {}, ws_reply(id, response), true});
    });
    if (!queued) {
      queue_ws_reply(*e, ws_error(id, "resource_exhausted", "the server is busy: too many requests waiting"));
      return 0;
    }
    ++e->in_flight;
    ++in_flight;
    return 0;
  }

  // A response as a WebSocket message: its JSON with the question's id and
  // the HTTP status the same request would have had.
  // The response body is a JSON object made by the API: the id and status
  // are put in front of its members as text, not by parsing it again.
  static std::string ws_reply(const json& id, const ServerResponse& response) {
    return json_with_members_first("\"id\":" + tools::json_line(id) + ",\"status\":" + std::to_string(response.status),
                                   response.body);
  }

  static std::string ws_error(const json& id, const char* code, const std::string& message) {
    return tools::json_line({{"id", id}, {"status", code == std::string("invalid_argument") ? 400 : 503},
                             {"error", {{"code", code}, {"message", message}}}});
  }

  void queue_ws_reply(Exchange& e, const std::string& reply) {
    std::string framed(LWS_PRE, '\0');
    framed += reply;
    e.outgoing.push_back(std::move(framed));
    lws_callback_on_writable(e.wsi);
  }

  int on_ws_writeable(lws* wsi, void* user) {
    Exchange* e = exchange_of(user);
    if (!e || e->outgoing.empty()) return 0;
    std::string& message = e->outgoing.front();
    const std::size_t length = message.size() - LWS_PRE;
    if (lws_write(wsi, reinterpret_cast<unsigned char*>(message.data()) + LWS_PRE, length, LWS_WRITE_TEXT) <
        static_cast<int>(length)) {
      return -1;
    }
    e->outgoing.pop_front();
    if (!e->outgoing.empty()) lws_callback_on_writable(wsi);
    return 0;
  }

  // The loop woken by a worker or a signal ----------------------------
  void on_wake() {
    std::vector<Completion> ready;
    {
      std::lock_guard<std::mutex> lock(done_mu);
      ready.swap(done);
    }
    for (auto& c : ready) {
      if (!c.partial) --in_flight;
      auto it = live.find(c.exchange_id);
      if (it == live.end()) continue;  // the client went away
      Exchange& e = *it->second;
      if (c.partial) {
        if (c.websocket) {
          queue_ws_reply(e, c.message);
        } else {
          stream_event(e, c.message, false);
        }
      } else if (c.websocket) {
        --e.in_flight;
        queue_ws_reply(e, c.message);
      } else {
        e.response = std::move(c.response);
        deliver(e);
      }
    }
    if (drain_requested.load() && !draining) {
      draining = true;
      drain_deadline = Clock::now() + options.drain_grace;
      std::fprintf(stderr, "rapidqa-server: draining: %zu requests in flight, up to %llds\n", in_flight,
                   static_cast<long long>(options.drain_grace.count()));
    }
    if (reload_requested.exchange(false)) reload();
  }

  void reload() {
    if (!options.tls_certificate.empty()) {
      const std::string cert = read_file(options.tls_certificate);
      const std::string key = read_file(options.tls_key);
      if (cert.empty() || key.empty() ||
          lws_tls_cert_updated(context, options.tls_certificate.c_str(), options.tls_key.c_str(), cert.data(),
                               cert.size(), key.data(), key.size())) {
        std::fprintf(stderr, "rapidqa-server: reload: the certificate or key could not be read; the old one stays\n");
      } else {
        std::fprintf(stderr, "rapidqa-server: reload: certificate reloaded\n");
      }
      if (h2_tls) {
        // New HTTP/2 connections get the new certificate; open ones keep theirs.
        auto loaded = TlsServerContext::load(options.tls_certificate, options.tls_key);
        if (loaded) h2_tls = std::move(loaded).value();
      }
    }
    if (reload_knowledge && *reload_knowledge) {
      auto job = *reload_knowledge;
      if (!workers->try_submit(job)) std::fprintf(stderr, "rapidqa-server: reload: busy, try again\n");
    }
  }

  void log_access(const Exchange& e, const ServerResponse& response) {
    access_log.write(e.request.request_id, e.protocol, e.request.method, e.request.path, response,
                     Clock::now() - e.started);
  }

  // HTTP/2 (nghttp2 on a raw socket) ----------------------------------
  void headers_done(H2Connection& connection, H2Connection::Stream& stream, bool ends) override {
    auto owned = std::make_unique<Exchange>();
    Exchange& e = *owned;
    e.id = next_id++;
    e.wsi = static_cast<lws*>(connection.owner());
    e.started = Clock::now();
    e.http2 = true;
    e.protocol = "HTTP/2";
    e.h2 = &connection;
    e.stream_id = stream.id;
    live.emplace(e.id, std::move(owned));
    stream.exchange = e.id;
    e.request.method = stream.method;
    e.request.path = stream.path.substr(0, stream.path.find('?'));
    e.request.authorization = stream.authorization;
    e.request.request_id = request_id_from(stream.request_id);
    e.sse = wants_event_stream(e.request, stream.accept);
    if (over_limit.count(e.wsi)) {
      answer_now(e, error_response(503, "resource_exhausted",
                                   "too many connections (at most " + std::to_string(options.max_connections) + ")",
                                   1),
                 false);
      return;
    }
    if (draining) {
      answer_now(e, error_response(503, "unavailable", "the server is shutting down", 1), false);
      return;
    }
    if (!read_timeout(e, stream.timeout)) return;
    if (!stream.content_length.empty()) {
      char* end = nullptr;
      const unsigned long long declared = std::strtoull(stream.content_length.c_str(), &end, 10);
      if (!end || *end != '\0') {
        answer_now(e, error_response(400, "invalid_argument", "content-length is not a number"), false);
        return;
      }
      if (declared > options.max_body_bytes) {
        stream.body_refused = true;
        e.refused_body = true;
        answer_now(e, too_large(), false);
        return;
      }
    }
    if (ends) {
      dispatch(e);
    } else {
      e.awaiting_body = true;
    }
  }

  void body_done(H2Connection&, H2Connection::Stream& stream) override {
    auto it = live.find(stream.exchange);
    if (it == live.end() || it->second->dispatched) return;
    Exchange& e = *it->second;
    e.awaiting_body = false;
    e.request.body = std::move(stream.body);
    dispatch(e);
  }

  void body_too_large(H2Connection&, H2Connection::Stream& stream) override {
    auto it = live.find(stream.exchange);
    if (it == live.end() || it->second->dispatched) return;
    it->second->refused_body = true;
    answer_now(*it->second, too_large(), false);
  }

  void stream_closed(H2Connection&, H2Connection::Stream& stream) override {
    auto it = live.find(stream.exchange);
    if (it == live.end()) return;
    if (it->second->dispatched) {
      auto busy = h2_busy.find(it->second->wsi);
      if (busy != h2_busy.end() && --busy->second == 0) h2_busy.erase(busy);
    }
    live.erase(it);
  }

  // The request is complete: the rest is the server's to do. An HTTP/2
  // connection is not timed out while any of its requests is (a slow
  // answer is not a slow client).
  void server_turn(Exchange& e) {
    if (e.dispatched) return;
    e.dispatched = true;
    if (e.h2) {
      ++h2_busy[e.wsi];
      refresh_h2_timeout(e.wsi);
    }
  }

  void refresh_h2_timeout(lws* wsi) {
    if (h2_busy.count(wsi)) {
      lws_set_timeout(wsi, NO_PENDING_TIMEOUT, 0);
    } else {
      lws_set_timeout(wsi, PENDING_TIMEOUT_USER_OK, static_cast<int>(options.client_timeout.count()));
    }
  }

  // A raw connection of the HTTP/2 listener, reached from lws's
  // per-session data: nghttp2's state and, with TLS, OpenSSL's.
  struct H2Socket {
    std::unique_ptr<TlsStream> tls;
    std::unique_ptr<H2Connection> h2;
    std::string out;          // bytes for the socket not yet written
    std::size_t out_sent = 0;
    bool failed = false;      // TLS failed: write what is left (an alert), then close
  };

  int on_h2_adopt(lws* wsi, void* user) {
    if (draining) return -1;
    on_new_connection(wsi);
    H2Connection::Settings settings;
    settings.max_concurrent_streams = options.max_streams_per_connection;
    settings.max_header_list_bytes = static_cast<std::uint32_t>(options.max_header_bytes);
    settings.max_body_bytes = options.max_body_bytes;
    auto* socket = new H2Socket;
    if (h2_tls) socket->tls = std::make_unique<TlsStream>(h2_tls);
    socket->h2 = std::make_unique<H2Connection>(*this, settings, wsi);
    *static_cast<H2Socket**>(user) = socket;
    lws_set_timeout(wsi, PENDING_TIMEOUT_USER_OK, static_cast<int>(options.client_timeout.count()));
    lws_callback_on_writable(wsi);  // the server's SETTINGS
    return 0;
  }

  int on_h2_receive(lws* wsi, void* user, const unsigned char* data, std::size_t length) {
    H2Socket* socket = *static_cast<H2Socket**>(user);
    if (!socket) return -1;
    // Any bytes are progress: a connection silent for the client timeout
    // while it is the client's turn is cut off.
    refresh_h2_timeout(wsi);
    if (socket->tls) {
      std::string plain;
      if (!socket->tls->receive(data, length, plain)) socket->failed = true;
      if (!plain.empty()) socket->h2->receive(reinterpret_cast<const unsigned char*>(plain.data()), plain.size());
    } else {
      // On a protocol error nghttp2 queues GOAWAY; once sent, finished() closes.
      socket->h2->receive(data, length);
    }
    lws_callback_on_writable(wsi);
    return 0;
  }

  int on_h2_writeable(lws* wsi, void* user) {
    H2Socket* socket = *static_cast<H2Socket**>(user);
    if (!socket) return -1;
    if (socket->out_sent == socket->out.size()) {
      socket->out.clear();
      socket->out_sent = 0;
      if (socket->tls) {
        if (socket->tls->established() && !socket->failed) {
          const std::string_view plain = socket->h2->pending_output();
          if (!plain.empty()) {
            if (!socket->tls->send(plain)) socket->failed = true;
            socket->h2->consume_output(plain.size());
          }
        }
        socket->out = socket->tls->take_output();
      } else {
        socket->out = std::string(socket->h2->pending_output());
        socket->h2->consume_output(socket->out.size());
      }
    }
    if (socket->out_sent < socket->out.size()) {
      unsigned char buffer[LWS_PRE + 16384];
      const std::size_t n = std::min(socket->out.size() - socket->out_sent, sizeof buffer - LWS_PRE);
      std::memcpy(buffer + LWS_PRE, socket->out.data() + socket->out_sent, n);
      if (lws_write(wsi, buffer + LWS_PRE, n, LWS_WRITE_RAW) < static_cast<int>(n)) return -1;
      socket->out_sent += n;
      refresh_h2_timeout(wsi);
      lws_callback_on_writable(wsi);  // more may be ready
      return 0;
    }
    return socket->failed || socket->h2->finished() ? -1 : 0;
  }

  void on_h2_close(lws* wsi, void* user) {
    H2Socket*& socket = *static_cast<H2Socket**>(user);
    // nghttp2_session_del does not report the streams it drops: forget
    // their exchanges here, so a worker finishing later finds none.
    if (socket) {
      const H2Connection* connection = socket->h2.get();
      for (auto it = live.begin(); it != live.end();) {
        it = it->second->h2 == connection ? live.erase(it) : std::next(it);
      }
    }
    delete socket;
    socket = nullptr;
    h2_busy.erase(wsi);
    on_wsi_destroy(wsi);
  }

  // Whether any answer is still to be written: at a worker, or made and
  // not yet sent.
  bool answers_outstanding() const {
    if (in_flight > 0) return true;
    return std::any_of(live.begin(), live.end(), [](const auto& item) {
      const Exchange& e = *item.second;
      return (e.response && e.dispatched) || !e.outgoing.empty();
    });
  }

  // Connections -------------------------------------------------------
  // A connection past the limit is still accepted, so that it can be told
  // why (503) before it is closed.
  void on_new_connection(lws* wsi) {
    connections.insert(wsi);
    if (connections.size() > options.max_connections) over_limit.insert(wsi);
  }
  void on_wsi_destroy(lws* wsi) {
    connections.erase(wsi);
    over_limit.erase(wsi);
  }
};

int HttpTransport::Impl::callback(lws* wsi, lws_callback_reasons reason, void* user, void* in, std::size_t len) {
  Impl* self = static_cast<Impl*>(lws_context_user(lws_get_context(wsi)));
  if (!self) return lws_callback_http_dummy(wsi, reason, user, in, len);
  try {
    switch (reason) {
      case LWS_CALLBACK_FILTER_NETWORK_CONNECTION:
        return self->draining ? 1 : 0;  // draining: stop accepting
      case LWS_CALLBACK_SERVER_NEW_CLIENT_INSTANTIATED:
        self->on_new_connection(wsi);
        break;
      case LWS_CALLBACK_WSI_DESTROY:
        self->on_wsi_destroy(wsi);
        break;
      case LWS_CALLBACK_HTTP:
        return self->on_http(wsi, user);
      case LWS_CALLBACK_HTTP_BODY:
        return self->on_body(user, static_cast<const char*>(in), len);
      case LWS_CALLBACK_HTTP_BODY_COMPLETION:
        return self->on_body_complete(user);
      case LWS_CALLBACK_HTTP_WRITEABLE:
        return self->on_http_writeable(wsi, user);
      case LWS_CALLBACK_CLOSED_HTTP:
        self->close_exchange(user);
        break;
      case LWS_CALLBACK_HTTP_CONFIRM_UPGRADE:
        return self->on_upgrade(wsi, static_cast<const char*>(in));
      case LWS_CALLBACK_ESTABLISHED:
        return self->on_ws_established(wsi, user);
      case LWS_CALLBACK_RECEIVE:
        return self->on_ws_receive(wsi, user, static_cast<const char*>(in), len);
      case LWS_CALLBACK_SERVER_WRITEABLE:
        return self->on_ws_writeable(wsi, user);
      case LWS_CALLBACK_CLOSED:
        self->close_exchange(user);
        break;
      case LWS_CALLBACK_EVENT_WAIT_CANCELLED:
        self->on_wake();
        break;
      default:
        break;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rapidqa-server: dropping a connection: %s\n", e.what());
    return -1;
  }
  return lws_callback_http_dummy(wsi, reason, user, in, len);
}

int HttpTransport::Impl::h2_callback(lws* wsi, lws_callback_reasons reason, void* user, void* in, std::size_t len) {
  Impl* self = static_cast<Impl*>(lws_context_user(lws_get_context(wsi)));
  if (!self) return 0;
  try {
    switch (reason) {
      case LWS_CALLBACK_RAW_ADOPT:
        return self->on_h2_adopt(wsi, user);
      case LWS_CALLBACK_RAW_RX:
        return self->on_h2_receive(wsi, user, static_cast<const unsigned char*>(in), len);
      case LWS_CALLBACK_RAW_WRITEABLE:
        return self->on_h2_writeable(wsi, user);
      case LWS_CALLBACK_RAW_CLOSE:
        self->on_h2_close(wsi, user);
        break;
      default:
        break;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rapidqa-server: dropping an HTTP/2 connection: %s\n", e.what());
    return -1;
  }
  return 0;
}

HttpTransport::HttpTransport(ServerApi& api, RequestWorkers& workers, AccessLog& access_log, TransportOptions options)
    : impl_(std::make_unique<Impl>(api, workers, access_log, std::move(options))) {
  impl_->reload_knowledge = &reload_knowledge;
}

HttpTransport::~HttpTransport() {
  {
    std::lock_guard<std::mutex> lock(impl_->timer_mu);
    impl_->timer_stop = true;
  }
  impl_->timer_cancelled.notify_all();
  if (impl_->drain_timer.joinable()) impl_->drain_timer.join();
  // The workers were stopped first (see the header): no job wakes a
  // destroyed context.
  if (impl_->context) lws_context_destroy(impl_->context);
}

Status HttpTransport::start() {
  Impl& s = *impl_;
  const TransportOptions& o = s.options;
  const bool tls = !o.tls_certificate.empty() || !o.tls_key.empty();
  if (tls && (o.tls_certificate.empty() || o.tls_key.empty())) {
    return Status::invalid_argument("TLS needs both a certificate (--tls-cert) and its key (--tls-key)");
  }
  if (!tls && !o.plain) {
    return Status::invalid_argument("give --tls-cert and --tls-key, or --plain to serve without TLS");
  }
  if (o.max_header_bytes < 1024 || o.max_header_bytes > 65535) {
    return Status::invalid_argument("--max-header-bytes must be between 1024 and 65535");
  }

  lws_set_log_level(LLL_ERR, nullptr);
  s.protocols[0] = {"rapidqa.v1", &Impl::callback, sizeof(SessionData), 0, 0, nullptr, 0};
  s.protocols[1] = {"rapidqa-h2", &Impl::h2_callback, sizeof(Impl::H2Socket*), 0, 0, nullptr, 0};
  s.protocols[2] = {nullptr, nullptr, 0, 0, 0, nullptr, 0};
  s.retry.secs_since_valid_ping = static_cast<std::uint16_t>(o.ws_ping_interval.count());
  s.retry.secs_since_valid_hangup = static_cast<std::uint16_t>(2 * o.ws_ping_interval.count());

  if (o.port < 0 || o.port > 65535) return Status::invalid_argument("--port must be between 0 and 65535");
  if (o.h2_port < -1 || o.h2_port > 65535) return Status::invalid_argument("--h2-port must be between 0 and 65535");

  // One event loop, a vhost per listening port.
  lws_context_creation_info info;
  std::memset(&info, 0, sizeof info);
  info.options = LWS_SERVER_OPTION_EXPLICIT_VHOSTS;
  if (tls) info.options |= LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT;
  info.user = &s;
  info.max_http_header_data = static_cast<unsigned short>(o.max_header_bytes);
  info.timeout_secs = static_cast<unsigned int>(o.client_timeout.count());
  info.timeout_secs_ah_idle = static_cast<unsigned int>(o.client_timeout.count());  // headers that never finish
  info.pt_serv_buf_size = 32768;
  s.context = lws_create_context(&info);
  if (!s.context) return Status::io_error("cannot start the event loop (libwebsockets)");

  auto listen = [&](int port, bool h2, const char* name) -> Status {
    lws_context_creation_info vh;
    std::memset(&vh, 0, sizeof vh);
    vh.vhost_name = name;
    vh.port = port;  // 0: the system picks a free port
    vh.iface = o.address.c_str();
    vh.protocols = s.protocols;
    vh.keepalive_timeout = static_cast<int>(o.client_timeout.count());
    vh.timeout_secs = static_cast<unsigned int>(o.client_timeout.count());
    vh.timeout_secs_ah_idle = static_cast<unsigned int>(o.client_timeout.count());  // headers that never finish
    vh.retry_and_idle_policy = &s.retry;
    vh.http2_settings[0] = 1;
    vh.http2_settings[H2SET_HEADER_TABLE_SIZE] = 4096;
    vh.http2_settings[H2SET_ENABLE_PUSH] = 0;
    vh.http2_settings[H2SET_MAX_CONCURRENT_STREAMS] = o.max_streams_per_connection;
    vh.http2_settings[H2SET_INITIAL_WINDOW_SIZE] = 65535;
    vh.http2_settings[H2SET_MAX_FRAME_SIZE] = 16384;
    vh.http2_settings[H2SET_MAX_HEADER_LIST_SIZE] = static_cast<std::uint32_t>(o.max_header_bytes);
    vh.options = LWS_SERVER_OPTION_VALIDATE_UTF8;
    if (h2) {
      // Every connection is HTTP/2 with prior knowledge, spoken by nghttp2.
      vh.options |= LWS_SERVER_OPTION_ADOPT_APPLY_LISTEN_ACCEPT_CONFIG;
      vh.listen_accept_role = "raw-skt";
      vh.listen_accept_protocol = "rapidqa-h2";
    }
    if (tls && !h2) {  // the HTTP/2 port does its own TLS (tls_stream.h)
      vh.options |= LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT;  // lws reads it per vhost too
      vh.ssl_cert_filepath = o.tls_certificate.c_str();
      vh.ssl_private_key_filepath = o.tls_key.c_str();
      vh.alpn = "http/1.1";
    }
    lws_vhost* vhost = lws_create_vhost(s.context, &vh);
    if (!vhost) {
      return Status::io_error("cannot listen on " + o.address + ":" + std::to_string(port) +
                              (tls ? " with the certificate " + o.tls_certificate : std::string()) +
                              " (port in use, address not local, or the certificate or key unreadable)");
    }
    (h2 ? s.bound_h2_port : s.bound_port) = lws_get_vhost_listen_port(vhost);
    return Status::ok();
  };
  if (Status st = listen(o.port, false, "main"); !st.is_ok()) return st;
  if (o.h2_port >= 0) {
    if (tls) {
      auto loaded = TlsServerContext::load(o.tls_certificate, o.tls_key);
      if (!loaded) return loaded.status();
      s.h2_tls = std::move(loaded).value();
    }
    if (Status st = listen(o.h2_port, true, "h2"); !st.is_ok()) return st;
  }
  return Status::ok();
}

int HttpTransport::port() const { return impl_->bound_port; }
int HttpTransport::h2_port() const { return impl_->bound_h2_port; }

void HttpTransport::run() {
  Impl& s = *impl_;
  while (true) {
    if (lws_service(s.context, 0) < 0) break;
    if (!s.draining) continue;
    const bool outstanding = s.answers_outstanding();
    if (!outstanding || Clock::now() >= s.drain_deadline) {
      if (outstanding) std::fprintf(stderr, "rapidqa-server: grace period over with answers unsent\n");
      break;
    }
  }
}

void HttpTransport::request_drain() {
  Impl& s = *impl_;
  if (s.drain_requested.exchange(true)) return;
  lws_cancel_service(s.context);
  // Wake the loop once the grace period is over even if nothing else does.
  const auto grace = s.options.drain_grace;
  lws_context* context = s.context;
  s.drain_timer = std::thread([&s, context, grace] {
    std::unique_lock<std::mutex> lock(s.timer_mu);
    if (!s.timer_cancelled.wait_for(lock, grace + std::chrono::milliseconds(50), [&] { return s.timer_stop; })) {
      lws_cancel_service(context);
    }
  });
}

void HttpTransport::request_reload() {
  impl_->reload_requested.store(true);
  lws_cancel_service(impl_->context);
}

}  // namespace rapidqa::server

// HttpTransport: HTTP/1.1, WebSocket and HTTP/2 on one libwebsockets event
// loop, in front of a ServerApi. The main port serves HTTP/1.1 and
// WebSocket (with TLS: ALPN http/1.1); HTTP/2 has a port of its own (h2c
// with prior knowledge, or h2 over TLS by ALPN), whose raw sockets are
// spoken by nghttp2 and, for TLS, OpenSSL directly (h2_connection.h says
// why libwebsockets' own HTTP/2 is not used).
//
// The loop never waits on the engine: a complete request is handed to the
// RequestWorkers (queue full: 503 with Retry-After at once), the worker runs ServerApi::handle and wakes the loop
// with the response, which the loop writes when the socket can take it.
// Requests whose connection closed meanwhile are dropped on completion.
//
// Limits enforced here (the API enforces the rest): body and header size,
// connections (past the limit a connection gets 503 and is closed), HTTP/2
// streams per connection, WebSocket message size and messages in flight per
// connection, and slow clients (no progress within the client timeout: the
// connection is closed).
//
// Thread safety: run() is called on one thread, which becomes the event
// loop; request_drain() and request_reload() may be called from any thread
// (a signal-handling thread) while it runs.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <rapidqa/status.h>

#include "access_log.h"
#include "request_workers.h"
#include "server_api.h"

namespace rapidqa::server {

struct TransportOptions {
  std::string address = "127.0.0.1";     // interface to listen on ("0.0.0.0": every IPv4 one)
  int port = 8080;                       // HTTP/1.1 and WebSocket (with TLS: h2 too); 0: any free port
  int h2_port = -1;                      // HTTP/2 (h2c with prior knowledge, or h2 over TLS) on this port (0: any); -1: none
  std::string tls_certificate;           // PEM file; with tls_key, serve TLS (h2 and HTTP/1.1 by ALPN)
  std::string tls_key;                   // PEM private key
  bool plain = false;                    // without TLS: must be asked for
  std::size_t max_body_bytes = 1 << 20;  // a larger request body: 413
  std::size_t max_header_bytes = 8192;   // all of a request's headers together; more: the request is refused
  std::size_t max_connections = 1024;    // more: 503 and the connection is closed
  std::uint32_t max_streams_per_connection = 128;  // HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS
  std::size_t max_ws_message_bytes = 1 << 16;      // a larger WebSocket message closes the connection (1009)
  std::size_t max_ws_in_flight = 32;     // questions a WebSocket may have unanswered; more are refused one by one
  std::chrono::seconds client_timeout{10};  // a client that sends nothing for this long is cut off
  std::chrono::seconds ws_ping_interval{30};  // an idle WebSocket is pinged; no pong for twice this: closed
  std::chrono::seconds drain_grace{10};  // SIGTERM: how long requests in flight may still take
};

class HttpTransport {
 public:
  // The workers must be stopped before the transport is destroyed: a job
  // that finishes wakes the event loop.
  HttpTransport(ServerApi& api, RequestWorkers& workers, AccessLog& access_log, TransportOptions options);
  ~HttpTransport();
  HttpTransport(const HttpTransport&) = delete;
  HttpTransport& operator=(const HttpTransport&) = delete;

  // Binds the port and loads the certificate. Fails (kInvalidArgument,
  // kIoError) with the reason when either cannot be done.
  Status start();
  // The port listened on (useful with port 0), after start().
  int port() const;
  int h2_port() const;  // -1 when there is no HTTP/2 listener

  // Serves until a drain finishes: returns once every request in flight is
  // answered or the grace period is over.
  void run();

  // Stop accepting; finish what is in flight (thread-safe).
  void request_drain();
  // Reload the TLS certificate from its files, and run `reload_knowledge`
  // (set before run()) on a worker, without dropping connections.
  void request_reload();
  std::function<void()> reload_knowledge;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace rapidqa::server

// TLS for the HTTP/2 listener's raw sockets: OpenSSL over memory buffers,
// so the event loop feeds it the socket's bytes and writes what it gives
// back. The HTTP/2 port does its own TLS because libwebsockets, on seeing
// ALPN "h2", hands the connection to its own HTTP/2 code (see
// h2_connection.h for why that is avoided).
//
// Thread safety: TlsServerContext is immutable once loaded and shared;
// TlsStream is thread-compatible (the event loop owns it).
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include <rapidqa/status.h>

struct ssl_ctx_st;
struct ssl_st;
struct bio_st;

namespace rapidqa::server {

class TlsServerContext {
 public:
  // A certificate chain and key (PEM files) offering ALPN "h2" only.
  static Result<std::shared_ptr<TlsServerContext>> load(const std::string& certificate, const std::string& key);
  ~TlsServerContext();
  TlsServerContext(const TlsServerContext&) = delete;
  TlsServerContext& operator=(const TlsServerContext&) = delete;
  ssl_ctx_st* get() const { return context_; }

 private:
  explicit TlsServerContext(ssl_ctx_st* context) : context_(context) {}
  ssl_ctx_st* context_;
};

class TlsStream {
 public:
  explicit TlsStream(std::shared_ptr<TlsServerContext> context);
  ~TlsStream();
  TlsStream(const TlsStream&) = delete;
  TlsStream& operator=(const TlsStream&) = delete;

  // Bytes from the socket; the plaintext they complete is appended to
  // `plain`. False: the handshake or a record failed (close).
  bool receive(const unsigned char* data, std::size_t length, std::string& plain);
  // Plaintext to send; false on failure.
  bool send(std::string_view plain);
  // Bytes for the socket (handshake and records), taken out.
  std::string take_output();
  bool established() const;

 private:
  std::shared_ptr<TlsServerContext> context_;  // kept alive while the connection is
  ssl_st* ssl_ = nullptr;
  bio_st* in_ = nullptr;   // socket bytes for OpenSSL (owned by ssl_)
  bio_st* out_ = nullptr;  // OpenSSL's bytes for the socket (owned by ssl_)
};

}  // namespace rapidqa::server

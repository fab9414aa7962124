#include "tls_stream.h"

#include <cstring>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

namespace rapidqa::server {
namespace {

std::string openssl_error() {
  char text[256] = "unknown error";
  if (const unsigned long e = ERR_get_error()) ERR_error_string_n(e, text, sizeof text);
  return text;
}

// Chooses "h2" when the client offers it; a client that does not speak
// HTTP/2 is refused at the handshake (this port speaks nothing else).
int select_h2(SSL*, const unsigned char** out, unsigned char* out_length, const unsigned char* in,
              unsigned int in_length, void*) {
  for (unsigned int at = 0; at < in_length;) {
    const unsigned int length = in[at];
    if (at + 1 + length > in_length) break;
    if (length == 2 && std::memcmp(in + at + 1, "h2", 2) == 0) {
      *out = in + at + 1;
      *out_length = 2;
      return SSL_TLSEXT_ERR_OK;
    }
    at += 1 + length;
  }
  return SSL_TLSEXT_ERR_ALERT_FATAL;
}

}  // namespace

Result<std::shared_ptr<TlsServerContext>> TlsServerContext::load(const std::string& certificate,
                                                                 const std::string& key) {
  SSL_CTX* context = SSL_CTX_new(TLS_server_method());
  if (!context) return Status::internal("OpenSSL: " + openssl_error());
  std::shared_ptr<TlsServerContext> owned(new TlsServerContext(context));
  SSL_CTX_set_min_proto_version(context, TLS1_2_VERSION);  // HTTP/2 over TLS needs 1.2 or later
  SSL_CTX_set_options(context, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION);
  if (SSL_CTX_use_certificate_chain_file(context, certificate.c_str()) != 1) {
    return Status::invalid_argument("cannot use the certificate " + certificate + ": " + openssl_error());
  }
  if (SSL_CTX_use_PrivateKey_file(context, key.c_str(), SSL_FILETYPE_PEM) != 1 || SSL_CTX_check_private_key(context) != 1) {
    return Status::invalid_argument("cannot use the key " + key + " with the certificate: " + openssl_error());
  }
  SSL_CTX_set_alpn_select_cb(context, select_h2, nullptr);
  return owned;
}

TlsServerContext::~TlsServerContext() { SSL_CTX_free(context_); }

TlsStream::TlsStream(std::shared_ptr<TlsServerContext> context) : context_(std::move(context)) {
  ssl_ = SSL_new(context_->get());
  in_ = BIO_new(BIO_s_mem());
  out_ = BIO_new(BIO_s_mem());
  BIO_set_mem_eof_return(in_, -1);  // an empty input buffer means "more to come", not EOF
  SSL_set_bio(ssl_, in_, out_);
  SSL_set_accept_state(ssl_);
}

TlsStream::~TlsStream() { SSL_free(ssl_); }

bool TlsStream::receive(const unsigned char* data, std::size_t length, std::string& plain) {
  if (BIO_write(in_, data, static_cast<int>(length)) != static_cast<int>(length)) return false;
  char buffer[16384];
  for (;;) {
    const int n = SSL_read(ssl_, buffer, sizeof buffer);
    if (n > 0) {
      plain.append(buffer, static_cast<std::size_t>(n));
      continue;
    }
    const int error = SSL_get_error(ssl_, n);
    if (error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE) return true;
    if (error == SSL_ERROR_ZERO_RETURN) return true;  // close_notify: the socket's close follows
    ERR_clear_error();
    return false;
  }
}

bool TlsStream::send(std::string_view plain) {
  while (!plain.empty()) {
    const int n = SSL_write(ssl_, plain.data(), static_cast<int>(plain.size()));
    if (n <= 0) {
      ERR_clear_error();
      return false;
    }
    plain.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

std::string TlsStream::take_output() {
  std::string bytes;
  char buffer[16384];
  for (int n; (n = BIO_read(out_, buffer, sizeof buffer)) > 0;) bytes.append(buffer, static_cast<std::size_t>(n));
  return bytes;
}

bool TlsStream::established() const { return SSL_is_init_finished(ssl_) == 1; }

}  // namespace rapidqa::server

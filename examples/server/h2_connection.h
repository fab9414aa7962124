// H2Connection: one HTTP/2 connection's protocol state, kept by nghttp2,
// between a socket's bytes and the transport's requests. The transport
// feeds it what the socket read (receive), hands it responses (respond),
// and writes what it has to send (pending_output / consume_output).
//
// Why nghttp2 and not libwebsockets' own HTTP/2: libwebsockets 4.1 (Debian
// 12) ends a connection with PROTOCOL_ERROR ("More rx than content_length
// told") when a read holds a request body's DATA frame and anything after
// it, which is every client that sends two requests with bodies at once on
// one connection (h2load -m 2, curl --parallel). nghttp2 is the HTTP/2
// library curl and h2load themselves use.
//
// Thread safety: thread-compatible; the transport's event loop owns it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>
#include <string_view>

#include "server_api.h"

struct nghttp2_session;

namespace rapidqa::server {

// A response body being sent, read by nghttp2's data provider until its
// stream closes.
struct H2OutgoingBody {
  std::string body;
  std::size_t offset = 0;
  bool open = false;  // a stream still being written (server-sent events): more may come
};

class H2Connection {
 public:
  // A request as its frames arrive.
  struct Stream {
    std::int32_t id = 0;
    std::string method, path, authorization, request_id, timeout, content_length, accept;
    std::string body;
    bool body_refused = false;  // over the size limit: the rest is dropped
    std::uint64_t exchange = 0; // the transport's id for it, once it has one
  };

  // What the transport does with requests; called from receive().
  class Listener {
   public:
    virtual ~Listener() = default;
    // The headers are in; `ends` when no body follows.
    virtual void headers_done(H2Connection& connection, Stream& stream, bool ends) = 0;
    // The body is in (END_STREAM after DATA).
    virtual void body_done(H2Connection& connection, Stream& stream) = 0;
    // The body grew past the limit; the listener answers (once).
    virtual void body_too_large(H2Connection& connection, Stream& stream) = 0;
    // The stream is gone (answered, reset by the client, or the connection closing).
    virtual void stream_closed(H2Connection& connection, Stream& stream) = 0;
  };

  struct Settings {
    std::uint32_t max_concurrent_streams = 128;
    std::uint32_t max_header_list_bytes = 8192;
    std::size_t max_body_bytes = 1 << 20;
  };

  H2Connection(Listener& listener, Settings settings, void* owner);
  ~H2Connection();
  H2Connection(const H2Connection&) = delete;
  H2Connection& operator=(const H2Connection&) = delete;

  // Bytes read from the socket. False: a protocol error the connection
  // cannot survive (nghttp2 has queued its GOAWAY: send it, then close).
  bool receive(const unsigned char* data, std::size_t length);

  // Answers a stream; false when the stream is gone.
  bool respond(std::int32_t stream_id, const ServerResponse& response, const std::string& request_id, bool head);

  // A response written as it is made (server-sent events): start_stream
  // sends 200 and the headers, append_stream each piece, the last with
  // end = true. False when the stream is gone.
  bool start_stream(std::int32_t stream_id, const std::string& content_type, const std::string& request_id);
  bool append_stream(std::int32_t stream_id, std::string_view data, bool end);

  // What to send next (empty: nothing for now), and how much of it went.
  std::string_view pending_output();
  void consume_output(std::size_t bytes);
  // Neither side wants anything more: close the socket.
  bool finished() const;

  // Stop taking new streams (drain): GOAWAY with the last stream id.
  void go_away();

  void* owner() const { return owner_; }

 private:
  friend struct H2Callbacks;
  Listener& listener_;
  Settings settings_;
  void* owner_;
  nghttp2_session* session_ = nullptr;
  std::string output_;          // bytes nghttp2 produced, not yet written
  std::size_t output_sent_ = 0;
  std::vector<std::pair<std::int32_t, std::unique_ptr<H2OutgoingBody>>> bodies_;
};

}  // namespace rapidqa::server

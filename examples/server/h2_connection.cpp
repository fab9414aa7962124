#include "h2_connection.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <unordered_map>
#include <vector>

#include <nghttp2/nghttp2.h>

namespace rapidqa::server {
namespace {

H2Connection::Stream* stream_of(nghttp2_session* session, std::int32_t id) {
  return static_cast<H2Connection::Stream*>(nghttp2_session_get_stream_user_data(session, id));
}

ssize_t read_body(nghttp2_session*, std::int32_t, std::uint8_t* buffer, std::size_t length, std::uint32_t* flags,
                  nghttp2_data_source* source, void*) {
  auto* out = static_cast<H2OutgoingBody*>(source->ptr);
  const std::size_t n = std::min(length, out->body.size() - out->offset);
  if (n == 0 && out->open) return NGHTTP2_ERR_DEFERRED;  // resumed by append_stream
  std::memcpy(buffer, out->body.data() + out->offset, n);
  out->offset += n;
  if (out->offset == out->body.size()) {
    if (!out->open) *flags |= NGHTTP2_DATA_FLAG_EOF;
    out->body.clear();  // a long stream keeps only what is unsent
    out->offset = 0;
  }
  return static_cast<ssize_t>(n);
}

}  // namespace

// nghttp2's callbacks, with the connection as their user data.
struct H2Callbacks {
  static H2Connection& self(void* user) { return *static_cast<H2Connection*>(user); }

  static int begin_headers(nghttp2_session* session, const nghttp2_frame* frame, void*) {
    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
    auto* stream = new H2Connection::Stream;
    stream->id = frame->hd.stream_id;
    nghttp2_session_set_stream_user_data(session, frame->hd.stream_id, stream);
    return 0;
  }

  static int header(nghttp2_session* session, const nghttp2_frame* frame, const std::uint8_t* name,
                    std::size_t name_length, const std::uint8_t* value, std::size_t value_length, std::uint8_t,
                    void*) {
    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
    H2Connection::Stream* stream = stream_of(session, frame->hd.stream_id);
    if (!stream) return 0;
    const std::string_view n(reinterpret_cast<const char*>(name), name_length);
    const std::string v(reinterpret_cast<const char*>(value), value_length);
    if (n == ":method") stream->method = v;
    else if (n == ":path") stream->path = v;
    else if (n == "authorization") stream->authorization = v;
    else if (n == "x-request-id") stream->request_id = v;
    else if (n == "accept") stream->accept = v;
    else if (n == "x-request-timeout-ms") stream->timeout = v;
    else if (n == "content-length") stream->content_length = v;
    return 0;
  }

  static int frame_received(nghttp2_session* session, const nghttp2_frame* frame, void* user) {
    H2Connection& c = self(user);
    const bool ends = (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0;
    if (frame->hd.type == NGHTTP2_HEADERS && frame->headers.cat == NGHTTP2_HCAT_REQUEST) {
      if (H2Connection::Stream* stream = stream_of(session, frame->hd.stream_id)) {
        c.listener_.headers_done(c, *stream, ends);
      }
    } else if (frame->hd.type == NGHTTP2_DATA && ends) {
      H2Connection::Stream* stream = stream_of(session, frame->hd.stream_id);
      if (stream && !stream->body_refused) c.listener_.body_done(c, *stream);
    }
    return 0;
  }

  static int data_chunk(nghttp2_session* session, std::uint8_t, std::int32_t stream_id, const std::uint8_t* data,
                        std::size_t length, void* user) {
    H2Connection& c = self(user);
    H2Connection::Stream* stream = stream_of(session, stream_id);
    if (!stream || stream->body_refused) return 0;
    if (stream->body.size() + length > c.settings_.max_body_bytes) {
      stream->body_refused = true;
      stream->body.clear();
      c.listener_.body_too_large(c, *stream);
      return 0;
    }
    stream->body.append(reinterpret_cast<const char*>(data), length);
    return 0;
  }

  static int stream_closed(nghttp2_session* session, std::int32_t stream_id, std::uint32_t, void* user) {
    H2Connection& c = self(user);
    if (H2Connection::Stream* stream = stream_of(session, stream_id)) {
      c.listener_.stream_closed(c, *stream);
      nghttp2_session_set_stream_user_data(session, stream_id, nullptr);
      delete stream;
    }
    return 0;
  }
};

H2Connection::H2Connection(Listener& listener, Settings settings, void* owner)
    : listener_(listener), settings_(settings), owner_(owner) {
  nghttp2_session_callbacks* callbacks = nullptr;
  nghttp2_session_callbacks_new(&callbacks);
  nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks, &H2Callbacks::begin_headers);
  nghttp2_session_callbacks_set_on_header_callback(callbacks, &H2Callbacks::header);
  nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks, &H2Callbacks::frame_received);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks, &H2Callbacks::data_chunk);
  nghttp2_session_callbacks_set_on_stream_close_callback(callbacks, &H2Callbacks::stream_closed);
  nghttp2_option* option = nullptr;
  nghttp2_option_new(&option);
  nghttp2_option_set_max_send_header_block_length(option, 65536);
  nghttp2_session_server_new2(&session_, callbacks, this, option);
  nghttp2_option_del(option);
  nghttp2_session_callbacks_del(callbacks);
  const nghttp2_settings_entry entries[] = {
      {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, settings_.max_concurrent_streams},
      {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, settings_.max_header_list_bytes},
      {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
  };
  nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, entries, sizeof entries / sizeof entries[0]);
}

H2Connection::~H2Connection() {
  // Streams still open are closed by nghttp2_session_del through the
  // stream-close callback, which tells the listener.
  nghttp2_session_del(session_);
}

bool H2Connection::receive(const unsigned char* data, std::size_t length) {
  const ssize_t used = nghttp2_session_mem_recv(session_, data, length);
  return used >= 0;
}

namespace {

// A header for nghttp2, borrowing both strings (they outlive the submit).
nghttp2_nv header(const char* name, const std::string& value) {
  return nghttp2_nv{reinterpret_cast<std::uint8_t*>(const_cast<char*>(name)),
                    reinterpret_cast<std::uint8_t*>(const_cast<char*>(value.data())), std::strlen(name), value.size(),
                    NGHTTP2_NV_FLAG_NONE};
}

// Submits a response's headers and, when given, the body its data provider
// reads until the stream closes (kept in `bodies` until then).
template <typename Bodies>
bool submit(nghttp2_session* session, Bodies& bodies, std::int32_t stream_id, const std::vector<nghttp2_nv>& headers,
            std::unique_ptr<H2OutgoingBody> body) {
  if (!body) return nghttp2_submit_response(session, stream_id, headers.data(), headers.size(), nullptr) == 0;
  nghttp2_data_provider provider;
  provider.source.ptr = body.get();
  provider.read_callback = &read_body;
  if (nghttp2_submit_response(session, stream_id, headers.data(), headers.size(), &provider) != 0) return false;
  bodies.push_back({stream_id, std::move(body)});
  return true;
}

}  // namespace

bool H2Connection::respond(std::int32_t stream_id, const ServerResponse& response, const std::string& request_id,
                           bool head) {
  if (!stream_of(session_, stream_id)) return false;
  const std::string status = std::to_string(response.status);
  const std::string length = std::to_string(response.body.size());
  const std::string retry = std::to_string(response.retry_after_seconds);
  std::vector<nghttp2_nv> headers = {header(":status", status), header("content-type", response.content_type),
                                     header("content-length", length)};
  if (!request_id.empty()) headers.push_back(header("x-request-id", request_id));
  if (response.retry_after_seconds > 0) headers.push_back(header("retry-after", retry));
  for (const auto& [name, value] : response.headers) headers.push_back(header(name.c_str(), value));
  if (head || response.body.empty()) return submit(session_, bodies_, stream_id, headers, nullptr);
  return submit(session_, bodies_, stream_id, headers, std::make_unique<H2OutgoingBody>(H2OutgoingBody{response.body, 0, false}));
}

bool H2Connection::start_stream(std::int32_t stream_id, const std::string& content_type, const std::string& request_id) {
  if (!stream_of(session_, stream_id)) return false;
  const std::string status = "200", no_cache = "no-cache";
  std::vector<nghttp2_nv> headers = {header(":status", status), header("content-type", content_type),
                                     header("cache-control", no_cache)};
  if (!request_id.empty()) headers.push_back(header("x-request-id", request_id));
  return submit(session_, bodies_, stream_id, headers, std::make_unique<H2OutgoingBody>(H2OutgoingBody{{}, 0, true}));
}

bool H2Connection::append_stream(std::int32_t stream_id, std::string_view data, bool end) {
  for (auto& [id, body] : bodies_) {
    if (id != stream_id || !body->open) continue;
    if (!nghttp2_session_find_stream(session_, stream_id)) return false;
    body->body.append(data.data(), data.size());
    if (end) body->open = false;
    nghttp2_session_resume_data(session_, stream_id);
    return true;
  }
  return false;
}

std::string_view H2Connection::pending_output() {
  if (output_sent_ == output_.size()) {
    output_.clear();
    output_sent_ = 0;
    // Everything nghttp2 has to send now, in one buffer.
    for (;;) {
      const std::uint8_t* data = nullptr;
      const ssize_t n = nghttp2_session_mem_send(session_, &data);
      if (n <= 0) break;
      output_.append(reinterpret_cast<const char*>(data), static_cast<std::size_t>(n));
      if (output_.size() >= 65536) break;
    }
    // Bodies whose streams are closed are done with.
    bodies_.erase(std::remove_if(bodies_.begin(), bodies_.end(),
                                 [&](const auto& b) { return nghttp2_session_find_stream(session_, b.first) == nullptr; }),
                  bodies_.end());
  }
  return std::string_view(output_).substr(output_sent_);
}

void H2Connection::consume_output(std::size_t bytes) { output_sent_ = std::min(output_.size(), output_sent_ + bytes); }

bool H2Connection::finished() const {
  return output_sent_ == output_.size() && !nghttp2_session_want_read(session_) && !nghttp2_session_want_write(session_);
}

void H2Connection::go_away() {
  nghttp2_submit_goaway(session_, NGHTTP2_FLAG_NONE, nghttp2_session_get_last_proc_stream_id(session_),
                        NGHTTP2_NO_ERROR, nullptr, 0);
}

}  // namespace rapidqa::server

// ChatStreamReader: the OpenAI chat completions stream as it arrives:
// server-sent events ("data: {chunk}" blocks ended by a blank line, ':'
// comments, "data: [DONE]" at the end), each chunk's
// choices[0].delta.content handed on as soon as its event is complete, the
// finish reason, and the usage chunk (stream_options.include_usage). An
// error object in the stream, or a chunk that is not JSON of that shape,
// is an error. Pure: fed bytes, tested without a socket.
//
// Thread safety: thread-compatible.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "rapidqa/status.h"

namespace rapidqa::remote {

class ChatStreamReader {
 public:
  // Reads `bytes` (any split of the stream); calls on_piece for each piece
  // of content. Stops at the first error, or when on_piece returns false
  // (stopped() then tells).
  Status feed(std::string_view bytes, const std::function<bool(std::string_view)>& on_piece);

  bool done() const { return done_; }        // "data: [DONE]" read
  bool stopped() const { return stopped_; }  // on_piece asked to stop
  const std::string& finish_reason() const { return finish_reason_; }
  std::uint64_t prompt_tokens() const { return prompt_tokens_; }
  std::uint64_t completion_tokens() const { return completion_tokens_; }

 private:
  Status event(std::string_view data, const std::function<bool(std::string_view)>& on_piece);

  std::string pending_;  // bytes of an incomplete line
  std::string data_;     // data lines of the current event
  bool has_data_ = false;
  bool done_ = false;
  bool stopped_ = false;
  std::string finish_reason_;
  std::uint64_t prompt_tokens_ = 0;
  std::uint64_t completion_tokens_ = 0;
};

}  // namespace rapidqa::remote

#include "remote/chat_stream.h"

#include <fmt/format.h>
#include <simdjson.h>

namespace rapidqa::remote {

Status ChatStreamReader::feed(std::string_view bytes, const std::function<bool(std::string_view)>& on_piece) {
  pending_.append(bytes.data(), bytes.size());
  std::size_t start = 0;
  for (;;) {
    const std::size_t newline = pending_.find('\n', start);
    if (newline == std::string::npos) break;
    std::string_view line(pending_.data() + start, newline - start);
    start = newline + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (done_ || stopped_) continue;
    if (line.empty()) {  // the event is complete
      if (has_data_) {
        Status s = event(data_, on_piece);
        data_.clear();
        has_data_ = false;
        if (!s.is_ok()) {
          pending_.clear();
          return s;
        }
      }
      continue;
    }
    if (line.front() == ':') continue;  // a comment (keep-alive)
    const std::size_t colon = line.find(':');
    const std::string_view field = line.substr(0, colon);
    std::string_view value = colon == std::string_view::npos ? std::string_view() : line.substr(colon + 1);
    if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
    if (field == "data") {
      if (has_data_) data_ += '\n';
      data_.append(value.data(), value.size());
      has_data_ = true;
    }
    // "event", "id" and "retry" carry nothing this API uses.
  }
  pending_.erase(0, start);
  if (pending_.size() > (1u << 20)) return Status::data_loss("a line of the stream is longer than 1 MiB");
  return Status::ok();
}

Status ChatStreamReader::event(std::string_view data, const std::function<bool(std::string_view)>& on_piece) {
  if (data == "[DONE]") {
    done_ = true;
    return Status::ok();
  }
  thread_local simdjson::dom::parser parser;
  simdjson::dom::element doc;
  simdjson::dom::object chunk;
  if (parser.parse(data.data(), data.size()).get(doc) != simdjson::SUCCESS ||
      doc.get_object().get(chunk) != simdjson::SUCCESS) {
    return Status::data_loss(fmt::format("a chunk of the stream is not a JSON object: {:.80}", data));
  }
  simdjson::dom::element error;
  if (chunk["error"].get(error) == simdjson::SUCCESS) {
    std::string_view message;
    if (error["message"].get_string().get(message) != simdjson::SUCCESS) message = "no message";
    return Status::unavailable(fmt::format("the engine ended the stream with an error: {}", message));
  }
  simdjson::dom::object usage;
  if (chunk["usage"].get_object().get(usage) == simdjson::SUCCESS) {
    uint64_t n;
    if (usage["prompt_tokens"].get_uint64().get(n) == simdjson::SUCCESS) prompt_tokens_ = n;
    if (usage["completion_tokens"].get_uint64().get(n) == simdjson::SUCCESS) completion_tokens_ = n;
  }
  simdjson::dom::array choices;
  if (chunk["choices"].get_array().get(choices) != simdjson::SUCCESS) {
    return Status::data_loss("a chunk of the stream has no 'choices' array");
  }
  for (simdjson::dom::element choice : choices) {
    simdjson::dom::object c;
    if (choice.get_object().get(c) != simdjson::SUCCESS) return Status::data_loss("a choice is not an object");
    uint64_t index = 0;
    if (c["index"].get_uint64().get(index) == simdjson::SUCCESS && index != 0) continue;  // one answer: choice 0
    std::string_view finish;
    if (c["finish_reason"].get_string().get(finish) == simdjson::SUCCESS) finish_reason_ = std::string(finish);
    simdjson::dom::element delta;
    if (c["delta"].get(delta) != simdjson::SUCCESS) continue;
    if (!delta.is_object()) return Status::data_loss("a choice's 'delta' is not an object");
    simdjson::dom::element content;
    if (delta["content"].get(content) != simdjson::SUCCESS || content.is_null()) continue;
    std::string_view piece;
    if (content.get_string().get(piece) != simdjson::SUCCESS) {
      return Status::data_loss("a choice's 'delta.content' is not a string");
    }
    if (!piece.empty() && on_piece && !on_piece(piece)) stopped_ = true;
  }
  return Status::ok();
}

}  // namespace rapidqa::remote

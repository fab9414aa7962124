#include "common/bounded_json.h"

#include <set>
#include <utility>

#include <fmt/format.h>

namespace rapidqa::detail {
namespace {

using json = nlohmann::json;

// A SAX consumer that builds the DOM through nlohmann's own builder while
// counting depth and remembering each open object's keys. Returning false
// from an event stops the reader at once, before it recurses further.
class BoundedSax {
 public:
  BoundedSax(json& result, const JsonLimits& limits) : dom_(result, /*allow_exceptions=*/false), limits_(limits) {}

  bool null() { return dom_.null(); }
  bool boolean(bool v) { return dom_.boolean(v); }
  bool number_integer(json::number_integer_t v) { return dom_.number_integer(v); }
  bool number_unsigned(json::number_unsigned_t v) { return dom_.number_unsigned(v); }
  bool number_float(json::number_float_t v, const json::string_t& s) { return dom_.number_float(v, s); }
  bool string(json::string_t& v) { return dom_.string(v); }
  bool binary(json::binary_t& v) { return dom_.binary(v); }

  bool start_object(std::size_t n) {
    if (!enter()) return false;
    keys_.emplace_back();
    return guard([&] { return dom_.start_object(n); });
  }
  bool key(json::string_t& k) {
    if (limits_.reject_duplicate_keys && !keys_.back().insert(k).second) {
      error_ = fmt::format("duplicate key '{}'", clip_for_message(k, 48));
      return false;
    }
    return dom_.key(k);
  }
  bool end_object() {
    --depth_;
    keys_.pop_back();
    return dom_.end_object();
  }
  bool start_array(std::size_t n) {
    if (!enter()) return false;
    keys_.emplace_back();  // arrays have no keys; keeps the stack in step with depth
    return guard([&] { return dom_.start_array(n); });
  }
  bool end_array() {
    --depth_;
    keys_.pop_back();
    return dom_.end_array();
  }
  bool parse_error(std::size_t position, const std::string& /*last_token*/, const nlohmann::detail::exception& e) {
    // nlohmann's message quotes the token it read, which may be huge.
    // "[json.exception.parse_error.101] parse error at ...": the bracket
    // names nlohmann's exception class, which tells a user nothing.
    std::string_view what = e.what();
    if (!what.empty() && what.front() == '[') {
      const auto close = what.find("] ");
      if (close != std::string_view::npos) what.remove_prefix(close + 2);
    }
    error_ = fmt::format("{} (at byte {})", clip_for_message(what, 160), position);
    return false;
  }

  const std::string& error() const { return error_; }

 private:
  bool enter() {
    if (++depth_ > limits_.max_depth) {
      error_ = fmt::format("nested deeper than {} levels", limits_.max_depth);
      return false;
    }
    return true;
  }
  // A declared container size beyond max_size() makes the builder throw.
  template <typename Fn>
  bool guard(Fn&& fn) {
    try {
      return fn();
    } catch (const std::exception& e) {
      error_ = clip_for_message(e.what(), 160);
      return false;
    }
  }

  nlohmann::detail::json_sax_dom_parser<json> dom_;
  JsonLimits limits_;
  std::size_t depth_ = 0;
  std::vector<std::set<std::string>> keys_;
  std::string error_;
};

template <typename Input>
Result<json> parse_with(Input&& input, json::input_format_t format, const JsonLimits& limits, StatusCode code,
                        const char* what) {
  json result;
  BoundedSax sax(result, limits);
  bool ok = false;
  try {
    ok = json::sax_parse(std::forward<Input>(input), &sax, format, /*strict=*/true);
  } catch (const std::exception& e) {
    return Status(code, fmt::format("{}: {}", what, clip_for_message(e.what(), 160)));
  }
  if (!ok || !sax.error().empty()) {
    return Status(code, fmt::format("{}: {}", what, sax.error().empty() ? "malformed input" : sax.error()));
  }
  return result;
}

// The length of the well-formed UTF-8 sequence text starts with (RFC 3629:
// no overlong forms, no surrogates, nothing above U+10FFFF), or 0 when it
// starts with anything else or a control character.
std::size_t utf8_sequence_length(std::string_view text) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char c = byte(0);
  if (c < 0x80) return c < 0x20 || c == 0x7f ? 0 : 1;
  std::size_t length = 0;
  unsigned char low = 0x80, high = 0xbf;  // the second byte's range
  if (c >= 0xc2 && c <= 0xdf) {
    length = 2;
  } else if (c >= 0xe0 && c <= 0xef) {
    length = 3;
    if (c == 0xe0) low = 0xa0;   // overlong
    if (c == 0xed) high = 0x9f;  // surrogates
  } else if (c >= 0xf0 && c <= 0xf4) {
    length = 4;
    if (c == 0xf0) low = 0x90;   // overlong
    if (c == 0xf4) high = 0x8f;  // above U+10FFFF
  } else {
    return 0;
  }
  if (text.size() < length || byte(1) < low || byte(1) > high) return 0;
  for (std::size_t k = 2; k < length; ++k) {
    if ((byte(k) & 0xc0) != 0x80) return 0;
  }
  return length;
}

}  // namespace

Result<json> parse_json_bounded(std::string_view text, const JsonLimits& limits) {
  return parse_with(text, json::input_format_t::json, limits, StatusCode::kInvalidArgument, "not valid JSON");
}

Result<json> parse_cbor_bounded(const std::vector<std::uint8_t>& bytes, const JsonLimits& limits) {
  return parse_with(bytes, json::input_format_t::cbor, limits, StatusCode::kDataLoss, "not valid CBOR");
}

std::string clip_for_message(std::string_view text, std::size_t max_bytes) {
  std::string out;
  std::size_t i = 0;
  while (i < text.size() && out.size() < max_bytes) {
    const std::size_t length = utf8_sequence_length(text.substr(i));
    const bool valid = length > 0;
    if (valid) {
      out.append(text.substr(i, length));
      i += length;
    } else {
      out += fmt::format("\\x{:02x}", static_cast<unsigned char>(text[i]));
      ++i;
    }
  }
  if (i < text.size()) out += fmt::format("... ({} bytes in all)", text.size());
  return out;
}

}  // namespace rapidqa::detail

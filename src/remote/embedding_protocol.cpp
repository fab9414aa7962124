#include "remote/embedding_protocol.h"

#include "remote/kserve_grpc_wire.h"

#include "rapidqa/base64.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <simdjson.h>

#include <cstdint>
#include <cstring>
#include <string_view>

namespace rapidqa::remote {

namespace {

using json = nlohmann::json;

// A model name as one URL path segment.
std::string escape_segment(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += fmt::format("%{:02X}", c);
    }
  }
  return out;
}

// A base64 string of little-endian float32s, as OpenAI's encoding_format
// "base64" sends them, decoded into `bytes` (reused from call to call);
// false when it is not base64 or not whole floats.
bool decode_base64_floats(std::string_view text, std::string& bytes) {
  return !text.empty() && base64_decode(text, bytes).is_ok() && bytes.size() % sizeof(float) == 0;
}

Status check_length(std::size_t got, std::size_t& dimension, std::size_t row) {
  if (got == 0) return Status::data_loss(fmt::format("vector {} of the answer is empty", row));
  if (dimension == 0) dimension = got;
  if (got != dimension) {
    return Status::data_loss(fmt::format("vector {} of the answer has {} values, not {}", row, got, dimension));
  }
  return Status::ok();
}

}  // namespace

std::string EmbeddingProtocol::path() const {
  if (protocol == RemoteProtocol::kOpenAIEmbeddings) return "/v1/embeddings";
  if (protocol == RemoteProtocol::kKServeV2Grpc) return "";  // the gRPC method is the call's, not a path
  return "/v2/models/" + escape_segment(model) + "/infer";
}

std::string EmbeddingProtocol::request_body(const std::vector<std::string>& texts) const {
  if (protocol == RemoteProtocol::kKServeV2Grpc) return kserve_grpc_request(model, kserve_input, kserve_output, texts);
  json body;
  if (protocol == RemoteProtocol::kOpenAIEmbeddings) {
    body = {{"model", model}, {"input", texts}, {"encoding_format", base64_vectors ? "base64" : "float"}};
  } else {
    body = {{"inputs", {{{"name", kserve_input}, {"shape", {texts.size()}}, {"datatype", "BYTES"}, {"data", texts}}}}};
    if (!kserve_output.empty()) body["outputs"] = {{{"name", kserve_output}}};
    // Binary tensor data (Triton, KServe, rapidqa-server): the vectors come
    // as their bytes after the JSON, not as numbers to print and read. An
    // engine without the extension ignores the parameter and sends numbers.
    if (kserve_binary_vectors) body["parameters"] = {{"binary_data_output", true}};
  }
  // Text that is not UTF-8 is replaced, never sent as invalid JSON.
  return body.dump(-1, ' ', false, json::error_handler_t::replace);
}

namespace {

using simdjson::dom::array;
using simdjson::dom::element;
using simdjson::dom::object;

// Appends a tensor's numbers (nested arrays flattened, as KServe allows).
bool append_numbers(element v, std::vector<float>& out) {
  double d;
  if (v.get_double().get(d) == simdjson::SUCCESS) {
    out.push_back(static_cast<float>(d));
    return true;
  }
  array a;
  if (v.get_array().get(a) != simdjson::SUCCESS) return false;
  for (element x : a) {
    if (!append_numbers(x, out)) return false;
  }
  return true;
}

std::string_view string_or_empty(object o, const char* key) {
  std::string_view v;
  if (o[key].get_string().get(v) != simdjson::SUCCESS) return {};
  return v;
}

// One parser per thread: its buffers are reused from answer to answer.
simdjson::dom::parser& thread_parser() {
  thread_local simdjson::dom::parser parser;
  return parser;
}

}  // namespace

// Answers are read with simdjson: a batch of vectors is tens to hundreds of
// kilobytes of JSON, which a character-at-a-time parser reads at a fraction
// of a millisecond per request, more than the rest of the network path.
Status EmbeddingProtocol::read_vectors(const std::string& body, std::size_t count, std::size_t& dimension,
                                       std::vector<float>& out, std::optional<std::size_t> json_length) const {
  if (protocol == RemoteProtocol::kKServeV2Grpc) {
    out.clear();
    return kserve_grpc_vectors(body, kserve_output, count, dimension, out);
  }
  std::string_view binary;  // KServe's binary tensor data, after the JSON
  simdjson::simdjson_result<element> parsed;
  if (json_length) {
    if (*json_length > body.size()) {
      return Status::data_loss(fmt::format("the answer's JSON header is {} bytes long, its body only {}",
                                           *json_length, body.size()));
    }
    binary = std::string_view(body).substr(*json_length);
    parsed = thread_parser().parse(body.data(), *json_length);  // copied with padding
  } else {
    parsed = thread_parser().parse(body);
  }
  element doc;
  object root;
  if (parsed.get(doc) != simdjson::SUCCESS || doc.get_object().get(root) != simdjson::SUCCESS) {
    return Status::data_loss("the answer is not a JSON object");
  }
  out.clear();
  if (protocol == RemoteProtocol::kOpenAIEmbeddings) {
    array data;
    if (root["data"].get_array().get(data) != simdjson::SUCCESS) return Status::data_loss("the answer has no 'data' array");
    if (data.size() != count) {
      return Status::data_loss(fmt::format("the answer holds {} embeddings for {} texts", data.size(), count));
    }
    // Each vector goes straight to its row of `out`: a batch is tens of
    // thousands of floats, and a copy of each text and a vector per row
    // cost more than decoding them.
    std::vector<bool> seen(count, false);
    thread_local std::string bytes;
    thread_local std::vector<float> numbers;
    std::size_t k = 0;
    for (element item_element : data) {
      object item;
      if (item_element.get_object().get(item) != simdjson::SUCCESS) {
        return Status::data_loss("an item of 'data' is not an object");
      }
      std::size_t index = k++;
      element index_element;
      if (item["index"].get(index_element) == simdjson::SUCCESS) {
        uint64_t i;
        if (index_element.get_uint64().get(i) != simdjson::SUCCESS || i >= count) {
          return Status::data_loss("an item of 'data' has an index outside the texts sent");
        }
        index = static_cast<std::size_t>(i);
      }
      if (seen[index]) return Status::data_loss(fmt::format("the answer has index {} twice", index));
      seen[index] = true;
      element e;
      std::string_view text;
      const char* values = nullptr;  // got floats' bytes
      std::size_t got = 0;
      bool read = item["embedding"].get(e) == simdjson::SUCCESS;
      if (read && e.get_string().get(text) == simdjson::SUCCESS) {
        read = decode_base64_floats(text, bytes);
        values = bytes.data();
        got = bytes.size() / sizeof(float);
      } else if (read) {
        numbers.clear();
        read = e.is_array() && append_numbers(e, numbers);
        values = reinterpret_cast<const char*>(numbers.data());
        got = numbers.size();
      }
      if (!read) return Status::data_loss("an item of 'data' has no 'embedding' (numbers, or base64 float32s)");
      if (Status s = check_length(got, dimension, index); !s.is_ok()) return s;
      if (out.empty()) out.resize(count * dimension);
      std::memcpy(out.data() + index * dimension, values, dimension * sizeof(float));
    }
    return Status::ok();
  }
  array outputs;
  if (root["outputs"].get_array().get(outputs) != simdjson::SUCCESS) {
    return Status::data_loss("the answer has no 'outputs' array");
  }
  // Binary outputs' bytes follow the JSON in the order of 'outputs'.
  const auto binary_size = [](object o, uint64_t& size) {
    return o["parameters"]["binary_data_size"].get_uint64().get(size) == simdjson::SUCCESS;
  };
  object tensor;
  bool found = false;
  uint64_t binary_offset = 0;
  for (element o : outputs) {
    object candidate;
    if (o.get_object().get(candidate) != simdjson::SUCCESS) continue;
    const bool named = !kserve_output.empty() && string_or_empty(candidate, "name") == kserve_output;
    const bool first_fp32 = kserve_output.empty() && string_or_empty(candidate, "datatype") == "FP32";
    if (named || first_fp32) {
      tensor = candidate;
      found = true;
      break;
    }
    uint64_t size = 0;
    if (binary_size(candidate, size)) {  // saturating: a hostile size cannot wrap the offset round
      binary_offset = size > UINT64_MAX - binary_offset ? UINT64_MAX : binary_offset + size;
    }
  }
  if (!found) {
    return Status::data_loss(kserve_output.empty() ? std::string("the answer has no FP32 output")
                                                   : "the answer has no output '" + kserve_output + "'");
  }
  if (string_or_empty(tensor, "datatype") != "FP32") return Status::data_loss("the output's datatype is not FP32");
  array shape;
  uint64_t rows = 0, columns = 0;
  if (tensor["shape"].get_array().get(shape) != simdjson::SUCCESS || shape.size() != 2 ||
      shape.at(0).get_uint64().get(rows) != simdjson::SUCCESS ||
      shape.at(1).get_uint64().get(columns) != simdjson::SUCCESS) {
    return Status::data_loss("the output's shape is not [texts, dimension]");
  }
  if (rows != count) return Status::data_loss(fmt::format("the output holds {} vectors for {} texts", rows, count));
  if (Status s = check_length(static_cast<std::size_t>(columns), dimension, 0); !s.is_ok()) return s;
  uint64_t size = 0;
  if (binary_size(tensor, size)) {
    if (!json_length) return Status::data_loss("the output is binary data but the answer has no Inference-Header-Content-Length");
    if (size != count * dimension * sizeof(float)) {
      return Status::data_loss(fmt::format("the output has {} bytes of binary data, its shape says {}", size,
                                           count * dimension * sizeof(float)));
    }
    if (binary_offset > binary.size() || size > binary.size() - binary_offset) {
      return Status::data_loss(fmt::format("the answer's binary data ends at {} bytes, before its output's {} at {}",
                                           binary.size(), size, binary_offset));
    }
    // Little-endian float32s, row-major: this machine's own layout.
    static_assert(sizeof(float) == 4, "binary tensor data is float32");
    out.resize(count * dimension);
    std::memcpy(out.data(), binary.data() + binary_offset, size);
    return Status::ok();
  }
  element data;
  if (tensor["data"].get(data) != simdjson::SUCCESS || !data.is_array() || !append_numbers(data, out)) {
    return Status::data_loss("the output has no numeric 'data'");
  }
  if (out.size() != count * dimension) {
    return Status::data_loss(fmt::format("the output holds {} values, its shape says {}", out.size(), count * dimension));
  }
  return Status::ok();
}

std::string error_message(const std::string& body) {
  const json doc = json::parse(body, nullptr, false);
  if (doc.is_object()) {
    if (const auto e = doc.find("error"); e != doc.end()) {
      if (e->is_string()) return e->get<std::string>();
      if (e->is_object() && e->contains("message") && (*e)["message"].is_string()) return (*e)["message"].get<std::string>();
    }
  }
  return body.substr(0, 200);
}

}  // namespace rapidqa::remote

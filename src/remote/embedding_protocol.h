// The embedding protocols' request bodies and answers: the OpenAI
// embeddings API and the KServe v2 inference protocol (JSON over HTTP, or
// protobuf messages over gRPC: kserve_grpc_wire.h).
// Pure functions, tested on their own against the documented shapes.
//
// Thread safety: stateless.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "rapidqa/remote_encoder.h"
#include "rapidqa/status.h"

namespace rapidqa::remote {

struct EmbeddingProtocol {
  RemoteProtocol protocol = RemoteProtocol::kOpenAIEmbeddings;
  std::string model;
  std::string kserve_input = "text";
  std::string kserve_output;  // empty: the first FP32 output
  bool base64_vectors = true; // OpenAI: encoding_format "base64"
  bool kserve_binary_vectors = true;  // KServe over HTTP: ask for binary tensor data

  // The path under an endpoint's base URL.
  std::string path() const;
  std::string request_body(const std::vector<std::string>& texts) const;
  // Reads `count` vectors from a 2xx answer into out (row-major) and their
  // length into dimension; when dimension is not 0 on entry, vectors of
  // another length are refused. `json_length`: the answer's
  // Inference-Header-Content-Length (KServe's binary tensor data: that
  // much JSON, then the tensors' bytes). kDataLoss when the answer is not
  // what the protocol says.
  Status read_vectors(const std::string& body, std::size_t count, std::size_t& dimension, std::vector<float>& out,
                      std::optional<std::size_t> json_length = std::nullopt) const;
};

// The message an engine gave with an error status (OpenAI's error.message,
// KServe's error, or the start of the body).
std::string error_message(const std::string& body);

}  // namespace rapidqa::remote

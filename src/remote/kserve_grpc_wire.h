// KServe v2 over gRPC, the messages of inference.GRPCInferenceService/
// ModelInfer (proto/kserve/grpc_predict_v2.proto) in protobuf's wire
// format, written and read with protobuf's coded streams and without
// generated code: generated descriptors would register the proto a second
// time in a process that also links rapidqa-server's stubs. Only the fields
// an embedding call uses: one BYTES input of shape [n] (its texts in
// contents.bytes_contents), the outputs wanted, and an FP32 output of shape
// [n, d] read from raw_output_contents or contents.fp32_contents.
//
// Thread safety: stateless.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "rapidqa/status.h"

namespace rapidqa::remote {

// A serialized ModelInferRequest.
std::string kserve_grpc_request(const std::string& model, const std::string& input_name,
                                const std::string& output_name, const std::vector<std::string>& texts);

// The vectors of a serialized ModelInferResponse: the output named
// output_name (empty: the first FP32 one), `count` rows; as
// EmbeddingProtocol::read_vectors (dimension checked when not 0 on entry;
// kDataLoss when the answer is not what the protocol says).
Status kserve_grpc_vectors(const std::string& response, const std::string& output_name, std::size_t count,
                           std::size_t& dimension, std::vector<float>& out);

}  // namespace rapidqa::remote

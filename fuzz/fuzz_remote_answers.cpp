// Feeds what remote model engines answer, which a compromised or broken
// engine controls: the first byte picks the reader, the rest is the answer.
//   0  the chat completions stream (ChatStreamReader), fed in two pieces
//      split where the second byte says: the text must not depend on the
//      split
//   1  an OpenAI embeddings answer      (EmbeddingProtocol::read_vectors)
//   2  a KServe v2 JSON inference answer (EmbeddingProtocol::read_vectors)
//   3  a KServe v2 gRPC ModelInferResponse (the protobuf wire reader)
//   4  a KServe v2 answer with binary tensor data: the answer's first two
//      bytes (little-endian) are its Inference-Header-Content-Length,
//      which may claim more than there is
// Vectors read must have the count asked for and the dimension reported.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_support.h"
#include "remote/chat_stream.h"
#include "remote/embedding_protocol.h"

namespace {

std::string read_stream(std::string_view bytes, std::size_t split, bool& ok, std::string& finish) {
  rapidqa::remote::ChatStreamReader reader;
  std::string text;
  auto on_piece = [&](std::string_view p) {
    text.append(p.data(), p.size());
    return true;
  };
  ok = reader.feed(bytes.substr(0, split), on_piece).is_ok() && reader.feed(bytes.substr(split), on_piece).is_ok();
  finish = reader.finish_reason();
  return text;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using rapidqa::fuzz::check;
  if (size < 2) return 0;
  const std::string_view body(reinterpret_cast<const char*>(data) + 2, size - 2);
  const int reader = data[0] % 5;
  if (reader == 0) {
    const std::size_t split = data[1] % (body.size() + 1);
    bool ok_split = false, ok_whole = false;
    std::string finish_split, finish_whole;
    const std::string split_text = read_stream(body, split, ok_split, finish_split);
    const std::string whole_text = read_stream(body, body.size(), ok_whole, finish_whole);
    check(ok_split == ok_whole, "the stream's outcome depends on where it was split");
    if (ok_whole) {
      check(split_text == whole_text && finish_split == finish_whole, "the stream's text depends on where it was split");
    }
    return 0;
  }
  rapidqa::remote::EmbeddingProtocol protocol;
  protocol.model = "m";
  protocol.protocol = reader == 1                 ? rapidqa::RemoteProtocol::kOpenAIEmbeddings
                      : reader == 2 || reader == 4 ? rapidqa::RemoteProtocol::kKServeV2
                                                  : rapidqa::RemoteProtocol::kKServeV2Grpc;
  const std::size_t count = 1 + data[1] % 4;
  std::size_t dimension = 0;
  std::vector<float> vectors;
  std::optional<std::size_t> json_length;
  std::string_view answer = body;
  if (reader == 4) {
    if (body.size() < 2) return 0;
    json_length = static_cast<std::uint8_t>(body[0]) | static_cast<std::size_t>(static_cast<std::uint8_t>(body[1])) << 8;
    answer = body.substr(2);
  }
  if (protocol.read_vectors(std::string(answer), count, dimension, vectors, json_length).is_ok()) {
    check(dimension > 0 && vectors.size() == count * dimension, "vectors read do not match the count and dimension");
  }
  return 0;
}

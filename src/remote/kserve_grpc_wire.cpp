#include "remote/kserve_grpc_wire.h"

#include <fmt/format.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/wire_format_lite.h>

#include <cstring>

namespace rapidqa::remote {

namespace {

using google::protobuf::io::CodedInputStream;
using google::protobuf::io::CodedOutputStream;
using google::protobuf::io::StringOutputStream;
using Wire = google::protobuf::internal::WireFormatLite;

// Field numbers of grpc_predict_v2.proto.
namespace request {
constexpr int kModelName = 1, kInputs = 5, kOutputs = 6;
}
namespace tensor {  // InferInputTensor and InferOutputTensor
constexpr int kName = 1, kDatatype = 2, kShape = 3, kContents = 5;
}
namespace contents {  // InferTensorContents
constexpr int kFp32 = 6, kBytes = 8;
}
namespace response {
constexpr int kOutputs = 5, kRawOutputContents = 6;
}

// A message built in a string, written as a length-delimited field.
class Message {
 public:
  Message() : stream_(&bytes_), out_(&stream_) {}
  CodedOutputStream& out() { return out_; }
  std::string take() {
    out_.Trim();
    return std::move(bytes_);
  }

 private:
  std::string bytes_;
  StringOutputStream stream_;
  CodedOutputStream out_;
};

void write_bytes(CodedOutputStream& out, int field, const std::string& value) {
  Wire::WriteTag(field, Wire::WIRETYPE_LENGTH_DELIMITED, &out);
  out.WriteVarint32(static_cast<std::uint32_t>(value.size()));
  out.WriteString(value);
}

struct OutputTensor {
  std::string name, datatype;
  std::vector<std::int64_t> shape;
  std::vector<float> fp32;  // contents.fp32_contents, when given there
};

// Reads a length-delimited field's bytes.
bool read_bytes(CodedInputStream& in, std::string& value) {
  std::uint32_t length = 0;
  return in.ReadVarint32(&length) && in.ReadString(&value, static_cast<int>(length));
}

bool read_fp32_contents(const std::string& bytes, std::vector<float>& out) {
  CodedInputStream in(reinterpret_cast<const std::uint8_t*>(bytes.data()), static_cast<int>(bytes.size()));
  while (std::uint32_t tag = in.ReadTag()) {
    if (Wire::GetTagFieldNumber(tag) == contents::kFp32 &&
        Wire::GetTagWireType(tag) == Wire::WIRETYPE_LENGTH_DELIMITED) {  // packed
      std::string packed;
      if (!read_bytes(in, packed) || packed.size() % 4 != 0) return false;
      if (packed.empty()) continue;
      const std::size_t first = out.size();
      out.resize(first + packed.size() / 4);
      std::memcpy(out.data() + first, packed.data(), packed.size());  // little-endian, as x86 is
    } else if (Wire::GetTagFieldNumber(tag) == contents::kFp32 && Wire::GetTagWireType(tag) == Wire::WIRETYPE_FIXED32) {
      std::uint32_t bits = 0;
      if (!in.ReadLittleEndian32(&bits)) return false;
      float f;
      std::memcpy(&f, &bits, 4);
      out.push_back(f);
    } else if (!Wire::SkipField(&in, tag)) {
      return false;
    }
  }
  return in.ConsumedEntireMessage();
}

bool read_output_tensor(const std::string& bytes, OutputTensor& t) {
  CodedInputStream in(reinterpret_cast<const std::uint8_t*>(bytes.data()), static_cast<int>(bytes.size()));
  while (std::uint32_t tag = in.ReadTag()) {
    const int field = Wire::GetTagFieldNumber(tag);
    const auto type = Wire::GetTagWireType(tag);
    if (field == tensor::kName && type == Wire::WIRETYPE_LENGTH_DELIMITED) {
      if (!read_bytes(in, t.name)) return false;
    } else if (field == tensor::kDatatype && type == Wire::WIRETYPE_LENGTH_DELIMITED) {
      if (!read_bytes(in, t.datatype)) return false;
    } else if (field == tensor::kShape && type == Wire::WIRETYPE_LENGTH_DELIMITED) {  // packed int64
      std::string packed;
      if (!read_bytes(in, packed)) return false;
      CodedInputStream dims(reinterpret_cast<const std::uint8_t*>(packed.data()), static_cast<int>(packed.size()));
      std::uint64_t d = 0;
      while (dims.BytesUntilLimit() != 0 && dims.ReadVarint64(&d)) t.shape.push_back(static_cast<std::int64_t>(d));
      if (!dims.ConsumedEntireMessage() && dims.BytesUntilLimit() != 0) return false;
    } else if (field == tensor::kShape && type == Wire::WIRETYPE_VARINT) {
      std::uint64_t d = 0;
      if (!in.ReadVarint64(&d)) return false;
      t.shape.push_back(static_cast<std::int64_t>(d));
    } else if (field == tensor::kContents && type == Wire::WIRETYPE_LENGTH_DELIMITED) {
      std::string c;
      if (!read_bytes(in, c) || !read_fp32_contents(c, t.fp32)) return false;
    } else if (!Wire::SkipField(&in, tag)) {
      return false;
    }
  }
  return in.ConsumedEntireMessage();
}

}  // namespace

std::string kserve_grpc_request(const std::string& model, const std::string& input_name,
                                const std::string& output_name, const std::vector<std::string>& texts) {
  Message texts_contents;
  for (const auto& t : texts) write_bytes(texts_contents.out(), contents::kBytes, t);
  Message shape;
  shape.out().WriteVarint64(texts.size());
  Message input;
  write_bytes(input.out(), tensor::kName, input_name);
  write_bytes(input.out(), tensor::kDatatype, "BYTES");
  write_bytes(input.out(), tensor::kShape, shape.take());
  write_bytes(input.out(), tensor::kContents, texts_contents.take());
  Message body;
  write_bytes(body.out(), request::kModelName, model);
  write_bytes(body.out(), request::kInputs, input.take());
  if (!output_name.empty()) {
    Message output;
    write_bytes(output.out(), tensor::kName, output_name);
    write_bytes(body.out(), request::kOutputs, output.take());
  }
  return body.take();
}

Status kserve_grpc_vectors(const std::string& response, const std::string& output_name, std::size_t count,
                           std::size_t& dimension, std::vector<float>& out) {
  std::vector<OutputTensor> outputs;
  std::vector<std::string> raw;
  CodedInputStream in(reinterpret_cast<const std::uint8_t*>(response.data()), static_cast<int>(response.size()));
  in.SetTotalBytesLimit(std::numeric_limits<int>::max());
  while (std::uint32_t tag = in.ReadTag()) {
    const int field = Wire::GetTagFieldNumber(tag);
    const bool delimited = Wire::GetTagWireType(tag) == Wire::WIRETYPE_LENGTH_DELIMITED;
    std::string bytes;
    if (field == response::kOutputs && delimited) {
      OutputTensor t;
      if (!read_bytes(in, bytes) || !read_output_tensor(bytes, t)) {
        return Status::data_loss("the ModelInferResponse has an output that cannot be read");
      }
      outputs.push_back(std::move(t));
    } else if (field == response::kRawOutputContents && delimited) {
      if (!read_bytes(in, bytes)) return Status::data_loss("the ModelInferResponse's raw contents are cut short");
      raw.push_back(std::move(bytes));
    } else if (!Wire::SkipField(&in, tag)) {
      return Status::data_loss("the answer is not a ModelInferResponse");
    }
  }
  if (!in.ConsumedEntireMessage()) return Status::data_loss("the answer is not a ModelInferResponse");
  std::size_t which = outputs.size();
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    if (output_name.empty() ? outputs[i].datatype == "FP32" : outputs[i].name == output_name) {
      which = i;
      break;
    }
  }
  if (which == outputs.size()) {
    return Status::data_loss(output_name.empty() ? std::string("the answer has no FP32 output")
                                                 : fmt::format("the answer has no output named '{}'", output_name));
  }
  const OutputTensor& t = outputs[which];
  if (t.datatype != "FP32") return Status::data_loss(fmt::format("output '{}' is {}, not FP32", t.name, t.datatype));
  if (t.shape.size() != 2 || t.shape[0] != static_cast<std::int64_t>(count) || t.shape[1] <= 0) {
    return Status::data_loss(fmt::format("output '{}' does not have shape [{}, d]", t.name, count));
  }
  const auto d = static_cast<std::size_t>(t.shape[1]);
  if (dimension != 0 && d != dimension) {
    return Status::data_loss(fmt::format("vector 0 of the answer has {} values, not {}", d, dimension));
  }
  std::vector<float> values;
  if (!raw.empty()) {
    // raw_output_contents holds every output in order, when used at all.
    if (raw.size() != outputs.size()) return Status::data_loss("raw_output_contents must hold one entry per output");
    const std::string& bytes = raw[which];
    if (bytes.size() != count * d * sizeof(float)) {
      return Status::data_loss(fmt::format("output '{}' holds {} bytes, not {}", t.name, bytes.size(),
                                           count * d * sizeof(float)));
    }
    values.resize(count * d);
    std::memcpy(values.data(), bytes.data(), bytes.size());
  } else {
    values = t.fp32;
    if (values.size() != count * d) {
      return Status::data_loss(fmt::format("output '{}' holds {} values, not {}", t.name, values.size(), count * d));
    }
  }
  dimension = d;
  out.insert(out.end(), values.begin(), values.end());
  return Status::ok();
}

}  // namespace rapidqa::remote

// SafetensorsFile: reads a .safetensors checkpoint (an 8-byte little-endian
// header length, a JSON header naming each tensor's dtype, shape and byte
// range, then the raw little-endian data) through a read-only memory map.
// F32 tensors are returned as views of the map, without a copy, and keep the
// map alive; F16 and BF16 are widened to float32; I8 (quantized weights)
// comes back as int8.
//
// Thread safety: thread-compatible; tensor() is const and may run
// concurrently.
#pragma once

#include <ATen/Tensor.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "rapidqa/status.h"

namespace rapidqa::model {

struct TensorInfo {
  std::string dtype;            // "F32", "F16", "BF16", ...
  std::vector<std::int64_t> shape;
  std::uint64_t begin = 0;      // byte range in the data section
  std::uint64_t end = 0;
};

class SafetensorsFile {
 public:
  // kNotFound when the file is missing; kDataLoss when the header or any
  // byte range is inconsistent with the file (named in the message): a
  // header over 100 MB or beyond the file, malformed or duplicate-key JSON,
  // a shape whose element or byte count overflows 64 bits, data_offsets
  // out of order, outside the data section or not dtype x shape long.
  // Messages quote at most 64 bytes of a tensor name.
  static Result<SafetensorsFile> open(const std::string& path);

  const std::map<std::string, TensorInfo>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  bool contains(const std::string& name) const { return tensors_.count(name) != 0; }

  // The tensor as float32 (int8 for I8). kNotFound when absent;
  // kInvalidArgument for an unsupported dtype (named with the tensor).
  Result<at::Tensor> tensor(const std::string& name) const;

 private:
  struct Mapping;
  std::string path_;
  std::shared_ptr<Mapping> mapping_;
  const std::uint8_t* data_ = nullptr;  // start of the data section
  std::map<std::string, TensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
};

// Writes tensors (any shape; int8 as I8, everything else as F32) as a safetensors file with
// optional metadata; the write goes to a temporary file renamed into place.
Status write_safetensors(const std::string& path, const std::map<std::string, at::Tensor>& tensors,
                         const std::map<std::string, std::string>& metadata = {});

}  // namespace rapidqa::model

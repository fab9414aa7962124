// Reading which tensors a TorchScript archive holds from its data.pkl,
// without running anything.
//
// A TorchScript file (torch.jit.save) is a zip archive: data.pkl pickles the
// module tree, whose objects' attributes include every parameter and buffer
// as a reference into a storage record (data/<key>); code/ holds the
// module's methods as TorchScript source. torch::jit::load compiles that
// source and runs __setstate__ methods while loading: a .pt file is code.
// This reader interprets data.pkl itself, with a fixed list of the globals
// PyTorch's own pickler writes (tensor rebuilding, list specialisations),
// so nothing in the file is compiled or called, and a malformed pickle is a
// Status rather than undefined behaviour. Also accepted: the data.pkl of
// torch.save(model.state_dict()) (an OrderedDict of name -> tensor at the
// root; the _metadata it BUILDs onto the dict is ignored) or of any dict of
// tensors.
//
// The work and memory are bounded by the pickle's size, not by what it
// asks for: values, memo entries, stack and marks are counted; everything
// copied out of the input (strings, globals, storage keys, shapes, names)
// is charged to one budget of a small multiple of the pickle's size; and
// naming walks each module once.
//
// LibTorch-free on purpose: torchscript_reader.cpp turns the descriptions
// into tensors, and this part can be tested and fuzzed on its own.
//
// Thread safety: free functions, no shared state.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "rapidqa/status.h"

namespace rapidqa::model {

// One tensor as data.pkl describes it: a strided view of a storage.
struct PickledTensor {
  std::string storage_key;         // its bytes are the archive record "data/<storage_key>"
  std::string storage_type;        // "FloatStorage", "HalfStorage", "CharStorage", ...
  std::int64_t storage_numel = 0;  // elements the storage declares
  std::int64_t offset = 0;         // storage offset of element 0, in elements
  std::vector<std::int64_t> sizes;
  std::vector<std::int64_t> strides;  // in elements
};

// Bytes per element of a storage type, 0 for one this reader does not take
// (quantized, complex, unknown).
std::size_t storage_element_size(std::string_view storage_type);

// The largest data.pkl read; a BERT-large one is under 100 KB.
inline constexpr std::size_t kMaxPickleBytes = 64u << 20;

// Every tensor attribute reachable from the root object through object
// attributes, by dotted path ("encoder.layer.0.output.dense.weight", as
// state_dict() names them). A module reachable by several paths (shared,
// or a cycle) is walked once, by its first path in attribute order, as
// named_modules() does; one tensor held by several modules is listed under
// each name. Objects whose state is not an attribute dict (custom
// __getstate__) contribute nothing. Each view is checked to lie inside its
// storage's declared elements, and every persistent id naming one storage
// key must declare the same type and element count; the caller checks that
// the storage record holds that many bytes. kDataLoss naming the byte
// offset for a malformed pickle or one past a bound (attribute names over
// 256 bytes, dotted names over 4 KiB, storage keys other than 1-64 bytes
// of [0-9A-Za-z_]); kInvalidArgument for a global or storage type outside
// the supported list (named, clipped).
Result<std::map<std::string, PickledTensor>> read_pickled_tensors(std::string_view pickle);

// torch.save's format before PyTorch 1.6 (pytorch_model.bin files of that
// age): pickles one after another (magic number, protocol 1001, system
// information, the state dict whose persistent ids are ('storage', type,
// key, location, numel, None), the storage keys), then each storage's bytes
// in key order, each after its element count as 8 little-endian bytes.
bool is_legacy_torch_save(std::string_view head);

struct LegacyStorage {
  std::string key;
  std::string type;         // "FloatStorage", ...
  std::int64_t numel = 0;   // elements the state dict declares
};

struct LegacyPickles {
  std::map<std::string, PickledTensor> tensors;  // as read_pickled_tensors names them
  std::vector<std::string> storage_keys;         // in the order their bytes follow
  std::vector<LegacyStorage> storages;           // the same order, with what each declares
  std::size_t data_offset = 0;                   // where the first storage's element count is
};

// Reads the pickles of a whole legacy file (`file`: its bytes, usually a
// memory map); the storages' bytes are the caller's to check and read.
// Refuses, as read_pickled_tensors does, any global outside the list;
// kDataLoss for a malformed file, a big-endian one, or storage keys that do
// not match the storages the state dict declares one to one.
Result<LegacyPickles> read_legacy_pickles(std::string_view file);

}  // namespace rapidqa::model

// Reading the tensors of a PyTorch zip archive (a TorchScript file, or a
// pytorch_model.bin written by torch.save) without loading it as a
// module: torch::jit::load would compile the archive's code/ and run its
// __setstate__ methods, so a .pt file could run anything it likes. Here the
// zip archive's directory is read for record sizes, then the archive is
// opened with LibTorch's reader, data.pkl is interpreted by
// torchscript_pickle.cpp (which calls nothing), and each storage record is
// copied out once after checking the record holds the bytes the pickle
// claims and no more than the file can account for.
#include <ATen/ATen.h>
#include <caffe2/serialize/inline_container.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <memory>
#include <fstream>
#include <unordered_map>

#include <fmt/format.h>

#include "common/bounded_json.h"
#include "common/mapped_file.h"
#include "model/torchscript_pickle.h"
#include "model/transformer_model.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(leak_sanitizer)
#define RAPIDQA_LEAK_SANITIZER 1
#endif
#elif defined(__SANITIZE_ADDRESS__)
#define RAPIDQA_LEAK_SANITIZER 1
#endif
#ifdef RAPIDQA_LEAK_SANITIZER
#include <sanitizer/lsan_interface.h>
#endif

namespace rapidqa::model {
namespace {

at::ScalarType scalar_type_of(const std::string& storage_type) {
  if (storage_type == "FloatStorage") return at::kFloat;
  if (storage_type == "DoubleStorage") return at::kDouble;
  if (storage_type == "HalfStorage") return at::kHalf;
  if (storage_type == "BFloat16Storage") return at::kBFloat16;
  if (storage_type == "LongStorage") return at::kLong;
  if (storage_type == "IntStorage") return at::kInt;
  if (storage_type == "ShortStorage") return at::kShort;
  if (storage_type == "CharStorage") return at::kChar;
  if (storage_type == "ByteStorage") return at::kByte;
  return at::kBool;  // storage_element_size() admits nothing else
}

// LibTorch's messages carry a backtrace after the first line.
std::string first_line(const std::string& what) {
  return detail::clip_for_message(what.substr(0, what.find('\n')), 160);
}

// --- record sizes, read before LibTorch extracts anything -----------------

// PyTorchStreamReader::getRecord allocates, then inflates, whatever size a
// record's central-directory entry declares (a few bytes of deflate data
// may declare gigabytes), and its constructor already extracts "version".
// So the sizes are read here first, as miniz 2.1 reads them: the last
// end-of-central-directory record, the zip64 one where its locator
// precedes that, a zip64 extra field where an entry's size is 0xFFFFFFFF.
// Names are looked up as miniz does, ASCII case ignored; an archive naming
// one record twice is refused, so both readers agree on which entry a name
// means.
constexpr std::uint64_t kMaxCentralDirectory = 64u << 20;  // bytes; a BERT-large archive's is ~40 KB
constexpr std::uint64_t kMaxVersionRecord = 1024;          // bytes; PyTorch writes "3\n"
// Storage records may decompress to at most this many times the file's
// size in all. PyTorch stores records uncompressed, so a well-formed file
// uses at most 1x; the rest is for a .pt re-zipped with deflate.
constexpr std::uint64_t kMaxStorageBytesPerFileByte = 4;

class ZipDirectory {
 public:
  static Result<ZipDirectory> read(const std::string& path) {
    ZipDirectory directory;
    std::ifstream in(path, std::ios::binary);
    std::error_code ec;
    const std::uint64_t file_size = std::filesystem::file_size(path, ec);
    if (!in || ec) return Status::io_error(fmt::format("{}: cannot be read", path));
    directory.file_size_ = file_size;
    auto corrupt = [&](const std::string& why) {
      return Status::data_loss(fmt::format("{}: not a readable PyTorch archive: {}", path, why));
    };
    auto read_at = [&](std::uint64_t offset, std::uint64_t size, std::string& out) {
      if (offset > file_size || size > file_size - offset) return false;
      out.resize(static_cast<std::size_t>(size));
      in.clear();
      in.seekg(static_cast<std::streamoff>(offset));
      return static_cast<bool>(in.read(out.data(), static_cast<std::streamsize>(size)));
    };

    constexpr std::uint64_t kEndSize = 22, kLocatorSize = 20, kZip64EndSize = 56, kEntrySize = 46;
    std::string tail;
    const std::uint64_t tail_size = std::min<std::uint64_t>(file_size, 0xFFFF + kEndSize);
    if (!read_at(file_size - tail_size, tail_size, tail)) return corrupt("cannot read its end");
    std::size_t end = std::string::npos;
    for (std::size_t i = tail.size() >= kEndSize ? tail.size() - kEndSize + 1 : 0; i-- > 0;) {
      if (le(tail, i, 4) == 0x06054b50) {
        end = i;
        break;
      }
    }
    if (end == std::string::npos) return corrupt("no zip end-of-central-directory record");
    std::uint64_t entries = le(tail, end + 10, 2), directory_size = le(tail, end + 12, 4),
                  directory_at = le(tail, end + 16, 4);
    const std::uint64_t end_at = file_size - tail_size + end;
    std::string locator, zip64_end;
    if (end_at >= kLocatorSize + kZip64EndSize && read_at(end_at - kLocatorSize, kLocatorSize, locator) &&
        le(locator, 0, 4) == 0x07064b50) {
      const std::uint64_t zip64_end_at = le(locator, 8, 8);
      if (zip64_end_at > file_size - kZip64EndSize) return corrupt("zip64 end-of-central-directory outside the file");
      // As in miniz: where the zip64 record is present, its counts replace the 16- and 32-bit ones.
      if (read_at(zip64_end_at, kZip64EndSize, zip64_end) && le(zip64_end, 0, 4) == 0x06064b50) {
        entries = le(zip64_end, 32, 8);
        directory_size = le(zip64_end, 40, 8);
        directory_at = le(zip64_end, 48, 8);
      }
    }
    if (directory_size > kMaxCentralDirectory) {
      return corrupt(fmt::format("a zip central directory of {} bytes (at most {})", directory_size,
                                 kMaxCentralDirectory));
    }
    if (entries > directory_size / kEntrySize) return corrupt("more zip entries than its central directory holds");
    std::string listing;
    if (!read_at(directory_at, directory_size, listing)) return corrupt("zip central directory outside the file");

    std::size_t at = 0;
    for (std::uint64_t e = 0; e < entries; ++e) {
      if (listing.size() - at < kEntrySize || le(listing, at, 4) != 0x02014b50) return corrupt("malformed zip entry");
      std::uint64_t uncompressed = le(listing, at + 24, 4);
      const std::size_t name_size = le(listing, at + 28, 2), extra_size = le(listing, at + 30, 2),
                        comment_size = le(listing, at + 32, 2);
      if (listing.size() - at - kEntrySize < name_size + extra_size + comment_size) {
        return corrupt("malformed zip entry");
      }
      const std::string name = listing.substr(at + kEntrySize, name_size);
      if (uncompressed == 0xFFFFFFFF) {
        // zip64 extended information: the 64-bit uncompressed size comes first.
        for (std::size_t x = at + kEntrySize + name_size, x_end = x + extra_size; x_end - x >= 4;) {
          const std::size_t id = le(listing, x, 2), size = le(listing, x + 2, 2);
          if (size > x_end - x - 4) break;
          if (id == 1 && size >= 8) {
            uncompressed = le(listing, x + 4, 8);
            break;
          }
          x += 4 + size;
        }
      }
      at += kEntrySize + name_size + extra_size + comment_size;
      if (name.find('\0') != std::string::npos) return corrupt("a zip entry name holds a NUL byte");
      if (e == 0) {
        // PyTorchStreamReader prefixes every name with the first entry's folder.
        const std::size_t slash = name.find('/');
        if (slash == std::string::npos) return corrupt("its first record is not in a folder");
        directory.prefix_ = name.substr(0, slash + 1);
      }
      if (!directory.sizes_.emplace(lower(name), uncompressed).second) {
        return corrupt(fmt::format("two records named '{}'", detail::clip_for_message(name)));
      }
    }
    return directory;
  }

  // The uncompressed size the archive declares for a record ("data.pkl",
  // "data/0"), null when it has none by that name.
  const std::uint64_t* size_of(const std::string& record) const {
    const auto found = sizes_.find(lower(prefix_ + record));
    return found == sizes_.end() ? nullptr : &found->second;
  }
  std::uint64_t file_size() const { return file_size_; }

 private:
  static std::uint64_t le(const std::string& bytes, std::size_t at, int width) {
    std::uint64_t v = 0;
    for (int i = width; i-- > 0;) v = (v << 8) | static_cast<unsigned char>(bytes[at + static_cast<std::size_t>(i)]);
    return v;
  }
  static std::string lower(std::string name) {
    for (char& c : name) {
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    }
    return name;
  }

  std::string prefix_;  // "<archive>/"
  std::unordered_map<std::string, std::uint64_t> sizes_;  // lower-cased full name -> uncompressed bytes
  std::uint64_t file_size_ = 0;
};

// Elements of a view, or false when the count overflows.
bool view_elements(const PickledTensor& info, std::uint64_t& elements) {
  elements = 1;
  for (const std::int64_t size : info.sizes) {
    if (__builtin_mul_overflow(elements, static_cast<std::uint64_t>(size), &elements)) return false;
  }
  return true;
}

// The view is its whole, non-empty storage, in order: it can share it.
bool whole_storage(const PickledTensor& info, std::uint64_t elements) {
  if (info.offset != 0 || elements == 0 || elements != static_cast<std::uint64_t>(info.storage_numel)) return false;
  std::int64_t expected = 1;
  for (std::size_t d = info.sizes.size(); d-- > 0;) {
    if (info.sizes[d] > 1 && info.strides[d] != expected) return false;
    expected *= info.sizes[d];
  }
  return true;
}

// LibTorch 1.13's archive reader leaks its zip state (a few hundred bytes)
// when its constructor throws on a malformed archive. That leak is not ours
// to fix; under LeakSanitizer (the sanitizer builds, the fuzzers) it is
// kept out of the report, so the report stays about our code.
std::unique_ptr<caffe2::serialize::PyTorchStreamReader> open_archive(const std::string& path) {
#ifdef RAPIDQA_LEAK_SANITIZER
  __lsan::ScopedDisabler not_ours;
#endif
  return std::make_unique<caffe2::serialize::PyTorchStreamReader>(path);
}

// The named tensors as views of their storages (flat tensors by storage
// key). A view of a whole storage shares it; any other view is copied out,
// and the copies may not add up to more than the storages themselves (a
// thousand names viewing one large storage would otherwise copy it a
// thousand times).
Result<std::map<std::string, at::Tensor>> views_of(const std::map<std::string, PickledTensor>& described,
                                                   const std::map<std::string, at::Tensor>& storages,
                                                   std::uint64_t storage_bytes, const std::string& path) {
  std::uint64_t copied = 0;
  std::map<std::string, at::Tensor> tensors;
  for (const auto& [name, info] : described) {
    const at::Tensor& flat = storages.at(info.storage_key);
    std::uint64_t elements = 0, bytes = 0;
    if (!view_elements(info, elements) ||
        __builtin_mul_overflow(elements, static_cast<std::uint64_t>(flat.element_size()), &bytes)) {
      return Status::data_loss(fmt::format("{}: tensor '{}': size overflows", path, detail::clip_for_message(name)));
    }
    // The pickle reader checked the view lies inside info.storage_numel
    // elements, which the caller checked is flat's.
    at::Tensor view = flat.as_strided(info.sizes, info.strides, info.offset);
    if (whole_storage(info, elements)) {
      tensors.emplace(name, std::move(view));
      continue;
    }
    if (bytes > storage_bytes - copied) {
      return Status::data_loss(fmt::format("{}: tensor '{}': copies of partial views would exceed the {} bytes of "
                                           "all storages",
                                           path, detail::clip_for_message(name), storage_bytes));
    }
    copied += bytes;
    tensors.emplace(name, view.clone());
  }
  if (tensors.empty()) {
    return Status::invalid_argument(fmt::format("{}: the archive holds no tensors", path));
  }
  return tensors;
}

// torch.save's format before PyTorch 1.6: the pickles, then each storage's
// element count and bytes in key order, all checked against the file's size
// before anything is allocated.
Result<std::map<std::string, at::Tensor>> read_legacy_file(const std::string& path) {
  auto mapped = detail::MappedFile::open(path);
  if (!mapped) return mapped.status();
  const std::string_view file(reinterpret_cast<const char*>(mapped->data()), mapped->size());
  auto pickles = read_legacy_pickles(file);
  if (!pickles) return Status(pickles.status().code(), fmt::format("{}: {}", path, pickles.status().message()));
  std::map<std::string, at::Tensor> storages;
  std::uint64_t at = pickles->data_offset, storage_bytes = 0;
  for (const LegacyStorage& storage : pickles->storages) {
    std::uint64_t needed = 0;
    if (__builtin_mul_overflow(static_cast<std::uint64_t>(storage.numel),
                               static_cast<std::uint64_t>(storage_element_size(storage.type)), &needed) ||
        file.size() < at || file.size() - at < 8 || file.size() - at - 8 < needed) {
      return Status::data_loss(fmt::format("{}: storage '{}' ({} elements of {}) runs past the end of the file",
                                           path, storage.key, storage.numel, storage.type));
    }
    std::uint64_t count = 0;
    for (int i = 8; i-- > 0;) count = (count << 8) | static_cast<unsigned char>(file[at + static_cast<std::size_t>(i)]);
    if (count != static_cast<std::uint64_t>(storage.numel)) {
      return Status::data_loss(fmt::format("{}: storage '{}' holds {} elements but the state dict declares {}", path,
                                           storage.key, count, storage.numel));
    }
    at::Tensor flat = at::empty({storage.numel}, at::TensorOptions().dtype(scalar_type_of(storage.type)));
    if (needed > 0) std::memcpy(flat.data_ptr(), file.data() + at + 8, needed);
    storages.emplace(storage.key, std::move(flat));
    storage_bytes += needed;
    at += 8 + needed;
  }
  if (at != file.size()) {
    return Status::data_loss(fmt::format("{}: {} bytes follow the last storage", path, file.size() - at));
  }
  return views_of(pickles->tensors, storages, storage_bytes, path);
}

Result<std::map<std::string, at::Tensor>> read_archive(const std::string& path) {
  auto directory = ZipDirectory::read(path);
  if (!directory) return directory.status();
  for (const char* version : {".data/version", "version"}) {
    const std::uint64_t* size = directory->size_of(version);
    if (size && *size > kMaxVersionRecord) {
      return Status::data_loss(fmt::format("{}: the '{}' record declares {} bytes (at most {})", path, version, *size,
                                           kMaxVersionRecord));
    }
  }
  const std::uint64_t* declared_pickle = directory->size_of("data.pkl");
  if (declared_pickle && *declared_pickle > kMaxPickleBytes) {
    return Status::data_loss(fmt::format("{}: data.pkl declares {} bytes, more than the {} accepted", path,
                                         *declared_pickle, kMaxPickleBytes));
  }

  const auto opened = open_archive(path);
  caffe2::serialize::PyTorchStreamReader& archive = *opened;
  if (!archive.hasRecord("data.pkl") || !declared_pickle) {
    return Status::data_loss(fmt::format("{}: no data.pkl in the archive (not written by torch.save or torch.jit.save?)", path));
  }
  const auto [pickle, pickle_size] = archive.getRecord("data.pkl");
  auto described = read_pickled_tensors(std::string_view(static_cast<const char*>(pickle.get()), pickle_size));
  if (!described) return Status(described.status().code(), fmt::format("{}: {}", path, described.status().message()));

  // One flat tensor per storage record, read once, shared by the views into it.
  const std::uint64_t extract_limit = kMaxStorageBytesPerFileByte * directory->file_size();
  std::uint64_t extracted = 0;      // bytes getRecord allocated for storages
  std::uint64_t storage_bytes = 0;  // bytes the storages hold
  std::map<std::string, at::Tensor> storages;
  for (const auto& [name, info] : described.value()) {
    const at::ScalarType type = scalar_type_of(info.storage_type);
    const std::string record = "data/" + info.storage_key;
    if (const auto found = storages.find(info.storage_key); found != storages.end()) {
      // The pickle reader refuses a key declared twice differently; the
      // views below rely on it, so it is checked again here.
      if (found->second.scalar_type() != type || found->second.numel() != info.storage_numel) {
        return Status::data_loss(fmt::format("{}: tensor '{}': storage record '{}' is declared twice differently",
                                             path, detail::clip_for_message(name), detail::clip_for_message(record)));
      }
      continue;
    }
    const std::uint64_t* declared = directory->size_of(record);
    if (!archive.hasRecord(record) || !declared) {
      return Status::data_loss(fmt::format("{}: tensor '{}': storage record '{}' is missing", path,
                                           detail::clip_for_message(name), detail::clip_for_message(record)));
    }
    std::uint64_t needed = 0;
    if (__builtin_mul_overflow(static_cast<std::uint64_t>(info.storage_numel),
                               static_cast<std::uint64_t>(storage_element_size(info.storage_type)), &needed)) {
      return Status::data_loss(fmt::format("{}: tensor '{}': storage size overflows", path,
                                           detail::clip_for_message(name)));
    }
    // The record's declared size, not the pickle's claim, decides what
    // getRecord allocates: both are checked before it runs.
    if (*declared < needed) {
      return Status::data_loss(fmt::format("{}: tensor '{}': storage record holds {} bytes but the pickle "
                                           "declares {}",
                                           path, detail::clip_for_message(name), *declared, needed));
    }
    if (*declared > extract_limit - extracted) {
      return Status::data_loss(fmt::format("{}: tensor '{}': the storage records declare more than {} bytes, {} times "
                                           "the file's size",
                                           path, detail::clip_for_message(name), extract_limit,
                                           kMaxStorageBytesPerFileByte));
    }
    extracted += *declared;
    const auto [data, size] = archive.getRecord(record);
    if (size < needed) {
      return Status::data_loss(fmt::format("{}: tensor '{}': storage record holds {} bytes but the pickle "
                                           "declares {}",
                                           path, detail::clip_for_message(name), size, needed));
    }
    at::Tensor flat = at::empty({info.storage_numel}, at::TensorOptions().dtype(type));
    if (needed > 0) std::memcpy(flat.data_ptr(), data.get(), needed);
    storage_bytes += needed;
    storages.emplace(info.storage_key, std::move(flat));
  }

  return views_of(described.value(), storages, storage_bytes, path);
}

}  // namespace

Result<std::map<std::string, at::Tensor>> read_pytorch_archive(const std::string& path) {
  std::error_code ec;
  // A FIFO or device named model.pt would block or never end.
  if (!std::filesystem::is_regular_file(path, ec)) {
    return Status::invalid_argument(fmt::format("{}: not a regular file", path));
  }
  try {
    char head[16] = {};
    std::ifstream(path, std::ios::binary).read(head, sizeof head);
    if (is_legacy_torch_save(std::string_view(head, sizeof head))) return read_legacy_file(path);
    return read_archive(path);
  } catch (const c10::Error& e) {
    return Status::data_loss(
        fmt::format("{}: not a readable PyTorch archive: {}", path, first_line(e.what_without_backtrace())));
  } catch (const std::bad_alloc&) {
    return Status::resource_exhausted(fmt::format("{}: out of memory reading the PyTorch archive", path));
  } catch (const std::exception& e) {
    return Status::data_loss(fmt::format("{}: not a readable PyTorch archive: {}", path, first_line(e.what())));
  }
}

}  // namespace rapidqa::model

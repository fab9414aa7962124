// MappedFile: a whole file mapped read-only into memory, for readers of
// large binary files (index snapshots of gigabytes) that would otherwise
// copy every byte into a buffer before copying it again into its place. The
// pages are the page cache's: they cost no heap and are read from disk as
// they are touched.
//
// The mapping sees the file as it changes: a file truncated by someone else
// while mapped makes reads past its new end fault (SIGBUS). Map only files
// that are replaced by rename, never rewritten in place (AtomicFileWriter's).
//
// Thread safety: thread-compatible; the bytes may be read concurrently.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "rapidqa/status.h"

namespace rapidqa::detail {

class MappedFile {
 public:
  // kNotFound when there is no such file, kIoError when it cannot be opened
  // or mapped (permissions, a folder, a device).
  static Result<MappedFile> open(const std::string& path);

  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&&) = delete;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  // The file's bytes, valid while this object lives (nullptr when empty).
  const std::uint8_t* data() const { return data_; }
  std::size_t size() const { return size_; }

 private:
  MappedFile(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}

  const std::uint8_t* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace rapidqa::detail

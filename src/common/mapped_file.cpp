#include "common/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include <fmt/format.h>

namespace rapidqa::detail {

Result<MappedFile> MappedFile::open(const std::string& path) {
  // O_NONBLOCK: a FIFO under the name must not block the open until a
  // writer comes (it is refused as not a regular file below).
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    const int error = errno;
    if (error == ENOENT) return Status::not_found(fmt::format("{}: no such file", path));
    return Status::io_error(fmt::format("{}: cannot open: {}", path, std::strerror(error)));
  }
  struct stat info {};
  if (::fstat(fd, &info) != 0) {
    const int error = errno;
    ::close(fd);
    return Status::io_error(fmt::format("{}: cannot tell its size: {}", path, std::strerror(error)));
  }
  if (!S_ISREG(info.st_mode)) {
    ::close(fd);
    return Status::io_error(fmt::format("{}: not a regular file", path));
  }
  const auto size = static_cast<std::size_t>(info.st_size);
  if (size == 0) {  // mmap refuses a length of 0
    ::close(fd);
    return MappedFile(nullptr, 0);
  }
  void* mapped = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  const int error = errno;
  ::close(fd);  // the mapping keeps the file open
  if (mapped == MAP_FAILED) return Status::io_error(fmt::format("{}: cannot map: {}", path, std::strerror(error)));
  // Readers go front to back: let the kernel read ahead further.
  ::madvise(mapped, size, MADV_SEQUENTIAL);
  return MappedFile(static_cast<const std::uint8_t*>(mapped), size);
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

MappedFile::~MappedFile() {
  if (data_) ::munmap(const_cast<std::uint8_t*>(data_), size_);
}

}  // namespace rapidqa::detail

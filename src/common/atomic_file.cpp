#include "common/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

#include <fmt/format.h>

namespace rapidqa::detail {
namespace {

// Pieces up to this size are gathered before a write; larger ones go
// straight to the file (a copy would only cost time).
constexpr std::size_t kBufferBytes = 1 << 20;

bool write_fully(int fd, const char* p, std::size_t size) {
  while (size > 0) {
    const ssize_t n = ::write(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n == 0) errno = EIO;
      return false;
    }
    p += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

bool pwrite_fully(int fd, const char* p, std::size_t size, off_t offset) {
  while (size > 0) {
    const ssize_t n = ::pwrite(fd, p, size, offset);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n == 0) errno = EIO;
      return false;
    }
    p += n;
    offset += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

std::string folder_of(const std::string& path) {
  const auto slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace

Result<AtomicFileWriter> AtomicFileWriter::create(const std::string& path) {
  const std::string partial = path + ".partial";
  const int fd = ::open(partial.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Status::io_error(fmt::format("{}: cannot create: {}", partial, std::strerror(errno)));
  return AtomicFileWriter(path, fd);
}

AtomicFileWriter::AtomicFileWriter(std::string path, int fd)
    : path_(std::move(path)), partial_path_(path_ + ".partial"), fd_(fd) {
  buffer_.reserve(kBufferBytes);
}

AtomicFileWriter::AtomicFileWriter(AtomicFileWriter&& other) noexcept
    : path_(std::move(other.path_)),
      partial_path_(std::move(other.partial_path_)),
      fd_(std::exchange(other.fd_, -1)),
      written_(other.written_),
      buffer_(std::move(other.buffer_)) {}

AtomicFileWriter::~AtomicFileWriter() { abandon(); }

void AtomicFileWriter::abandon() {
  if (fd_ < 0) return;
  ::close(fd_);
  fd_ = -1;
  ::unlink(partial_path_.c_str());
}

Status AtomicFileWriter::fail(const char* doing) {
  const int error = errno;
  abandon();
  return Status::io_error(fmt::format("{}: {}: {}", partial_path_, doing, std::strerror(error)));
}

Status AtomicFileWriter::flush() {
  if (buffer_.empty()) return Status::ok();
  if (!write_fully(fd_, buffer_.data(), buffer_.size())) return fail("write failed");
  written_ += buffer_.size();
  buffer_.clear();
  return Status::ok();
}

Status AtomicFileWriter::append(const void* data, std::size_t size) {
  if (fd_ < 0) return Status::failed_precondition(fmt::format("{}: written after commit or failure", partial_path_));
  const auto* p = static_cast<const char*>(data);
  if (buffer_.size() + size <= kBufferBytes) {
    buffer_.insert(buffer_.end(), p, p + size);
    return Status::ok();
  }
  if (auto s = flush(); !s.is_ok()) return s;
  if (size < kBufferBytes) {
    buffer_.insert(buffer_.end(), p, p + size);
    return Status::ok();
  }
  if (!write_fully(fd_, p, size)) return fail("write failed");
  written_ += size;
  return Status::ok();
}

Status AtomicFileWriter::overwrite(std::uint64_t offset, const void* data, std::size_t size) {
  if (fd_ < 0) return Status::failed_precondition(fmt::format("{}: written after commit or failure", partial_path_));
  if (offset + size > written_ + buffer_.size()) {
    return Status::internal(fmt::format("{}: overwrite past the bytes written", partial_path_));
  }
  if (auto s = flush(); !s.is_ok()) return s;
  if (!pwrite_fully(fd_, static_cast<const char*>(data), size, static_cast<off_t>(offset))) return fail("write failed");
  return Status::ok();
}

Status AtomicFileWriter::commit() {
  if (fd_ < 0) return Status::failed_precondition(fmt::format("{}: committed twice or after a failure", partial_path_));
  if (auto s = flush(); !s.is_ok()) return s;
  if (::fsync(fd_) != 0) return fail("fsync failed");
  if (::close(std::exchange(fd_, -1)) != 0) {
    const int error = errno;
    ::unlink(partial_path_.c_str());
    return Status::io_error(fmt::format("{}: close failed: {}", partial_path_, std::strerror(error)));
  }
  if (std::rename(partial_path_.c_str(), path_.c_str()) != 0) {
    const int error = errno;
    ::unlink(partial_path_.c_str());
    return Status::io_error(fmt::format("{}: cannot rename into place: {}", path_, std::strerror(error)));
  }
  // The rename is durable only once the folder's entry is: without this a
  // power cut could bring back the old file (or none) after commit returned.
  const std::string folder = folder_of(path_);
  const int dir = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return Status::io_error(fmt::format("{}: cannot open to sync: {}", folder, std::strerror(errno)));
  // EINVAL: a file system that cannot sync folders (nothing more to do).
  const bool synced = ::fsync(dir) == 0 || errno == EINVAL;
  const int error = errno;
  ::close(dir);
  if (!synced) return Status::io_error(fmt::format("{}: fsync of the folder failed: {}", folder, std::strerror(error)));
  return Status::ok();
}

}  // namespace rapidqa::detail

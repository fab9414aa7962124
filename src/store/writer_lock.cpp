#include "store/writer_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include <fmt/format.h>

namespace rapidqa::store {
namespace {

// The pid the holder wrote into the lock file, or "" when it cannot be read
// (the holder may be between taking the lock and writing it).
std::string holder_pid(int fd) {
  char buffer[32] = {};
  const ssize_t got = ::pread(fd, buffer, sizeof buffer - 1, 0);
  if (got <= 0) return "";
  std::string pid(buffer, static_cast<std::size_t>(got));
  while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' ')) pid.pop_back();
  return pid.find_first_not_of("0123456789") == std::string::npos ? pid : "";
}

}  // namespace

Result<std::unique_ptr<WriterLock>> WriterLock::acquire(const std::string& lock_path, const std::string& store_name) {
  const int fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    return Status::io_error(fmt::format("{}: cannot create the writer lock file '{}': {}", store_name, lock_path,
                                        std::strerror(errno)));
  }
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    const std::string pid = holder_pid(fd);
    ::close(fd);
    if (error == EWOULDBLOCK) {
      return Status::failed_precondition(fmt::format(
          "{} is open for writing by {} (lock file '{}'): one process writes a store at a time; open it "
          "read-only to read it alongside",
          store_name, pid.empty() ? std::string("another process") : "process " + pid, lock_path));
    }
    return Status::io_error(fmt::format("{}: cannot lock '{}': {}", store_name, lock_path, std::strerror(error)));
  }
  // Only the holder writes the file, so no reader sees a mix of two pids.
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
    // The lock itself is held; only the courtesy of naming the holder is lost.
  }
  return std::unique_ptr<WriterLock>(new WriterLock(fd));
}

WriterLock::~WriterLock() {
  // Closing releases the flock. The file stays: unlinking it would let a
  // second writer lock a fresh file while a third still waits on this one.
  ::close(fd_);
}

}  // namespace rapidqa::store

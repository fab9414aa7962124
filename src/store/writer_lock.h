// WriterLock: the one-writer-per-file rule of a file store. The writer
// holds an exclusive flock on "PATH.lock" for as long as the store is open,
// with its process id written inside so a refused second writer can be
// told who holds it. The kernel drops the lock when the holder exits, even
// by SIGKILL, so a crash never leaves a store locked.
//
// Thread safety: thread-compatible. flock locks belong to the open file, so
// a second WriterLock in the same process is refused like one in another.
#pragma once

#include <memory>
#include <string>

#include "rapidqa/status.h"

namespace rapidqa::store {

class WriterLock {
 public:
  // kFailedPrecondition (naming the holder's pid) when another writer holds
  // the lock; kIoError when the lock file cannot be created.
  static Result<std::unique_ptr<WriterLock>> acquire(const std::string& lock_path, const std::string& store_name);
  ~WriterLock();
  WriterLock(const WriterLock&) = delete;
  WriterLock& operator=(const WriterLock&) = delete;

 private:
  explicit WriterLock(int fd) : fd_(fd) {}
  int fd_;
};

}  // namespace rapidqa::store

// AtomicFileWriter: writes a file that appears under its name only once it
// is complete and on disk. The bytes go to "<path>.partial"; commit() syncs
// them (fsync), renames the file over <path> and syncs the folder, so after a
// crash <path> holds either the previous file or the new one, never a
// mixture, and a failed or abandoned write leaves no partial file behind.
// Two writers for the same path at once would share the .partial name: the
// caller allows one at a time.
//
// Thread safety: thread-compatible (one writer per file).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "rapidqa/status.h"

namespace rapidqa::detail {

class AtomicFileWriter {
 public:
  // Creates (or truncates) <path>.partial. kIoError when the folder is
  // missing or not writable.
  static Result<AtomicFileWriter> create(const std::string& path);

  AtomicFileWriter(AtomicFileWriter&& other) noexcept;
  AtomicFileWriter& operator=(AtomicFileWriter&&) = delete;
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;
  // Without a successful commit(), removes the partial file.
  ~AtomicFileWriter();

  // Appends bytes (buffered: small pieces cost no system call each).
  Status append(const void* data, std::size_t size);
  // Replaces bytes already appended, from `offset` on (a header whose
  // checksum is known only at the end).
  Status overwrite(std::uint64_t offset, const void* data, std::size_t size);
  // Flushes, syncs, and renames the file into place. Any failure is
  // kIoError; one before the rename leaves <path> as it was, and none leaves
  // the partial file. (Only a failed sync of the folder comes after the
  // rename: the new file is in place but may not survive a power cut.)
  Status commit();

  const std::string& path() const { return path_; }

 private:
  AtomicFileWriter(std::string path, int fd);
  Status flush();
  Status fail(const char* doing);  // closes and removes the partial file, returns kIoError with errno's text
  void abandon();

  std::string path_;
  std::string partial_path_;
  int fd_ = -1;                 // -1 once committed or abandoned
  std::uint64_t written_ = 0;   // bytes handed to the file so far (the buffer excluded)
  std::vector<char> buffer_;
};

}  // namespace rapidqa::detail

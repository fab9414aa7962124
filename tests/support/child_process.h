// ChildProcess: a program the tests and benchmarks run beside themselves
// (redis-server, PostgreSQL, a peer engine), with its stdin and stdout
// optionally connected to pipes, and every wait bounded so a stuck child
// fails a test instead of hanging it.
//
// Thread safety: thread-compatible. Creating one makes the process ignore
// SIGPIPE, so writing to a child that died reports an error instead of
// killing the test.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "rapidqa/status.h"

namespace rapidqa::testing {

struct ChildOptions {
  bool pipe_stdio = false;        // stdin and stdout through pipes; otherwise inherited
  std::string output_file;        // when not piped and not empty: stdout and stderr appended here
  std::string working_directory;  // the child's; empty: this process's
  // The child leads a process group of its own, and kill_and_wait() kills
  // the whole group: a wrapper that forks its program (runuser) dies
  // together with that program instead of leaving it behind.
  bool own_process_group = false;
};

class ChildProcess {
 public:
  // argv[0] is the program's path. kIoError when it cannot be started.
  static Result<std::unique_ptr<ChildProcess>> start(const std::vector<std::string>& argv,
                                                     const ChildOptions& options = {});
  // Kills the child (SIGKILL) if it still runs, and reaps it.
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  // Whether it still runs (reaps it if it exited).
  bool running();
  void send_signal(int signal);
  // SIGKILL and wait for the exit.
  void kill_and_wait();
  // Waits up to timeout for the child to exit on its own; true if it did.
  bool wait_for_exit(std::chrono::milliseconds timeout);
  // The exit code once the child has exited and been reaped (running()
  // returned false); nullopt while it runs or when a signal ended it.
  std::optional<int> exit_code() const;

  // Piped children only. write_line appends '\n'; false if the child is gone.
  bool write_line(const std::string& line);
  // One line without its '\n'; nullopt on timeout or end of output.
  std::optional<std::string> read_line(std::chrono::milliseconds timeout);

 private:
  ChildProcess() = default;
  // Records waitpid's status for the child.
  void reaped(int wait_status);

  pid_t pid_ = -1;
  bool reaped_ = false;
  bool own_process_group_ = false;
  std::optional<int> exit_code_;
  int stdin_fd_ = -1;
  int stdout_fd_ = -1;
  std::string buffered_;  // output read past the last line returned
};

}  // namespace rapidqa::testing

#include "support/child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include <fmt/format.h>

extern char** environ;

namespace rapidqa::testing {
namespace {

using SteadyTime = std::chrono::steady_clock;

Status os_error(const std::string& what) { return Status::io_error(fmt::format("{}: {}", what, std::strerror(errno))); }

}  // namespace

Result<std::unique_ptr<ChildProcess>> ChildProcess::start(const std::vector<std::string>& argv,
                                                          const ChildOptions& options) {
  if (argv.empty()) return Status::invalid_argument("no program to start");
  ::signal(SIGPIPE, SIG_IGN);
  std::unique_ptr<ChildProcess> child(new ChildProcess());

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  int to_child[2] = {-1, -1};
  int from_child[2] = {-1, -1};
  if (options.pipe_stdio) {
    // Close-on-exec, so no other child inherits these ends and keeps a
    // pipe open after this child is gone.
    if (pipe2(to_child, O_CLOEXEC) != 0 || pipe2(from_child, O_CLOEXEC) != 0) {
      posix_spawn_file_actions_destroy(&actions);
      return os_error("pipe");
    }
    posix_spawn_file_actions_adddup2(&actions, to_child[0], STDIN_FILENO);
    posix_spawn_file_actions_adddup2(&actions, from_child[1], STDOUT_FILENO);
  } else if (!options.output_file.empty()) {
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, options.output_file.c_str(),
                                     O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  }
  if (!options.working_directory.empty()) {
    posix_spawn_file_actions_addchdir_np(&actions, options.working_directory.c_str());
  }
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  if (options.own_process_group) {
    posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(&attributes, 0);  // a group whose id is the child's pid
    child->own_process_group_ = true;
  }
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const int spawned = posix_spawn(&child->pid_, argv[0].c_str(), &actions, &attributes, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  if (options.pipe_stdio) {
    close(to_child[0]);
    close(from_child[1]);
    child->stdin_fd_ = to_child[1];
    child->stdout_fd_ = from_child[0];
  }
  if (spawned != 0) {
    child->reaped_ = true;
    errno = spawned;
    return os_error(fmt::format("starting {}", argv[0]));
  }
  return child;
}

ChildProcess::~ChildProcess() {
  if (stdin_fd_ >= 0) close(stdin_fd_);
  if (stdout_fd_ >= 0) close(stdout_fd_);
  kill_and_wait();
}

bool ChildProcess::running() {
  if (reaped_) return false;
  int status = 0;
  const pid_t r = waitpid(pid_, &status, WNOHANG);
  if (r == pid_) reaped(status);
  if (r < 0 && errno == ECHILD) reaped_ = true;
  return !reaped_;
}

void ChildProcess::reaped(int wait_status) {
  reaped_ = true;
  if (WIFEXITED(wait_status)) exit_code_ = WEXITSTATUS(wait_status);
}

std::optional<int> ChildProcess::exit_code() const { return exit_code_; }

void ChildProcess::send_signal(int signal) {
  if (!reaped_) ::kill(pid_, signal);
}

void ChildProcess::kill_and_wait() {
  if (reaped_) return;
  // The group is only signalled while its leader is unreaped: until then
  // no other process can take over the group's id.
  ::kill(own_process_group_ ? -pid_ : pid_, SIGKILL);
  int status = 0;
  pid_t r = 0;
  while ((r = waitpid(pid_, &status, 0)) < 0 && errno == EINTR) {
  }
  if (r == pid_) {
    reaped(status);
  } else {
    reaped_ = true;  // ECHILD: someone else reaped it; its status is lost
  }
}

bool ChildProcess::wait_for_exit(std::chrono::milliseconds timeout) {
  const auto deadline = SteadyTime::now() + timeout;
  while (running()) {
    if (SteadyTime::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

bool ChildProcess::write_line(const std::string& line) {
  if (stdin_fd_ < 0) return false;
  const std::string data = line + "\n";
  std::size_t written = 0;
  while (written < data.size()) {
    const ssize_t n = write(stdin_fd_, data.data() + written, data.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    written += static_cast<std::size_t>(n);
  }
  return true;
}

std::optional<std::string> ChildProcess::read_line(std::chrono::milliseconds timeout) {
  if (stdout_fd_ < 0) return std::nullopt;
  const auto deadline = SteadyTime::now() + timeout;
  for (;;) {
    if (const auto newline = buffered_.find('\n'); newline != std::string::npos) {
      std::string line = buffered_.substr(0, newline);
      buffered_.erase(0, newline + 1);
      return line;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyTime::now()).count();
    if (left <= 0) return std::nullopt;
    pollfd readable{stdout_fd_, POLLIN, 0};
    const int ready = poll(&readable, 1, static_cast<int>(left));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) return std::nullopt;
    char chunk[4096];
    const ssize_t n = read(stdout_fd_, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return std::nullopt;  // the child closed its output
    buffered_.append(chunk, static_cast<std::size_t>(n));
  }
}

}  // namespace rapidqa::testing

// RedisServer: a private redis-server for a test or a benchmark, on a free
// loopback port, in its own temporary directory, with persistence off. It
// can be killed (an outage) and started again on the same port.
//
// Thread safety: thread-compatible.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "rapidqa/status.h"
#include "support/child_process.h"

namespace rapidqa::testing {

// The redis-server the build found (tests), or the first one on PATH
// (benchmarks); "" when there is none.
std::string redis_server_on_path();

class RedisServer {
 public:
  // Starts `binary` and waits until it answers PING (at most ready_timeout).
  static Result<std::unique_ptr<RedisServer>> start(const std::string& binary,
                                                    std::chrono::milliseconds ready_timeout = std::chrono::seconds(20));
  // Kills the server and removes its directory.
  ~RedisServer();
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  int port() const { return port_; }
  bool running() const;
  // SIGKILL: connections drop at once, nothing is saved.
  void kill();
  // SIGSTOP, waiting until it has stopped: connections stay open but
  // nothing answers, as with a hung server. thaw() resumes it.
  Status freeze();
  void thaw();
  // A fresh server on the same port (empty: persistence is off).
  Status restart(std::chrono::milliseconds ready_timeout = std::chrono::seconds(20));
  // What the server wrote, for a failing test's message.
  std::string log_tail() const;

 private:
  RedisServer() = default;
  Status launch(std::chrono::milliseconds ready_timeout);

  std::string binary_;
  std::string dir_;
  int port_ = 0;
  std::unique_ptr<ChildProcess> process_;
};

}  // namespace rapidqa::testing

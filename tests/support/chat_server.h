// ChatServer: tests/support/chat_completions_server.py run beside a test or
// a benchmark, the stand-in for an LLM engine serving the OpenAI chat
// completions API (faults are picked by the model name; see that file).
// It can be killed and started again on the same port, to test the circuit
// breaker and recovery.
//
// Thread safety: thread-compatible.
#pragma once

#include <memory>
#include <string>

#include "rapidqa/status.h"
#include "support/child_process.h"

namespace rapidqa::testing {

class ChatServer {
 public:
  // python: the interpreter; script: chat_completions_server.py. Starts it
  // on a free loopback port and waits until it listens (kUnavailable if it
  // does not within 20 s).
  static Result<std::unique_ptr<ChatServer>> start(std::string python, std::string script, std::string token = "");
  ~ChatServer();

  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int port() const { return port_; }
  void kill();       // SIGKILL: connections reset, the port refuses
  Status restart();  // on the same port

 private:
  ChatServer(std::string python, std::string script, std::string token)
      : python_(std::move(python)), script_(std::move(script)), token_(std::move(token)) {}
  Status launch(int port);

  std::string python_, script_, token_;
  int port_ = 0;
  std::unique_ptr<ChildProcess> child_;
};

}  // namespace rapidqa::testing

#include "support/chat_server.h"

#include <chrono>
#include <thread>

#include "support/free_port.h"

namespace rapidqa::testing {

using namespace std::chrono_literals;

Result<std::unique_ptr<ChatServer>> ChatServer::start(std::string python, std::string script, std::string token) {
  std::unique_ptr<ChatServer> server(new ChatServer(std::move(python), std::move(script), std::move(token)));
  Status last = Status::unavailable("no free loopback port");
  for (int attempt = 0; attempt < 3; ++attempt) {  // another process may take the free port first
    last = server->launch(free_loopback_port());
    if (last.is_ok()) return server;
  }
  return last;
}

ChatServer::~ChatServer() { kill(); }

void ChatServer::kill() {
  if (child_) child_->kill_and_wait();
  child_.reset();
}

Status ChatServer::restart() {
  kill();
  // The port was just released; a few tries cover a slow close.
  Status last;
  for (int attempt = 0; attempt < 20; ++attempt) {
    last = launch(port_);
    if (last.is_ok()) return last;
    std::this_thread::sleep_for(100ms);
  }
  return last;
}

Status ChatServer::launch(int port) {
  if (port <= 0) return Status::unavailable("no free loopback port");
  std::vector<std::string> argv = {python_, script_, "--port", std::to_string(port)};
  if (!token_.empty()) {
    argv.push_back("--token");
    argv.push_back(token_);
  }
  ChildOptions options;
  options.pipe_stdio = true;
  auto child = ChildProcess::start(argv, options);
  if (!child.is_ok()) return child.status();
  auto line = (*child)->read_line(20s);
  if (!line || line->rfind("listening ", 0) != 0) {
    return Status::unavailable("the chat test server did not start on port " + std::to_string(port));
  }
  port_ = port;
  child_ = std::move(child).value();
  return Status::ok();
}

}  // namespace rapidqa::testing

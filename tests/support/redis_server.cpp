#include "support/redis_server.h"

#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "cache/redis_client.h"
#include "support/free_port.h"

namespace rapidqa::testing {
namespace {

using SteadyTime = std::chrono::steady_clock;

bool answers_ping(int port) {
  auto connection = cache::RedisConnection::connect("127.0.0.1", port, std::chrono::milliseconds(200),
                                                    std::chrono::milliseconds(1000));
  if (!connection) return false;
  auto pong = connection->command({"PING"});
  return pong && pong->text == "PONG";
}

}  // namespace

std::string redis_server_on_path() {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    if (dir.empty()) continue;
    const std::string candidate = dir + "/redis-server";
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

Result<std::unique_ptr<RedisServer>> RedisServer::start(const std::string& binary,
                                                        std::chrono::milliseconds ready_timeout) {
  if (binary.empty()) return Status::not_found("no redis-server binary given");
  std::unique_ptr<RedisServer> server(new RedisServer());
  server->binary_ = binary;
  char dir_template[] = "/tmp/rapidqa-redis-XXXXXX";
  if (!mkdtemp(dir_template)) return Status::io_error("cannot create a directory for redis-server");
  server->dir_ = dir_template;
  Status launched;
  for (int attempt = 0; attempt < 5; ++attempt) {
    server->port_ = free_loopback_port();
    launched = server->launch(ready_timeout);
    if (launched.is_ok()) return server;
  }
  return launched;
}

RedisServer::~RedisServer() {
  kill();
  std::error_code ignored;
  if (!dir_.empty()) std::filesystem::remove_all(dir_, ignored);
}

Status RedisServer::launch(std::chrono::milliseconds ready_timeout) {
  if (port_ == 0) return Status::unavailable("no free loopback port");
  ChildOptions options;
  options.output_file = dir_ + "/redis.log";
  // No configuration file: nothing of a system-wide Redis set-up applies.
  auto child = ChildProcess::start({binary_, "--port", std::to_string(port_), "--bind", "127.0.0.1", "--save", "",
                                    "--appendonly", "no", "--dir", dir_, "--daemonize", "no", "--logfile", ""},
                                   options);
  if (!child) return child.status();
  process_ = std::move(child).value();
  const auto deadline = SteadyTime::now() + ready_timeout;
  while (SteadyTime::now() < deadline) {
    if (!process_->running()) {
      return Status::unavailable(fmt::format("redis-server on port {} exited: {}", port_, log_tail()));
    }
    if (answers_ping(port_)) return Status::ok();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  kill();
  return Status::deadline_exceeded(
      fmt::format("redis-server on port {} did not answer PING within {} ms: {}", port_, ready_timeout.count(),
                  log_tail()));
}

bool RedisServer::running() const { return process_ && process_->running(); }

void RedisServer::kill() {
  if (process_) process_->kill_and_wait();
  process_.reset();
}

Status RedisServer::freeze() {
  if (!process_) return Status::failed_precondition("redis-server is not running");
  process_->send_signal(SIGSTOP);
  const std::string stat_path = fmt::format("/proc/{}/stat", process_->pid());
  const auto deadline = SteadyTime::now() + std::chrono::seconds(10);
  while (SteadyTime::now() < deadline) {
    std::ifstream in(stat_path);
    std::string stat;
    std::getline(in, stat);
    // "pid (comm) state ...": the state letter follows the last ')'.
    const auto paren = stat.rfind(')');
    if (paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] == 'T') return Status::ok();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return Status::deadline_exceeded("redis-server did not stop on SIGSTOP");
}

void RedisServer::thaw() {
  if (process_) process_->send_signal(SIGCONT);
}

Status RedisServer::restart(std::chrono::milliseconds ready_timeout) {
  kill();
  return launch(ready_timeout);
}

std::string RedisServer::log_tail() const {
  std::ifstream in(dir_ + "/redis.log");
  std::stringstream all;
  all << in.rdbuf();
  const std::string text = all.str();
  return text.size() <= 2000 ? text : text.substr(text.size() - 2000);
}

}  // namespace rapidqa::testing

#include "support/canned_http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <nlohmann/json.hpp>

namespace rapidqa::testing {

Result<std::unique_ptr<CannedHttpServer>> CannedHttpServer::start(CannedReply reply) {
  std::unique_ptr<CannedHttpServer> s(new CannedHttpServer());
  s->reply_ = std::move(reply);
  s->listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s->listen_fd_ < 0) return Status::io_error("socket failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (::bind(s->listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::listen(s->listen_fd_, 64) != 0 || ::getsockname(s->listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return Status::io_error(std::string("cannot listen on loopback: ") + std::strerror(errno));
  }
  s->port_ = ntohs(addr.sin_port);
  s->acceptor_ = std::thread([raw = s.get()] { raw->accept_loop(); });
  return s;
}

CannedHttpServer::~CannedHttpServer() {
  stopping_ = true;
  ::shutdown(listen_fd_, SHUT_RDWR);
  if (acceptor_.joinable()) acceptor_.join();
  ::close(listen_fd_);
  std::vector<std::thread> threads;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (int fd : connections_) ::shutdown(fd, SHUT_RDWR);
    threads.swap(threads_);
  }
  for (auto& t : threads) t.join();
}

std::string CannedHttpServer::url() const { return "http://127.0.0.1:" + std::to_string(port_); }

void CannedHttpServer::set_reply(CannedReply reply) {
  std::lock_guard<std::mutex> lock(mu_);
  reply_ = std::move(reply);
}

std::string CannedHttpServer::last_request() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_request_;
}

void CannedHttpServer::accept_loop() {
  while (!stopping_) {
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (stopping_) return;
      continue;
    }
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    std::lock_guard<std::mutex> lock(mu_);
    connections_.push_back(fd);
    threads_.emplace_back([this, fd] { serve(fd); });
  }
}

void CannedHttpServer::serve(int fd) {
  std::string buffer;
  char chunk[16384];
  const auto forget = [&] {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& c : connections_) {
      if (c == fd) c = -1;
    }
    ::close(fd);
  };
  while (!stopping_) {
    // One request: headers, then Content-Length bytes of body.
    std::size_t header_end;
    while ((header_end = buffer.find("\r\n\r\n")) == std::string::npos) {
      const ssize_t n = ::recv(fd, chunk, sizeof(chunk), 0);
      if (n <= 0) return forget();
      buffer.append(chunk, static_cast<std::size_t>(n));
    }
    std::size_t length = 0;
    std::string lower = buffer.substr(0, header_end);
    for (auto& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (const auto at = lower.find("content-length:"); at != std::string::npos) {
      length = std::strtoul(lower.c_str() + at + 15, nullptr, 10);
    }
    while (buffer.size() < header_end + 4 + length) {
      const ssize_t n = ::recv(fd, chunk, sizeof(chunk), 0);
      if (n <= 0) return forget();
      buffer.append(chunk, static_cast<std::size_t>(n));
    }
    const std::string body = buffer.substr(header_end + 4, length);
    CannedReply reply;
    {
      std::lock_guard<std::mutex> lock(mu_);
      last_request_ = buffer.substr(0, header_end + 4 + length);
      reply = reply_;
    }
    buffer.erase(0, header_end + 4 + length);
    requests_.fetch_add(1);
    if (reply.mode == CannedReply::Mode::kClose) return forget();
    if (reply.mode == CannedReply::Mode::kStall) {
      while (!stopping_) {
        pollfd p{fd, POLLIN, 0};
        if (::poll(&p, 1, 50) > 0 && ::recv(fd, chunk, sizeof(chunk), MSG_DONTWAIT) == 0) break;  // client gave up
      }
      return forget();
    }
    if (reply.delay.count() > 0) std::this_thread::sleep_for(reply.delay);
    std::string payload = reply.body;
    int status = reply.status;
    if (reply.mode == CannedReply::Mode::kEmbed) {
      const auto request = nlohmann::json::parse(body, nullptr, false);
      nlohmann::json data = nlohmann::json::array();
      const std::size_t n = request.is_object() && request.contains("input") && request["input"].is_array()
                                ? request["input"].size()
                                : 1;
      for (std::size_t i = 0; i < n; ++i) data.push_back({{"object", "embedding"}, {"index", i}, {"embedding", {1, 2, 3, 4}}});
      payload = nlohmann::json({{"object", "list"}, {"data", data}, {"model", "canned"}}).dump();
      status = 200;
    }
    const std::string head = "HTTP/1.1 " + std::to_string(status) + " Canned\r\nContent-Type: application/json\r\n" +
                             reply.headers + "Content-Length: " + std::to_string(payload.size()) + "\r\n\r\n";
    const std::string out = head + payload;
    if (::send(fd, out.data(), out.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(out.size())) return forget();
  }
  forget();
}

}  // namespace rapidqa::testing

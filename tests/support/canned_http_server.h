// CannedHttpServer: a loopback HTTP/1.1 server whose answers the test
// chooses, for the faults a real engine will not produce on demand: an
// error status with Retry-After, a connection closed without an answer, a
// request never answered, an answer that is not what the protocol says, a
// slow answer. In kEmbed mode it answers like an OpenAI embeddings server
// (one 4-dimensional vector per input text), so it can also be the healthy
// endpoint beside a faulty one.
//
// Thread safety: thread-safe; set_reply() may be called while requests are
// being served (requests read after it get the new reply).
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "rapidqa/status.h"

namespace rapidqa::testing {

struct CannedReply {
  enum class Mode {
    kEmbed,   // 200 with one embedding [1, 2, 3, 4] per input text (OpenAI shape)
    kFixed,   // `status`, `headers` and `body` as given
    kClose,   // close the connection without an answer
    kStall,   // never answer (until the server stops)
  };
  Mode mode = Mode::kEmbed;
  int status = 200;
  std::string headers;  // extra "Name: value\r\n" lines
  std::string body;
  std::chrono::milliseconds delay{0};  // before answering (kEmbed, kFixed)
};

class CannedHttpServer {
 public:
  static Result<std::unique_ptr<CannedHttpServer>> start(CannedReply reply = {});
  ~CannedHttpServer();  // stops: closes every connection and joins its threads
  CannedHttpServer(const CannedHttpServer&) = delete;
  CannedHttpServer& operator=(const CannedHttpServer&) = delete;

  std::string url() const;  // "http://127.0.0.1:PORT"
  void set_reply(CannedReply reply);
  std::size_t requests() const { return requests_.load(); }
  // The last request as received: request line, headers and body.
  std::string last_request() const;

 private:
  CannedHttpServer() = default;
  void accept_loop();
  void serve(int fd);

  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<std::size_t> requests_{0};
  mutable std::mutex mu_;
  CannedReply reply_;              // guarded by mu_
  std::string last_request_;       // guarded by mu_
  std::vector<int> connections_;   // guarded by mu_
  std::vector<std::thread> threads_;  // guarded by mu_
  std::thread acceptor_;
};

}  // namespace rapidqa::testing

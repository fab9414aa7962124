// AccessLog: one JSON line per answered request (time, request id,
// protocol, method, path, status, tenant, answer tier, latency), written by
// whichever thread finished the request.
//
// Thread safety: thread-safe.
#pragma once

#include <chrono>
#include <cstdio>
#include <mutex>
#include <string>

#include <rapidqa/status.h>

#include "server_api.h"

namespace rapidqa::server {

class AccessLog {
 public:
  AccessLog() = default;
  ~AccessLog();
  AccessLog(const AccessLog&) = delete;
  AccessLog& operator=(const AccessLog&) = delete;

  // "" writes nothing, "-" standard output, anything else a file appended to.
  Status open(const std::string& destination);

  void write(const std::string& request_id, const char* protocol, const std::string& method, const std::string& path,
             const ServerResponse& response, std::chrono::steady_clock::duration latency);

 private:
  std::mutex mu_;
  std::FILE* out_ = nullptr;  // guarded by mu_
  bool owned_ = false;
};

}  // namespace rapidqa::server

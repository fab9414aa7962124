// Request ids: a client's own (x-request-id, gRPC metadata) is kept when it
// is short printable ASCII, since it goes into response headers and the
// access log; otherwise the server makes one, unique within the process
// and unlikely to repeat across restarts.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>

namespace rapidqa::server {

inline bool usable_request_id(const std::string& id) {
  return !id.empty() && id.size() <= 128 &&
         std::all_of(id.begin(), id.end(), [](char c) { return c > 0x20 && c < 0x7f && c != '"' && c != '\\'; });
}

inline std::string make_request_id() {
  static std::atomic<std::uint64_t> counter{0};
  static const std::uint64_t prefix = std::random_device{}();
  char buffer[40];
  std::snprintf(buffer, sizeof buffer, "%08llx-%llu", static_cast<unsigned long long>(prefix & 0xffffffffULL),
                static_cast<unsigned long long>(counter.fetch_add(1) + 1));
  return buffer;
}

inline std::string request_id_from(const std::string& sent) { return usable_request_id(sent) ? sent : make_request_id(); }

}  // namespace rapidqa::server

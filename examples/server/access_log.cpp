#include "access_log.h"

#include <cerrno>
#include <cstring>
#include <ctime>

#include <nlohmann/json.hpp>

#include "tool_support.h"

namespace rapidqa::server {

AccessLog::~AccessLog() {
  if (owned_ && out_) std::fclose(out_);
}

Status AccessLog::open(const std::string& destination) {
  if (destination.empty()) return Status::ok();
  if (destination == "-") {
    out_ = stdout;
    return Status::ok();
  }
  out_ = std::fopen(destination.c_str(), "a");
  if (!out_) return Status::io_error("cannot open the access log " + destination + ": " + std::strerror(errno));
  owned_ = true;
  return Status::ok();
}

void AccessLog::write(const std::string& request_id, const char* protocol, const std::string& method,
                      const std::string& path, const ServerResponse& response,
                      std::chrono::steady_clock::duration latency) {
  if (!out_) return;
  const auto now = std::chrono::system_clock::now();
  const std::time_t seconds = std::chrono::system_clock::to_time_t(now);
  const auto millis =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char time[40];
  std::snprintf(time, sizeof time, "%04d-%02d-%02dT%02d:%02d:%02d.%03lldZ", utc.tm_year + 1900, utc.tm_mon + 1,
                utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec, static_cast<long long>(millis));
  nlohmann::json line = {{"time", time},
                         {"request_id", request_id},
                         {"protocol", protocol},
                         {"method", method},
                         {"path", path},
                         {"status", response.status},
                         {"tenant", response.tenant},
                         {"tier", response.tier},
                         {"latency_us", std::chrono::duration<double, std::micro>(latency).count()}};
  const std::string text = tools::json_line(line) + "\n";
  std::lock_guard<std::mutex> lock(mu_);
  std::fwrite(text.data(), 1, text.size(), out_);
  std::fflush(out_);
}

}  // namespace rapidqa::server

#include "remote/remote_calls.h"

#include <curl/curl.h>
#include <fmt/format.h>

#include <algorithm>

namespace rapidqa::remote {

long curl_http_version(RemoteHttpVersion v) {
  switch (v) {
    case RemoteHttpVersion::kHttp1:
      return CURL_HTTP_VERSION_1_1;
    case RemoteHttpVersion::kHttp2:
      return CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE;
    case RemoteHttpVersion::kAuto:
      break;
  }
  return CURL_HTTP_VERSION_2TLS;  // h2 where TLS offers it, HTTP/1.1 otherwise
}

bool is_client_error(long status) { return status >= 400 && status < 500 && status != 429 && status != 408; }

StatusCode code_of_client_error(long status) {
  if (status == 401 || status == 403) return StatusCode::kFailedPrecondition;
  if (status == 404) return StatusCode::kNotFound;
  return StatusCode::kInvalidArgument;
}

std::string deadline_header(SteadyTime deadline) {
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
  return fmt::format("x-request-timeout-ms: {}", std::max<long long>(1, left));
}

Status check_common_options(const char* what, RemoteEngineOptions& o) {
  if (o.endpoints.empty()) return Status::invalid_argument(fmt::format("{}: endpoints is empty", what));
  for (auto& url : o.endpoints) {
    if (url.rfind("http://", 0) != 0 && url.rfind("https://", 0) != 0) {
      return Status::invalid_argument(fmt::format("{}: endpoint '{}' is not an http:// or https:// URL", what, url));
    }
    while (!url.empty() && url.back() == '/') url.pop_back();
  }
  if (o.model.empty()) return Status::invalid_argument(fmt::format("{}: model is required", what));
  if (o.connect_timeout.count() <= 0 || o.request_timeout.count() <= 0) {
    return Status::invalid_argument(fmt::format("{}: connect_timeout and request_timeout must be positive", what));
  }
  if (!(o.retry_budget_ratio >= 0 && o.retry_budget_ratio <= 1) || !(o.retry_budget_floor >= 0)) {
    return Status::invalid_argument(
        fmt::format("{}: retry_budget_ratio must be in [0, 1] and retry_budget_floor >= 0", what));
  }
  if (o.breaker_window == 0 || o.breaker_min_calls == 0 || o.breaker_min_calls > o.breaker_window ||
      !(o.breaker_failure_ratio > 0 && o.breaker_failure_ratio <= 1)) {
    return Status::invalid_argument(fmt::format(
        "{}: breaker_min_calls must be in [1, breaker_window] and breaker_failure_ratio in (0, 1]", what));
  }
  for (const auto& h : o.extra_headers) {
    if (h.find(':') == std::string::npos || h.find_first_of("\r\n") != std::string::npos) {
      return Status::invalid_argument(fmt::format("{}: extra header '{}' is not one 'Name: value' line", what, h));
    }
  }
  if (o.bearer_token.find_first_of("\r\n") != std::string::npos) {
    return Status::invalid_argument(fmt::format("{}: bearer_token holds a line break", what));
  }
  return Status::ok();
}

namespace {

EndpointSetOptions endpoint_options(const RemoteEngineOptions& o) {
  EndpointSetOptions e;
  e.choice = o.choice;
  e.eject_after_failures = o.eject_after_failures;
  e.ejection_time = o.ejection_time;
  e.max_ejection_time = o.max_ejection_time;
  return e;
}

}  // namespace

CallGuards::CallGuards(const RemoteEngineOptions& o)
    : endpoints(o.endpoints, endpoint_options(o)),
      breaker(CircuitBreakerOptions{o.breaker_window, o.breaker_min_calls, o.breaker_failure_ratio,
                                    o.breaker_open_time}),
      budget(o.retry_budget_ratio, o.retry_budget_floor) {
  http.http_version = curl_http_version(o.http_version);
  http.ca_file = o.ca_file;
  http.verify_tls = o.verify_tls;
  http.connect_timeout = o.connect_timeout;
  http.max_response_bytes = o.max_response_bytes;
  headers = o.extra_headers;
  if (!o.bearer_token.empty()) headers.push_back("Authorization: Bearer " + o.bearer_token);
}

RemoteEngineMetrics CallGuards::metrics(const std::string& name) const {
  const auto now = std::chrono::steady_clock::now();
  RemoteEngineMetrics m;
  m.name = name;
  m.breaker = breaker.state(now);
  m.breaker_opens = breaker.opens();
  m.refused_by_breaker = breaker.refused();
  m.retry_budget_spent = budget.refusals();
  m.endpoints = endpoints.metrics(now);
  return m;
}

}  // namespace rapidqa::remote

#include "remote/remote_calls.h"

#include <curl/curl.h>

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

// What every remote engine client shares: the checks of the options both
// RemoteEncoderOptions and RemoteGeneratorOptions carry (endpoints,
// headers, timeouts, retry budget, breaker), and the guards built from
// them (the endpoint set, the circuit breaker, the retry budget, the HTTP
// settings and headers).
//
// Thread safety: the guards are thread-safe (see each class).
#pragma once

#include <fmt/format.h>

#include <string>
#include <vector>

#include "rapidqa/remote_encoder.h"
#include "rapidqa/status.h"
#include "remote/circuit_breaker.h"
#include "remote/endpoint_set.h"
#include "remote/http_lane.h"

namespace rapidqa::remote {

long curl_http_version(RemoteHttpVersion v);

// A 4xx other than 408 and 429 is the caller's error: 401/403
// kFailedPrecondition (credentials), 404 kNotFound, others kInvalidArgument.
bool is_client_error(long http_status);
StatusCode code_of_client_error(long http_status);

// Options is RemoteEncoderOptions or RemoteGeneratorOptions; `what` names
// it in errors. Trailing slashes come off the endpoints.
template <typename Options>
Status check_common_options(const char* what, Options& o) {
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

// The guards in front of one remote engine's endpoints.
struct CallGuards {
  template <typename Options>
  explicit CallGuards(const Options& o)
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

  // The engine's counters under `name`.
  RemoteEngineMetrics metrics(const std::string& name) const;

  EndpointSet endpoints;
  CircuitBreaker breaker;
  RetryBudget budget;
  HttpSettings http;
  std::vector<std::string> headers;  // extra headers and the token

 private:
  template <typename Options>
  static EndpointSetOptions endpoint_options(const Options& o) {
    EndpointSetOptions e;
    e.choice = o.choice;
    e.eject_after_failures = o.eject_after_failures;
    e.ejection_time = o.ejection_time;
    e.max_ejection_time = o.max_ejection_time;
    return e;
  }
};

}  // namespace rapidqa::remote

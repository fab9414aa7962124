// What every remote engine client shares: the checks of
// RemoteEngineOptions (endpoints, headers, timeouts, retry budget,
// breaker), and the guards built from them (the endpoint set, the circuit breaker, the retry budget, the HTTP
// settings and headers).
//
// Thread safety: the guards are thread-safe (see each class).
#pragma once

#include <string>
#include <vector>

#include "rapidqa/metrics.h"
#include "rapidqa/remote_engine.h"
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

// The "x-request-timeout-ms: N" header that tells an engine (rapidqa-server
// reads it) the milliseconds left until `deadline`, at least 1.
std::string deadline_header(SteadyTime deadline);

// Checks what every client's options carry; `what` names the client in
// errors. Trailing slashes come off the endpoints.
Status check_common_options(const char* what, RemoteEngineOptions& o);

// The guards in front of one remote engine's endpoints.
struct CallGuards {
  explicit CallGuards(const RemoteEngineOptions& o);

  // The engine's counters under `name`.
  RemoteEngineMetrics metrics(const std::string& name) const;

  EndpointSet endpoints;
  CircuitBreaker breaker;
  RetryBudget budget;
  HttpSettings http;
  std::vector<std::string> headers;  // extra headers and the token
};

}  // namespace rapidqa::remote

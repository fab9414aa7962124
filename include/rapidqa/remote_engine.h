// RemoteEngineOptions: what every client of a remote model engine
// (RemoteEncoder, RemoteGenerator) is configured with: the endpoints that
// serve one model, how to reach them (authentication, TLS, HTTP version,
// timeouts), and what stands in front of them (endpoint choice, retries
// within a budget, outlier ejection, the circuit breaker). The clients'
// option structs derive from it and add their protocol's settings.
//
// Thread safety: a plain value.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

namespace rapidqa {

enum class RemoteHttpVersion {
  kAuto,   // HTTP/1.1 keep-alive for http://, HTTP/2 when the server offers it (ALPN) for https://
  kHttp1,  // HTTP/1.1 keep-alive everywhere
  kHttp2,  // HTTP/2 everywhere: h2c with prior knowledge for http://
};

enum class EndpointChoice {
  kRoundRobin,
  kLeastLoaded,  // fewest requests in flight; ties go to the lower recent latency
};

struct RemoteEngineOptions {
  // Base URLs of the engines that serve the same model ("http://host:8080",
  // "https://host"), without the protocol's path. At least one.
  std::vector<std::string> endpoints;
  std::string model;  // the model's name at the engine; required

  std::string bearer_token;                 // "Authorization: Bearer ..." when set
  std::vector<std::string> extra_headers;   // "Name: value" lines sent with every request
  RemoteHttpVersion http_version = RemoteHttpVersion::kAuto;
  std::string ca_file;                      // trusted certificates for https://; empty: the system's
  bool verify_tls = true;                   // false only for tests with a self-signed certificate

  std::chrono::milliseconds connect_timeout{1000};
  // The budget of a call without a deadline of its own (RemoteEncoder:
  // 10 s; RemoteGenerator: 60 s).
  std::chrono::milliseconds request_timeout{10000};
  std::size_t max_response_bytes = 64u << 20;  // a larger answer fails the request (generator: 4 MiB)

  EndpointChoice choice = EndpointChoice::kLeastLoaded;
  // Retries go to another endpoint when there is one, only while time is
  // left, and only while retries and hedges stay within retry_budget_ratio
  // of the requests made (plus retry_budget_floor in reserve).
  // (RemoteGenerator: 1, and only before the first token.)
  std::size_t max_retries = 2;
  double retry_budget_ratio = 0.2;
  double retry_budget_floor = 10;
  // Outlier ejection: this many failures in a row leave an endpoint out for
  // ejection_time times the number of its ejections so far (at most
  // max_ejection_time). 0 never ejects.
  std::size_t eject_after_failures = 3;
  std::chrono::milliseconds ejection_time{1000};
  std::chrono::milliseconds max_ejection_time{30000};
  // The circuit breaker opens when at least breaker_min_calls of the last
  // breaker_window calls were made and breaker_failure_ratio of them failed,
  // or when every endpoint is ejected; it stays open for breaker_open_time,
  // then lets one trial call through.
  std::size_t breaker_window = 20;
  std::size_t breaker_min_calls = 5;
  double breaker_failure_ratio = 0.5;
  std::chrono::milliseconds breaker_open_time{2000};
};

}  // namespace rapidqa

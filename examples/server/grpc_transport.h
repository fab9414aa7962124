// GrpcTransport: rapidqa.v1.QA, KServe v2's GRPCInferenceService, the
// standard health service (grpc.health.v1) and server reflection, on
// gRPC's callback API in front of a ServerApi.
//
// rapidqa.v1 calls are translated to the JSON API's requests and answers
// (protobuf's JSON mapping), so gRPC gives the same answers, checks and
// errors as HTTP; KServe inference takes the binary path (ServerApi::embed)
// and returns raw little-endian floats. gRPC's threads only translate: the
// engine runs on the RequestWorkers, and a full queue is answered
// RESOURCE_EXHAUSTED with a retry-after trailer. AskStream reads ahead up
// to a limit of questions in flight and writes answers in order.
//
// Thread safety: start() and shutdown() from one thread; set_ready() from
// any.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include <rapidqa/status.h>

#include "access_log.h"
#include "request_workers.h"
#include "server_api.h"

namespace rapidqa::server {

struct GrpcOptions {
  std::string address = "127.0.0.1";
  int port = -1;                         // -1: no gRPC; 0: any free port
  std::string tls_certificate;           // with tls_key: TLS; else plain (must be asked for by the caller)
  std::string tls_key;
  std::size_t max_message_bytes = 1 << 20;   // larger requests: RESOURCE_EXHAUSTED from gRPC
  std::uint32_t max_streams_per_connection = 128;
  std::size_t max_stream_in_flight = 32;     // AskStream questions read ahead of their answers
};

class GrpcTransport {
 public:
  GrpcTransport(ServerApi& api, RequestWorkers& workers, AccessLog& access_log, GrpcOptions options);
  ~GrpcTransport();
  GrpcTransport(const GrpcTransport&) = delete;
  GrpcTransport& operator=(const GrpcTransport&) = delete;

  Status start();
  int port() const;
  // Health: SERVING once ready, NOT_SERVING before and while draining.
  void set_ready(bool ready);
  // Stops accepting calls, lets those in flight finish until the deadline,
  // then cancels the rest.
  void shutdown(std::chrono::system_clock::time_point deadline);

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace rapidqa::server

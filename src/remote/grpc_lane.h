// GrpcLane: RequestLane over gRPC C++ for unary calls whose messages are
// already serialized (KServe v2's ModelInfer): the request's body is sent
// as the message, its "Name: value" headers as metadata, the deadline as
// gRPC's own (grpc-timeout on the wire). One channel per endpoint, shared
// by every lane of a caller (GrpcChannels), multiplexes the calls over one
// HTTP/2 connection. gRPC's status is reported in HttpResponse's terms so
// that the endpoint set, retries and breaker treat both transports alike:
// OK is 200, RESOURCE_EXHAUSTED 429, the caller's errors 4xx, a missed
// deadline timed_out, an unreachable endpoint no status; the body of an
// error is {"error": {"message"}}.
//
// Thread safety: GrpcChannels is thread-safe; a lane serves one call at a time.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "remote/http_lane.h"
#include "rapidqa/status.h"

namespace grpc {
class Channel;
}

namespace rapidqa::remote {

class GrpcChannels {
 public:
  // ca_file: PEM certificates for https:// endpoints (empty: the system's).
  explicit GrpcChannels(std::string ca_file) : ca_file_(std::move(ca_file)) {}
  // The channel to an endpoint URL (http://host:port plaintext, https:// TLS).
  Result<std::shared_ptr<grpc::Channel>> channel(const std::string& url);

 private:
  std::string ca_file_;
  std::mutex mu_;
  std::unordered_map<std::string, std::shared_ptr<grpc::Channel>> channels_;  // guarded by mu_
};

class GrpcLane final : public RequestLane {
 public:
  // method: the full gRPC method, "/package.Service/Method".
  GrpcLane(std::shared_ptr<GrpcChannels> channels, std::string method)
      : channels_(std::move(channels)), method_(std::move(method)) {}

  void run(const HttpRequest& first, std::size_t first_tag, std::optional<std::chrono::nanoseconds> hedge_after,
           const std::function<std::optional<Hedge>()>& make_hedge, SteadyTime deadline,
           const std::function<void(std::size_t tag, HttpResponse&)>& finished) override;

 private:
  std::shared_ptr<GrpcChannels> channels_;
  std::string method_;
};

// Whether this build has the gRPC client (gRPC C++ was found).
bool grpc_client_available();

}  // namespace rapidqa::remote

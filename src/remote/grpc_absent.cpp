// Built when gRPC C++ and protobuf were not found: RemoteEncoder refuses
// RemoteProtocol::kKServeV2Grpc at create (grpc_client_available() is
// false), so nothing here is reached.
#include "remote/grpc_lane.h"
#include "remote/kserve_grpc_wire.h"

namespace rapidqa::remote {

bool grpc_client_available() { return false; }

Result<std::shared_ptr<grpc::Channel>> GrpcChannels::channel(const std::string&) {
  return Status::failed_precondition("this build has no gRPC client");
}

void GrpcLane::run(const HttpRequest&, std::size_t first_tag, std::optional<std::chrono::nanoseconds>,
                   const std::function<std::optional<Hedge>()>&, SteadyTime,
                   const std::function<void(std::size_t tag, HttpResponse&)>& finished) {
  HttpResponse r;
  r.error = "this build has no gRPC client";
  finished(first_tag, r);
}

std::string kserve_grpc_request(const std::string&, const std::string&, const std::string&,
                                const std::vector<std::string>&) {
  return {};
}

Status kserve_grpc_vectors(const std::string&, const std::string&, std::size_t, std::size_t&, std::vector<float>&) {
  return Status::failed_precondition("this build has no gRPC client");
}

}  // namespace rapidqa::remote

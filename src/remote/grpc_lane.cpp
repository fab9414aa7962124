#include "remote/grpc_lane.h"

#include <fmt/format.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <cctype>
#include <condition_variable>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

namespace rapidqa::remote {

namespace {

using std::chrono::steady_clock;

int http_status_of(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK: return 200;
    case grpc::StatusCode::INVALID_ARGUMENT: return 400;
    case grpc::StatusCode::UNAUTHENTICATED: return 401;
    case grpc::StatusCode::PERMISSION_DENIED: return 403;
    case grpc::StatusCode::NOT_FOUND: return 404;
    case grpc::StatusCode::ALREADY_EXISTS: return 409;
    case grpc::StatusCode::FAILED_PRECONDITION: return 412;
    case grpc::StatusCode::OUT_OF_RANGE: return 413;
    case grpc::StatusCode::RESOURCE_EXHAUSTED: return 429;
    case grpc::StatusCode::UNIMPLEMENTED: return 501;
    default: return 500;
  }
}

// One call in flight: what gRPC fills in, and when it is done.
struct Call {
  std::unique_ptr<grpc::GenericStub> stub;
  grpc::ClientContext context;
  grpc::ByteBuffer request, response;
  grpc::Status status;
  std::size_t tag = 0;
  SteadyTime began{};
  bool done = false;      // guarded by the lane's run() mutex
  bool reported = false;  // run() only
  bool abandoned = false;
};

}  // namespace

bool grpc_client_available() { return true; }

Result<std::shared_ptr<grpc::Channel>> GrpcChannels::channel(const std::string& url) {
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = channels_.find(url); it != channels_.end()) return it->second;
  const bool tls = url.rfind("https://", 0) == 0;
  std::string target = url.substr(url.find("://") + 3);
  if (auto slash = target.find('/'); slash != std::string::npos) target.resize(slash);
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  if (tls) {
    grpc::SslCredentialsOptions ssl;
    if (!ca_file_.empty()) {
      std::ifstream in(ca_file_, std::ios::binary);
      ssl.pem_root_certs.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
      if (ssl.pem_root_certs.empty()) return Status::invalid_argument("cannot read certificates from " + ca_file_);
    }
    credentials = grpc::SslCredentials(ssl);
  } else {
    credentials = grpc::InsecureChannelCredentials();
  }
  grpc::ChannelArguments arguments;
  arguments.SetMaxReceiveMessageSize(64 << 20);
  auto made = grpc::CreateCustomChannel(target, credentials, arguments);
  channels_.emplace(url, made);
  return made;
}

void GrpcLane::run(const HttpRequest& first, std::size_t first_tag,
                   std::optional<std::chrono::nanoseconds> hedge_after,
                   const std::function<std::optional<Hedge>()>& make_hedge, SteadyTime deadline,
                   const std::function<void(std::size_t tag, HttpResponse&)>& finished) {
  std::mutex mu;
  std::condition_variable changed;
  std::vector<std::unique_ptr<Call>> calls;

  auto start = [&](const HttpRequest& request, std::size_t tag) {
    auto call = std::make_unique<Call>();
    call->tag = tag;
    call->began = steady_clock::now();
    Call* c = call.get();
    {
      std::lock_guard<std::mutex> lock(mu);
      calls.push_back(std::move(call));
    }
    auto channel = channels_->channel(request.url);
    if (!channel) {
      std::lock_guard<std::mutex> lock(mu);
      c->status = grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, channel.status().message());
      c->done = true;
      return;
    }
    c->context.set_deadline(std::chrono::system_clock::now() + (deadline - steady_clock::now()));
    for (const auto& header : request.headers) {
      const auto colon = header.find(':');
      if (colon == std::string::npos) continue;
      std::string name = header.substr(0, colon);
      std::transform(name.begin(), name.end(), name.begin(), [](unsigned char ch) { return std::tolower(ch); });
      if (name == "content-type" || name == "x-request-timeout-ms" || name == "expect") continue;
      std::string value = header.substr(colon + 1);
      value.erase(0, value.find_first_not_of(' '));
      c->context.AddMetadata(name, value);
    }
    grpc::Slice slice(request.body);
    c->request = grpc::ByteBuffer(&slice, 1);
    c->stub = std::make_unique<grpc::GenericStub>(*channel);
    c->stub->UnaryCall(&c->context, method_, grpc::StubOptions(), &c->request, &c->response,
                   [&mu, &changed, c](grpc::Status status) {
                     std::lock_guard<std::mutex> lock(mu);
                     c->status = std::move(status);
                     c->done = true;
                     changed.notify_all();
                   });
  };

  auto report = [&](Call& c) {
    HttpResponse r;
    r.elapsed = steady_clock::now() - c.began;
    if (c.abandoned) {
      r.abandoned = true;
    } else if (c.status.ok()) {
      r.status = 200;
      std::vector<grpc::Slice> slices;
      if (!c.response.Dump(&slices).ok()) {
        r.status = 0;
        r.error = "the answer could not be read";
      }
      for (const auto& s : slices) r.body.append(reinterpret_cast<const char*>(s.begin()), s.size());
    } else if (c.status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
      r.timed_out = true;
      r.error = "the deadline passed (gRPC DEADLINE_EXCEEDED)";
    } else if (c.status.error_code() == grpc::StatusCode::UNAVAILABLE ||
               c.status.error_code() == grpc::StatusCode::CANCELLED) {
      r.error = fmt::format("gRPC {}: {}", c.status.error_code() == grpc::StatusCode::UNAVAILABLE ? "UNAVAILABLE"
                                                                                                 : "CANCELLED",
                            c.status.error_message());
    } else {
      r.status = http_status_of(c.status.error_code());
      r.body = nlohmann::json{{"error", {{"message", fmt::format("gRPC status {}: {}", int(c.status.error_code()),
                                                               c.status.error_message())}}}}
                   .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    }
    c.reported = true;
    finished(c.tag, r);
    return r.succeeded();
  };

  start(first, first_tag);
  bool hedged = false, won = false;
  std::unique_lock<std::mutex> lock(mu);
  for (;;) {
    // Report what finished (outside the lock: finished() may pick endpoints).
    Call* ready = nullptr;
    for (auto& c : calls) {
      if (c->done && !c->reported) {
        ready = c.get();
        break;
      }
    }
    if (ready) {
      lock.unlock();
      const bool succeeded = report(*ready);
      lock.lock();
      if (succeeded && !won) {
        won = true;
        for (auto& c : calls) {
          if (!c->done) {
            c->abandoned = true;
            c->context.TryCancel();
          }
        }
      }
      continue;
    }
    const bool all_done = std::all_of(calls.begin(), calls.end(), [](const auto& c) { return c->reported; });
    if (all_done) break;
    if (!hedged && !won && hedge_after && make_hedge) {
      const SteadyTime hedge_at = calls.front()->began + *hedge_after;
      if (steady_clock::now() >= hedge_at) {
        hedged = true;
        lock.unlock();
        auto hedge = make_hedge();
        if (hedge) start(hedge->request, hedge->tag);
        lock.lock();
        continue;
      }
      changed.wait_until(lock, hedge_at);
      continue;
    }
    // gRPC ends every call by its deadline; the wait is bounded by it too.
    changed.wait(lock);
  }
}

}  // namespace rapidqa::remote

#include "rapidqa/remote_encoder.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <mutex>

#include "common/squared_norm.h"
#include "remote/circuit_breaker.h"
#include "remote/embedding_protocol.h"
#include "remote/endpoint_set.h"
#include "remote/grpc_lane.h"
#include "remote/http_lane.h"
#include "remote/remote_calls.h"

namespace rapidqa {

namespace {

using remote::SteadyTime;
using std::chrono::steady_clock;

Status check_options(RemoteEncoderOptions& o) {
  if (Status s = remote::check_common_options("remote encoder", o); !s.is_ok()) return s;
  if (o.protocol != RemoteProtocol::kOpenAIEmbeddings && o.kserve_input.empty()) {
    return Status::invalid_argument("remote encoder: kserve_input is empty");
  }
  if (o.protocol == RemoteProtocol::kKServeV2Grpc) {
    if (!remote::grpc_client_available()) {
      return Status::failed_precondition("remote encoder: this build has no gRPC client (gRPC C++ was not found)");
    }
    if (!o.verify_tls) return Status::invalid_argument("remote encoder: over gRPC, TLS is always verified");
  }
  if (o.max_texts_per_request == 0) return Status::invalid_argument("remote encoder: max_texts_per_request must be positive");
  if (!(o.hedge_percentile >= 0 && o.hedge_percentile < 1)) {
    return Status::invalid_argument("remote encoder: hedge_percentile must be in [0, 1) (0: no hedging)");
  }
  return Status::ok();
}

// Scales each row to unit length; a row that cannot be is the engine's error.
Status normalize_rows(std::vector<float>& v, std::size_t dim) {
  for (std::size_t r = 0; r * dim < v.size(); ++r) {
    float* row = v.data() + r * dim;
    const double sum = squared_norm(row, dim);
    if (!std::isfinite(sum) || sum <= 0) {
      return Status::data_loss(fmt::format("vector {} of the answer is zero or not finite", r));
    }
    const float scale = static_cast<float>(1.0 / std::sqrt(sum));
    for (std::size_t i = 0; i < dim; ++i) row[i] *= scale;
  }
  return Status::ok();
}

}  // namespace

struct RemoteEncoder::Impl {
  RemoteEncoderOptions options;
  remote::EmbeddingProtocol protocol;
  std::size_t dimension = 0;
  remote::CallGuards guards;
  remote::EndpointSet& endpoints = guards.endpoints;
  remote::CircuitBreaker& breaker = guards.breaker;
  remote::RetryBudget& budget = guards.budget;
  std::mutex lanes_mu;
  std::vector<std::unique_ptr<remote::RequestLane>> idle_lanes;  // guarded by lanes_mu
  std::shared_ptr<remote::GrpcChannels> grpc_channels;            // KServe over gRPC: one channel per endpoint

  explicit Impl(RemoteEncoderOptions o)
      : options(std::move(o)), dimension(options.dimension), guards(options) {
    protocol.protocol = options.protocol;
    protocol.model = options.model;
    protocol.kserve_input = options.kserve_input;
    protocol.kserve_output = options.kserve_output;
    protocol.base64_vectors = options.base64_vectors;
    protocol.kserve_binary_vectors = options.kserve_binary_vectors;
    if (options.protocol == RemoteProtocol::kKServeV2Grpc) {
      grpc_channels = std::make_shared<remote::GrpcChannels>(options.ca_file);
    }
  }

  std::string name() const { return fmt::format("remote-{}:{}", remote_protocol_name(options.protocol), options.model); }

  std::unique_ptr<remote::RequestLane> take_lane() {
    {
      std::lock_guard<std::mutex> lock(lanes_mu);
      if (!idle_lanes.empty()) {
        auto lane = std::move(idle_lanes.back());
        idle_lanes.pop_back();
        return lane;
      }
    }
    if (grpc_channels) {
      return std::make_unique<remote::GrpcLane>(grpc_channels, "/inference.GRPCInferenceService/ModelInfer");
    }
    return std::make_unique<remote::HttpLane>(guards.http);
  }
  void return_lane(std::unique_ptr<remote::RequestLane> lane) {
    std::lock_guard<std::mutex> lock(lanes_mu);
    if (idle_lanes.size() < 64) idle_lanes.push_back(std::move(lane));
  }

  remote::HttpRequest request_to(std::size_t endpoint, const std::string& body, SteadyTime deadline) const {
    remote::HttpRequest r;
    r.url = endpoints.url(endpoint) + protocol.path();
    r.body = body;
    r.headers = guards.headers;
    r.headers.push_back(remote::deadline_header(deadline));  // the engine learns the budget
    return r;
  }

  // One request's worth of texts, with retries and a hedge, within deadline.
  Status call(const std::vector<std::string>& texts, SteadyTime deadline, std::vector<float>& out) {
    const remote::Admission admission = breaker.admit(steady_clock::now());
    if (admission == remote::Admission::kRefused) {
      return Status::unavailable(fmt::format("{}: the circuit breaker is open after recent failures", name()));
    }
    const bool trial = admission == remote::Admission::kTrial;
    budget.deposit();
    const std::string body = protocol.request_body(texts);
    std::vector<std::size_t> tried;
    Status last = Status::unavailable(fmt::format("{}: no endpoint was tried", name()));
    for (std::size_t attempt = 0; attempt <= options.max_retries; ++attempt) {
      const SteadyTime now = steady_clock::now();
      if (now >= deadline) {
        last = Status::deadline_exceeded(fmt::format("{}: the deadline passed ({})", name(), last.message()));
        break;
      }
      if (attempt > 0 && !budget.try_spend()) break;
      const auto kind = attempt == 0 ? remote::RequestKind::kFirst : remote::RequestKind::kRetry;
      const std::optional<std::size_t> endpoint = endpoints.pick(tried, kind, now);
      if (!endpoint) {
        breaker.trip(now);
        last = Status::unavailable(fmt::format("{}: every endpoint is left out after failures ({})", name(),
                                               last.message()));
        break;
      }
      tried.push_back(*endpoint);

      std::optional<std::chrono::nanoseconds> hedge_after;
      if (options.hedge_percentile > 0 && endpoints.size() > 1) {
        if (auto p = endpoints.recent_latency(options.hedge_percentile)) {
          hedge_after = std::max<std::chrono::nanoseconds>(*p, options.hedge_min_delay);
        }
      }
      const auto make_hedge = [&]() -> std::optional<remote::Hedge> {
        if (!budget.try_spend()) return std::nullopt;
        const auto other = endpoints.pick(tried, remote::RequestKind::kHedge, steady_clock::now());
        if (!other) return std::nullopt;
        if (*other == tried.back()) {  // nowhere else to go
          endpoints.finished(*other, false, true, {}, steady_clock::now());
          return std::nullopt;
        }
        tried.push_back(*other);
        return remote::Hedge{request_to(*other, body, deadline), *other};
      };

      bool succeeded = false;
      bool client_error = false;
      bool deadline_hit = false;
      Status failure;
      auto lane = take_lane();
      lane->run(request_to(*endpoint, body, deadline), *endpoint, hedge_after, make_hedge, deadline,
                [&](std::size_t ep, remote::HttpResponse& r) {
                  const SteadyTime at = steady_clock::now();
                  const std::string where = endpoints.url(ep);
                  if (r.abandoned || succeeded) {
                    endpoints.finished(ep, false, true, r.elapsed, at);
                    return;
                  }
                  if (r.succeeded()) {
                    // Kept per thread: a batch's vectors are about 100 KB, a fresh
                    // allocation (and its page faults) per answer.
                    thread_local std::vector<float> vectors;
                    std::size_t dim = dimension;
                    Status read = protocol.read_vectors(r.body, texts.size(), dim, vectors, r.inference_header_length);
                    if (read.is_ok()) read = normalize_rows(vectors, dim);
                    if (read.is_ok()) {
                      endpoints.finished(ep, false, false, r.elapsed, at);
                      succeeded = true;
                      if (dimension == 0) dimension = dim;
                      out.insert(out.end(), vectors.begin(), vectors.end());
                      return;
                    }
                    endpoints.finished(ep, true, false, r.elapsed, at);
                    failure = Status(read.code(), fmt::format("{}: {}", where, read.message()));
                    return;
                  }
                  if (r.status == 0) {
                    // Our own deadline is not the endpoint's fault.
                    endpoints.finished(ep, !r.timed_out, r.timed_out, r.elapsed, at);
                    deadline_hit = deadline_hit || r.timed_out;
                    failure = Status::unavailable(fmt::format("{}: {}", where, r.error));
                    return;
                  }
                  const std::string message = remote::error_message(r.body);
                  if (remote::is_client_error(r.status)) {
                    endpoints.finished(ep, false, true, r.elapsed, at);
                    client_error = true;
                    failure = Status(remote::code_of_client_error(r.status),
                                     fmt::format("{} answered {}: {}", where, r.status, message));
                    return;
                  }
                  std::optional<std::chrono::nanoseconds> cool_down;
                  if (r.status == 429 && r.retry_after) cool_down = *r.retry_after;
                  endpoints.finished(ep, true, false, r.elapsed, at, cool_down);
                  failure = Status::unavailable(fmt::format("{} answered {}: {}", where, r.status, message));
                });
      return_lane(std::move(lane));
      if (succeeded || client_error) {
        // The engine answered: it is up, whatever it thought of the texts.
        breaker.record(true, trial, steady_clock::now());
        return succeeded ? Status::ok() : failure;
      }
      last = deadline_hit ? Status::deadline_exceeded(failure.message()) : failure;
    }
    breaker.record(false, trial, steady_clock::now());
    return last;
  }
};

const char* remote_protocol_name(RemoteProtocol protocol) noexcept {
  switch (protocol) {
    case RemoteProtocol::kOpenAIEmbeddings: return "openai";
    case RemoteProtocol::kKServeV2: return "kserve";
    case RemoteProtocol::kKServeV2Grpc: return "kserve-grpc";
  }
  return "unknown";
}

std::optional<RemoteProtocol> remote_protocol_from_name(std::string_view name) noexcept {
  for (RemoteProtocol p : {RemoteProtocol::kOpenAIEmbeddings, RemoteProtocol::kKServeV2, RemoteProtocol::kKServeV2Grpc}) {
    if (name == remote_protocol_name(p)) return p;
  }
  return std::nullopt;
}

RemoteEncoder::RemoteEncoder(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
RemoteEncoder::~RemoteEncoder() = default;

Result<std::shared_ptr<RemoteEncoder>> RemoteEncoder::create(RemoteEncoderOptions options) {
  if (Status s = check_options(options); !s.is_ok()) return s;
  auto impl = std::make_unique<Impl>(std::move(options));
  std::vector<float> probe;
  const SteadyTime deadline = steady_clock::now() + impl->options.request_timeout;
  const std::size_t expected = impl->options.dimension;
  Status s = impl->call({"dimension check"}, deadline, probe);
  if (!s.is_ok()) {
    if (expected != 0 && s.code() == StatusCode::kDataLoss && s.message().find(" values, not ") != std::string::npos) {
      return Status::failed_precondition(
          fmt::format("{}: the engine's vectors are not {} long as configured: {}", impl->name(), expected, s.message()));
    }
    return Status(s.code(), fmt::format("{}: the first request failed: {}", impl->name(), s.message()));
  }
  return std::shared_ptr<RemoteEncoder>(new RemoteEncoder(std::move(impl)));
}

std::size_t RemoteEncoder::dimension() const { return impl_->dimension; }
std::string RemoteEncoder::name() const { return impl_->name(); }
bool RemoteEncoder::wants_normalized_text() const { return impl_->options.send_normalized_text; }

std::string RemoteEncoder::fingerprint() const {
  return fmt::format("{}/dim={}/revision={}/normalized-text={}", name(), dimension(), impl_->options.model_revision,
                     impl_->options.send_normalized_text ? 1 : 0);
}

Status RemoteEncoder::encode(const std::vector<std::string>& texts, std::vector<float>& out) const {
  return encode_within(texts, out, impl_->options.request_timeout);
}

Status RemoteEncoder::encode_within(const std::vector<std::string>& texts, std::vector<float>& out,
                                    std::chrono::nanoseconds time_left) const {
  out.clear();
  if (texts.empty()) return Status::ok();
  if (time_left.count() <= 0) return Status::deadline_exceeded(name() + ": no time left for the request");
  const SteadyTime deadline = steady_clock::now() + time_left;
  out.reserve(texts.size() * impl_->dimension);
  const std::size_t step = impl_->options.max_texts_per_request;
  for (std::size_t begin = 0; begin < texts.size(); begin += step) {
    const std::size_t end = std::min(texts.size(), begin + step);
    const std::vector<std::string> chunk(texts.begin() + static_cast<std::ptrdiff_t>(begin),
                                         texts.begin() + static_cast<std::ptrdiff_t>(end));
    if (Status s = impl_->call(chunk, deadline, out); !s.is_ok()) return s;
  }
  return Status::ok();
}

RemoteEngineMetrics RemoteEncoder::metrics() const { return impl_->guards.metrics(name()); }

void RemoteEncoder::add_metrics(MetricsSnapshot& snapshot) const { snapshot.remote_engines.push_back(metrics()); }

}  // namespace rapidqa

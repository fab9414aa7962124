#include "grpc_transport.h"

#include <cmath>
#include <cstring>
#include <deque>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>

#include <google/protobuf/util/json_util.h>
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_credentials_options.h>
#include <nlohmann/json.hpp>
#include <rapidqa/version.h>

#include "kserve/grpc_predict_v2.grpc.pb.h"
#include "rapidqa/v1/rapidqa.grpc.pb.h"
#include "request_ids.h"

namespace rapidqa::server {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;
namespace pb = ::rapidqa::v1;

std::string metadata(const grpc::CallbackServerContext* context, const char* key) {
  const auto& all = context->client_metadata();
  auto it = all.find(key);
  return it == all.end() ? std::string() : std::string(it->second.data(), it->second.size());
}

// The JSON API's request for a call: its token, request id and deadline.
ServerRequest make_request(grpc::CallbackServerContext* context, std::string method, std::string path,
                           std::string body) {
  ServerRequest r;
  r.method = std::move(method);
  r.path = std::move(path);
  r.body = std::move(body);
  r.authorization = metadata(context, "authorization");
  r.request_id = request_id_from(metadata(context, "x-request-id"));
  const auto deadline = context->deadline();
  if (deadline != std::chrono::system_clock::time_point::max()) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::system_clock::now());
    r.timeout = std::max(std::chrono::milliseconds(1), left);
  }
  context->AddInitialMetadata("x-request-id", r.request_id);
  return r;
}

grpc::StatusCode grpc_code(const std::string& name) {
  static const std::map<std::string, grpc::StatusCode> kCodes = {
      {"invalid_argument", grpc::StatusCode::INVALID_ARGUMENT},
      {"not_found", grpc::StatusCode::NOT_FOUND},
      {"already_exists", grpc::StatusCode::ALREADY_EXISTS},
      {"out_of_range", grpc::StatusCode::OUT_OF_RANGE},
      {"failed_precondition", grpc::StatusCode::FAILED_PRECONDITION},
      {"resource_exhausted", grpc::StatusCode::RESOURCE_EXHAUSTED},
      {"deadline_exceeded", grpc::StatusCode::DEADLINE_EXCEEDED},
      {"unavailable", grpc::StatusCode::UNAVAILABLE},
      {"unauthenticated", grpc::StatusCode::UNAUTHENTICATED},
      {"permission_denied", grpc::StatusCode::PERMISSION_DENIED},
      {"method_not_allowed", grpc::StatusCode::UNIMPLEMENTED},
      {"data_loss", grpc::StatusCode::DATA_LOSS},
  };
  auto it = kCodes.find(name);
  return it == kCodes.end() ? grpc::StatusCode::INTERNAL : it->second;
}

// An error response of the JSON API as a gRPC status (and a retry-after
// trailer where it says when to come back).
grpc::Status error_status(grpc::CallbackServerContext* context, const ServerResponse& response) {
  json body = json::parse(response.body, nullptr, false);
  std::string code = "internal", message = response.body;
  if (!body.is_discarded() && body.contains("error") && body["error"].is_object()) {
    code = body["error"].value("code", code);
    message = body["error"].value("message", message);
  }
  if (response.retry_after_seconds > 0) {
    context->AddTrailingMetadata("retry-after", std::to_string(response.retry_after_seconds));
  }
  return grpc::Status(grpc_code(code), message);
}

grpc::Status busy(grpc::CallbackServerContext* context) {
  context->AddTrailingMetadata("retry-after", "1");
  return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "the server is busy: too many requests waiting");
}

std::string to_json(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  std::string out;
  (void)google::protobuf::util::MessageToJsonString(message, &out, options);
  return out;
}

bool from_json(const std::string& text, google::protobuf::Message* message) {
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;
  return google::protobuf::util::JsonStringToMessage(text, message, options).ok();
}

// One answer of /v1/ask:batch or a stream as a StreamAnswer.
std::string stream_answer_json(const json& item) {
  if (item.contains("error")) return json{{"error", item["error"]}}.dump();
  return json{{"answer", item}}.dump();
}

// AskRequest as the JSON API's body, written directly (protobuf's JSON
// mapping costs more than the answer itself on a cache hit).
std::string ask_body(const pb::AskRequest& r) {
  json body = {{"question", r.question()}};
  if (!r.tenant().empty()) body["tenant"] = r.tenant();
  if (r.has_use_cache()) body["use_cache"] = r.use_cache();
  if (r.has_semantic_threshold()) body["semantic_threshold"] = r.semantic_threshold();
  if (r.has_top_k()) body["top_k"] = r.top_k();
  if (r.has_min_answer_score()) body["min_answer_score"] = r.min_answer_score();
  if (r.has_min_answer_confidence()) body["min_answer_confidence"] = r.min_answer_confidence();
  if (r.has_timeout_ms()) body["timeout_ms"] = r.timeout_ms();
  if (!r.priority().empty()) body["priority"] = r.priority();
  return body.dump(-1, ' ', false, json::error_handler_t::replace);
}

void fill_answer(const Answer& a, pb::Answer* out) {
  out->set_answer(a.text);
  out->set_entry_id(a.entry_id());
  out->set_score(a.score);
  out->set_tier(answer_tier_name(a.tier));
  out->set_degraded(a.degraded);
  out->set_degraded_reason(a.degraded_reason);
  for (const auto& m : a.matches) {
    pb::Match* match = out->add_matches();
    match->set_entry_id(m.entry_id);
    match->set_score(m.score);
    match->set_version(m.version);
  }
  auto& stages = *out->mutable_stage_us();
  for (std::size_t i = 0; i < kStageCount; ++i) {
    const auto stage = static_cast<Stage>(i);
    stages[stage_name(stage)] = std::chrono::duration<double, std::micro>(a.timings[stage]).count();
  }
  if (a.extracted) out->set_extracted_from(a.extracted->entry_id);
  out->set_generated(a.generated);
  out->set_confidence(a.confidence);
  out->set_fallback_reason(a.fallback_reason);
  out->set_cache_decision(a.cache_decision);
}

// What the access log keeps of a typed ask.
ServerResponse logged(const ServerApi::AskOutcome& outcome) {
  if (!outcome.answer) return outcome.refusal;
  ServerResponse r;
  r.tenant = outcome.tenant;
  r.tier = answer_tier_name(outcome.answer->tier);
  return r;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

bool ok_status(int http) { return http == 200 || http == 201; }

}  // namespace

struct GrpcTransport::Impl {
  Impl(ServerApi& api_, RequestWorkers& workers_, AccessLog& log_, GrpcOptions options_)
      : api(api_), workers(workers_), access_log(log_), options(std::move(options_)), qa(*this), kserve(*this) {}

  ServerApi& api;
  RequestWorkers& workers;
  AccessLog& access_log;
  GrpcOptions options;
  std::unique_ptr<grpc::Server> server;
  int bound_port = -1;

  // A unary call of the JSON API: run on a worker, the response body turned
  // into the reply by `fill` (false: the body did not fit the reply type).
  template <typename Reply>
  grpc::ServerUnaryReactor* unary(grpc::CallbackServerContext* context, const char* rpc, std::string method,
                                  std::string path, std::string body, Reply* reply,
                                  std::function<std::string(const std::string&)> reshape = nullptr) {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    ServerRequest request = make_request(context, std::move(method), std::move(path), std::move(body));
    const Clock::time_point started = Clock::now();
    const bool queued = workers.try_submit([this, context, reactor, reply, rpc, started, reshape,
                                            request = std::move(request)] {
      ServerResponse response = api.handle(request);
      access_log.write(request.request_id, "gRPC", "POST", rpc, response, Clock::now() - started);
      if (!ok_status(response.status)) {
        reactor->Finish(error_status(context, response));
        return;
      }
      const std::string body = reshape ? reshape(response.body) : response.body;
      reactor->Finish(from_json(body, reply) ? grpc::Status::OK
                                              : grpc::Status(grpc::StatusCode::INTERNAL, "cannot encode the reply"));
    });
    if (!queued) reactor->Finish(busy(context));
    return reactor;
  }

  // Ask, typed end to end: a cache hit is answered on gRPC's thread.
  grpc::ServerUnaryReactor* ask(grpc::CallbackServerContext* context, const pb::AskRequest& question,
                                pb::Answer* reply) {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    ServerRequest request = make_request(context, "POST", "/v1/ask", ask_body(question));
    const Clock::time_point started = Clock::now();
    auto finish = [this, context, reactor, reply, started](const ServerRequest& r, const ServerApi::AskOutcome& o) {
      access_log.write(r.request_id, "gRPC", "POST", "/rapidqa.v1.QA/Ask", logged(o), Clock::now() - started);
      if (!o.answer) {
        reactor->Finish(error_status(context, o.refusal));
        return;
      }
      fill_answer(*o.answer, reply);
      reactor->Finish(grpc::Status::OK);
    };
    if (auto cached = api.ask_typed(request, /*cached_only=*/true)) {
      finish(request, *cached);
      return reactor;
    }
    if (!workers.try_submit([this, finish, request = std::move(request)] {
          finish(request, *api.ask_typed(request, /*cached_only=*/false));
        })) {
      reactor->Finish(busy(context));
    }
    return reactor;
  }

  class QAService final : public pb::QA::CallbackService {
   public:
    explicit QAService(Impl& impl) : impl_(impl) {}

    grpc::ServerUnaryReactor* Ask(grpc::CallbackServerContext* context, const pb::AskRequest* request,
                                  pb::Answer* reply) override {
      return impl_.ask(context, *request, reply);
    }

    grpc::ServerUnaryReactor* AskBatch(grpc::CallbackServerContext* context, const pb::AskBatchRequest* request,
                                       pb::AskBatchReply* reply) override {
      return impl_.unary(context, "/rapidqa.v1.QA/AskBatch", "POST", "/v1/ask:batch", to_json(*request), reply,
                         [](const std::string& body) {
                           json in = json::parse(body);
                           json answers = json::array();
                           for (const auto& item : in["answers"]) answers.push_back(json::parse(stream_answer_json(item)));
                           return json{{"answers", answers}}.dump();
                         });
    }

    grpc::ServerUnaryReactor* GetEntry(grpc::CallbackServerContext* context, const pb::EntryId* request,
                                       pb::Entry* reply) override {
      return impl_.unary(context, "/rapidqa.v1.QA/GetEntry", "GET", "/v1/entries/" + request->id(), "", reply);
    }

    grpc::ServerUnaryReactor* PutEntry(grpc::CallbackServerContext* context, const pb::Entry* request,
                                       pb::EntryChange* reply) override {
      pb::Entry entry = *request;
      entry.clear_version();
      return impl_.unary(context, "/rapidqa.v1.QA/PutEntry", "PUT", "/v1/entries/" + request->id(), to_json(entry),
                         reply);
    }

    grpc::ServerUnaryReactor* DeleteEntry(grpc::CallbackServerContext* context, const pb::EntryId* request,
                                          pb::EntryChange* reply) override {
      return impl_.unary(context, "/rapidqa.v1.QA/DeleteEntry", "DELETE", "/v1/entries/" + request->id(), "", reply);
    }

    grpc::ServerUnaryReactor* ImportEntries(grpc::CallbackServerContext* context, const pb::ImportRequest* request,
                                            pb::ImportReply* reply) override {
      return impl_.unary(context, "/rapidqa.v1.QA/ImportEntries", "POST", "/v1/entries:import", request->jsonl(),
                         reply);
    }

    grpc::ServerUnaryReactor* InvalidateEntry(grpc::CallbackServerContext* context, const pb::EntryId* request,
                                              pb::CacheChange* reply) override {
      return impl_.unary(context, "/rapidqa.v1.QA/InvalidateEntry", "POST", "/v1/cache:invalidate",
                         json{{"entry_id", request->id()}}.dump(), reply);
    }

    grpc::ServerUnaryReactor* CorrectCachedAnswer(grpc::CallbackServerContext* context,
                                                  const pb::CachedAnswerCorrection* request,
                                                  pb::CacheChange* reply) override {
      return impl_.unary(context, "/rapidqa.v1.QA/CorrectCachedAnswer", "POST", "/v1/cache:correct", to_json(*request),
                         reply);
    }

    grpc::ServerUnaryReactor* DeleteCachedAnswer(grpc::CallbackServerContext* context,
                                                 const pb::CachedQuestion* request, pb::CacheChange* reply) override {
      return impl_.unary(context, "/rapidqa.v1.QA/DeleteCachedAnswer", "POST", "/v1/cache:delete", to_json(*request),
                         reply);
    }

    grpc::ServerBidiReactor<pb::AskRequest, pb::StreamAnswer>* AskStream(grpc::CallbackServerContext* context) override;
    grpc::ServerWriteReactor<pb::AnswerPiece>* AskStreamed(grpc::CallbackServerContext* context,
                                                          const pb::AskRequest* request) override;

   private:
    Impl& impl_;
  };

  class KServeService final : public inference::GRPCInferenceService::CallbackService {
   public:
    explicit KServeService(Impl& impl) : impl_(impl) {}

    grpc::ServerUnaryReactor* ServerLive(grpc::CallbackServerContext* context, const inference::ServerLiveRequest*,
                                         inference::ServerLiveResponse* reply) override {
      reply->set_live(true);
      return finish(context, grpc::Status::OK);
    }
    grpc::ServerUnaryReactor* ServerReady(grpc::CallbackServerContext* context, const inference::ServerReadyRequest*,
                                          inference::ServerReadyResponse* reply) override {
      reply->set_ready(impl_.api.ready());
      return finish(context, grpc::Status::OK);
    }
    grpc::ServerUnaryReactor* ModelReady(grpc::CallbackServerContext* context,
                                         const inference::ModelReadyRequest* request,
                                         inference::ModelReadyResponse* reply) override {
      grpc::Status known = model_known(request->name(), request->version());
      reply->set_ready(known.ok() && impl_.api.ready());
      return finish(context, known);
    }
    grpc::ServerUnaryReactor* ServerMetadata(grpc::CallbackServerContext* context,
                                             const inference::ServerMetadataRequest*,
                                             inference::ServerMetadataResponse* reply) override {
      reply->set_name("rapidqa");
      reply->set_version(RAPIDQA_VERSION_STRING);
      return finish(context, grpc::Status::OK);
    }
    grpc::ServerUnaryReactor* ModelMetadata(grpc::CallbackServerContext* context,
                                            const inference::ModelMetadataRequest* request,
                                            inference::ModelMetadataResponse* reply) override {
      grpc::Status known = model_known(request->name(), request->version());
      if (known.ok()) {
        reply->set_name(impl_.api.model_name());
        reply->add_versions("1");
        reply->set_platform("rapidqa");
        auto* input = reply->add_inputs();
        input->set_name("text");
        input->set_datatype("BYTES");
        input->add_shape(-1);
        auto* output = reply->add_outputs();
        output->set_name("embedding");
        output->set_datatype("FP32");
        output->add_shape(-1);
        output->add_shape(static_cast<std::int64_t>(impl_.api.engine().encoder().dimension()));
      }
      return finish(context, known);
    }
    grpc::ServerUnaryReactor* ModelInfer(grpc::CallbackServerContext* context,
                                         const inference::ModelInferRequest* request,
                                         inference::ModelInferResponse* reply) override;

   private:
    grpc::Status model_known(const std::string& name, const std::string& version) const {
      if (name != impl_.api.model_name()) {
        return grpc::Status(grpc::StatusCode::NOT_FOUND,
                            "no model '" + name + "'; this server serves '" + impl_.api.model_name() + "'");
      }
      if (!version.empty() && version != "1") {
        return grpc::Status(grpc::StatusCode::NOT_FOUND, "model '" + name + "' has version 1 only");
      }
      return grpc::Status::OK;
    }
    static grpc::ServerUnaryReactor* finish(grpc::CallbackServerContext* context, grpc::Status status) {
      grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
      reactor->Finish(std::move(status));
      return reactor;
    }
    Impl& impl_;
  };

  QAService qa;
  KServeService kserve;
};

// AskStream: questions are read ahead (up to max_stream_in_flight) and
// answered on the workers concurrently; answers are written in the order
// the questions came, one write at a time as gRPC requires. The reactor
// finishes only when no job of its own is left at a worker, so a job never
// outlives it.
class AskStreamReactor final : public grpc::ServerBidiReactor<pb::AskRequest, pb::StreamAnswer> {
 public:
  AskStreamReactor(GrpcTransport::Impl& impl, grpc::CallbackServerContext* context)
      : impl_(impl), context_(context) {
    authorization_ = metadata(context, "authorization");
    StartSendInitialMetadata();
    StartRead(&incoming_);
  }

  void OnReadDone(bool ok) override {
    std::unique_lock<std::mutex> lock(mu_);
    if (!ok) {
      reads_done_ = true;
      maybe_finish(lock);
      return;
    }
    const std::uint64_t sequence = next_sequence_++;
    ServerRequest request;
    request.method = "POST";
    request.path = "/v1/ask";
    request.body = ask_body(incoming_);
    request.authorization = authorization_;
    request.request_id = make_request_id();
    const Clock::time_point started = Clock::now();
    if (auto cached = impl_.api.ask_typed(request, /*cached_only=*/true)) {
      impl_.access_log.write(request.request_id, "gRPC", "POST", "/rapidqa.v1.QA/AskStream", logged(*cached),
                             Clock::now() - started);
      ready_[sequence] = stream_answer(*cached);
      write_next(lock);
    } else {
      ++at_workers_;
      const bool queued = impl_.workers.try_submit([this, sequence, started, request = std::move(request)] {
        const auto outcome = impl_.api.ask_typed(request, /*cached_only=*/false);
        impl_.access_log.write(request.request_id, "gRPC", "POST", "/rapidqa.v1.QA/AskStream", logged(*outcome),
                               Clock::now() - started);
        pb::StreamAnswer answer = stream_answer(*outcome);
        std::unique_lock<std::mutex> lock(mu_);
        --at_workers_;
        ready_[sequence] = std::move(answer);
        write_next(lock);
        maybe_finish(lock);
      });
      if (!queued) {
        --at_workers_;
        pb::StreamAnswer refused;
        refused.mutable_error()->set_code("resource_exhausted");
        refused.mutable_error()->set_message("the server is busy: too many requests waiting");
        ready_[sequence] = std::move(refused);
        write_next(lock);
      }
    }
    // Read on while few enough questions wait for their answers.
    if (next_sequence_ - next_write_ < impl_.options.max_stream_in_flight) {
      StartRead(&incoming_);
    } else {
      read_paused_ = true;
    }
  }

  void OnWriteDone(bool ok) override {
    std::unique_lock<std::mutex> lock(mu_);
    writing_ = false;
    if (!ok) broken_ = true;  // the client is gone: answers still at workers are dropped
    ++next_write_;
    if (read_paused_ && !broken_ && !reads_done_) {
      read_paused_ = false;
      StartRead(&incoming_);
    }
    write_next(lock);
    maybe_finish(lock);
  }

  void OnCancel() override {
    std::unique_lock<std::mutex> lock(mu_);
    broken_ = true;
    reads_done_ = true;
    maybe_finish(lock);
  }

  void OnDone() override { delete this; }

 private:
  static pb::StreamAnswer stream_answer(const ServerApi::AskOutcome& outcome) {
    pb::StreamAnswer out;
    if (outcome.answer) {
      fill_answer(*outcome.answer, out.mutable_answer());
      return out;
    }
    json body = json::parse(outcome.refusal.body, nullptr, false);
    const bool worded = !body.is_discarded() && body.contains("error") && body["error"].is_object();
    out.mutable_error()->set_code(worded ? body["error"].value("code", "internal") : "internal");
    out.mutable_error()->set_message(worded ? body["error"].value("message", "") : outcome.refusal.body);
    return out;
  }

  void write_next(std::unique_lock<std::mutex>&) {
    if (writing_ || broken_) return;
    auto it = ready_.find(next_write_);
    if (it == ready_.end()) return;
    outgoing_ = std::move(it->second);
    ready_.erase(it);
    writing_ = true;
    StartWrite(&outgoing_);
  }

  // Finish once the client sent its last question (or left), every job
  // came back and every answer was written (or cannot be).
  void maybe_finish(std::unique_lock<std::mutex>&) {
    if (finished_ || !reads_done_ || at_workers_ > 0 || writing_) return;
    if (!broken_ && (next_write_ < next_sequence_)) return;
    finished_ = true;
    Finish(broken_ && context_->IsCancelled() ? grpc::Status::CANCELLED : grpc::Status::OK);
  }

  GrpcTransport::Impl& impl_;
  grpc::CallbackServerContext* context_;
  std::string authorization_;
  pb::AskRequest incoming_;  // gRPC fills it between StartRead and OnReadDone
  std::mutex mu_;
  std::map<std::uint64_t, pb::StreamAnswer> ready_;  // guarded by mu_: answers waiting for their turn
  pb::StreamAnswer outgoing_;                        // guarded by mu_: the write in progress
  std::uint64_t next_sequence_ = 0;                  // guarded by mu_
  std::uint64_t next_write_ = 0;                     // guarded by mu_
  std::size_t at_workers_ = 0;                       // guarded by mu_
  bool writing_ = false, reads_done_ = false, read_paused_ = false, broken_ = false, finished_ = false;
};

// AskStreamed: one question on a worker, each piece of its text written
// as it comes (one write at a time, the rest queued), then the Answer. The
// reactor finishes only once its job has left the worker; a client that
// leaves stops the generation (the job's on_token returns false).
class AskStreamedReactor final : public grpc::ServerWriteReactor<pb::AnswerPiece> {
 public:
  AskStreamedReactor(GrpcTransport::Impl& impl, grpc::CallbackServerContext* context, const pb::AskRequest& question)
      : impl_(impl), context_(context) {
    ServerRequest request = make_request(context, "POST", "/v1/ask", ask_body(question));
    request.on_token = [this](std::string_view piece) {
      std::unique_lock<std::mutex> lock(mu_);
      if (broken_) return false;
      pb::AnswerPiece out;
      out.set_text(std::string(piece));
      queued_.push_back(std::move(out));
      write_next(lock);
      return true;
    };
    const Clock::time_point started = Clock::now();
    job_running_ = true;
    const bool queued = impl_.workers.try_submit([this, started, request = std::move(request)] {
      const auto outcome = impl_.api.ask_typed(request, /*cached_only=*/false);
      impl_.access_log.write(request.request_id, "gRPC", "POST", "/rapidqa.v1.QA/AskStreamed", logged(*outcome),
                             Clock::now() - started);
      std::unique_lock<std::mutex> lock(mu_);
      job_running_ = false;
      if (outcome->answer) {
        pb::AnswerPiece last;
        fill_answer(*outcome->answer, last.mutable_answer());
        queued_.push_back(std::move(last));
        ending_ = grpc::Status::OK;
      } else {
        ending_ = error_status(context_, outcome->refusal);
      }
      write_next(lock);
      maybe_finish(lock);
    });
    if (!queued) {
      job_running_ = false;
      finished_ = true;
      Finish(busy(context));
    }
  }

  void OnWriteDone(bool ok) override {
    std::unique_lock<std::mutex> lock(mu_);
    writing_ = false;
    if (!ok) broken_ = true;
    write_next(lock);
    maybe_finish(lock);
  }

  void OnCancel() override {
    std::unique_lock<std::mutex> lock(mu_);
    broken_ = true;
    maybe_finish(lock);
  }

  void OnDone() override {
    // gRPC calls it once Finish is done; the job has left the worker by then.
    delete this;
  }

 private:
  void write_next(std::unique_lock<std::mutex>&) {
    if (writing_ || broken_ || queued_.empty()) return;
    outgoing_ = std::move(queued_.front());
    queued_.pop_front();
    writing_ = true;
    StartWrite(&outgoing_);
  }

  void maybe_finish(std::unique_lock<std::mutex>&) {
    if (finished_ || job_running_ || writing_) return;
    if (!broken_ && (!ending_ || !queued_.empty())) return;
    finished_ = true;
    Finish(broken_ ? grpc::Status::CANCELLED : *ending_);
  }

  GrpcTransport::Impl& impl_;
  grpc::CallbackServerContext* context_;
  std::mutex mu_;
  std::deque<pb::AnswerPiece> queued_;  // guarded by mu_
  pb::AnswerPiece outgoing_;            // guarded by mu_: the write in progress
  std::optional<grpc::Status> ending_;  // guarded by mu_: set when the job is done
  bool job_running_ = false, writing_ = false, broken_ = false, finished_ = false;
};

grpc::ServerWriteReactor<pb::AnswerPiece>* GrpcTransport::Impl::QAService::AskStreamed(
    grpc::CallbackServerContext* context, const pb::AskRequest* request) {
  return new AskStreamedReactor(impl_, context, *request);
}

grpc::ServerBidiReactor<pb::AskRequest, pb::StreamAnswer>* GrpcTransport::Impl::QAService::AskStream(
    grpc::CallbackServerContext* context) {
  return new AskStreamReactor(impl_, context);
}

grpc::ServerUnaryReactor* GrpcTransport::Impl::KServeService::ModelInfer(grpc::CallbackServerContext* context,
                                                                         const inference::ModelInferRequest* request,
                                                                         inference::ModelInferResponse* reply) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (grpc::Status known = model_known(request->model_name(), request->model_version()); !known.ok()) {
    reactor->Finish(known);
    return reactor;
  }
  auto invalid = [&](const std::string& message) {
    reactor->Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, message));
    return reactor;
  };
  if (request->inputs_size() != 1) return invalid("exactly one input tensor (the texts) is expected");
  const auto& tensor = request->inputs(0);
  if (tensor.datatype() != "BYTES") return invalid("the input tensor's datatype must be BYTES");
  for (const auto& output : request->outputs()) {
    if (output.name() != "embedding") return invalid("this model has one output, 'embedding', not '" + output.name() + "'");
  }
  std::vector<std::string> texts;
  if (request->raw_input_contents_size() > 0) {
    if (request->raw_input_contents_size() != 1) return invalid("raw_input_contents must hold one entry per input");
    // BYTES elements in raw form: a 4-byte little-endian length, then the bytes.
    const std::string& raw = request->raw_input_contents(0);
    std::size_t at = 0;
    while (at < raw.size()) {
      if (raw.size() - at < 4) return invalid("raw_input_contents: an element's length is cut short");
      std::uint32_t length = 0;
      for (int b = 3; b >= 0; --b) length = (length << 8) | static_cast<unsigned char>(raw[at + static_cast<std::size_t>(b)]);
      at += 4;
      if (raw.size() - at < length) return invalid("raw_input_contents: an element is longer than the bytes left");
      texts.emplace_back(raw.substr(at, length));
      at += length;
    }
  } else {
    texts.assign(tensor.contents().bytes_contents().begin(), tensor.contents().bytes_contents().end());
  }
  std::int64_t elements = 1;
  for (std::int64_t d : tensor.shape()) {
    if (d < 0) return invalid("the input tensor's shape has a negative dimension");
    elements *= d;
  }
  if (tensor.shape_size() == 0 || elements != static_cast<std::int64_t>(texts.size())) {
    return invalid("the input tensor's shape does not match its " + std::to_string(texts.size()) + " strings");
  }
  ServerRequest meta = make_request(context, "POST", "/inference.GRPCInferenceService/ModelInfer", "");
  const Clock::time_point started = Clock::now();
  const bool queued = impl_.workers.try_submit([this, context, reactor, reply, request, started, meta,
                                                texts = std::move(texts)] {
    std::vector<float> vectors;
    ServerResponse response = impl_.api.embed(request->model_name(), texts, meta.authorization, vectors);
    impl_.access_log.write(meta.request_id, "gRPC", "POST", meta.path, response, Clock::now() - started);
    if (response.status != 200) {
      reactor->Finish(error_status(context, response));
      return;
    }
    const std::size_t dim = impl_.api.engine().encoder().dimension();
    reply->set_model_name(impl_.api.model_name());
    reply->set_model_version("1");
    reply->set_id(request->id());
    auto* output = reply->add_outputs();
    output->set_name("embedding");
    output->set_datatype("FP32");
    output->add_shape(static_cast<std::int64_t>(texts.size()));
    output->add_shape(static_cast<std::int64_t>(dim));
    reply->add_raw_output_contents(std::string(reinterpret_cast<const char*>(vectors.data()),
                                               vectors.size() * sizeof(float)));  // x86-64: little-endian
    reactor->Finish(grpc::Status::OK);
  });
  if (!queued) reactor->Finish(busy(context));
  return reactor;
}

GrpcTransport::GrpcTransport(ServerApi& api, RequestWorkers& workers, AccessLog& access_log, GrpcOptions options)
    : impl_(std::make_unique<Impl>(api, workers, access_log, std::move(options))) {}

GrpcTransport::~GrpcTransport() {
  if (impl_->server) impl_->server->Shutdown(std::chrono::system_clock::now());
}

Status GrpcTransport::start() {
  Impl& s = *impl_;
  const GrpcOptions& o = s.options;
  if (o.port < 0) return Status::ok();
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  std::shared_ptr<grpc::ServerCredentials> credentials;
  if (!o.tls_certificate.empty()) {
    if (read_file(o.tls_certificate).empty() || read_file(o.tls_key).empty()) {
      return Status::invalid_argument("cannot read the certificate " + o.tls_certificate + " or its key");
    }
    // The files are watched: a renewed certificate is served within the
    // refresh interval, without a restart (as SIGHUP does for HTTP).
    auto provider = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
        o.tls_key, o.tls_certificate, /*refresh_interval_sec=*/5);
    grpc::experimental::TlsServerCredentialsOptions tls(provider);
    tls.watch_identity_key_cert_pairs();
    credentials = grpc::experimental::TlsServerCredentials(tls);
  } else {
    credentials = grpc::InsecureServerCredentials();
  }
  builder.AddListeningPort(o.address + ":" + std::to_string(o.port), credentials, &s.bound_port);
  builder.SetMaxReceiveMessageSize(static_cast<int>(o.max_message_bytes));
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, static_cast<int>(o.max_streams_per_connection));
  builder.RegisterService(&s.qa);
  builder.RegisterService(&s.kserve);
  s.server = builder.BuildAndStart();
  if (!s.server || s.bound_port <= 0) {
    return Status::io_error("cannot listen for gRPC on " + o.address + ":" + std::to_string(o.port));
  }
  set_ready(s.api.ready());
  return Status::ok();
}

int GrpcTransport::port() const { return impl_->bound_port; }

void GrpcTransport::set_ready(bool ready) {
  if (!impl_->server) return;
  if (auto* health = impl_->server->GetHealthCheckService()) {
    // The whole server ("") and each service by name, as load balancers ask.
    for (const char* service : {"", "rapidqa.v1.QA", "inference.GRPCInferenceService"}) {
      health->SetServingStatus(service, ready);
    }
  }
}

void GrpcTransport::shutdown(std::chrono::system_clock::time_point deadline) {
  if (!impl_->server) return;
  set_ready(false);
  impl_->server->Shutdown(deadline);
}

}  // namespace rapidqa::server

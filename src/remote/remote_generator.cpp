#include "rapidqa/generator.h"

#include <curl/curl.h>
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <nlohmann/json.hpp>

#include "metrics/latency_histogram.h"
#include "remote/chat_stream.h"
#include "remote/embedding_protocol.h"
#include "remote/remote_calls.h"

namespace rapidqa {

namespace {

using remote::SteadyTime;
using std::chrono::steady_clock;

void replace_all(std::string& s, const std::string& from, const std::string& to) {
  for (std::size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) {
    s.replace(at, from.size(), to);
  }
}

// One streamed request: what curl's callbacks see and leave behind.
struct Stream {
  remote::ChatStreamReader reader;
  const TokenCallback* on_token = nullptr;
  GenerationResult* result = nullptr;
  bool* streamed = nullptr;
  CURL* easy = nullptr;
  long status = 0;
  std::string error_body;  // a non-2xx answer's body (bounded)
  std::size_t bytes = 0;
  std::size_t max_bytes = 0;
  Status failure;          // why the callbacks stopped the transfer
  bool stalled = false;
  std::optional<std::chrono::milliseconds> retry_after;
  SteadyTime started, last_data;
  std::chrono::nanoseconds stall_timeout{0};

  static size_t on_body(char* data, size_t size, size_t count, void* self_ptr) {
    auto* s = static_cast<Stream*>(self_ptr);
    const size_t n = size * count;
    s->last_data = steady_clock::now();
    s->bytes += n;
    if (s->bytes > s->max_bytes) {
      s->failure = Status::data_loss(fmt::format("the answer is larger than {} bytes", s->max_bytes));
      return 0;
    }
    if (s->status == 0) curl_easy_getinfo(s->easy, CURLINFO_RESPONSE_CODE, &s->status);
    if (s->status < 200 || s->status >= 300) {
      if (s->error_body.size() < 4096) s->error_body.append(data, std::min<size_t>(n, 4096));
      return n;
    }
    Status fed = s->reader.feed(std::string_view(data, n), [s](std::string_view piece) {
      if (s->result->text.empty()) s->result->time_to_first_token = steady_clock::now() - s->started;
      s->result->text.append(piece.data(), piece.size());
      *s->streamed = true;
      return !*s->on_token || (*s->on_token)(piece);
    });
    if (!fed.is_ok()) {
      s->failure = fed;
      return 0;
    }
    if (s->reader.stopped()) {
      s->failure = Status::failed_precondition("the caller stopped the generation");
      return 0;
    }
    return n;
  }

  static size_t on_header(char* data, size_t size, size_t count, void* self_ptr) {
    auto* s = static_cast<Stream*>(self_ptr);
    if (auto hint = remote::retry_after_header(data, size * count)) s->retry_after = hint;
    return size * count;
  }

  // Called by curl at least once a second: gives up on a silent stream.
  static int on_progress(void* self_ptr, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
    auto* s = static_cast<Stream*>(self_ptr);
    if (steady_clock::now() - s->last_data > s->stall_timeout) {
      s->stalled = true;
      return 1;
    }
    return 0;
  }
};

}  // namespace

struct RemoteGenerator::Impl {
  RemoteGeneratorOptions options;
  remote::CallGuards guards;
  std::mutex handles_mu;
  std::vector<CURL*> idle_handles;  // guarded by handles_mu; each keeps its connection
  metrics::LatencyHistogram time_to_first_token;
  std::atomic<std::uint64_t> generations{0}, failures{0}, prompt_tokens{0}, completion_tokens{0};

  explicit Impl(RemoteGeneratorOptions o) : options(std::move(o)), guards(options) { remote::global_init_once(); }
  ~Impl() {
    for (CURL* h : idle_handles) curl_easy_cleanup(h);
  }

  CURL* take_handle() {
    std::lock_guard<std::mutex> lock(handles_mu);
    if (idle_handles.empty()) return curl_easy_init();
    CURL* h = idle_handles.back();
    idle_handles.pop_back();
    return h;
  }
  void return_handle(CURL* h) {
    std::lock_guard<std::mutex> lock(handles_mu);
    if (idle_handles.size() < 64) {
      idle_handles.push_back(h);
    } else {
      curl_easy_cleanup(h);
    }
  }

  std::string name() const { return "remote-chat:" + options.model; }

  std::string request_body(const std::string& prompt) const {
    nlohmann::json body = {
        {"model", options.model},
        {"messages", {{{"role", "system"}, {"content", options.system_prompt}}, {{"role", "user"}, {"content", prompt}}}},
        {"stream", true},
        {"stream_options", {{"include_usage", true}}},
        {"max_tokens", options.max_tokens},
        {"temperature", options.temperature}};
    return body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }

  // One request to one endpoint. Returns its outcome; `endpoint_failed`
  // says whether it counts against the endpoint.
  Status stream_once(std::size_t endpoint, const std::string& body, SteadyTime deadline, const TokenCallback& on_token,
                     GenerationResult& result, bool& streamed, bool& endpoint_failed, bool& client_error,
                     std::optional<std::chrono::milliseconds>& retry_after) {
    const std::string url = guards.endpoints.url(endpoint) + "/v1/chat/completions";
    Stream s;
    s.on_token = &on_token;
    s.result = &result;
    s.streamed = &streamed;
    s.max_bytes = options.max_response_bytes;
    s.started = s.last_data = steady_clock::now();
    s.stall_timeout = options.stall_timeout;
    CURL* e = take_handle();
    s.easy = e;
    curl_easy_reset(e);
    std::vector<std::string> headers = guards.headers;
    headers.push_back("Accept: text/event-stream");
    headers.push_back(remote::deadline_header(deadline));
    curl_slist* list = remote::json_headers(headers);
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - s.started).count();
    remote::set_post_options(e, guards.http, url, body, list, static_cast<long>(left));
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, &Stream::on_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, &s);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, &Stream::on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, &s);
    curl_easy_setopt(e, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(e, CURLOPT_XFERINFOFUNCTION, &Stream::on_progress);
    curl_easy_setopt(e, CURLOPT_XFERINFODATA, &s);
    char error[CURL_ERROR_SIZE] = {};
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, error);
    const CURLcode code = curl_easy_perform(e);
    if (s.status == 0) curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &s.status);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, nullptr);
    curl_slist_free_all(list);
    return_handle(e);
    retry_after = s.retry_after;
    const std::string where = guards.endpoints.url(endpoint);
    endpoint_failed = true;
    client_error = false;
    if (!s.failure.is_ok()) {
      endpoint_failed = s.failure.code() == StatusCode::kDataLoss;
      return Status(s.failure.code(), fmt::format("{}: {}", where, s.failure.message()));
    }
    if (s.stalled) {
      return Status::deadline_exceeded(
          fmt::format("{}: the stream sent nothing for {} ms", where, options.stall_timeout.count()));
    }
    if (code != CURLE_OK) {
      if (code == CURLE_OPERATION_TIMEDOUT) {
        endpoint_failed = false;  // our deadline, not the endpoint's fault
        return Status::deadline_exceeded(fmt::format("{}: the deadline passed", where));
      }
      return Status::unavailable(fmt::format("{}: {}", where, error[0] ? error : curl_easy_strerror(code)));
    }
    if (s.status < 200 || s.status >= 300) {
      const std::string message = remote::error_message(s.error_body);
      if (remote::is_client_error(s.status)) {
        endpoint_failed = false;
        client_error = true;
        return Status(remote::code_of_client_error(s.status), fmt::format("{} answered {}: {}", where, s.status, message));
      }
      return Status::unavailable(fmt::format("{} answered {}: {}", where, s.status, message));
    }
    if (!s.reader.done() && s.reader.finish_reason().empty()) {
      return Status::unavailable(fmt::format("{}: the stream ended before the answer did", where));
    }
    endpoint_failed = false;
    result.finish_reason = s.reader.finish_reason();
    result.prompt_tokens = s.reader.prompt_tokens();
    result.completion_tokens = s.reader.completion_tokens();
    return Status::ok();
  }
};

RemoteGenerator::RemoteGenerator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
RemoteGenerator::~RemoteGenerator() = default;

Result<std::shared_ptr<RemoteGenerator>> RemoteGenerator::create(RemoteGeneratorOptions options) {
  if (Status s = remote::check_common_options("remote generator", options); !s.is_ok()) return s;
  if (options.max_tokens == 0) return Status::invalid_argument("remote generator: max_tokens must be positive");
  if (options.stall_timeout.count() <= 0) return Status::invalid_argument("remote generator: stall_timeout must be positive");
  if (options.prompt_template.find("{question}") == std::string::npos) {
    return Status::invalid_argument("remote generator: prompt_template has no {question}");
  }
  return std::shared_ptr<RemoteGenerator>(new RemoteGenerator(std::make_unique<Impl>(std::move(options))));
}

std::string RemoteGenerator::name() const { return impl_->name(); }

std::string RemoteGenerator::render_prompt(const std::string& question,
                                           const std::vector<GenerationSource>& sources) const {
  std::string blocks;
  for (std::size_t i = 0; i < sources.size(); ++i) {
    const GenerationSource& s = sources[i];
    if (i > 0) blocks += "\n\n";
    blocks += fmt::format("[{}] Question: {}\nAnswer: {}", i + 1, s.question, s.answer);
    if (!s.context.empty()) blocks += "\nContext: " + s.context;
  }
  // {sources} first: the question may itself contain "{sources}".
  std::string prompt = impl_->options.prompt_template;
  replace_all(prompt, "{sources}", blocks);
  replace_all(prompt, "{question}", question);
  return prompt;
}

Status RemoteGenerator::generate(const std::string& question, const std::vector<GenerationSource>& sources,
                                 std::chrono::nanoseconds time_left, const TokenCallback& on_token,
                                 GenerationResult& result, bool& streamed) const {
  Impl& impl = *impl_;
  result = GenerationResult{};
  streamed = false;
  time_left = std::min<std::chrono::nanoseconds>(time_left, impl.options.request_timeout);
  if (time_left.count() <= 0) return Status::deadline_exceeded(name() + ": no time left for the request");
  const SteadyTime deadline = steady_clock::now() + time_left;
  const remote::Admission admission = impl.guards.breaker.admit(steady_clock::now());
  if (admission == remote::Admission::kRefused) {
    ++impl.failures;
    return Status::unavailable(name() + ": the circuit breaker is open after recent failures");
  }
  const bool trial = admission == remote::Admission::kTrial;
  impl.guards.budget.deposit();
  const std::string body = impl.request_body(render_prompt(question, sources));
  std::vector<std::size_t> tried;
  Status last = Status::unavailable(name() + ": no endpoint was tried");
  for (std::size_t attempt = 0; attempt <= impl.options.max_retries; ++attempt) {
    const SteadyTime now = steady_clock::now();
    if (now >= deadline) {
      if (last.code() != StatusCode::kDeadlineExceeded) {
        last = Status::deadline_exceeded(fmt::format("{}: the deadline passed ({})", name(), last.message()));
      }
      break;
    }
    if (attempt > 0 && !impl.guards.budget.try_spend()) break;
    const auto endpoint =
        impl.guards.endpoints.pick(tried, attempt == 0 ? remote::RequestKind::kFirst : remote::RequestKind::kRetry, now);
    if (!endpoint) {
      impl.guards.breaker.trip(now);
      last = Status::unavailable(fmt::format("{}: every endpoint is left out after failures ({})", name(), last.message()));
      break;
    }
    tried.push_back(*endpoint);
    result = GenerationResult{};
    bool endpoint_failed = false, client_error = false;
    std::optional<std::chrono::milliseconds> retry_after;
    const SteadyTime began = steady_clock::now();
    Status s = impl.stream_once(*endpoint, body, deadline, on_token, result, streamed, endpoint_failed, client_error,
                                retry_after);
    const auto elapsed = steady_clock::now() - began;
    std::optional<std::chrono::nanoseconds> cool_down;
    if (retry_after) cool_down = *retry_after;
    impl.guards.endpoints.finished(*endpoint, endpoint_failed, !endpoint_failed && !s.is_ok(), elapsed,
                                   steady_clock::now(), cool_down);
    if (s.is_ok()) {
      impl.guards.breaker.record(true, trial, steady_clock::now());
      ++impl.generations;
      impl.prompt_tokens += result.prompt_tokens;
      impl.completion_tokens += result.completion_tokens;
      if (!result.text.empty()) impl.time_to_first_token.record(result.time_to_first_token);
      return s;
    }
    last = s;
    // The caller's own stop or its error: nothing to retry, the engine is up.
    if (client_error || s.code() == StatusCode::kFailedPrecondition) {
      impl.guards.breaker.record(true, trial, steady_clock::now());
      ++impl.failures;
      return s;
    }
    if (streamed) break;  // text reached the caller: another answer must not follow it
  }
  impl.guards.breaker.record(false, trial, steady_clock::now());
  ++impl.failures;
  return last;
}

void RemoteGenerator::add_metrics(MetricsSnapshot& snapshot) const {
  snapshot.remote_engines.push_back(impl_->guards.metrics(name()));
  GenerationMetrics& g = snapshot.generation;
  g.generations += impl_->generations.load();
  g.failures += impl_->failures.load();
  g.prompt_tokens += impl_->prompt_tokens.load();
  g.completion_tokens += impl_->completion_tokens.load();
  g.time_to_first_token = impl_->time_to_first_token.summary();
}

}  // namespace rapidqa

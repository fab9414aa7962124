#include "server_api.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <optional>
#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <rapidqa/base64.h>
#include <rapidqa/knowledge_file.h>
#include <rapidqa/text_normalizer.h>
#include <rapidqa/version.h>

#include "answer_json.h"
#include "tool_support.h"

namespace rapidqa::server {
namespace {

using nlohmann::json;

std::string sha256(std::string_view text) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_Digest(text.data(), text.size(), digest, &length, EVP_sha256(), nullptr);
  return std::string(reinterpret_cast<const char*>(digest), length);
}

ServerResponse json_response(const json& body, int status = 200) {
  ServerResponse r;
  r.status = status;
  r.body = tools::json_line(body);
  return r;
}

// Floats as JSON numbers, each the shortest text that reads back as the
// same float (a float widened to double prints 17 digits of noise), and
// written straight into the body: a batch of vectors is tens of thousands
// of numbers, and a JSON library's value per number was most of a
// request's time. JSON has no NaN or infinity: they are written as null,
// as the JSON library does.
void append_json_floats(const float* values, std::size_t n, std::string& out) {
  out += '[';
  char text[32];
  for (std::size_t i = 0; i < n; ++i) {
    if (i) out += ',';
    if (!std::isfinite(values[i])) {
      out += "null";
      continue;
    }
    const auto written = std::to_chars(text, text + sizeof text, values[i]);
    out.append(text, written.ptr);
  }
  out += ']';
}

// Reads the boolean `name` of a KServe parameters object into `out` when
// it is there; false (with `error` set) when the object or the value has
// the wrong type.
bool json_flag(const json* parameters, const char* name, bool& out, ServerResponse& error) {
  if (!parameters) return true;
  if (!parameters->is_object()) {
    error = error_response(400, "invalid_argument", "'parameters' must be an object");
    return false;
  }
  const auto it = parameters->find(name);
  if (it == parameters->end()) return true;
  if (!it->is_boolean()) {
    error = error_response(400, "invalid_argument", std::string("parameter '") + name + "' must be true or false");
    return false;
  }
  out = it->get<bool>();
  return true;
}

// A request body's JSON object, read field by field with its types checked
// and every field it does not know refused, so a misspelt option is an
// error instead of silently ignored.
class BodyObject {
 public:
  // Parses; on failure `error` holds the response to give.
  static std::optional<BodyObject> parse(const std::string& body, std::initializer_list<const char*> known,
                                         ServerResponse& error) {
    json parsed = json::parse(body, nullptr, /*allow_exceptions=*/false);
    if (parsed.is_discarded()) {
      error = error_response(400, "invalid_argument", "the body is not valid JSON");
      return std::nullopt;
    }
    if (!parsed.is_object()) {
      error = error_response(400, "invalid_argument", "the body must be a JSON object");
      return std::nullopt;
    }
    for (const auto& item : parsed.items()) {
      if (std::none_of(known.begin(), known.end(), [&](const char* k) { return item.key() == k; })) {
        error = error_response(400, "invalid_argument", "unknown field '" + item.key() + "'");
        return std::nullopt;
      }
    }
    return BodyObject(std::move(parsed));
  }

  const json* field(const char* name) const {
    auto it = object_.find(name);
    return it == object_.end() || it->is_null() ? nullptr : &*it;
  }

  // Each getter leaves `out` alone when the field is absent and returns
  // false (with `error` set) when it has the wrong type.
  bool string(const char* name, std::string& out, ServerResponse& error) const {
    const json* v = field(name);
    if (!v) return true;
    if (!v->is_string()) return wrong_type(name, "a string", error);
    out = v->get<std::string>();
    return true;
  }
  bool boolean(const char* name, bool& out, ServerResponse& error) const {
    const json* v = field(name);
    if (!v) return true;
    if (!v->is_boolean()) return wrong_type(name, "true or false", error);
    out = v->get<bool>();
    return true;
  }
  bool number(const char* name, std::optional<double>& out, ServerResponse& error) const {
    const json* v = field(name);
    if (!v) return true;
    if (!v->is_number() || !std::isfinite(v->get<double>())) return wrong_type(name, "a finite number", error);
    out = v->get<double>();
    return true;
  }
  bool count(const char* name, std::optional<std::uint64_t>& out, ServerResponse& error) const {
    const json* v = field(name);
    if (!v) return true;
    if (!v->is_number_unsigned()) return wrong_type(name, "a whole number of at least 0", error);
    out = v->get<std::uint64_t>();
    return true;
  }
  bool strings(const char* name, std::vector<std::string>& out, ServerResponse& error) const {
    const json* v = field(name);
    if (!v) return true;
    if (!v->is_array()) return wrong_type(name, "an array of strings", error);
    out.clear();
    for (const auto& item : *v) {
      if (!item.is_string()) return wrong_type(name, "an array of strings", error);
      out.push_back(item.get<std::string>());
    }
    return true;
  }

 private:
  explicit BodyObject(json object) : object_(std::move(object)) {}
  static bool wrong_type(const char* name, const char* expected, ServerResponse& error) {
    error = error_response(400, "invalid_argument", std::string("field '") + name + "' must be " + expected);
    return false;
  }
  json object_;
};

ServerResponse status_response(const Status& s) {
  const int http = http_status_for(s.code());
  return error_response(http, status_code_name(s.code()), s.message(), http == 503 ? 1 : 0);
}

// The ask options every ask route reads.
constexpr std::initializer_list<const char*> kAskFields = {
    "question", "questions", "tenant", "use_cache", "semantic_threshold", "top_k", "min_answer_score",
    "min_answer_confidence", "timeout_ms", "priority"};

bool read_ask_options(const BodyObject& body, const ServerRequest& request, AskOptions& options,
                      ServerResponse& error) {
  std::optional<double> threshold, min_score, min_confidence, timeout_ms;
  std::optional<std::uint64_t> top_k;
  std::string priority;
  if (!body.string("tenant", options.tenant, error) || !body.boolean("use_cache", options.use_cache, error) ||
      !body.number("semantic_threshold", threshold, error) || !body.count("top_k", top_k, error) ||
      !body.number("min_answer_score", min_score, error) ||
      !body.number("min_answer_confidence", min_confidence, error) || !body.number("timeout_ms", timeout_ms, error) ||
      !body.string("priority", priority, error)) {
    return false;
  }
  if (threshold) options.semantic_threshold = static_cast<float>(*threshold);
  if (min_score) options.min_answer_score = static_cast<float>(*min_score);
  if (min_confidence) options.min_answer_confidence = static_cast<float>(*min_confidence);
  if (top_k) {
    if (*top_k == 0 || *top_k > 1000) {
      error = error_response(400, "invalid_argument", "field 'top_k' must be between 1 and 1000");
      return false;
    }
    options.top_k = static_cast<std::size_t>(*top_k);
  }
  // The tighter of the body's and the header's deadline.
  std::chrono::milliseconds timeout = request.timeout;
  if (timeout_ms) {
    if (*timeout_ms <= 0 || *timeout_ms > 3.6e6) {
      error = error_response(400, "invalid_argument", "field 'timeout_ms' must be above 0 and at most 3600000");
      return false;
    }
    const auto body_timeout = std::chrono::milliseconds(static_cast<std::int64_t>(std::ceil(*timeout_ms)));
    timeout = timeout.count() > 0 ? std::min(timeout, body_timeout) : body_timeout;
  }
  options.timeout = timeout;
  if (priority.empty() || priority == "normal") {
    options.priority = BatchPriority::kNormal;
  } else if (priority == "high") {
    options.priority = BatchPriority::kHigh;
  } else if (priority == "low") {
    options.priority = BatchPriority::kLow;
  } else {
    error = error_response(400, "invalid_argument", "field 'priority' must be \"high\", \"normal\" or \"low\"");
    return false;
  }
  return true;
}

bool starts_with(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

ServerResponse method_not_allowed(const std::string& method, const std::string& path) {
  return error_response(405, "method_not_allowed", method + " is not served on " + path);
}

}  // namespace

std::string sse_token_event(std::string_view piece) {
  return "event: token\ndata: " + tools::json_line({{"text", piece}}) + "\n\n";
}

std::string sse_final_event(const ServerResponse& response) {
  if (response.status == 200) return "event: answer\ndata: " + response.body + "\n\n";
  return "event: error\ndata: " + json_with_members_first("\"status\":" + std::to_string(response.status), response.body) +
         "\n\n";
}

std::string json_with_members_first(const std::string& members, const std::string& object) {
  std::string out = "{" + members;
  const auto first = object.find_first_not_of(" \t\r\n", 1);
  if (object.empty() || object.front() != '{' || first == std::string::npos || object[first] == '}') return out + "}";
  return out + "," + object.substr(1);
}

ServerResponse error_response(int http_status, std::string_view code, std::string_view message,
                              int retry_after_seconds) {
  ServerResponse r;
  r.status = http_status;
  r.body = tools::json_line({{"error", {{"code", code}, {"message", message}}}});
  r.retry_after_seconds = retry_after_seconds;
  return r;
}

int http_status_for(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return 200;
    case StatusCode::kInvalidArgument: return 400;
    case StatusCode::kOutOfRange: return 400;
    case StatusCode::kNotFound: return 404;
    case StatusCode::kAlreadyExists: return 409;
    case StatusCode::kFailedPrecondition: return 409;
    case StatusCode::kResourceExhausted: return 503;
    case StatusCode::kUnavailable: return 503;
    case StatusCode::kDeadlineExceeded: return 504;
    default: return 500;
  }
}

double TenantRateLimiter::capacity() const {
  return limit_.burst > 0 ? limit_.burst : std::max(1.0, limit_.questions_per_second);
}

int TenantRateLimiter::admit(const std::string& tenant, double questions, Clock::time_point now) {
  if (limit_.questions_per_second <= 0) return 0;
  constexpr std::size_t kMaxTenants = 10000;
  std::lock_guard<std::mutex> lock(mu_);
  if (buckets_.size() >= kMaxTenants && buckets_.find(tenant) == buckets_.end()) {
    // Forget every tenant whose bucket has refilled: it is as if unseen.
    for (auto it = buckets_.begin(); it != buckets_.end();) {
      const double idle = std::chrono::duration<double>(now - it->second.refilled).count();
      it = it->second.tokens + idle * limit_.questions_per_second >= capacity() ? buckets_.erase(it) : std::next(it);
    }
  }
  auto [it, added] = buckets_.try_emplace(tenant, Bucket{capacity(), now});
  Bucket& b = it->second;
  if (!added && now > b.refilled) {
    b.tokens = std::min(capacity(), b.tokens + std::chrono::duration<double>(now - b.refilled).count() *
                                                   limit_.questions_per_second);
    b.refilled = now;
  }
  if (b.tokens >= questions) {
    b.tokens -= questions;
    return 0;
  }
  const double wait = (questions - b.tokens) / limit_.questions_per_second;
  return std::max(1, static_cast<int>(std::ceil(wait)));
}

ServerApi::ServerApi(QAEngine& engine, ServerApiOptions options)
    : engine_(engine),
      options_(std::move(options)),
      admin_token_digest_(options_.admin_token.empty() ? std::string() : sha256(options_.admin_token)),
      limiter_(options_.rate_limit) {}

bool ServerApi::authorized(std::string_view authorization) const {
  if (admin_token_digest_.empty()) return false;
  constexpr std::string_view kBearer = "Bearer ";
  if (!starts_with(authorization, kBearer)) return false;
  // Digests of equal length compared in constant time: neither the token's
  // bytes nor its length show in the time taken.
  const std::string presented = sha256(authorization.substr(kBearer.size()));
  return CRYPTO_memcmp(presented.data(), admin_token_digest_.data(), presented.size()) == 0;
}

ServerResponse ServerApi::handle(const ServerRequest& request) {
  try {
    return route(request);
  } catch (const std::bad_alloc&) {
    return error_response(503, "resource_exhausted", "out of memory", 1);
  } catch (const std::exception& e) {
    return error_response(500, "internal", std::string("internal error: ") + e.what());
  }
}

ServerResponse ServerApi::route(const ServerRequest& request) {
  const std::string& path = request.path;
  const std::string& method = request.method;
  const bool get = method == "GET" || method == "HEAD";
  const bool post = method == "POST";

  if (path == "/healthz") {
    return get ? json_response({{"status", "ok"}}) : method_not_allowed(method, path);
  }
  if (path == "/readyz") {
    if (!get) return method_not_allowed(method, path);
    return ready() ? json_response({{"status", "ready"}, {"entries", engine_.entry_count()}})
                   : error_response(503, "unavailable", "the knowledge is still loading", 1);
  }
  if (path == "/metrics") {
    if (!get) return method_not_allowed(method, path);
    ServerResponse r;
    r.content_type = "text/plain; version=0.0.4";
    r.body = engine_.metrics().format_prometheus();
    return r;
  }

  const bool admin = starts_with(path, "/v1/entries") || starts_with(path, "/v1/cache:");
  const bool inference = !admin && (starts_with(path, "/v1/") || starts_with(path, "/v2/models/"));
  if (admin || (inference && options_.protect_ask)) {
    if (options_.admin_token.empty() && admin) {
      return error_response(403, "permission_denied",
                            "administration is off: start the server with --token-file or RAPIDQA_SERVER_TOKEN");
    }
    if (!authorized(request.authorization)) {
      ServerResponse r = error_response(401, "unauthenticated", "this route needs 'Authorization: Bearer TOKEN'");
      return r;
    }
  }
  if (inference && !ready()) return error_response(503, "unavailable", "the knowledge is still loading", 1);

  if (path == "/v1/ask") return post ? ask(request) : method_not_allowed(method, path);
  if (path == "/v1/ask:batch") return post ? ask_batch(request) : method_not_allowed(method, path);
  if (path == "/v1/entries:import") return post ? import_entries(request) : method_not_allowed(method, path);
  if (starts_with(path, "/v1/entries/")) {
    const std::string id = path.substr(std::strlen("/v1/entries/"));
    if (id.empty()) return error_response(400, "invalid_argument", "the path names no entry id");
    return entry(request, id);
  }
  if (starts_with(path, "/v1/cache:")) {
    return post ? cache_admin(request, std::string_view(path).substr(std::strlen("/v1/cache:")))
                : method_not_allowed(method, path);
  }
  if (path == "/v1/embeddings") return post ? embeddings(request) : method_not_allowed(method, path);
  if (path == "/v2" || starts_with(path, "/v2/")) return kserve(request, std::string_view(path).substr(3));
  return error_response(404, "not_found", "no route " + path);
}

namespace {

// The question and options of POST /v1/ask; false with `error` set when
// the body is refused.
bool read_ask(const ServerRequest& request, std::string& question, AskOptions& options, ServerResponse& error) {
  auto body = BodyObject::parse(request.body, kAskFields, error);
  if (!body) return false;
  if (!body->string("question", question, error) || !read_ask_options(*body, request, options, error)) return false;
  if (!body->field("question")) {
    error = error_response(400, "invalid_argument", "field 'question' is required");
    return false;
  }
  if (body->field("questions")) {
    error = error_response(400, "invalid_argument", "'questions' belongs to /v1/ask:batch");
    return false;
  }
  return true;
}

}  // namespace

ServerResponse ServerApi::answered(const Answer& answer, const std::string& tenant) {
  ServerResponse r = json_response(tools::answer_to_json(answer));
  r.tenant = tenant;
  r.tier = answer_tier_name(answer.tier);
  return r;
}

std::optional<ServerResponse> ServerApi::over_rate(const std::string& tenant, double questions) {
  const int wait = limiter_.admit(tenant, questions, TenantRateLimiter::Clock::now());
  if (!wait) return std::nullopt;
  ServerResponse r = error_response(429, "resource_exhausted", "tenant '" + tenant + "' is over its rate limit", wait);
  r.tenant = tenant;
  return r;
}

std::optional<ServerApi::AskOutcome> ServerApi::ask_typed(const ServerRequest& request, bool cached_only) {
  AskOutcome out;
  auto refuse = [&](ServerResponse response) -> std::optional<AskOutcome> {
    if (cached_only) return std::nullopt;  // the full path words the refusal
    out.refusal = std::move(response);
    out.refusal.tenant = out.tenant;
    return out;
  };
  try {
    if (!ready()) return refuse(error_response(503, "unavailable", "the knowledge is still loading", 1));
    if (options_.protect_ask && !authorized(request.authorization)) {
      return refuse(error_response(401, "unauthenticated", "this route needs 'Authorization: Bearer TOKEN'"));
    }
    ServerResponse error;
    std::string question;
    AskOptions options;
    if (!read_ask(request, question, options, error)) return refuse(std::move(error));
    out.tenant = options.tenant;
    if (cached_only) {
      out.answer = engine_.ask_cached(question, options);
      if (!out.answer) return std::nullopt;
      if (auto limited = over_rate(options.tenant, 1)) {
        out.answer.reset();
        out.refusal = std::move(*limited);
      }
      return out;
    }
    if (auto limited = over_rate(options.tenant, 1)) return refuse(std::move(*limited));
    options.on_token = request.on_token;
    auto answer = engine_.ask(question, options);
    if (!answer) return refuse(status_response(answer.status()));
    out.answer = std::move(answer).value();
    return out;
  } catch (const std::bad_alloc&) {
    return refuse(error_response(503, "resource_exhausted", "out of memory", 1));
  } catch (const std::exception& e) {
    return refuse(error_response(500, "internal", std::string("internal error: ") + e.what()));
  }
}

ServerResponse ServerApi::ask(const ServerRequest& request) {
  auto outcome = ask_typed(request, /*cached_only=*/false);
  return outcome->answer ? answered(*outcome->answer, outcome->tenant) : outcome->refusal;
}

std::optional<ServerResponse> ServerApi::ask_cached(const ServerRequest& request) {
  if (request.method != "POST" || request.path != "/v1/ask") return std::nullopt;
  auto outcome = ask_typed(request, /*cached_only=*/true);
  if (!outcome) return std::nullopt;
  return outcome->answer ? answered(*outcome->answer, outcome->tenant) : outcome->refusal;
}

ServerResponse ServerApi::ask_batch(const ServerRequest& request) {
  ServerResponse error;
  auto body = BodyObject::parse(request.body, kAskFields, error);
  if (!body) return error;
  std::vector<std::string> questions;
  AskOptions options;
  if (!body->strings("questions", questions, error) || !read_ask_options(*body, request, options, error)) return error;
  if (!body->field("questions")) return error_response(400, "invalid_argument", "field 'questions' is required");
  if (body->field("question")) return error_response(400, "invalid_argument", "'question' belongs to /v1/ask");
  if (questions.size() > options_.max_batch) {
    return error_response(413, "out_of_range", "at most " + std::to_string(options_.max_batch) +
                                                   " questions in one batch; this one has " +
                                                   std::to_string(questions.size()));
  }
  if (auto limited = over_rate(options.tenant, static_cast<double>(questions.size()))) return *limited;
  json answers = json::array();
  for (auto& result : engine_.ask_batch(questions, options)) {
    if (result) {
      answers.push_back(tools::answer_to_json(*result));
    } else {
      answers.push_back(
          {{"error", {{"code", status_code_name(result.status().code())}, {"message", result.status().message()}}}});
    }
  }
  ServerResponse r = json_response({{"answers", answers}});
  r.tenant = options.tenant;
  return r;
}

ServerResponse ServerApi::entry(const ServerRequest& request, const std::string& id) {
  if (request.method == "GET" || request.method == "HEAD") {
    auto found = engine_.entry(id);
    if (!found) return status_response(found.status());
    json object = json::parse(knowledge_entry_to_json(*found));
    object["version"] = found->version;
    return json_response(object);
  }
  if (request.method == "DELETE") {
    const Status s = engine_.remove_entry(id);
    return s.is_ok() ? json_response({{"deleted", id}}) : status_response(s);
  }
  if (request.method != "PUT") return method_not_allowed(request.method, request.path);
  // The id may be left out of the body: the path names it.
  json object = json::parse(request.body, nullptr, false);
  if (object.is_discarded() || !object.is_object()) {
    return error_response(400, "invalid_argument", "the body must be an entry as a JSON object");
  }
  if (!object.contains("id")) object["id"] = id;
  object.erase("version");  // the server assigns versions; a GET's body can be PUT back
  auto parsed = parse_knowledge_entry_json(object.dump());
  if (!parsed) return status_response(parsed.status());
  KnowledgeEntry e = std::move(parsed).value();
  if (e.id != id) {
    return error_response(400, "invalid_argument", "the body's id '" + e.id + "' is not the path's '" + id + "'");
  }
  const bool exists = static_cast<bool>(engine_.entry(id));
  const Status s = exists ? engine_.update_entry(e) : engine_.add_entry(e);
  if (!s.is_ok()) return status_response(s);
  auto stored = engine_.entry(id);
  if (!stored) return status_response(stored.status());
  return json_response({{"id", id}, {"version", stored->version}, {"created", !exists}}, exists ? 200 : 201);
}

ServerResponse ServerApi::import_entries(const ServerRequest& request) {
  std::istringstream in(request.body);
  auto file = parse_knowledge_jsonl(in, "request body");
  if (!file) return status_response(file.status());
  std::size_t added = 0, updated = 0;
  for (auto& e : file->entries) {
    const bool exists = static_cast<bool>(engine_.entry(e.id));
    const std::string id = e.id;
    const Status s = exists ? engine_.update_entry(std::move(e)) : engine_.add_entry(std::move(e));
    if (!s.is_ok()) {
      return error_response(http_status_for(s.code()), status_code_name(s.code()),
                            "entry '" + id + "': " + s.message() + " (" + std::to_string(added + updated) +
                                " entries before it were imported)");
    }
    ++(exists ? updated : added);
  }
  return json_response({{"added", added}, {"updated", updated}});
}

ServerResponse ServerApi::cache_admin(const ServerRequest& request, std::string_view action) {
  ServerResponse error;
  if (action == "invalidate") {
    auto body = BodyObject::parse(request.body, {"entry_id"}, error);
    if (!body) return error;
    std::string id;
    if (!body->string("entry_id", id, error)) return error;
    if (id.empty()) return error_response(400, "invalid_argument", "field 'entry_id' is required");
    auto dropped = engine_.invalidate_entry(id);
    return dropped ? json_response({{"dropped", *dropped}}) : status_response(dropped.status());
  }
  if (action == "correct" || action == "delete") {
    auto body = BodyObject::parse(request.body, {"question", "answer", "tenant"}, error);
    if (!body) return error;
    std::string question, text;
    AskOptions options;
    if (!body->string("question", question, error) || !body->string("answer", text, error) ||
        !body->string("tenant", options.tenant, error)) {
      return error;
    }
    if (!body->field("question")) return error_response(400, "invalid_argument", "field 'question' is required");
    if (action == "correct") {
      if (!body->field("answer")) return error_response(400, "invalid_argument", "field 'answer' is required");
      const Status s = engine_.correct_cached_answer(question, text, options);
      return s.is_ok() ? json_response({{"corrected", true}}) : status_response(s);
    }
    if (body->field("answer")) return error_response(400, "invalid_argument", "'answer' belongs to cache:correct");
    auto dropped = engine_.delete_cached_answer(question, options);
    return dropped ? json_response({{"dropped", *dropped}}) : status_response(dropped.status());
  }
  return error_response(404, "not_found", "no cache action '" + std::string(action) +
                                              "' (invalidate, correct, delete)");
}

ServerResponse ServerApi::embeddings(const ServerRequest& request) {
  ServerResponse error;
  auto body = BodyObject::parse(request.body, {"input", "model", "encoding_format", "user", "dimensions"}, error);
  if (!body) return error;
  std::vector<std::string> texts;
  const json* input = body->field("input");
  if (!input) return error_response(400, "invalid_argument", "field 'input' is required");
  if (input->is_string()) {
    texts.push_back(input->get<std::string>());
  } else if (!body->strings("input", texts, error)) {
    return error_response(400, "invalid_argument", "field 'input' must be a string or an array of strings");
  }
  std::string model = options_.model_name, format = "float";
  std::optional<std::uint64_t> dimensions;
  if (!body->string("model", model, error) || !body->string("encoding_format", format, error) ||
      !body->count("dimensions", dimensions, error)) {
    return error;
  }
  if (format != "float" && format != "base64") {
    return error_response(400, "invalid_argument", "field 'encoding_format' must be \"float\" or \"base64\"");
  }
  const std::size_t dim = engine_.encoder().dimension();
  if (dimensions && *dimensions != dim) {
    return error_response(400, "invalid_argument",
                          "this model makes " + std::to_string(dim) + "-dimensional vectors only");
  }
  thread_local std::vector<float> vectors;  // a batch's are about 100 KB: kept per worker thread
  if (ServerResponse r = embed(model, texts, request.authorization, vectors); r.status != 200) return r;
  std::size_t tokens = 0;
  for (const auto& text : texts) tokens += text.size();  // bytes: the encoder's own tokens are not exposed
  const json usage = {{"prompt_tokens", tokens}, {"total_tokens", tokens}};
  // Written directly: base64 needs no escaping, and a JSON library's
  // escaping pass over every character (or value per number) was most of
  // this route's time.
  const bool base64 = format == "base64";
  const std::size_t row_text = base64 ? (dim * sizeof(float) + 2) / 3 * 4 + 2  // a row's bytes as base64, quoted
                                      : dim * 12;                               // about 12 characters a number
  ServerResponse r;
  r.status = 200;
  r.body.reserve(texts.size() * (row_text + 64) + 128);
  r.body += "{\"object\":\"list\",\"data\":[";
  for (std::size_t i = 0; i < texts.size(); ++i) {
    if (i) r.body += ',';
    r.body += "{\"object\":\"embedding\",\"index\":";
    r.body += std::to_string(i);
    r.body += ",\"embedding\":";
    const float* row = vectors.data() + i * dim;
    if (base64) {
      r.body += '"';
      append_base64(row, dim * sizeof(float), r.body);
      r.body += '"';
    } else {
      append_json_floats(row, dim, r.body);
    }
    r.body += '}';
  }
  r.body += "],\"model\":" + tools::json_line(options_.model_name) + ",\"usage\":" + tools::json_line(usage) + "}";
  return r;
}

ServerResponse ServerApi::embed(const std::string& model, const std::vector<std::string>& texts,
                                const std::string& authorization, std::vector<float>& vectors) {
  if (options_.protect_ask && !authorized(authorization)) {
    return error_response(401, "unauthenticated", "this route needs 'Authorization: Bearer TOKEN'");
  }
  if (!ready()) return error_response(503, "unavailable", "the knowledge is still loading", 1);
  if (model != options_.model_name) {
    return error_response(404, "not_found", "no model '" + model + "'; this server serves '" + options_.model_name + "'");
  }
  if (texts.empty()) return error_response(400, "invalid_argument", "no text to embed");
  if (texts.size() > options_.max_batch) {
    return error_response(413, "out_of_range", "at most " + std::to_string(options_.max_batch) +
                                                   " texts in one request; this one has " + std::to_string(texts.size()));
  }
  if (const Status s = engine_.embed(texts, vectors); !s.is_ok()) return status_response(s);
  ServerResponse ok;
  ok.body.clear();
  return ok;
}

ServerResponse ServerApi::kserve(const ServerRequest& request, std::string_view rest) {
  const bool get = request.method == "GET" || request.method == "HEAD";
  const std::string path = request.path;
  if (rest.empty() || rest == "/") {
    if (!get) return method_not_allowed(request.method, path);
    return json_response(
        {{"name", "rapidqa"}, {"version", RAPIDQA_VERSION_STRING}, {"extensions", json::array({"binary_tensor_data"})}});
  }
  if (rest == "/health/live") return get ? json_response({{"live", true}}) : method_not_allowed(request.method, path);
  if (rest == "/health/ready") {
    if (!get) return method_not_allowed(request.method, path);
    return ready() ? json_response({{"ready", true}}) : error_response(503, "unavailable", "the knowledge is still loading", 1);
  }
  constexpr std::string_view kModels = "/models/";
  if (!starts_with(rest, kModels)) return error_response(404, "not_found", "no route " + path);
  std::string_view model_and_action = rest.substr(kModels.size());
  std::string_view model = model_and_action.substr(0, model_and_action.find('/'));
  std::string_view action =
      model.size() < model_and_action.size() ? model_and_action.substr(model.size()) : std::string_view();
  // KServe allows /models/{name}/versions/{v}/...: this server has version "1" only.
  if (starts_with(action, "/versions/")) {
    std::string_view after = action.substr(std::strlen("/versions/"));
    std::string_view version = after.substr(0, after.find('/'));
    if (version != "1") return error_response(404, "not_found", "model '" + std::string(model) + "' has version 1 only");
    action = after.substr(version.size());
  }
  if (model != options_.model_name) {
    return error_response(404, "not_found",
                          "no model '" + std::string(model) + "'; this server serves '" + options_.model_name + "'");
  }
  const std::size_t dim = engine_.encoder().dimension();
  if (action.empty()) {
    if (!get) return method_not_allowed(request.method, path);
    return json_response({{"name", options_.model_name},
                          {"versions", {"1"}},
                          {"platform", "rapidqa"},
                          {"inputs", {{{"name", "text"}, {"datatype", "BYTES"}, {"shape", {-1}}}}},
                          {"outputs", {{{"name", "embedding"}, {"datatype", "FP32"}, {"shape", {-1, dim}}}}}});
  }
  if (action == "/ready") return get ? json_response({{"name", options_.model_name}, {"ready", ready()}}, ready() ? 200 : 503)
                                     : method_not_allowed(request.method, path);
  if (action == "/infer") {
    return request.method == "POST" ? kserve_infer(request, options_.model_name) : method_not_allowed(request.method, path);
  }
  return error_response(404, "not_found", "no route " + path);
}

ServerResponse ServerApi::kserve_infer(const ServerRequest& request, const std::string& model) {
  ServerResponse error;
  auto body = BodyObject::parse(request.body, {"id", "inputs", "outputs", "parameters"}, error);
  if (!body) return error;
  const json* inputs = body->field("inputs");
  if (!inputs || !inputs->is_array() || inputs->size() != 1) {
    return error_response(400, "invalid_argument", "field 'inputs' must hold exactly one tensor (the texts)");
  }
  const json& tensor = inputs->front();
  if (!tensor.is_object() || !tensor.contains("datatype") || tensor["datatype"] != "BYTES") {
    return error_response(400, "invalid_argument", "the input tensor's datatype must be \"BYTES\"");
  }
  if (!tensor.contains("data") || !tensor["data"].is_array()) {
    return error_response(400, "invalid_argument", "the input tensor needs 'data': an array of strings");
  }
  std::vector<std::string> texts;
  for (const auto& item : tensor["data"]) {
    if (!item.is_string()) return error_response(400, "invalid_argument", "the input tensor's data must be strings");
    texts.push_back(item.get<std::string>());
  }
  if (tensor.contains("shape")) {
    const json& shape = tensor["shape"];
    std::uint64_t elements = 1;
    bool valid = shape.is_array() && !shape.empty();
    for (const auto& d : shape) {
      if (!d.is_number_unsigned()) valid = false;
      else elements *= d.get<std::uint64_t>();
    }
    if (!valid || elements != texts.size()) {
      return error_response(400, "invalid_argument", "the input tensor's shape does not match its " +
                                                         std::to_string(texts.size()) + " strings");
    }
  }
  // The binary tensor data extension: the request's binary_data_output,
  // overridden by its output's own binary_data.
  bool binary = false;
  if (!json_flag(body->field("parameters"), "binary_data_output", binary, error)) return error;
  if (const json* outputs = body->field("outputs")) {
    if (!outputs->is_array()) return error_response(400, "invalid_argument", "field 'outputs' must be an array");
    for (const auto& wanted : *outputs) {
      if (!wanted.is_object() || !wanted.contains("name") || !wanted["name"].is_string()) {
        return error_response(400, "invalid_argument", "each entry of 'outputs' needs a 'name'");
      }
      if (wanted["name"] != "embedding") {
        return error_response(400, "invalid_argument", "this model has one output, 'embedding', not '" +
                                                           wanted["name"].get<std::string>() + "'");
      }
      const auto parameters = wanted.find("parameters");
      if (parameters != wanted.end() && !json_flag(&*parameters, "binary_data", binary, error)) return error;
    }
  }
  thread_local std::vector<float> vectors;  // a batch's are about 100 KB: kept per worker thread
  if (ServerResponse r = embed(model, texts, request.authorization, vectors); r.status != 200) return r;
  const std::size_t dim = engine_.encoder().dimension();
  const std::size_t bytes = texts.size() * dim * sizeof(float);
  // Written directly, as the embeddings route is: the vectors are most of it.
  ServerResponse r;
  r.status = 200;
  r.body.reserve((binary ? bytes : texts.size() * dim * 12) + 256);
  r.body += "{\"model_name\":" + tools::json_line(model) + ",\"model_version\":\"1\"";
  if (const json* id = body->field("id")) r.body += ",\"id\":" + tools::json_line(*id);
  r.body += ",\"outputs\":[{\"name\":\"embedding\",\"datatype\":\"FP32\",\"shape\":[" +
            std::to_string(texts.size()) + "," + std::to_string(dim) + "]";
  if (binary) {
    r.body += ",\"parameters\":{\"binary_data_size\":" + std::to_string(bytes) + "}}]}";
    r.headers.emplace_back("inference-header-content-length", std::to_string(r.body.size()));
    r.content_type = "application/octet-stream";
    // Little-endian float32s, row-major: this machine's own layout.
    r.body.append(reinterpret_cast<const char*>(vectors.data()), bytes);
    return r;
  }
  r.body += ",\"data\":";
  append_json_floats(vectors.data(), texts.size() * dim, r.body);
  r.body += "}]}";
  return r;
}

}  // namespace rapidqa::server

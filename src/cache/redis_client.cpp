#include "cache/redis_client.h"

#include <sys/time.h>

#include <hiredis/hiredis.h>

#include <fmt/format.h>

namespace rapidqa::cache {
namespace {

timeval to_timeval(std::chrono::milliseconds ms) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(ms.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((ms.count() % 1000) * 1000);
  return tv;
}

RedisReply convert(const redisReply* r) {
  RedisReply out;
  if (!r) return out;
  switch (r->type) {
    case REDIS_REPLY_STRING: out.type = RedisReply::Type::kString; break;
    case REDIS_REPLY_STATUS: out.type = RedisReply::Type::kStatus; break;
    case REDIS_REPLY_ERROR: out.type = RedisReply::Type::kError; break;
    case REDIS_REPLY_INTEGER: out.type = RedisReply::Type::kInteger; break;
    case REDIS_REPLY_ARRAY: out.type = RedisReply::Type::kArray; break;
    default: out.type = RedisReply::Type::kNil; break;
  }
  if (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS || r->type == REDIS_REPLY_ERROR) {
    out.text.assign(r->str, r->len);
  } else if (r->type == REDIS_REPLY_INTEGER) {
    out.integer = r->integer;
  } else if (r->type == REDIS_REPLY_ARRAY) {
    out.elements.reserve(r->elements);
    for (std::size_t i = 0; i < r->elements; ++i) out.elements.push_back(convert(r->element[i]));
  }
  return out;
}

// Takes ownership of a reply hiredis allocated.
RedisReply take(void* raw) {
  auto* r = static_cast<redisReply*>(raw);
  RedisReply out = convert(r);
  freeReplyObject(r);
  return out;
}

struct ArgvView {
  std::vector<const char*> argv;
  std::vector<std::size_t> lengths;
  explicit ArgvView(const std::vector<std::string>& args) {
    argv.reserve(args.size());
    lengths.reserve(args.size());
    for (const auto& a : args) {
      argv.push_back(a.data());
      lengths.push_back(a.size());
    }
  }
};

}  // namespace

void RedisConnection::ContextDeleter::operator()(redisContext* context) const { redisFree(context); }

RedisConnection::RedisConnection(std::unique_ptr<redisContext, ContextDeleter> context)
    : context_(std::move(context)) {}

RedisConnection::~RedisConnection() = default;

Result<RedisConnection> RedisConnection::connect(const std::string& host, int port,
                                                 std::chrono::milliseconds connect_timeout,
                                                 std::chrono::milliseconds command_timeout) {
  std::unique_ptr<redisContext, ContextDeleter> context(
      redisConnectWithTimeout(host.c_str(), port, to_timeval(connect_timeout)));
  if (!context) return Status::resource_exhausted("out of memory for a Redis connection");
  if (context->err) {
    return Status::unavailable(fmt::format("cannot connect to Redis at {}:{}: {}", host, port, context->errstr));
  }
  if (redisSetTimeout(context.get(), to_timeval(command_timeout)) != REDIS_OK) {
    return Status::unavailable(fmt::format("cannot set timeouts on the Redis connection: {}", context->errstr));
  }
  // Keepalive finds a peer that vanished without closing the connection
  // even when nothing is being sent.
  (void)redisEnableKeepAlive(context.get());
  return RedisConnection(std::move(context));
}

Status RedisConnection::link_failure(const char* doing) const {
  return Status::unavailable(
      fmt::format("Redis link failed while {}: {}", doing, context_->errstr[0] ? context_->errstr : "no reply"));
}

Result<RedisReply> RedisConnection::command(const std::vector<std::string>& args) {
  ArgvView view(args);
  void* raw = redisCommandArgv(context_.get(), static_cast<int>(args.size()), view.argv.data(), view.lengths.data());
  if (!raw) return link_failure(args.empty() ? "sending a command" : args.front().c_str());
  return take(raw);
}

void RedisConnection::append(const std::vector<std::string>& args) {
  ArgvView view(args);
  // Fails only when out of memory; the matching read_reply then fails too.
  (void)redisAppendCommandArgv(context_.get(), static_cast<int>(args.size()), view.argv.data(), view.lengths.data());
}

Result<RedisReply> RedisConnection::read_reply() {
  void* raw = nullptr;
  if (redisGetReply(context_.get(), &raw) != REDIS_OK || !raw) return link_failure("reading a reply");
  return take(raw);
}

int RedisConnection::fd() const { return context_->fd; }

Status RedisConnection::flush() {
  int done = 0;
  while (!done) {
    if (redisBufferWrite(context_.get(), &done) != REDIS_OK) return link_failure("writing");
  }
  return Status::ok();
}

Status RedisConnection::read_available() {
  if (redisBufferRead(context_.get()) != REDIS_OK) return link_failure("reading");
  return Status::ok();
}

Result<std::optional<RedisReply>> RedisConnection::buffered_reply() {
  void* raw = nullptr;
  if (redisGetReplyFromReader(context_.get(), &raw) != REDIS_OK) return link_failure("parsing a reply");
  if (!raw) return std::optional<RedisReply>();
  return std::optional<RedisReply>(take(raw));
}

}  // namespace rapidqa::cache

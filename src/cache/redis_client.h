// RedisConnection: one blocking connection to Redis through hiredis, with a
// bound on every wait, and replies copied into plain values so no other file
// sees hiredis types. Used by the relay (and by the tests to play a peer
// that misbehaves).
//
// Thread safety: thread-compatible; one thread uses a connection at a time.
// Writing to a socket the server has closed raises SIGPIPE; a thread that
// may do so must block SIGPIPE (the relay's thread does).
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "rapidqa/status.h"

struct redisContext;

namespace rapidqa::cache {

struct RedisReply {
  enum class Type { kNil, kString, kStatus, kError, kInteger, kArray };
  Type type = Type::kNil;
  std::string text;                  // kString, kStatus, kError
  long long integer = 0;             // kInteger
  std::vector<RedisReply> elements;  // kArray

  bool is_error() const { return type == Type::kError; }
  bool is_array() const { return type == Type::kArray; }
  bool is_text() const { return type == Type::kString || type == Type::kStatus; }
};

class RedisConnection {
 public:
  // kUnavailable (with hiredis's reason) when the server cannot be reached
  // within connect_timeout. Every later read or write waits at most
  // command_timeout.
  static Result<RedisConnection> connect(const std::string& host, int port, std::chrono::milliseconds connect_timeout,
                                         std::chrono::milliseconds command_timeout);

  RedisConnection(RedisConnection&&) noexcept = default;
  RedisConnection& operator=(RedisConnection&&) noexcept = default;
  ~RedisConnection();

  // Sends one command and waits for its reply. kUnavailable when the link
  // failed or timed out, after which the connection is unusable; a reply
  // the server sent as an error is a RedisReply of type kError, not a
  // failed Status.
  Result<RedisReply> command(const std::vector<std::string>& args);

  // Pipelining: queue commands, then read their replies in order.
  // read_reply() sends whatever is queued first.
  void append(const std::vector<std::string>& args);
  Result<RedisReply> read_reply();

  // For a subscriber that waits in poll(): the socket, a write of queued
  // commands, a read of whatever has arrived, and the next reply already
  // read (nullopt when none is complete yet). Failures are kUnavailable.
  int fd() const;
  Status flush();
  Status read_available();
  Result<std::optional<RedisReply>> buffered_reply();

 private:
  struct ContextDeleter {
    void operator()(redisContext* context) const;
  };
  explicit RedisConnection(std::unique_ptr<redisContext, ContextDeleter> context);
  Status link_failure(const char* doing) const;

  std::unique_ptr<redisContext, ContextDeleter> context_;
};

}  // namespace rapidqa::cache

// RedisSyncOptions: how several engine processes that serve the same
// knowledge base share their knowledge changes through Redis (pub/sub for
// speed, a capped stream for catching up after a disconnection).
//
// With a host set, every add, update, removal and invalidation made on one
// instance reaches the others' knowledge and caches, normally within a few
// milliseconds. Redis is never on the request path: while it is down every
// instance keeps answering from its own knowledge and caches (whose TTLs
// bound how stale a cached answer can get), queues its own changes, logs the
// outage through EngineOptions::log, and catches up when Redis returns. An
// instance that cannot tell what it missed drops all its cached answers.
//
// load_knowledge stays local: it replaces this instance's knowledge and
// clears its caches only; load the same file on every instance.
//
// Needs Redis 5 or later (streams); Redis 7 detects missed changes more
// precisely. Thread safety: a plain value type; thread-compatible.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>

namespace rapidqa {

struct RedisSyncOptions {
  std::string host;                   // Redis host name or address; empty = no Redis (this instance stands alone)
  int port = 6379;                    // Redis TCP port, 1..65535
  // Instances that share a knowledge base share a prefix; it names the
  // pub/sub channel <prefix>:changes, the stream <prefix>:changelog and the
  // key <prefix>:epoch.
  std::string channel_prefix = "rapidqa";
  // The name these connections show in CLIENT LIST (suffixed ":pub" and
  // ":sub"); empty = "rapidqa-<instance id>".
  std::string client_name;
  std::chrono::milliseconds connect_timeout{500};      // longest wait for one TCP connection to Redis
  std::chrono::milliseconds command_timeout{500};      // longest wait for one Redis reply before the link counts as down
  std::chrono::milliseconds reconnect_interval{1000};  // pause between attempts to reach Redis while it is down
  std::chrono::milliseconds heartbeat_interval{1000};  // silence on the subscription after which a PING checks Redis is alive
  // Local changes waiting to be sent (while Redis is down or slow). When
  // full the oldest is dropped (counted) and peers are told to drop their
  // cached answers, since they can no longer learn every change.
  std::size_t max_queued_changes = 10000;
  // Changes kept in the Redis stream (XADD MAXLEN ~, so Redis may keep a
  // few more) for instances that reconnect to replay what they missed.
  std::size_t change_log_length = 10000;
};

}  // namespace rapidqa

// RedisRelay: carries knowledge changes between engine instances through
// Redis. Each local change goes, as one atomic script, into a capped stream
// (the change log) and onto a pub/sub channel; every instance subscribes to
// the channel and hands each peer's change to its engine.
//
// One owned thread does all the network work: it keeps two connections
// (one to publish, one subscribed), sends the changes publish() queued, and
// delivers peers' changes. While Redis is down it logs the outage once,
// retries every reconnect_interval and lets the queue fill (bounded; the
// oldest change is dropped and counted, and peers are then told to drop
// their cached answers). On reconnect it subscribes first and then replays
// the log after the last entry it saw, so no change falls between the two;
// entries seen both ways are skipped by stream id. When it cannot prove the
// replay complete (the log was trimmed or lost, or it never saw the log) it
// calls on_gap.
//
// Thread safety: thread-safe. The callbacks run on the relay's thread, one
// at a time, with no relay lock held; they may take the engine's locks.
// publish() never waits for Redis, so it may be called under those locks.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "cache/change_log.h"
#include "cache/knowledge_change.h"
#include "rapidqa/log.h"
#include "rapidqa/redis_sync.h"
#include "rapidqa/status.h"

namespace rapidqa::cache {

class RedisConnection;
struct ChangeMessage;

struct RedisRelayStats {
  bool connected = false;      // both connections up and subscribed
  std::uint64_t outages = 0;   // times Redis was lost (or could not be reached at start)
  std::uint64_t published = 0; // local changes Redis accepted
  std::uint64_t received = 0;  // peer changes delivered live from the channel
  std::uint64_t replayed = 0;  // peer changes delivered from the log after a reconnect
  std::uint64_t queued = 0;    // local changes waiting to be sent now
  std::uint64_t dropped = 0;   // local changes dropped (queue full, or refused by Redis)
  std::uint64_t malformed = 0; // messages skipped because they could not be read
  std::uint64_t gaps = 0;      // times on_gap was called
};

// kInvalidArgument naming the field when an option is out of range (the
// host is not checked: it may be unreachable now and fine later).
Status validate_redis_sync_options(const RedisSyncOptions& options);

class RedisRelay {
 public:
  struct Callbacks {
    std::function<void(const KnowledgeChange&)> on_change;  // a peer's change
    std::function<void(const std::string& reason)> on_gap;  // changes may have been missed
    LogSink log;                                            // outages, recoveries, skipped messages
  };

  // Starts the thread and waits for its first attempt to reach Redis
  // (bounded by the connect and command timeouts). Redis being unreachable
  // is not an error: it is logged and retried. kInvalidArgument for bad
  // options. instance_id names this instance's own changes.
  static Result<std::unique_ptr<RedisRelay>> start(RedisSyncOptions options, std::string instance_id,
                                                   Callbacks callbacks);
  // Stops the thread; returns within about connect_timeout + command_timeout.
  ~RedisRelay();
  RedisRelay(const RedisRelay&) = delete;
  RedisRelay& operator=(const RedisRelay&) = delete;

  // Queues a local change for the thread to send; never blocks on Redis.
  void publish(const KnowledgeChange& change);
  RedisRelayStats stats() const;

 private:
  struct Pending {
    std::uint64_t sequence;  // queue position, so the thread can pop what it sent
    std::string message;
  };
  struct Link;  // the two connections, alive only while Redis is reachable

  RedisRelay(RedisSyncOptions options, std::string instance_id, Callbacks callbacks);
  void run();
  bool stopping() const { return stopping_.load(std::memory_order_acquire); }
  void wake();
  // Waits until the deadline, a wake() or stop.
  void wait_until(std::chrono::steady_clock::time_point deadline);
  Status connect(bool at_start);
  Status resync(StreamId replay_after);
  Status serve();
  Status send_queued();
  Status read_subscription();
  void handle_message(const std::string& payload, std::optional<StreamId> stream_entry);
  void deliver(const ChangeMessage& message, bool replayed);
  void link_lost(const Status& why);
  void link_up();
  void log(LogLevel level, const std::string& message) const;

  const RedisSyncOptions options_;
  const std::string instance_id_;
  const Callbacks callbacks_;
  const std::string channel_, stream_key_, epoch_key_, client_name_;

  // Shared between publish() and the thread.
  mutable std::mutex mu_;
  std::deque<Pending> queue_;            // guarded by mu_
  std::uint64_t next_sequence_ = 0;      // guarded by mu_
  bool peers_missed_changes_ = false;    // guarded by mu_: a change was dropped since the last send
  int wake_fd_ = -1;                     // an eventfd the thread polls with the subscription
  std::atomic<bool> stopping_{false};

  // Start-up handshake: start() waits for the first connection attempt.
  std::mutex started_mu_;
  std::condition_variable started_cv_;
  bool first_attempt_done_ = false;      // guarded by started_mu_

  // Counters, read by stats() from any thread.
  std::atomic<bool> connected_{false};
  std::atomic<std::uint64_t> outages_{0}, published_{0}, received_{0}, replayed_{0}, dropped_{0}, malformed_{0},
      gaps_{0};

  // Owned by the thread alone.
  std::unique_ptr<Link> link_;
  std::optional<StreamId> cursor_;       // the newest log entry seen; none until Redis was first reached
  std::string epoch_;                    // the value of epoch_key_ when last connected
  std::string unresolved_gap_;           // why changes may be missed, found while connecting; kept until reported
  bool outage_logged_ = false;
  bool ever_connected_ = false;
  std::chrono::steady_clock::time_point down_since_{};

  std::thread thread_;  // last: starts after everything it uses exists
};

}  // namespace rapidqa::cache

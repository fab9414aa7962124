// ChangeReplication: this engine's change bus joined to its peers' through
// Redis (see cache/redis_relay.h for the protocol). Outgoing: every change
// this instance makes, except a reload (each instance loads its own
// knowledge file), goes to Redis. Incoming: a peer's change is handed to
// apply_peer_change, which applies it here and publishes it on the local
// bus, where it must not echo back; when changes may have been missed,
// drop_cached_answers is called (dropping cached answers is always safe).
//
// Thread safety: thread-safe. The callbacks run on the relay's thread.
// Destroy it before anything its callbacks use.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "cache/knowledge_change.h"
#include "cache/redis_relay.h"
#include "rapidqa/log.h"
#include "rapidqa/metrics.h"
#include "rapidqa/redis_sync.h"
#include "rapidqa/status.h"

namespace rapidqa::engine {

class ChangeReplication {
 public:
  struct Callbacks {
    std::function<void(const cache::KnowledgeChange&)> apply_peer_change;
    std::function<void()> drop_cached_answers;
    LogSink log;  // outages, recoveries, gaps; null = silent
  };

  // Starts the relay (Redis being unreachable is logged and retried, not a
  // failure) and subscribes to bus, which must outlive this object.
  // instance_id: the origin this instance's changes carry.
  static Result<std::unique_ptr<ChangeReplication>> start(const RedisSyncOptions& options, std::string instance_id,
                                                          cache::ChangeBus& bus, Callbacks callbacks);

  // The relay's counters into snapshot.relay.
  void add_stats(MetricsSnapshot& snapshot) const;

 private:
  ChangeReplication() = default;

  std::string instance_id_;
  std::unique_ptr<cache::RedisRelay> relay_;
};

}  // namespace rapidqa::engine

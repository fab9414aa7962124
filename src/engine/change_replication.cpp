#include "engine/change_replication.h"

#include <utility>

#include <fmt/format.h>

namespace rapidqa::engine {

Result<std::unique_ptr<ChangeReplication>> ChangeReplication::start(const RedisSyncOptions& options,
                                                                    std::string instance_id, cache::ChangeBus& bus,
                                                                    Callbacks callbacks) {
  std::unique_ptr<ChangeReplication> replication(new ChangeReplication());
  replication->instance_id_ = instance_id;
  cache::RedisRelay::Callbacks relay_callbacks;
  relay_callbacks.on_change = std::move(callbacks.apply_peer_change);
  relay_callbacks.on_gap = [drop = std::move(callbacks.drop_cached_answers), log = callbacks.log](const std::string& reason) {
    // The knowledge and its TTLs stay as they are.
    if (log) log(LogLevel::kWarning, fmt::format("{}; dropping every cached answer", reason));
    drop();
  };
  relay_callbacks.log = callbacks.log;
  auto started = cache::RedisRelay::start(options, std::move(instance_id), std::move(relay_callbacks));
  if (!started) return started.status();
  replication->relay_ = std::move(started).value();
  ChangeReplication* self = replication.get();
  bus.subscribe([self](const cache::KnowledgeChange& change) -> cache::ChangeEffect {
    // Only this instance's own changes go out: a peer's arrives through
    // apply_peer_change and must not echo back.
    if (change.origin == self->instance_id_ && change.kind != cache::KnowledgeChange::Kind::kReload) {
      self->relay_->publish(change);
    }
    return {};
  });
  return replication;
}

void ChangeReplication::add_stats(MetricsSnapshot& snapshot) const {
  const cache::RedisRelayStats redis = relay_->stats();
  snapshot.relay.connected = redis.connected;
  snapshot.relay.outages = redis.outages;
  snapshot.relay.published = redis.published;
  snapshot.relay.received = redis.received;
  snapshot.relay.replayed = redis.replayed;
  snapshot.relay.queued = redis.queued;
  snapshot.relay.dropped = redis.dropped;
  snapshot.relay.malformed = redis.malformed;
  snapshot.relay.gaps = redis.gaps;
}

}  // namespace rapidqa::engine

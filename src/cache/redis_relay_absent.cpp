// The relay of a build without Redis (RAPIDQA_WITH_REDIS=OFF): engine
// options that name a Redis host are refused at creation, so no relay is
// ever started and the rest of the engine needs no #ifdef.
#include "cache/redis_relay.h"

namespace rapidqa::cache {
namespace {
Status built_without_redis() {
  return Status::failed_precondition(
      "redis.host is set, but this rapidqa was built without Redis support (RAPIDQA_WITH_REDIS=OFF)");
}
}  // namespace

Status validate_redis_sync_options(const RedisSyncOptions&) { return built_without_redis(); }

Result<std::unique_ptr<RedisRelay>> RedisRelay::start(RedisSyncOptions, std::string, Callbacks) {
  return built_without_redis();
}

RedisRelay::~RedisRelay() = default;
void RedisRelay::publish(const KnowledgeChange&) {}
RedisRelayStats RedisRelay::stats() const { return {}; }

}  // namespace rapidqa::cache

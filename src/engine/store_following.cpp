#include "engine/store_following.h"

#include <utility>

#include <fmt/format.h>

namespace rapidqa::engine {

Result<std::unique_ptr<StoreFollowing>> StoreFollowing::start(KnowledgeStore& store, Follow follow, LogSink log) {
  std::unique_ptr<StoreFollowing> following(new StoreFollowing(std::move(follow), std::move(log)));
  StoreFollowing* self = following.get();
  StoreWatcher watcher;
  watcher.changed = [self](const std::vector<std::string>& ids) { self->on_changed(ids); };
  watcher.resync = [self](const std::string& reason) { self->on_resync(reason); };
  auto watch = store.watch(std::move(watcher));
  if (!watch) return watch.status();
  std::lock_guard<std::mutex> lock(following->mu_);
  following->watch_ = std::move(watch).value();
  return following;
}

StoreFollowing::~StoreFollowing() { watch_.reset(); }

void StoreFollowing::ready() {
  std::lock_guard<std::mutex> lock(mu_);
  ready_ = true;
  follow_pending();
}

void StoreFollowing::on_changed(const std::vector<std::string>& ids) {
  std::lock_guard<std::mutex> lock(mu_);
  pending_.insert(ids.begin(), ids.end());
  follow_pending();
}

void StoreFollowing::on_resync(const std::string& reason) {
  if (log_) log_(LogLevel::kInfo, fmt::format("{}; comparing every entry with the store", reason));
  std::lock_guard<std::mutex> lock(mu_);
  resync_pending_ = true;
  follow_pending();
}

void StoreFollowing::follow_pending() {
  if (!ready_ || (!resync_pending_ && pending_.empty())) return;
  const std::vector<std::string> ids(pending_.begin(), pending_.end());
  Status followed = follow_(resync_pending_ ? nullptr : &ids);
  if (followed.is_ok()) {
    pending_.clear();
    resync_pending_ = false;
    return;
  }
  // Whatever was missed is found by comparing everything next time.
  resync_pending_ = true;
  if (log_) {
    log_(LogLevel::kWarning, fmt::format("following the store's other writers failed ({}); every entry is compared "
                                         "at the next change or reconnection",
                                         followed.message()));
  }
}

}  // namespace rapidqa::engine

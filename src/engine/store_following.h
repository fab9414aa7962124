// StoreFollowing: keeps an engine level with the other writers of a shared
// knowledge store (PostgreSQL). It watches the store (KnowledgeStore::
// watch) and hands each report to `follow`, which brings memory and the
// caches level (EngineKnowledge::follow_store under the engine's lock).
//
// The watch starts before the engine loads the store, so no commit falls
// between the load and the first notification; reports that arrive before
// ready() are held and followed then. A follow that fails (the server went
// away between the notification and the read) turns the next report into
// a full comparison, so nothing reported is lost for good.
//
// Thread safety: thread-safe. `follow` runs on the watch's thread, or on
// the thread calling ready(); never two at once.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "rapidqa/knowledge_store.h"
#include "rapidqa/log.h"
#include "rapidqa/status.h"

namespace rapidqa::engine {

class StoreFollowing {
 public:
  // entry_ids: the entries to compare, or null for every entry.
  using Follow = std::function<Status(const std::vector<std::string>* entry_ids)>;

  // Starts watching; kUnavailable when the store's server cannot be reached.
  static Result<std::unique_ptr<StoreFollowing>> start(KnowledgeStore& store, Follow follow, LogSink log);
  // Stops the watch first, so no report arrives into a half-destroyed owner.
  ~StoreFollowing();

  // The engine is built: follow what was held, and from now on each report
  // as it arrives.
  void ready();
  bool connected() const { return watch_ && watch_->connected(); }

 private:
  StoreFollowing(Follow follow, LogSink log) : follow_(std::move(follow)), log_(std::move(log)) {}
  void on_changed(const std::vector<std::string>& ids);
  void on_resync(const std::string& reason);
  // Under mu_: follows what is pending, if ready.
  void follow_pending();

  const Follow follow_;
  const LogSink log_;
  std::mutex mu_;                  // over everything below
  bool ready_ = false;
  bool resync_pending_ = false;    // compare every entry at the next chance
  std::set<std::string> pending_;  // entries to compare at the next chance
  std::unique_ptr<StoreWatch> watch_;  // last: its thread calls the members above
};

}  // namespace rapidqa::engine

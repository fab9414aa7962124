// The PostgreSQL store's watch: LISTENs on a connection of its own, on a
// thread of its own, and reports other connections' commits to a
// StoreWatcher (see KnowledgeStore::watch).
//
// Thread safety: the watcher's callbacks run on the watch's thread, one at
// a time; destroying the watch stops the thread.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "rapidqa/knowledge_store.h"

namespace rapidqa::store {

// own_backend: the server process of the store's writing connection, whose
// notifications are the store's own and are not reported (0: none yet).
// Returns once listening; kUnavailable when the server cannot be reached.
Result<std::unique_ptr<StoreWatch>> start_postgres_watch(std::string uri, std::string store_name,
                                                         StoreWatcher watcher,
                                                         std::shared_ptr<std::atomic<int>> own_backend);

}  // namespace rapidqa::store

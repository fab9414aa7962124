#include "store/postgres_watch.h"

#include <poll.h>

#include <cerrno>
#include <chrono>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "store/postgres_connection.h"
#include "store/postgres_schema.h"

namespace rapidqa::store {
namespace {

// LISTENs on its own connection, on its own thread. A lost connection is
// retried every second; once back, the watcher is told to resync, since
// notifications sent meanwhile are gone.
class PostgresStoreWatch final : public StoreWatch {
 public:
  PostgresStoreWatch(std::string uri, std::string name, StoreWatcher watcher,
                     std::shared_ptr<std::atomic<int>> own_backend)
      : uri_(std::move(uri)), name_(std::move(name)), watcher_(std::move(watcher)),
        own_backend_(std::move(own_backend)) {}
  ~PostgresStoreWatch() override {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }

  // Connects and LISTENs before returning, then starts the thread.
  Status start() {
    if (Status s = listen(); !s.is_ok()) return s;
    thread_ = std::thread([this] { run(); });
    return Status::ok();
  }

  bool connected() const override { return connected_; }

 private:
  Status listen() {
    auto connected = pg::connect(uri_, name_);
    if (!connected) return connected.status();
    const std::string sql = fmt::format("LISTEN {}", kChangeChannel);
    auto listening = pg::exec(connected->get(), sql.c_str(), PGRES_COMMAND_OK, name_, "listening for changes");
    if (!listening) return listening.status();
    connection_ = std::move(connected).value();
    connected_ = true;
    return Status::ok();
  }

  // Sleeps up to `duration` in short steps, so a stop is seen quickly.
  void pause(std::chrono::milliseconds duration) {
    const auto until = std::chrono::steady_clock::now() + duration;
    while (!stop_ && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }

  void run() {
    while (!stop_) {
      if (!connection_) {
        if (!listen().is_ok()) {
          pause(std::chrono::seconds(1));
          continue;
        }
        if (watcher_.resync) watcher_.resync("the connection to the store's server was re-established");
      }
      pollfd waiting{PQsocket(connection_.get()), POLLIN, 0};
      const int ready = ::poll(&waiting, 1, /*timeout ms=*/100);
      if (ready < 0 && errno != EINTR) {
        drop_connection();
        continue;
      }
      if (ready <= 0) continue;
      if (PQconsumeInput(connection_.get()) == 0 || pg::lost(connection_.get())) {
        drop_connection();
        continue;
      }
      deliver();
    }
  }

  void drop_connection() {
    connection_.reset();
    connected_ = false;
  }

  void deliver() {
    std::set<std::string> ids;
    bool everything = false;
    const int own = own_backend_->load();
    while (PGnotify* raw = PQnotifies(connection_.get())) {
      std::unique_ptr<PGnotify, void (*)(void*)> notification(raw, PQfreemem);
      if (own != 0 && notification->be_pid == own) continue;  // this store's own commit
      const std::string payload = notification->extra ? notification->extra : "";
      auto parsed = nlohmann::json::parse(payload, nullptr, /*allow_exceptions=*/false);
      if (!parsed.is_array()) {
        everything = true;  // "*", or a payload this version does not read
        continue;
      }
      for (const auto& id : parsed) {
        if (id.is_string()) ids.insert(id.get<std::string>());
      }
    }
    if (everything) {
      if (watcher_.resync) watcher_.resync("a commit touched more entries than one notification names");
    } else if (!ids.empty() && watcher_.changed) {
      watcher_.changed(std::vector<std::string>(ids.begin(), ids.end()));
    }
  }

  const std::string uri_;
  const std::string name_;
  const StoreWatcher watcher_;
  const std::shared_ptr<std::atomic<int>> own_backend_;
  pg::ConnectionPtr connection_;  // the thread's own (start() sets it first)
  std::atomic<bool> connected_{false};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace

Result<std::unique_ptr<StoreWatch>> start_postgres_watch(std::string uri, std::string store_name,
                                                         StoreWatcher watcher,
                                                         std::shared_ptr<std::atomic<int>> own_backend) {
  auto watch = std::make_unique<PostgresStoreWatch>(std::move(uri), std::move(store_name), std::move(watcher),
                                                    std::move(own_backend));
  if (Status s = watch->start(); !s.is_ok()) return s;
  return std::unique_ptr<StoreWatch>(std::move(watch));
}

}  // namespace rapidqa::store

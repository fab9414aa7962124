// PostgresServer: a private PostgreSQL 15 server for a test or a benchmark,
// on a free loopback port, in its own temporary directory, with the
// superuser `rapidqa` (no password: trust authentication) and an empty
// database `rapidqa`. It can be killed like a crash and started again on
// the same data directory and port, where committed data survives.
//
// PostgreSQL refuses to run as root. A test that runs as root runs the
// server as the unprivileged user rapidqa-pg (scripts/setup.sh creates it)
// through runuser; otherwise the server runs as the test's own user.
//
// Every wait is bounded: a server that does not start, answer or stop fails
// the call with a Status that quotes the server's log.
//
// Thread safety: thread-compatible. Any number of servers may run at once,
// in one process or several (ctest -j): each has its own directory and port.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "rapidqa/status.h"
#include "support/child_process.h"

namespace rapidqa::testing {

// The folder that holds initdb and postgres: $RAPIDQA_PG_BIN_DIR when set,
// otherwise Debian's /usr/lib/postgresql/15/bin; "" when that folder has no
// initdb (postgresql-15 is not installed).
std::string postgres_bin_dir();

struct PostgresServerOptions {
  // Off makes commits faster but a machine crash could lose them; kill() is
  // a process crash, which keeps what was written either way.
  bool fsync = true;
  std::string bin_dir;  // where initdb and postgres are; empty: postgres_bin_dir()
};

class PostgresServer {
 public:
  // Creates a cluster (initdb), starts it, waits until it accepts
  // connections (at most ready_timeout), and creates the database rapidqa.
  // kNotFound without PostgreSQL binaries; kFailedPrecondition as root
  // without the user rapidqa-pg; kDeadlineExceeded or kUnavailable with
  // the server's log when it does not come up.
  static Result<std::unique_ptr<PostgresServer>> start(
      const PostgresServerOptions& options = {},
      std::chrono::milliseconds ready_timeout = std::chrono::seconds(30));
  // Kills the server and its backends and removes its directory.
  ~PostgresServer();
  PostgresServer(const PostgresServer&) = delete;
  PostgresServer& operator=(const PostgresServer&) = delete;

  int port() const { return port_; }
  // "postgresql://rapidqa@127.0.0.1:PORT/DATABASE", for libpq.
  std::string uri(const std::string& database = "rapidqa") const;
  // The cluster's data directory (PGDATA), for tests that inspect or damage
  // its files while the server is down.
  std::string data_directory() const { return dir_ + "/data"; }
  // Whether the postmaster runs.
  bool running() const;

  // SIGKILL to the postmaster and every backend at once, as in a crash:
  // connections drop, nothing is shut down cleanly, the next start runs
  // crash recovery. Returns once none of them is left.
  void kill();
  // Fast shutdown (SIGINT): open transactions roll back, a checkpoint is
  // written, the server exits. Kills it and returns kDeadlineExceeded when
  // it has not exited within timeout. OK when it was not running.
  Status stop(std::chrono::milliseconds timeout = std::chrono::seconds(30));
  // Stops the server if it runs (fast shutdown), then starts it again on
  // the same data directory and port and waits until it accepts
  // connections. After kill() this is crash recovery.
  Status restart(std::chrono::milliseconds ready_timeout = std::chrono::seconds(30));

  // CREATE DATABASE name (owned by rapidqa). kAlreadyExists when it exists.
  Status create_database(const std::string& name);

  // The end of what the server wrote, for a failing test's message.
  std::string log_tail() const;

 private:
  PostgresServer() = default;
  Status create_cluster();
  Status launch(std::chrono::milliseconds ready_timeout);
  // The program's command line, run as rapidqa-pg through runuser when
  // this process is root.
  std::vector<std::string> command_line(std::vector<std::string> program_and_arguments) const;
  // The postgres process itself (the child of runuser when there is one);
  // -1 when it is not running.
  pid_t postmaster_pid() const;
  bool postmaster_says_ready() const;
  // Removes the shared memory segment a killed server leaves behind.
  void remove_leftover_shared_memory();

  PostgresServerOptions options_;
  std::string bin_dir_;
  std::string dir_;
  int port_ = 0;
  bool run_as_service_user_ = false;  // through runuser, as rapidqa-pg
  uid_t server_uid_ = 0;               // the user the server's processes run as
  std::unique_ptr<ChildProcess> process_;  // postgres, or the runuser that runs it
};

}  // namespace rapidqa::testing

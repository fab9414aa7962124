#include "support/postgres_server.h"

#include <libpq-fe.h>
#include <pwd.h>
#include <signal.h>
#include <sys/ipc.h>
#include <sys/shm.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "support/free_port.h"

namespace rapidqa::testing {
namespace {

using SteadyTime = std::chrono::steady_clock;

constexpr const char* kDebianBinDir = "/usr/lib/postgresql/15/bin";
constexpr const char* kServiceUser = "rapidqa-pg";  // scripts/setup.sh creates it
constexpr const char* kSuperuser = "rapidqa";
constexpr const char* kDefaultDatabase = "rapidqa";
// initdb -N takes about a second; the bound only stops a hung one.
constexpr std::chrono::seconds kInitdbTimeout(120);
// Processes die within milliseconds of SIGKILL; this only bounds the wait.
constexpr std::chrono::seconds kKillTimeout(10);
constexpr std::size_t kLogTailChars = 2000;

bool is_executable(const std::string& path) { return access(path.c_str(), X_OK) == 0; }

std::string file_tail(const std::string& path) {
  std::ifstream in(path);
  std::stringstream all;
  all << in.rdbuf();
  const std::string text = all.str();
  return text.size() <= kLogTailChars ? text : text.substr(text.size() - kLogTailChars);
}

std::vector<std::string> file_lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::optional<long long> parse_integer(const std::string& text) {
  char* end = nullptr;
  errno = 0;
  const long long value = std::strtoll(text.c_str(), &end, 10);
  if (errno != 0 || end == text.c_str()) return std::nullopt;
  return value;
}

struct ProcessInfo {
  char state = '?';  // 'Z' for a zombie, 'T' when stopped
  pid_t parent = -1;
};

// From /proc/PID/stat, "pid (comm) state ppid ...": the fields follow the
// last ')', since the command name may hold anything.
std::optional<ProcessInfo> process_info(pid_t pid) {
  std::ifstream in(fmt::format("/proc/{}/stat", pid));
  std::string stat;
  if (!std::getline(in, stat)) return std::nullopt;
  const auto paren = stat.rfind(')');
  if (paren == std::string::npos) return std::nullopt;
  std::istringstream fields(stat.substr(paren + 1));
  ProcessInfo info;
  fields >> info.state >> info.parent;
  if (!fields) return std::nullopt;
  return info;
}

bool alive(pid_t pid) {
  const auto info = process_info(pid);
  return info && info->state != 'Z';
}

bool wait_until_stopped(pid_t pid, std::chrono::milliseconds timeout) {
  const auto deadline = SteadyTime::now() + timeout;
  while (SteadyTime::now() < deadline) {
    const auto info = process_info(pid);
    if (!info || info->state == 'T' || info->state == 'Z') return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

// Every live process whose working directory is `directory`. The
// postmaster changes into its data directory before it forks anything, and
// its backends inherit that; so this finds all of a cluster's processes,
// including backends a dead postmaster left behind. Backends cannot be
// found by process group: each one calls setsid().
std::vector<pid_t> processes_working_in(const std::string& directory) {
  std::vector<pid_t> found;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", error)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::error_code unreadable;  // gone meanwhile, a zombie, or another user's
    const auto cwd = std::filesystem::read_symlink(entry.path() / "cwd", unreadable);
    if (!unreadable && cwd == directory) found.push_back(static_cast<pid_t>(std::stol(name)));
  }
  return found;
}

std::vector<pid_t> children_of(pid_t parent) {
  std::vector<pid_t> children;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", error)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    const auto pid = static_cast<pid_t>(std::stol(name));
    const auto info = process_info(pid);
    if (info && info->parent == parent) children.push_back(pid);
  }
  return children;
}

// A libpq key word's value, quoted so that spaces and quotes survive.
std::string conninfo_value(const std::string& value) {
  std::string quoted = "'";
  for (const char c : value) {
    if (c == '\'' || c == '\\') quoted += '\\';
    quoted += c;
  }
  return quoted + "'";
}

std::string conninfo(int port, const std::string& database) {
  // A statement timeout, so no query of the fixture's own waits unbounded.
  return fmt::format("host=127.0.0.1 port={} user={} dbname={} connect_timeout=10 "
                     "options='-c statement_timeout=60000'",
                     port, kSuperuser, conninfo_value(database));
}

std::string quoted_identifier(const std::string& name) {
  std::string quoted = "\"";
  for (const char c : name) {
    if (c == '"') quoted += '"';
    quoted += c;
  }
  return quoted + "\"";
}

std::string trimmed(const char* message) {
  std::string text = message ? message : "";
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

// Runs one statement as the superuser. kAlreadyExists for SQLSTATE 42P04
// (duplicate_database) and 42P06 (duplicate_schema).
Status execute_as_superuser(int port, const std::string& database, const std::string& sql) {
  std::unique_ptr<PGconn, decltype(&PQfinish)> connection(PQconnectdb(conninfo(port, database).c_str()), &PQfinish);
  if (!connection) return Status::resource_exhausted("out of memory connecting to PostgreSQL");
  if (PQstatus(connection.get()) != CONNECTION_OK) {
    return Status::unavailable(fmt::format("cannot connect to PostgreSQL on port {}: {}", port,
                                           trimmed(PQerrorMessage(connection.get()))));
  }
  std::unique_ptr<PGresult, decltype(&PQclear)> result(PQexec(connection.get(), sql.c_str()), &PQclear);
  if (result && PQresultStatus(result.get()) == PGRES_COMMAND_OK) return Status::ok();
  const char* sqlstate = result ? PQresultErrorField(result.get(), PG_DIAG_SQLSTATE) : nullptr;
  const std::string message = fmt::format("{}: {}", sql, trimmed(PQerrorMessage(connection.get())));
  if (sqlstate && (std::strcmp(sqlstate, "42P04") == 0 || std::strcmp(sqlstate, "42P06") == 0)) {
    return Status::already_exists(message);
  }
  return Status::internal(message);
}

// RFC 3986 percent-encoding for a URI path segment.
std::string uri_encoded(const std::string& text) {
  std::string encoded;
  for (const unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
      encoded += static_cast<char>(c);
    } else {
      encoded += fmt::format("%{:02X}", c);
    }
  }
  return encoded;
}

// $RAPIDQA_PG_BIN_DIR, or Debian's folder; whether or not it holds anything.
std::string chosen_bin_dir() {
  const char* chosen = std::getenv("RAPIDQA_PG_BIN_DIR");
  return chosen && *chosen ? chosen : kDebianBinDir;
}

std::string runuser_path() {
  for (const char* candidate : {"/usr/sbin/runuser", "/sbin/runuser"}) {
    if (is_executable(candidate)) return candidate;
  }
  return "";
}

}  // namespace

std::string postgres_bin_dir() {
  const std::string dir = chosen_bin_dir();
  return is_executable(dir + "/initdb") ? dir : "";
}

Result<std::unique_ptr<PostgresServer>> PostgresServer::start(const PostgresServerOptions& options,
                                                              std::chrono::milliseconds ready_timeout) {
  std::unique_ptr<PostgresServer> server(new PostgresServer());
  server->options_ = options;
  server->bin_dir_ = options.bin_dir.empty() ? chosen_bin_dir() : options.bin_dir;
  if (!is_executable(server->bin_dir_ + "/initdb") || !is_executable(server->bin_dir_ + "/postgres")) {
    return Status::not_found(fmt::format(
        "no PostgreSQL 15 binaries (initdb, postgres) in '{}': scripts/setup.sh installs postgresql-15; "
        "RAPIDQA_PG_BIN_DIR names another folder",
        server->bin_dir_));
  }

  // PostgreSQL will not run as root: it would own every file it touches.
  server->run_as_service_user_ = geteuid() == 0;
  server->server_uid_ = geteuid();
  const passwd* service_user = nullptr;
  if (server->run_as_service_user_) {
    service_user = getpwnam(kServiceUser);
    if (!service_user) {
      return Status::failed_precondition(fmt::format(
          "running as root, so PostgreSQL must run as the user {}, which does not exist: run scripts/setup.sh, "
          "or `useradd --system --no-create-home --shell /usr/sbin/nologin {}`",
          kServiceUser, kServiceUser));
    }
    server->server_uid_ = service_user->pw_uid;
    if (runuser_path().empty()) {
      return Status::failed_precondition(
          fmt::format("running as root, and runuser (util-linux) is missing to run PostgreSQL as {}", kServiceUser));
    }
  }

  char dir_template[] = "/tmp/rapidqa-pg-XXXXXX";
  if (!mkdtemp(dir_template)) {
    return Status::io_error(fmt::format("cannot create a directory for PostgreSQL: {}", std::strerror(errno)));
  }
  server->dir_ = dir_template;  // from here on the destructor removes it
  if (service_user && chown(server->dir_.c_str(), service_user->pw_uid, service_user->pw_gid) != 0) {
    return Status::io_error(fmt::format("cannot give {} to {}: {}", server->dir_, kServiceUser, std::strerror(errno)));
  }

  if (Status created = server->create_cluster(); !created) return created;
  Status launched;
  for (int attempt = 0; attempt < 5; ++attempt) {
    server->port_ = free_loopback_port();
    launched = server->launch(ready_timeout);
    // kUnavailable: it exited, most likely because another process took the
    // port first. A server that hangs would hang on another port too.
    if (launched.code() != StatusCode::kUnavailable) break;
  }
  if (!launched) return launched;
  if (Status created = server->create_database(kDefaultDatabase); !created) return created;
  return server;
}

PostgresServer::~PostgresServer() {
  kill();
  remove_leftover_shared_memory();
  std::error_code ignored;
  if (!dir_.empty()) std::filesystem::remove_all(dir_, ignored);
}

std::vector<std::string> PostgresServer::command_line(std::vector<std::string> program_and_arguments) const {
  if (!run_as_service_user_) return program_and_arguments;
  // runuser forks the program and waits for it, rather than exec it: the
  // ChildProcess is runuser, and the program its child.
  std::vector<std::string> wrapped{runuser_path(), "-u", kServiceUser, "--"};
  wrapped.insert(wrapped.end(), program_and_arguments.begin(), program_and_arguments.end());
  return wrapped;
}

Status PostgresServer::create_cluster() {
  ChildOptions child_options;
  child_options.output_file = dir_ + "/initdb.log";
  child_options.working_directory = dir_;  // the test's may be closed to rapidqa-pg
  child_options.own_process_group = true;  // a timeout kills initdb, not only runuser
  // Trust authentication on loopback: the server is private to this test.
  // No locale, so messages and sorting do not depend on the machine; -N
  // skips the fsyncs, since a machine crash during a test loses the test.
  auto initdb = ChildProcess::start(command_line({bin_dir_ + "/initdb", "-D", data_directory(), "-U", kSuperuser,
                                                  "--auth=trust", "-E", "UTF8", "--no-locale", "-N"}),
                                    child_options);
  if (!initdb) return initdb.status();
  if (!(*initdb)->wait_for_exit(kInitdbTimeout)) {
    (*initdb)->kill_and_wait();
    return Status::deadline_exceeded(fmt::format("initdb did not finish within {} s: {}", kInitdbTimeout.count(),
                                                 file_tail(child_options.output_file)));
  }
  if ((*initdb)->exit_code() != 0) {
    return Status::io_error(
        fmt::format("initdb of {} failed: {}", data_directory(), file_tail(child_options.output_file)));
  }
  return Status::ok();
}

Status PostgresServer::launch(std::chrono::milliseconds ready_timeout) {
  if (port_ == 0) return Status::unavailable("no free loopback port");
  ChildOptions child_options;
  child_options.output_file = dir_ + "/server.log";
  child_options.working_directory = dir_;
  // In the test's process group, not one of its own: kill() needs no group
  // (the backends leave every group anyway, each calls setsid()), and a
  // Ctrl-C that kills the test without its destructors then reaches the
  // postmaster too, as a fast shutdown, instead of leaving it running.
  child_options.own_process_group = false;
  // postgres itself rather than pg_ctl, so the server is this process's
  // child (through runuser) and a kill is a crash, not a shutdown.
  // - The unix socket goes in the private directory: Debian's default,
  //   /var/run/postgresql, belongs to the system's postgres user.
  // - Dynamic shared memory in files under the data directory (mmap), not
  //   in /dev/shm, where a killed server would leave segments behind.
  // - After a crash, one syncfs() of the file system instead of an fsync()
  //   of each of the cluster's ~1000 files: recovery in about 0.4 s rather
  //   than 1.5 s. (Nothing is synced with fsync off.)
  auto child = ChildProcess::start(
      command_line({bin_dir_ + "/postgres", "-D", data_directory(), "-p", std::to_string(port_), "-k", dir_, "-c",
                    "listen_addresses=127.0.0.1", "-c", options_.fsync ? "fsync=on" : "fsync=off", "-c",
                    "max_connections=100", "-c", "shared_buffers=32MB", "-c", "dynamic_shared_memory_type=mmap",
                    "-c", "recovery_init_sync_method=syncfs"}),
      child_options);
  if (!child) return child.status();
  process_ = std::move(child).value();

  const std::string ping = conninfo(port_, "postgres");
  const auto deadline = SteadyTime::now() + ready_timeout;
  while (SteadyTime::now() < deadline) {
    if (!process_->running()) {
      kill();  // collects any backend it left
      return Status::unavailable(fmt::format("postgres on port {} exited: {}", port_, log_tail()));
    }
    // The lock file names the server that answers: with a port taken by
    // another test's server, PQping alone would answer for that one.
    if (postmaster_says_ready() && PQping(ping.c_str()) == PQPING_OK) return Status::ok();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  kill();
  return Status::deadline_exceeded(fmt::format("postgres on port {} did not accept connections within {} ms: {}",
                                               port_, ready_timeout.count(), log_tail()));
}

pid_t PostgresServer::postmaster_pid() const {
  if (!running()) return -1;
  // postmaster.pid's first line; a killed server's stale file names a dead
  // process, or one that is not the child of this server's runuser.
  const auto lines = file_lines(data_directory() + "/postmaster.pid");
  if (lines.empty()) return -1;
  const auto pid = parse_integer(lines[0]);
  if (!pid || *pid <= 0) return -1;
  const auto postmaster = static_cast<pid_t>(*pid);
  if (!run_as_service_user_) return postmaster == process_->pid() ? postmaster : -1;
  const auto info = process_info(postmaster);
  return info && info->state != 'Z' && info->parent == process_->pid() ? postmaster : -1;
}

bool PostgresServer::postmaster_says_ready() const {
  // The eighth line is the postmaster's state ("starting", "ready",
  // "stopping"), padded with spaces.
  const auto lines = file_lines(data_directory() + "/postmaster.pid");
  return lines.size() >= 8 && lines[7].rfind("ready", 0) == 0 && postmaster_pid() > 0;
}

std::string PostgresServer::uri(const std::string& database) const {
  return fmt::format("postgresql://{}@127.0.0.1:{}/{}", kSuperuser, port_, uri_encoded(database));
}

bool PostgresServer::running() const { return process_ && process_->running(); }

void PostgresServer::kill() {
  // Stopped first, the postmaster forks no new backend while they are
  // being killed, and killed last, no backend outlives it to log its
  // death: all of them vanish at once, as in a crash.
  const pid_t postmaster = postmaster_pid();
  if (postmaster > 0) {
    ::kill(postmaster, SIGSTOP);
    (void)wait_until_stopped(postmaster, std::chrono::seconds(1));
  }
  // Only the server's user's: a shell of someone else's that stands in the
  // directory is not part of the server.
  const auto ours = [this](pid_t pid) {
    struct stat owner {};
    return ::stat(fmt::format("/proc/{}", pid).c_str(), &owner) == 0 && owner.st_uid == server_uid_;
  };
  const std::vector<pid_t> cluster = processes_working_in(data_directory());
  for (const pid_t pid : cluster) {
    if (pid != postmaster && ours(pid)) ::kill(pid, SIGKILL);
  }
  const auto deadline = SteadyTime::now() + kKillTimeout;
  if (process_ && run_as_service_user_) {
    // runuser must reap the postmaster: killed with it, the postmaster
    // would be left to init, and until init reaps it (which can take
    // seconds) its pid counts as a live postmaster, so a restart refuses
    // the data directory. So the postmaster (runuser's child, also before
    // it has moved into the data directory or when runuser has only just
    // forked it) dies first, and runuser, which stopped itself when the
    // postmaster stopped, is let go on to see the exit.
    while (process_->running() && SteadyTime::now() < deadline) {
      for (const pid_t child : children_of(process_->pid())) ::kill(child, SIGKILL);
      process_->send_signal(SIGCONT);
      (void)process_->wait_for_exit(std::chrono::milliseconds(5));
    }
  }
  if (process_) process_->kill_and_wait();  // the postmaster itself when run directly
  process_.reset();
  // The killed backends belong to init now; wait until they are gone, so a
  // restart finds the shared memory free and the port closed.
  for (const pid_t pid : cluster) {
    while (alive(pid) && ours(pid) && SteadyTime::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
}

Status PostgresServer::stop(std::chrono::milliseconds timeout) {
  const pid_t postmaster = postmaster_pid();
  if (postmaster <= 0) {
    kill();  // not running (or not yet up): collect whatever is left
    return Status::ok();
  }
  // SIGINT to the postmaster itself: runuser would turn a signal sent to it
  // into SIGTERM, a "smart" shutdown that waits for every client to leave.
  ::kill(postmaster, SIGINT);
  if (process_->wait_for_exit(timeout)) {
    process_.reset();
    return Status::ok();
  }
  kill();
  return Status::deadline_exceeded(fmt::format("postgres on port {} did not shut down within {} ms; killed it: {}",
                                               port_, timeout.count(), log_tail()));
}

Status PostgresServer::restart(std::chrono::milliseconds ready_timeout) {
  if (Status stopped = stop(); !stopped) return stopped;
  return launch(ready_timeout);
}

Status PostgresServer::create_database(const std::string& name) {
  if (name.empty() || name.find('\0') != std::string::npos) {
    return Status::invalid_argument("a database name must be non-empty and hold no NUL character");
  }
  if (!running()) return Status::failed_precondition("PostgreSQL is not running");
  return execute_as_superuser(port_, "postgres", "CREATE DATABASE " + quoted_identifier(name));
}

void PostgresServer::remove_leftover_shared_memory() {
  // A server that shut down removed its segment and its postmaster.pid. A
  // killed one leaves both; the file's seventh line is "KEY SHMID". The
  // segment is small, but the system allows only so many.
  const auto lines = file_lines(data_directory() + "/postmaster.pid");
  if (lines.size() < 7) return;
  std::istringstream fields(lines[6]);
  long long key = 0;
  int shmid = -1;
  if (!(fields >> key >> shmid) || shmid < 0) return;
  shmid_ds segment{};
  if (shmctl(shmid, IPC_STAT, &segment) != 0) return;
  // The same key and no process attached: the segment is this cluster's,
  // and unused (the id may have been reused by now).
  if (segment.shm_perm.__key == static_cast<key_t>(key) && segment.shm_nattch == 0) shmctl(shmid, IPC_RMID, nullptr);
}

std::string PostgresServer::log_tail() const { return file_tail(dir_ + "/server.log"); }

}  // namespace rapidqa::testing

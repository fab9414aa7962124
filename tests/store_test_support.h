// What the store tests share: scratch folders, entries, opening stores and
// engines, and the two backends a store case runs on. STORE_TEST_CASE
// defines one case twice, "... (SQLite)" tagged [sqlite] on a file in a
// scratch folder and "... (PostgreSQL)" tagged [postgres] on a database of a
// private server (tests/support/postgres_server.h), so both stores are held
// to the same behaviour.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>
#include <utility>

#include <catch2/catch.hpp>

#include "rapidqa/knowledge_store.h"
#include "rapidqa/qa_engine.h"
#include "support/postgres_server.h"

namespace rapidqa::testing {

// A fresh folder per test, removed after.
struct ScratchDir {
  std::filesystem::path path;
  explicit ScratchDir(const std::string& name)
      : path(std::filesystem::temp_directory_path() / ("rapidqa-store-" + name + "-" + std::to_string(::getpid()))) {
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~ScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  std::string uri(const std::string& file = "kb.db") const { return "sqlite:" + (path / file).string(); }
};

inline KnowledgeEntry faq(const std::string& id, const std::string& question, const std::string& answer) {
  KnowledgeEntry e;
  e.id = id;
  e.question = question;
  e.answer = answer;
  return e;
}

inline std::unique_ptr<KnowledgeStore> open_store(const std::string& uri, bool read_only = false) {
  KnowledgeStoreOptions options;
  options.read_only = read_only;
  auto store = KnowledgeStore::open(uri, options);
  INFO(store.status().to_string());
  REQUIRE(store);
  return std::move(store).value();
}

inline std::unique_ptr<QAEngine> engine_on(const std::string& uri) {
  EngineOptions options;
  options.knowledge_store = uri;
  auto engine = QAEngine::create(std::move(options));
  INFO(engine.status().to_string());
  REQUIRE(engine);
  return std::move(engine).value();
}

// A private PostgreSQL server for one test. Without PostgreSQL the test
// fails and says so, rather than skip: the shared store would go untested.
inline std::unique_ptr<PostgresServer> start_postgres(const PostgresServerOptions& options = {}) {
  auto server = PostgresServer::start(options);
  INFO("starting PostgreSQL (scripts/setup.sh installs postgresql-15 and creates the user rapidqa-pg): "
       << server.status().to_string());
  REQUIRE(server);
  return std::move(server).value();
}

// Where a shared store case runs: scratch files either way, and the store
// itself in a SQLite file or in a private server's database.
class StoreBackend {
 public:
  static std::unique_ptr<StoreBackend> sqlite(const std::string& name) {
    return std::unique_ptr<StoreBackend>(new StoreBackend(name, nullptr));
  }
  static std::unique_ptr<StoreBackend> postgres(const std::string& name) {
    // Commits are durable without fsync as long as the machine stays up,
    // which is all a test needs; the crash cases kill processes, not power.
    PostgresServerOptions options;
    options.fsync = false;
    return std::unique_ptr<StoreBackend>(new StoreBackend(name, start_postgres(options)));
  }

  const std::filesystem::path& scratch() const { return dir_.path; }
  // The store's URI: the same store at every call.
  std::string uri() const { return server_ ? server_->uri() : dir_.uri(); }
  bool is_postgres() const { return server_ != nullptr; }
  PostgresServer* server() const { return server_.get(); }

 private:
  StoreBackend(const std::string& name, std::unique_ptr<PostgresServer> server)
      : dir_(name), server_(std::move(server)) {}
  ScratchDir dir_;
  std::unique_ptr<PostgresServer> server_;
};

}  // namespace rapidqa::testing

// STORE_TEST_CASE(function, "what it checks", "[tags]") { ...uses backend... }
#define STORE_TEST_CASE(function, description, tags)                             \
  static void function(rapidqa::testing::StoreBackend& backend);               \
  TEST_CASE(description " (SQLite)", tags "[sqlite]") {                        \
    auto backend = rapidqa::testing::StoreBackend::sqlite(#function);          \
    function(*backend);                                                        \
  }                                                                            \
  TEST_CASE(description " (PostgreSQL)", tags "[postgres]") {                  \
    auto backend = rapidqa::testing::StoreBackend::postgres(#function);        \
    function(*backend);                                                        \
  }                                                                            \
  static void function(rapidqa::testing::StoreBackend& backend)

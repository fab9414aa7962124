// What only a shared store does, on a real PostgreSQL server started for
// each case (tests/support/postgres_server.h): several writers at once
// count one entry's versions without gaps, instances on one store converge
// on the latest version whoever wrote it (in one process and across
// processes), and an engine whose server is killed under it keeps answering
// from memory, refuses writes without acknowledging them, and recovers.
// The cases both stores share are in store_test.cpp (STORE_TEST_CASE).
#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "rapidqa/knowledge_store.h"
#include "rapidqa/qa_engine.h"
#include "store_test_support.h"
#include "support/child_process.h"

using rapidqa::KnowledgeEntry;
using rapidqa::KnowledgeStore;
using rapidqa::QAEngine;
using rapidqa::StatusCode;
using rapidqa::StoreChange;
using rapidqa::testing::engine_on;
using rapidqa::testing::faq;
using rapidqa::testing::open_store;
using rapidqa::testing::start_postgres;

namespace {

// Polls `condition` until it holds or `timeout` passes.
bool eventually(const std::function<bool()>& condition,
                std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < until) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return condition();
}

std::uint64_t version_in(const QAEngine& engine, const std::string& id) {
  auto entry = engine.entry(id);
  return entry ? entry->version : 0;
}

}  // namespace

TEST_CASE("Writers on several connections at once number one entry's versions without gaps", "[postgres]") {
  auto server = start_postgres();
  {
    auto first = open_store(server->uri());
    REQUIRE(first->commit({StoreChange::add(faq("shared", "What is shared?", "version 1"))}));
  }
  constexpr int kWriters = 6;
  constexpr int kUpdatesEach = 40;
  std::vector<std::thread> writers;
  std::atomic<int> failures{0};
  for (int w = 0; w < kWriters; ++w) {
    writers.emplace_back([&, w] {
      auto opened = KnowledgeStore::open(server->uri());
      if (!opened) {
        ++failures;
        return;
      }
      for (int i = 0; i < kUpdatesEach; ++i) {
        const std::string answer = "writer " + std::to_string(w) + " update " + std::to_string(i);
        if (!(*opened)->commit({StoreChange::update(faq("shared", "What is shared?", answer))})) ++failures;
      }
    });
  }
  for (auto& t : writers) t.join();
  CHECK(failures == 0);

  auto store = open_store(server->uri());
  auto history = store->history("shared");
  REQUIRE(history);
  REQUIRE(history->size() == 1 + kWriters * kUpdatesEach);
  std::map<std::string, int> answers;
  for (std::size_t i = 0; i < history->size(); ++i) {
    CHECK(history->at(i).version == i + 1);
    ++answers[history->at(i).entry.answer];
  }
  CHECK(answers.size() == history->size());  // every update is one version of its own
  auto current = store->load_current({"shared", "absent"});
  REQUIRE(current);
  REQUIRE(current->size() == 1);
  CHECK(current->at(0).version == history->back().version);
}

TEST_CASE("Two engines on one store converge on the latest version of an entry both write", "[postgres]") {
  auto server = start_postgres();
  auto a = engine_on(server->uri());
  auto b = engine_on(server->uri());
  REQUIRE(a->add_entry(faq("hours", "When are you open?", "9 to 5")).is_ok());
  // b hears of a's commit from the store and serves it.
  REQUIRE(eventually([&] { return version_in(*b, "hours") == 1; }));
  auto answer = b->ask("When are you open?");
  REQUIRE(answer);
  CHECK(answer->text == "9 to 5");
  REQUIRE(b->ask("When are you open?")->tier == rapidqa::AnswerTier::kResultCache);

  // Both write the entry at once, many times; whoever commits last wins
  // everywhere, and b's cached answer is not served past a's change.
  std::thread writer_a([&] {
    for (int i = 0; i < 30; ++i) (void)a->update_entry(faq("hours", "When are you open?", "a says " + std::to_string(i)));
  });
  std::thread writer_b([&] {
    for (int i = 0; i < 30; ++i) (void)b->update_entry(faq("hours", "When are you open?", "b says " + std::to_string(i)));
  });
  writer_a.join();
  writer_b.join();
  auto store = open_store(server->uri(), /*read_only=*/true);
  auto latest = store->load_current({"hours"});
  REQUIRE(latest);
  REQUIRE(latest->size() == 1);
  CHECK(latest->at(0).version == 61);
  for (QAEngine* engine : {a.get(), b.get()}) {
    REQUIRE(eventually([&] { return version_in(*engine, "hours") == 61; }));
    auto served = engine->ask("When are you open?");
    REQUIRE(served);
    CHECK(served->text == latest->at(0).answer);
    REQUIRE_FALSE(served->matches.empty());
    CHECK(served->matches[0].version == 61);
  }

  // A removal and a rollback travel the same way.
  REQUIRE(a->remove_entry("hours").is_ok());
  REQUIRE(eventually([&] { return b->entry_count() == 0; }));
  auto rolled = b->rollback_entry("hours", 1);
  REQUIRE(rolled);
  CHECK(rolled->version == 63);
  REQUIRE(eventually([&] { return version_in(*a, "hours") == 63; }));
  CHECK(a->entry("hours")->answer == "9 to 5");
  // A stale write is refused by the store, not applied over the latest.
  CHECK(a->add_entry(faq("hours", "When?", "dup")).code() == StatusCode::kAlreadyExists);
}

TEST_CASE("Engines in two processes converge through the store", "[postgres]") {
  auto server = start_postgres();
  auto local = engine_on(server->uri());
  REQUIRE(local->add_entry(faq("slot0", "what does slot zero say", "the first word")).is_ok());
  // rapidqa-store-writer makes numbered changes to slot0..slot24 in its own
  // process; this engine follows every one it acknowledged.
  rapidqa::testing::ChildOptions options;
  options.pipe_stdio = true;
  auto child = rapidqa::testing::ChildProcess::start({RAPIDQA_STORE_WRITER, "write", server->uri(), "25"}, options);
  REQUIRE(child);
  auto ready = (*child)->read_line(std::chrono::seconds(30));
  REQUIRE(ready);
  REQUIRE(*ready == "ready");
  std::string last_line;
  for (int i = 0; i < 60; ++i) {
    auto line = (*child)->read_line(std::chrono::seconds(30));
    REQUIRE(line);
    last_line = *line;
  }
  (*child)->kill_and_wait();
  while (auto line = (*child)->read_line(std::chrono::seconds(2))) last_line = *line;
  INFO("the writer's last acknowledged change: " << last_line);

  auto store = open_store(server->uri(), /*read_only=*/true);
  auto current = store->load_current();
  REQUIRE(current);
  REQUIRE(eventually([&] {
    if (local->entry_count() != current->size()) return false;
    for (const auto& e : *current) {
      if (version_in(*local, e.id) != e.version) return false;
    }
    return true;
  }));
  for (const auto& e : *current) {
    auto answer = local->ask(e.question);
    REQUIRE(answer);
    CHECK(answer->text == e.answer);
  }
}

TEST_CASE("A server killed under a running engine: answers from memory, writes refused unacknowledged, then recovery",
          "[postgres][crash]") {
  auto server = start_postgres();
  auto engine = engine_on(server->uri());
  for (int slot = 0; slot < 10; ++slot) {
    REQUIRE(engine->add_entry(faq("slot" + std::to_string(slot), "what is in slot " + std::to_string(slot),
                                  "nothing yet"))
                .is_ok());
  }

  // A writer thread makes numbered changes the whole time and records which
  // were acknowledged; the server is killed and restarted three times.
  std::mutex mu;
  std::map<int, std::string> acknowledged;  // change number -> slot
  int refused = 0;
  std::vector<std::string> wrong_refusals;  // refusals that were not kUnavailable
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    for (int n = 0; !stop; ++n) {
      const std::string slot = "slot" + std::to_string(n % 10);
      const rapidqa::Status s =
          engine->update_entry(faq(slot, "what is in " + std::string("slot ") + std::to_string(n % 10),
                                   "change " + std::to_string(n)));
      std::lock_guard<std::mutex> lock(mu);
      if (s.is_ok()) {
        acknowledged[n] = slot;
      } else if (s.code() == StatusCode::kUnavailable) {
        ++refused;
      } else {
        wrong_refusals.push_back(s.to_string());
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  });

  for (int outage = 0; outage < 3; ++outage) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    server->kill();
    // While the server is down the engine answers from memory, and a write
    // is refused and changes nothing.
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    auto before = engine->entry("slot3");
    REQUIRE(before);
    auto answer = engine->ask("what is in slot 3");
    REQUIRE(answer);
    CHECK(answer->text == before->answer);
    const rapidqa::Status during = engine->update_entry(faq("slot3", "what is in slot 3", "never acknowledged"));
    CHECK(during.code() == StatusCode::kUnavailable);
    CHECK(engine->entry("slot3")->version == before->version);
    INFO(server->log_tail());
    REQUIRE(server->restart().is_ok());
    // The engine reconnects by itself: a write succeeds again.
    REQUIRE(eventually([&] { return engine->update_entry(faq("slot9", "what is in slot 9", "back")).is_ok(); }));
  }
  stop = true;
  writer.join();

  std::lock_guard<std::mutex> lock(mu);
  INFO(acknowledged.size() << " changes acknowledged, " << refused << " refused during the outages");
  CHECK(refused > 0);
  CHECK(wrong_refusals.empty());
  REQUIRE(acknowledged.size() > 10);
  auto store = open_store(server->uri(), /*read_only=*/true);
  // Every acknowledged change is in its slot's history.
  std::map<std::string, std::vector<rapidqa::EntryVersion>> histories;
  for (int slot = 0; slot < 10; ++slot) {
    const std::string id = "slot" + std::to_string(slot);
    auto history = store->history(id);
    REQUIRE(history);
    histories[id] = std::move(history).value();
  }
  for (const auto& [n, slot] : acknowledged) {
    bool found = false;
    for (const auto& v : histories[slot]) found |= v.entry.answer == "change " + std::to_string(n);
    INFO("change " << n);
    CHECK(found);
  }
  for (const auto& [id, history] : histories) {
    for (const auto& v : history) CHECK(v.entry.answer != "never acknowledged");
  }
  // Memory and store agree once the engine has caught up.
  auto current = store->load_current();
  REQUIRE(current);
  REQUIRE(eventually([&] {
    for (const auto& e : *current) {
      if (version_in(*engine, e.id) != e.version) return false;
    }
    return true;
  }));
}

TEST_CASE("Changes made while an engine's connection was down are followed once it is back", "[postgres]") {
  auto server = start_postgres();
  auto engine = engine_on(server->uri());
  REQUIRE(engine->add_entry(faq("hours", "When are you open?", "9 to 5")).is_ok());
  server->kill();
  REQUIRE(server->restart().is_ok());
  // Another writer changes the entry right after the restart, perhaps
  // before the engine's watch is listening again: the resync after the
  // reconnection finds it either way.
  {
    auto other = open_store(server->uri());
    REQUIRE(other->commit({StoreChange::update(faq("hours", "When are you open?", "8 to 8"))}));
  }
  REQUIRE(eventually([&] { return version_in(*engine, "hours") == 2; }, std::chrono::seconds(20)));
  auto answer = engine->ask("When are you open?");
  REQUIRE(answer);
  CHECK(answer->text == "8 to 8");
}

TEST_CASE("Unreachable servers, bad URIs and passwords in messages", "[postgres]") {
  auto refused = KnowledgeStore::open("postgresql://rapidqa:s3cret@127.0.0.1:1/none?connect_timeout=2");
  REQUIRE_FALSE(refused);
  CHECK(refused.status().code() == StatusCode::kUnavailable);
  CHECK(refused.status().message().find("s3cret") == std::string::npos);
  CHECK(refused.status().message().find("127.0.0.1") != std::string::npos);

  auto server = start_postgres();
  auto missing = KnowledgeStore::open(server->uri("no_such_database"));
  REQUIRE_FALSE(missing);
  CHECK(missing.status().message().find("no_such_database") != std::string::npos);

  // A read-only open of an empty database says so; writes through a
  // read-only store are refused.
  rapidqa::KnowledgeStoreOptions read_only;
  read_only.read_only = true;
  auto empty = KnowledgeStore::open(server->uri(), read_only);
  REQUIRE_FALSE(empty);
  CHECK(empty.status().code() == StatusCode::kFailedPrecondition);
  auto writer = open_store(server->uri());
  REQUIRE(writer->commit({StoreChange::add(faq("a", "Question a?", "Answer a"))}));
  auto reader = open_store(server->uri(), /*read_only=*/true);
  CHECK(reader->commit({StoreChange::remove("a")}).status().code() == StatusCode::kFailedPrecondition);
  auto stats = reader->stats();
  REQUIRE(stats);
  CHECK(stats->current_entries == 1);
  CHECK(stats->schema_version == 2);
  CHECK(stats->bytes > 0);
}

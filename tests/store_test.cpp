// The knowledge stores and an engine on them: versions and history from the
// store, commit-first changes, import and export, and crash safety under
// SIGKILL (the [crash] cases; RAPIDQA_CRASH_KILLS sets how many kills), on
// both SQLite and PostgreSQL (STORE_TEST_CASE); then SQLite's own: one
// writer per file, damaged and read-only files, a full disk.
// postgres_store_test.cpp has what only a shared store does.
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "common/checksum.h"
#include "rapidqa/hashing_encoder.h"
#include "rapidqa/knowledge_store.h"
#include "rapidqa/qa_engine.h"
#include "store_test_support.h"
#include "support/child_process.h"

namespace fs = std::filesystem;
using rapidqa::EngineOptions;
using rapidqa::KnowledgeEntry;
using rapidqa::KnowledgeStore;
using rapidqa::QAEngine;
using rapidqa::StatusCode;
using rapidqa::StoreChange;
using rapidqa::testing::engine_on;
using rapidqa::testing::faq;
using rapidqa::testing::open_store;
using rapidqa::testing::ScratchDir;

namespace {

nlohmann::json run_writer(const std::vector<std::string>& args) {
  std::vector<std::string> argv{RAPIDQA_STORE_WRITER};
  argv.insert(argv.end(), args.begin(), args.end());
  rapidqa::testing::ChildOptions options;
  options.pipe_stdio = true;
  auto child = rapidqa::testing::ChildProcess::start(argv, options);
  REQUIRE(child);
  auto line = (*child)->read_line(std::chrono::seconds(60));
  REQUIRE(line);
  return nlohmann::json::parse(*line);
}

}  // namespace

STORE_TEST_CASE(versions_and_history, "The store numbers each entry's versions and keeps its history", "[store]") {
  auto store = open_store(backend.uri());
  auto first = store->commit({StoreChange::add(faq("hours", "When are you open?", "9 to 5"))});
  REQUIRE(first);
  CHECK(first->at(0).version == 1);
  REQUIRE(store->commit({StoreChange::update(faq("hours", "When are you open?", "8 to 6"))}));
  REQUIRE(store->commit({StoreChange::remove("hours")}));
  // A re-added entry keeps counting, so no answer cached from version 1 or 2
  // can pass for the new one.
  auto again = store->commit({StoreChange::add(faq("hours", "When are you open?", "around the clock"))});
  REQUIRE(again);
  CHECK(again->at(0).version == 4);

  auto history = store->history("hours");
  REQUIRE(history);
  REQUIRE(history->size() == 4);
  CHECK(history->at(0).entry.answer == "9 to 5");
  CHECK(history->at(1).entry.answer == "8 to 6");
  CHECK(history->at(2).removed);
  CHECK(history->at(3).entry.answer == "around the clock");
  auto second = store->version_of("hours", 2);
  REQUIRE(second);
  CHECK(second->entry.answer == "8 to 6");
  CHECK(store->version_of("hours", 9).status().code() == StatusCode::kNotFound);
  CHECK(store->history("never").status().code() == StatusCode::kNotFound);

  auto current = store->load_current();
  REQUIRE(current);
  REQUIRE(current->size() == 1);
  CHECK(current->at(0).version == 4);
}

STORE_TEST_CASE(batch_all_or_nothing, "A batch commits all or nothing, and a refused change names itself", "[store]") {
  auto store = open_store(backend.uri());
  REQUIRE(store->commit({StoreChange::add(faq("a", "Question a?", "Answer a"))}));
  auto refused = store->commit({StoreChange::add(faq("b", "Question b?", "Answer b")),
                                StoreChange::add(faq("a", "Question a again?", "Answer a again")),
                                StoreChange::update(faq("c", "Question c?", "Answer c"))});
  REQUIRE_FALSE(refused);
  CHECK(refused.status().code() == StatusCode::kAlreadyExists);
  CHECK(refused.status().message().find("change 2 of 3") != std::string::npos);
  auto current = store->load_current();
  REQUIRE(current);
  REQUIRE(current->size() == 1);  // "b" went with the refused batch
  CHECK(store->history("b").status().code() == StatusCode::kNotFound);
  CHECK(store->commit({StoreChange::update(faq("zz", "Q?", "A"))}).status().code() == StatusCode::kNotFound);
  CHECK(store->commit({StoreChange::add(faq("bad", "", "A"))}).status().code() == StatusCode::kInvalidArgument);
}

TEST_CASE("One process writes a store: a second writer is refused with the holder's pid, readers are not",
          "[store]") {
  ScratchDir dir("one-writer");
  auto writer = open_store(dir.uri());
  REQUIRE(writer->commit({StoreChange::add(faq("a", "Question a?", "Answer a"))}));
  auto second = KnowledgeStore::open(dir.uri());
  REQUIRE_FALSE(second);
  CHECK(second.status().code() == StatusCode::kFailedPrecondition);
  CHECK(second.status().message().find("process " + std::to_string(::getpid())) != std::string::npos);

  EngineOptions options;
  options.knowledge_store = dir.uri();
  auto engine = QAEngine::create(options);
  REQUIRE_FALSE(engine);
  CHECK(engine.status().code() == StatusCode::kFailedPrecondition);

  auto reader = open_store(dir.uri(), /*read_only=*/true);
  auto seen = reader->load_current();
  REQUIRE(seen);
  CHECK(seen->size() == 1);
  CHECK(reader->commit({StoreChange::remove("a")}).status().code() == StatusCode::kFailedPrecondition);

  writer.reset();  // the lock goes with the writer
  CHECK(KnowledgeStore::open(dir.uri()));
}

STORE_TEST_CASE(engine_restarts, "An engine on a store keeps its knowledge, versions and history across restarts",
                "[store]") {
  {
    auto engine = engine_on(backend.uri());
    CHECK(engine->entry_count() == 0);
    REQUIRE(engine->add_entry(faq("reset", "How do I reset my password?", "Use the reset link")).is_ok());
    REQUIRE(engine->add_entry(faq("hours", "When are you open?", "9 to 5")).is_ok());
    REQUIRE(engine->update_entry(faq("reset", "How do I reset my password?", "Ask support")).is_ok());
    REQUIRE(engine->remove_entry("hours").is_ok());
    CHECK(engine->add_entry(faq("reset", "Another?", "Dup")).code() == StatusCode::kAlreadyExists);
    CHECK(engine->update_entry(faq("nope", "Q?", "A")).code() == StatusCode::kNotFound);
  }
  auto engine = engine_on(backend.uri());
  CHECK(engine->entry_count() == 1);
  auto reset = engine->entry("reset");
  REQUIRE(reset);
  CHECK(reset->version == 2);
  CHECK(reset->answer == "Ask support");
  auto answer = engine->ask("How do I reset my password?");
  REQUIRE(answer);
  CHECK(answer->text == "Ask support");
  REQUIRE(answer->matches.size() >= 1);
  CHECK(answer->matches[0].version == 2);

  auto history = engine->entry_history("hours");
  REQUIRE(history);
  REQUIRE(history->size() == 2);
  CHECK(history->back().removed);
  auto stats = engine->store_stats();
  REQUIRE(stats);
  CHECK(stats->current_entries == 1);
  CHECK(stats->versions == 4);
  CHECK(stats->schema_version == 2);
}

STORE_TEST_CASE(rollback, "Rolling back makes a new version equal to the old one and drops the cached answers",
                "[store]") {
  auto engine = engine_on(backend.uri());
  REQUIRE(engine->add_entry(faq("reset", "How do I reset my password?", "Use the reset link")).is_ok());
  REQUIRE(engine->update_entry(faq("reset", "How do I reset my password?", "Ask support")).is_ok());
  auto cached = engine->ask("How do I reset my password?");
  REQUIRE(cached);
  REQUIRE(engine->ask("How do I reset my password?")->tier == rapidqa::AnswerTier::kResultCache);

  auto rolled = engine->rollback_entry("reset", 1);
  REQUIRE(rolled);
  CHECK(rolled->version == 3);
  CHECK(rolled->answer == "Use the reset link");
  auto answer = engine->ask("How do I reset my password?");
  REQUIRE(answer);
  CHECK(answer->text == "Use the reset link");
  // The cached answer of version 2 is gone. The question may already be
  // cached again, re-answered in the background from version 3 (it was
  // hot), so the answer's version is what tells.
  REQUIRE_FALSE(answer->matches.empty());
  CHECK(answer->matches[0].version == 3);

  CHECK(engine->rollback_entry("reset", 7).status().code() == StatusCode::kNotFound);
  REQUIRE(engine->remove_entry("reset").is_ok());  // version 4: the removal
  auto restored = engine->rollback_entry("reset", 3);
  REQUIRE(restored);
  CHECK(restored->version == 5);
  CHECK(engine->entry_count() == 1);
  auto removed_again = engine->rollback_entry("reset", 4);
  REQUIRE(removed_again);
  CHECK(engine->entry_count() == 0);

  auto memory_only = QAEngine::create({});
  REQUIRE(memory_only);
  CHECK((*memory_only)->rollback_entry("reset", 1).status().code() == StatusCode::kFailedPrecondition);
  CHECK((*memory_only)->entry_history("reset").status().code() == StatusCode::kFailedPrecondition);
}

STORE_TEST_CASE(import_export, "Importing a knowledge file is all or nothing and keeps unchanged entries' versions",
                "[store]") {
  auto store = open_store(backend.uri());
  const std::string first = (backend.scratch() / "first.jsonl").string();
  std::ofstream(first) << R"({"id":"a","question":"Question a?","answer":"Answer a"})" "\n"
                       << R"({"id":"b","question":"Question b?","answer":"Answer b","tags":["x"]})" "\n";
  std::vector<std::pair<std::size_t, std::size_t>> progress;
  auto imported = rapidqa::import_knowledge_file(*store, first, {}, [&](std::size_t done, std::size_t total) {
    progress.emplace_back(done, total);
  });
  REQUIRE(imported);
  CHECK(imported->added == 2);
  REQUIRE_FALSE(progress.empty());
  CHECK(progress.back() == std::make_pair(std::size_t{2}, std::size_t{2}));

  const std::string second = (backend.scratch() / "second.jsonl").string();
  std::ofstream(second) << R"({"id":"b","question":"Question b?","answer":"Answer b","tags":["x"]})" "\n"
                        << R"({"id":"c","question":"Question c?","answer":"Answer c"})" "\n";
  auto replaced = rapidqa::import_knowledge_file(*store, second);
  REQUIRE(replaced);
  CHECK(replaced->added == 1);
  CHECK(replaced->unchanged == 1);
  CHECK(replaced->removed == 1);
  CHECK(store->version_of("b", 2).status().code() == StatusCode::kNotFound);  // b kept version 1

  const std::string bad = (backend.scratch() / "bad.jsonl").string();
  std::ofstream(bad) << R"({"id":"d","question":"Question d?","answer":"Answer d"})" "\n"
                     << R"({"id":"e","question":"Question e?"})" "\n";
  auto refused = rapidqa::import_knowledge_file(*store, bad);
  REQUIRE_FALSE(refused);
  CHECK(refused.status().message().find("line 2") != std::string::npos);
  auto current = store->load_current();
  REQUIRE(current);
  REQUIRE(current->size() == 2);  // b and c, untouched
  CHECK(current->at(0).id == "b");

  const std::string exported = (backend.scratch() / "export.jsonl").string();
  auto written = rapidqa::export_knowledge_file(*store, exported);
  REQUIRE(written);
  CHECK(*written == 2);
  auto round_trip = rapidqa::read_knowledge_file(exported);
  REQUIRE(round_trip);
  REQUIRE(round_trip->entries.size() == 2);
  CHECK(rapidqa::same_entry_content(round_trip->entries[0], current->at(0)));
  CHECK(rapidqa::same_entry_content(round_trip->entries[1], current->at(1)));
}

STORE_TEST_CASE(load_knowledge_imports, "load_knowledge on an engine with a store imports the file durably", "[store]") {
  {
    auto engine = engine_on(backend.uri());
    auto loaded = engine->load_knowledge(RAPIDQA_SOURCE_DIR "/examples/data/faq.jsonl");
    REQUIRE(loaded);
    CHECK(loaded->entries > 10);
  }
  auto engine = engine_on(backend.uri());
  auto file = rapidqa::read_knowledge_file(RAPIDQA_SOURCE_DIR "/examples/data/faq.jsonl");
  REQUIRE(file);
  CHECK(engine->entry_count() == file->entries.size());
  const KnowledgeEntry& some = file->entries.front();
  auto answer = engine->ask(some.question);
  REQUIRE(answer);
  CHECK(answer->text == some.answer);
}

TEST_CASE("A damaged or foreign file is refused at open and nothing is served from it", "[store][hostile]") {
  ScratchDir dir("damaged");
  const fs::path garbage = dir.path / "garbage.db";
  std::ofstream(garbage) << std::string(8192, 'Z');
  auto opened = KnowledgeStore::open("sqlite:" + garbage.string());
  REQUIRE_FALSE(opened);
  CHECK(opened.status().code() == StatusCode::kDataLoss);

  // A real store whose pages were overwritten in the middle.
  const fs::path damaged = dir.path / "kb.db";
  {
    auto store = open_store(dir.uri());
    std::vector<StoreChange> many;
    for (int i = 0; i < 400; ++i) {
      many.push_back(StoreChange::add(faq("id" + std::to_string(i), "Question number " + std::to_string(i) + "?",
                                          std::string(300, static_cast<char>('a' + i % 26)))));
    }
    REQUIRE(store->commit(many));
  }
  {
    auto checkpoint = open_store(dir.uri());  // closing the last connection folds the log into the file
  }
  REQUIRE(fs::file_size(damaged) > 16384);
  {
    std::fstream file(damaged, std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(8192);
    const std::string noise(4096, '\x5a');
    file.write(noise.data(), static_cast<std::streamsize>(noise.size()));
  }
  auto reopened = KnowledgeStore::open(dir.uri());
  REQUIRE_FALSE(reopened);
  CHECK(reopened.status().code() == StatusCode::kDataLoss);
  EngineOptions options;
  options.knowledge_store = dir.uri();
  auto engine = QAEngine::create(options);
  REQUIRE_FALSE(engine);
  CHECK(engine.status().code() == StatusCode::kDataLoss);

  // Another program's database is left alone, not given our tables.
  const fs::path foreign = dir.path / "foreign.db";
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(foreign.string().c_str(), &db) == SQLITE_OK);
  REQUIRE(sqlite3_exec(db, "CREATE TABLE invoices(id INTEGER)", nullptr, nullptr, nullptr) == SQLITE_OK);
  sqlite3_close(db);
  auto other = KnowledgeStore::open("sqlite:" + foreign.string());
  REQUIRE_FALSE(other);
  CHECK(other.status().code() == StatusCode::kFailedPrecondition);
  CHECK(other.status().message().find("not a knowledge store") != std::string::npos);
  CHECK(KnowledgeStore::open("unknown:" + foreign.string()).status().code() == StatusCode::kInvalidArgument);
}

TEST_CASE("A read-only database file is refused at open with the reason", "[store][hostile]") {
  ScratchDir dir("read-only");
  {
    auto store = open_store(dir.uri());
    REQUIRE(store->commit({StoreChange::add(faq("a", "Question a?", "Answer a"))}));
  }
  // Another user than root (the writer drops to nobody when run as root)
  // may use the folder and the lock file but not write the database.
  fs::permissions(dir.path, fs::perms::all);
  fs::permissions(dir.path / "kb.db.lock", fs::perms::all);
  fs::permissions(dir.path / "kb.db", fs::perms::owner_read | fs::perms::group_read | fs::perms::others_read);
  auto report = run_writer({"open", dir.uri(), "65534"});
  CHECK_FALSE(report["ok"].get<bool>());
  CHECK(report["code"] == "io_error");
  CHECK(report["message"].get<std::string>().find("read-only") != std::string::npos);
}

TEST_CASE("A full disk fails the update with the reason and changes nothing in memory or the caches",
          "[store][hostile]") {
  ScratchDir dir("full-disk");
  {
    auto engine = engine_on(dir.uri());
    REQUIRE(engine->add_entry(faq("slot0", "What does slot zero hold?", "The first answer")).is_ok());
  }
  auto report = run_writer({"full-disk", dir.uri(), "65536"});
  INFO(report.dump());
  CHECK_FALSE(report["update_ok"].get<bool>());
  CHECK((report["update_code"] == "io_error" || report["update_code"] == "resource_exhausted"));
  CHECK(report["version_after"] == report["version_before"]);
  CHECK(report["answer_before"] == "The first answer");
  CHECK(report["answer_after"] == "The first answer");
  CHECK(report["tier_after"] == "result_cache");  // the cached answer was not dropped: nothing changed

  auto store = open_store(dir.uri());
  auto history = store->history("slot0");
  REQUIRE(history);
  CHECK(history->size() == 1);
}

namespace {

// What the writer acknowledged: change number -> (kind, slot).
struct Acknowledged {
  std::string kind;
  std::string slot;
};

std::string number_in(const std::string& text, const std::string& before) {
  const auto at = text.find(before);
  if (at == std::string::npos) return "";
  const auto start = at + before.size();
  const auto end = text.find_first_not_of("0123456789", start);
  return text.substr(start, end - start);
}

// Checks the store against every acknowledged change: each put is in its
// slot's history with every field, each removal is there after the put
// before it, versions count 1, 2, 3 ... without gaps, every version's
// fields name one change, and the current entry is the last version.
void check_store_holds(const std::string& uri, const std::map<unsigned long long, Acknowledged>& acked) {
  auto store = open_store(uri, /*read_only=*/true);
  std::map<std::string, std::vector<rapidqa::EntryVersion>> histories;
  for (int slot = 0; slot < 25; ++slot) {
    const std::string id = "slot" + std::to_string(slot);
    auto history = store->history(id);
    if (history) histories[id] = std::move(history).value();
  }
  std::map<std::string, std::uint64_t> last_put_version;
  for (const auto& [n, ack] : acked) {
    INFO("change " << n << " " << ack.kind << " " << ack.slot);
    auto& history = histories[ack.slot];
    REQUIRE_FALSE(history.empty());
    if (ack.kind == "put") {
      std::uint64_t found = 0;
      for (const auto& v : history) {
        if (!v.removed && v.entry.answer == "answer " + std::to_string(n)) found = v.version;
      }
      REQUIRE(found > 0);
      CHECK(found > last_put_version[ack.slot]);
      last_put_version[ack.slot] = found;
    } else {
      bool removed_after = false;
      for (const auto& v : history) removed_after |= v.removed && v.version > last_put_version[ack.slot];
      CHECK(removed_after);
    }
  }
  auto current = store->load_current();
  REQUIRE(current);
  std::map<std::string, KnowledgeEntry> current_by_id;
  for (auto& e : *current) current_by_id[e.id] = e;
  for (const auto& [id, history] : histories) {
    INFO(id);
    for (std::size_t i = 0; i < history.size(); ++i) {
      const auto& v = history[i];
      CHECK(v.version == i + 1);
      if (v.removed) continue;
      const std::string n = number_in(v.entry.answer, "answer ");
      REQUIRE_FALSE(n.empty());
      CHECK(v.entry.question == "what does change " + n + " say");
      REQUIRE(v.entry.alternates.size() == 2);
      CHECK(v.entry.alternates[1] == "change " + n + " second phrasing");
      REQUIRE(v.entry.tags.size() == 1);
      CHECK(v.entry.tags[0] == "change-" + n);
    }
    const auto it = current_by_id.find(id);
    if (history.back().removed) {
      CHECK(it == current_by_id.end());
    } else {
      REQUIRE(it != current_by_id.end());
      CHECK(it->second.version == history.back().version);
      CHECK(it->second.answer == history.back().entry.answer);
    }
  }
}

int crash_kills() {
  const char* configured = std::getenv("RAPIDQA_CRASH_KILLS");
  return configured ? std::max(1, std::atoi(configured)) : 20;
}

}  // namespace

STORE_TEST_CASE(crash_safety, "Every acknowledged change survives SIGKILL at random moments, none half-applied",
                "[store][crash]") {
  const int kills = crash_kills();
  std::mt19937 random(20240611u);
  std::map<unsigned long long, Acknowledged> acked;
  unsigned long long next = 0;
  int killed_before_ready = 0;
  for (int round = 0; round < kills; ++round) {
    rapidqa::testing::ChildOptions options;
    options.pipe_stdio = true;
    auto child = rapidqa::testing::ChildProcess::start({RAPIDQA_STORE_WRITER, "write", backend.uri(), std::to_string(next)},
                                                       options);
    REQUIRE(child);
    // One round in five dies while the engine opens the store (recovery,
    // the integrity check, the load); the rest after a random stretch of
    // changes.
    if (random() % 5 == 0) {
      std::this_thread::sleep_for(std::chrono::microseconds(random() % 20000));
      ++killed_before_ready;
    } else {
      auto ready = (*child)->read_line(std::chrono::seconds(30));
      REQUIRE(ready);
      REQUIRE(*ready == "ready");
      std::this_thread::sleep_for(std::chrono::microseconds(random() % 40000));
    }
    (*child)->kill_and_wait();
    // What was printed before the kill is still in the pipe.
    while (auto line = (*child)->read_line(std::chrono::seconds(5))) {
      if (*line == "ready") continue;
      std::istringstream fields(*line);
      unsigned long long n = 0;
      Acknowledged ack;
      fields >> n >> ack.kind >> ack.slot;
      REQUIRE((ack.kind == "put" || ack.kind == "remove"));
      acked[n] = ack;
      next = n + 1;
    }
  }
  INFO(acked.size() << " acknowledged changes over " << kills << " kills (" << killed_before_ready
                    << " while opening)");
  REQUIRE(acked.size() > static_cast<std::size_t>(kills));
  check_store_holds(backend.uri(), acked);
  if (std::getenv("RAPIDQA_CRASH_KILLS")) {  // scripts/crash-check.sh reports what was checked
    std::cout << "crash check (" << (backend.is_postgres() ? "PostgreSQL" : "SQLite") << "): " << acked.size() << " acknowledged changes over " << kills << " SIGKILLs ("
              << killed_before_ready << " while the engine was opening the store), all present and whole\n";
  }

  // The engine answers from the latest versions.
  auto store = open_store(backend.uri(), /*read_only=*/true);
  auto current = store->load_current();
  REQUIRE(current);
  store.reset();
  auto engine = engine_on(backend.uri());
  CHECK(engine->entry_count() == current->size());
  for (const auto& e : *current) {
    auto answer = engine->ask(e.question);
    REQUIRE(answer);
    CHECK(answer->text == e.answer);
    REQUIRE_FALSE(answer->matches.empty());
    CHECK(answer->matches[0].version == e.version);
  }
}

namespace {

// The built-in encoder, counting the texts it encodes, so a test can tell
// a restart that read its vectors from one that encoded them.
class CountingEncoder final : public rapidqa::Encoder {
 public:
  // lightweight = false: the engine treats it as a model encoder (a
  // degraded path with a lexical mirror of the knowledge, a batcher).
  explicit CountingEncoder(rapidqa::HashingEncoderOptions options = {}, bool lightweight = true)
      : inner_(std::move(rapidqa::HashingEncoder::create(options)).value()), lightweight_(lightweight) {}
  std::size_t dimension() const override { return inner_->dimension(); }
  std::string name() const override { return inner_->name(); }
  bool is_lightweight() const override { return lightweight_; }
  rapidqa::Status encode(const std::vector<std::string>& texts, std::vector<float>& out) const override {
    encoded += texts.size();
    return inner_->encode(texts, out);
  }
  void adapt(const std::vector<std::string>& corpus) override { inner_->adapt(corpus); }
  std::string fingerprint() const override { return inner_->fingerprint(); }
  std::string learned_state() const override { return inner_->learned_state(); }
  rapidqa::Status restore_learned_state(const std::string& state) override {
    return inner_->restore_learned_state(state);
  }
  mutable std::atomic<std::size_t> encoded{0};

 private:
  std::unique_ptr<rapidqa::HashingEncoder> inner_;
  bool lightweight_;
};

std::unique_ptr<QAEngine> engine_with(const std::string& uri, std::shared_ptr<rapidqa::Encoder> encoder,
                                      std::vector<std::string>* log = nullptr) {
  EngineOptions options;
  options.knowledge_store = uri;
  options.encoder = std::move(encoder);
  options.rebuild_workers = 0;
  if (log) options.log = [log](rapidqa::LogLevel, const std::string& message) { log->push_back(message); };
  auto engine = QAEngine::create(std::move(options));
  INFO(engine.status().to_string());
  REQUIRE(engine);
  return std::move(engine).value();
}

bool logged(const std::vector<std::string>& log, const std::string& part) {
  return std::any_of(log.begin(), log.end(), [&](const std::string& line) { return line.find(part) != std::string::npos; });
}

// Overwrites the byte in the middle of a file, as a torn copy or a bad
// sector would.
void damage_middle_byte(const fs::path& path) {
  std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
  file.seekp(static_cast<std::streamoff>(fs::file_size(path) / 2));
  file.put('\x7f');
}

// Imports the bundled FAQ into the store through an engine, then closes
// the engine, which saves the vectors and the index snapshot beside it.
void store_faq_and_close(const std::string& uri) {
  auto engine = engine_on(uri);
  REQUIRE(engine->load_knowledge(RAPIDQA_SOURCE_DIR "/examples/data/faq.jsonl"));
}

// Every question of the bundled FAQ gets its own answer.
void check_faq_answers(QAEngine& engine) {
  auto file = rapidqa::read_knowledge_file(RAPIDQA_SOURCE_DIR "/examples/data/faq.jsonl");
  REQUIRE(file);
  for (const auto& e : file->entries) {
    auto answer = engine.ask(e.question);
    REQUIRE(answer);
    CHECK(answer->text == e.answer);
  }
}

}  // namespace

STORE_TEST_CASE(restart_reads_vectors,
                "A restart reads the vectors it saved instead of encoding, and encodes only what changed",
                "[store][restart]") {
  std::vector<KnowledgeEntry> entries;
  for (int i = 0; i < 60; ++i) {
    KnowledgeEntry e = faq("id" + std::to_string(i), "how do i do thing number " + std::to_string(i),
                           "do it like " + std::to_string(i));
    e.alternates = {"thing " + std::to_string(i) + " how to"};
    entries.push_back(e);
  }
  float first_score = 0;
  {
    auto encoder = std::make_shared<CountingEncoder>();
    auto engine = engine_with(backend.uri(), encoder);
    REQUIRE(engine->load_entries(entries));
    CHECK(encoder->encoded >= 120);
    auto answer = engine->ask("how do i do thing number 17");
    REQUIRE(answer);
    first_score = answer->score;
  }
  {
    // Same encoder: the learned state and every vector come from the store.
    auto encoder = std::make_shared<CountingEncoder>();
    std::vector<std::string> log;
    auto engine = engine_with(backend.uri(), encoder, &log);
    CHECK(encoder->encoded == 0);
    // A SQLite store keeps the index beside its file; a PostgreSQL one
    // reads the vectors and builds it.
    CHECK(logged(log, backend.is_postgres() ? "read the vectors of 60 of 60 entries"
                                            : "read the retrieval index of 60 entries"));
    auto answer = engine->ask("how do i do thing number 17");
    REQUIRE(answer);
    CHECK(answer->text == "do it like 17");
    CHECK(answer->score == Approx(first_score).margin(1e-6));
    // A change made now is saved with its vectors when the engine closes.
    REQUIRE(engine->update_entry(faq("id3", "how do i do thing number 3 now", "like this now")).is_ok());
  }
  {
    // Another writer changes one entry while no engine runs.
    auto store = open_store(backend.uri());
    REQUIRE(store->commit({StoreChange::update(faq("id5", "how do i do thing five", "five"))}));
  }
  {
    auto encoder = std::make_shared<CountingEncoder>();
    std::vector<std::string> log;
    auto engine = engine_with(backend.uri(), encoder, &log);
    CHECK(encoder->encoded == 1);  // id5's one phrasing; id3's vectors were saved at close
    CHECK(logged(log, backend.is_postgres() ? "read the vectors of 59 of 60 entries"
                                            : "read the retrieval index of 60 entries from"));
    CHECK(engine->ask("how do i do thing five")->text == "five");
    CHECK(engine->ask("how do i do thing number 3 now")->text == "like this now");
  }
  {
    // Another encoder (other options): everything is encoded again, and the
    // log says why.
    rapidqa::HashingEncoderOptions other;
    other.dimension = 256;
    auto encoder = std::make_shared<CountingEncoder>(other);
    std::vector<std::string> log;
    auto engine = engine_with(backend.uri(), encoder, &log);
    CHECK(encoder->encoded == 118);  // 58 entries of two phrasings, id3 and id5 of one
    CHECK(logged(log, "encoding all 60 entries: the store keeps no vectors made by this encoder"));
    CHECK(engine->ask("how do i do thing number 17")->text == "do it like 17");
  }
  auto stats = open_store(backend.uri(), /*read_only=*/true)->stats();
  REQUIRE(stats);
  // The encoder that learned anew dropped the vectors of the earlier one.
  CHECK(stats->stored_vectors == 60);
}

TEST_CASE("A store of an older layout is migrated at open and keeps its entries", "[store][sqlite]") {
  ScratchDir dir("migrate");
  const std::string path = (dir.path / "kb.db").string();
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  // Layout version 1, as rapidqa 0.2's first store wrote it.
  REQUIRE(sqlite3_exec(db,
                       "CREATE TABLE schema_version(version INTEGER NOT NULL);"
                       "INSERT INTO schema_version VALUES (1);"
                       "CREATE TABLE entry_versions(entry_id TEXT NOT NULL, version INTEGER NOT NULL,"
                       "  removed INTEGER NOT NULL, body TEXT NOT NULL, committed_at_ms INTEGER NOT NULL,"
                       "  PRIMARY KEY (entry_id, version)) WITHOUT ROWID;"
                       "CREATE TABLE current_entries(entry_id TEXT PRIMARY KEY, version INTEGER NOT NULL,"
                       "  body TEXT NOT NULL) WITHOUT ROWID;"
                       "INSERT INTO entry_versions VALUES ('hours', 1, 0,"
                       "  '{\"id\":\"hours\",\"question\":\"When are you open?\",\"answer\":\"9 to 5\"}', 0);"
                       "INSERT INTO current_entries VALUES ('hours', 1,"
                       "  '{\"id\":\"hours\",\"question\":\"When are you open?\",\"answer\":\"9 to 5\"}');",
                       nullptr, nullptr, nullptr) == SQLITE_OK);
  sqlite3_close(db);
  {
    // Read-only: read as it is, nothing migrated.
    auto reader = open_store(dir.uri(), /*read_only=*/true);
    CHECK(reader->stats()->schema_version == 1);
    CHECK(reader->load_vectors("any")->empty());
  }
  auto engine = engine_on(dir.uri());
  CHECK(engine->store_stats()->schema_version == 2);
  CHECK(engine->ask("When are you open?")->text == "9 to 5");
  CHECK(engine->store_stats()->stored_vectors == 1);
  // A layout newer than this library's is refused, untouched.
  engine.reset();
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  REQUIRE(sqlite3_exec(db, "UPDATE schema_version SET version = 99", nullptr, nullptr, nullptr) == SQLITE_OK);
  sqlite3_close(db);
  auto newer = KnowledgeStore::open(dir.uri());
  REQUIRE_FALSE(newer);
  CHECK(newer.status().code() == StatusCode::kFailedPrecondition);
  CHECK(newer.status().message().find("newer") != std::string::npos);
}

TEST_CASE("A damaged or foreign index snapshot is not used: the index is built from the stored vectors",
          "[store][restart][hostile]") {
  ScratchDir dir("snapshot");
  store_faq_and_close(dir.uri());
  const fs::path index = dir.path / "kb.db.index";
  REQUIRE(fs::exists(index));
  REQUIRE(fs::exists(dir.path / "kb.db.index.labels"));
  damage_middle_byte(index);
  auto encoder = std::make_shared<CountingEncoder>();
  std::vector<std::string> log;
  auto engine = engine_with(dir.uri(), encoder, &log);
  CHECK(logged(log, "the retrieval index snapshot is not used"));
  CHECK(logged(log, "read the vectors of"));
  CHECK(encoder->encoded == 0);
  check_faq_answers(*engine);
  // The index was saved again whole: the next start reads it.
  engine.reset();
  log.clear();
  auto again = engine_with(dir.uri(), std::make_shared<CountingEncoder>(), &log);
  CHECK(logged(log, "read the retrieval index of"));
}

TEST_CASE("A model encoder's engine reads its lexical mirror back at a restart instead of building it",
          "[store][restart][degradation]") {
  ScratchDir dir("lexical");
  const auto model_like = [] { return std::make_shared<CountingEncoder>(rapidqa::HashingEncoderOptions{}, false); };
  {
    auto engine = engine_with(dir.uri(), model_like());
    REQUIRE(engine->load_knowledge(RAPIDQA_SOURCE_DIR "/examples/data/faq.jsonl"));
  }
  for (const char* file : {"kb.db.index.lexical", "kb.db.index.lexical.labels", "kb.db.index.lexical.state"}) {
    INFO(file);
    CHECK(fs::exists(dir.path / file));
  }
  {
    std::vector<std::string> log;
    auto engine = engine_with(dir.uri(), model_like(), &log);
    CHECK(logged(log, "read the retrieval index of"));
    CHECK(logged(log, "read the lexical index of"));
    CHECK_FALSE(logged(log, "not used"));
    // A change after the restart reaches the mirror and the next save.
    KnowledgeEntry e;
    e.id = "parking";
    e.question = "Where can I park my car?";
    e.answer = "Level B2";
    REQUIRE(engine->add_entry(e).is_ok());
  }
  // A damaged state file: the mirror is built from the entries, and saved
  // again whole at close.
  damage_middle_byte(dir.path / "kb.db.index.lexical.state");
  {
    std::vector<std::string> log;
    auto engine = engine_with(dir.uri(), model_like(), &log);
    CHECK(logged(log, "the lexical index snapshot is not used"));
    CHECK(engine->ask("Where can I park my car?")->text == "Level B2");
  }
  std::vector<std::string> log;
  auto engine = engine_with(dir.uri(), model_like(), &log);
  CHECK(logged(log, "read the lexical index of"));
  CHECK_FALSE(logged(log, "not used"));
}

namespace {

template <typename T>
T take(const std::string& bytes, std::size_t& at) {
  T value;
  std::memcpy(&value, bytes.data() + at, sizeof value);
  at += sizeof value;
  return value;
}

template <typename T>
void put(std::string& out, T value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof value);
}

std::string file_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// An index snapshot's labels file (src/engine/knowledge_snapshot.cpp has
// the layout), taken apart to be edited and written back.
struct LabelsFile {
  std::string magic;
  std::uint64_t index_size = 0, index_checksum = 0;
  std::string fingerprint;
  std::int64_t next_label = 0;
  struct Entry {
    std::string id;
    std::uint64_t version = 0;
    std::vector<std::int64_t> labels;
  };
  std::vector<Entry> entries;

  static LabelsFile read(const fs::path& path) {
    const std::string bytes = file_bytes(path);
    LabelsFile f;
    f.magic = bytes.substr(0, 8);
    std::size_t at = 8;
    f.index_size = take<std::uint64_t>(bytes, at);
    f.index_checksum = take<std::uint64_t>(bytes, at);
    const auto fingerprint_bytes = take<std::uint32_t>(bytes, at);
    f.fingerprint = bytes.substr(at, fingerprint_bytes);
    at += fingerprint_bytes;
    f.next_label = take<std::int64_t>(bytes, at);
    const auto count = take<std::uint64_t>(bytes, at);
    for (std::uint64_t i = 0; i < count; ++i) {
      Entry e;
      const auto id_bytes = take<std::uint32_t>(bytes, at);
      e.id = bytes.substr(at, id_bytes);
      at += id_bytes;
      e.version = take<std::uint64_t>(bytes, at);
      for (auto n = take<std::uint32_t>(bytes, at); n > 0; --n) e.labels.push_back(take<std::int64_t>(bytes, at));
      f.entries.push_back(std::move(e));
    }
    REQUIRE(at + 8 == bytes.size());
    return f;
  }

  // Written with a valid checksum: only the reader's own checks stand
  // between the contents and the engine.
  void write(const fs::path& path) const {
    std::string out = magic;
    put<std::uint64_t>(out, index_size);
    put<std::uint64_t>(out, index_checksum);
    put<std::uint32_t>(out, static_cast<std::uint32_t>(fingerprint.size()));
    out += fingerprint;
    put<std::int64_t>(out, next_label);
    put<std::uint64_t>(out, entries.size());
    for (const Entry& e : entries) {
      put<std::uint32_t>(out, static_cast<std::uint32_t>(e.id.size()));
      out += e.id;
      put<std::uint64_t>(out, e.version);
      put<std::uint32_t>(out, static_cast<std::uint32_t>(e.labels.size()));
      for (const std::int64_t label : e.labels) put<std::int64_t>(out, label);
    }
    put<std::uint64_t>(out, rapidqa::detail::xxh64(out.data(), out.size()));
    std::ofstream(path, std::ios::binary | std::ios::trunc) << out;
  }
};

}  // namespace

TEST_CASE("A labels file of the first format is read and saved again in the current one",
          "[store][restart][snapshot]") {
  ScratchDir dir("labels-format1");
  store_faq_and_close(dir.uri());
  // Format 1, as an earlier rapidqa wrote it: the index named by the XXH64
  // of its whole file, the entries in no particular order (here reversed).
  const fs::path labels = dir.path / "kb.db.index.labels";
  LabelsFile file = LabelsFile::read(labels);
  REQUIRE(file.magic.compare(0, 6, "RQKBL2") == 0);
  const std::string index = file_bytes(dir.path / "kb.db.index");
  REQUIRE(index.size() == file.index_size);
  file.magic = std::string("RQKBL1\0\0", 8);
  file.index_checksum = rapidqa::detail::xxh64(index.data(), index.size());
  std::reverse(file.entries.begin(), file.entries.end());
  file.write(labels);

  auto encoder = std::make_shared<CountingEncoder>();
  {
    std::vector<std::string> log;
    auto engine = engine_with(dir.uri(), encoder, &log);
    CHECK(logged(log, "read the retrieval index of"));
    CHECK_FALSE(logged(log, "not used"));
    CHECK(encoder->encoded == 0);
    check_faq_answers(*engine);
  }
  // Saved again at close, in the current format.
  CHECK(file_bytes(labels).compare(0, 6, "RQKBL2") == 0);
}

TEST_CASE("A labels file that lists a label twice or a label the index lacks is not used",
          "[store][restart][snapshot][hostile]") {
  ScratchDir dir("labels-hostile");
  store_faq_and_close(dir.uri());
  const fs::path labels = dir.path / "kb.db.index.labels";
  // Each case edits the file as the last start saved it (a start that did
  // not use it built the index again and saved it anew).
  const auto refused = [&](auto edit, const std::string& reason) {
    LabelsFile file = LabelsFile::read(labels);
    REQUIRE(file.entries.size() >= 2);
    edit(file);
    file.write(labels);
    std::vector<std::string> log;
    auto engine = engine_with(dir.uri(), std::make_shared<CountingEncoder>(), &log);
    CHECK(logged(log, "the retrieval index snapshot is not used"));
    CHECK(logged(log, reason));
    check_faq_answers(*engine);  // built from the stored vectors instead
  };
  refused([](LabelsFile& f) { f.entries[1].labels[0] = f.entries[0].labels[0]; }, "listed for two phrasings");
  refused([](LabelsFile& f) { f.entries[0].labels[0] = f.next_label + 5; }, "missing from the index");
  refused([](LabelsFile& f) { f.next_label = -3; }, "negative next label");
}

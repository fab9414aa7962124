#include <catch2/catch.hpp>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <future>
#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "engine/rebuild_pool.h"
#include "rapidqa/qa_engine.h"
#include "rapidqa/text_normalizer.h"
#include "test_support.h"

using namespace std::chrono_literals;
using rapidqa::AnswerTier;
using rapidqa::AskOptions;
using rapidqa::EngineOptions;
using rapidqa::KnowledgeEntry;
using rapidqa::QAEngine;
using rapidqa::StatusCode;

namespace {

std::unique_ptr<QAEngine> make_engine(EngineOptions options = {}) {
  auto engine = QAEngine::create(std::move(options));
  REQUIRE(engine.is_ok());
  return std::move(engine).value();
}

std::unique_ptr<QAEngine> faq_engine(EngineOptions options = {}) {
  auto engine = make_engine(std::move(options));
  const auto loaded = engine->load_knowledge(rapidqa::testing::bundled_faq());
  REQUIRE(loaded.is_ok());
  return engine;
}

KnowledgeEntry entry(std::string id, std::string question, std::string answer,
                     std::vector<std::string> alternates = {}) {
  KnowledgeEntry e;
  e.id = std::move(id);
  e.question = std::move(question);
  e.answer = std::move(answer);
  e.alternates = std::move(alternates);
  return e;
}

AskOptions no_cache() {
  AskOptions o;
  o.use_cache = false;
  return o;
}

}  // namespace

TEST_CASE("The bundled FAQ answers the password question and its paraphrases", "[engine]") {
  auto engine = faq_engine();
  auto answer = engine->ask("How do I reset my password?");
  REQUIRE(answer.is_ok());
  CHECK(answer->entry_id() == "shop-en-reset-password");
  CHECK(answer->text.rfind("To reset your password", 0) == 0);
  CHECK(answer->tier == AnswerTier::kKnowledge);
  CHECK(answer->score == Approx(1.0f).epsilon(1e-4));

  CHECK(engine->ask("I forgot my password, how can I reset it?")->entry_id() == "shop-en-reset-password");
  CHECK(engine->ask("如何重置密码？")->entry_id() == "shop-zh-reset-password");
  CHECK(engine->ask("我忘记密码了，怎么重置？")->entry_id() == "shop-zh-reset-password");
}

TEST_CASE("Every bundled phrasing retrieves its own entry first", "[engine][retrieval]") {
  auto engine = faq_engine();
  const auto file = rapidqa::read_knowledge_file(rapidqa::testing::bundled_faq());
  REQUIRE(file.is_ok());
  std::size_t asked = 0, correct = 0;
  for (const auto& e : file->entries) {
    std::vector<std::string> phrasings{e.question};
    phrasings.insert(phrasings.end(), e.alternates.begin(), e.alternates.end());
    for (const auto& p : phrasings) {
      const auto answer = engine->ask(p, no_cache());
      REQUIRE(answer.is_ok());
      ++asked;
      if (answer->entry_id() == e.id) ++correct;
      else WARN("'" << p << "' answered by " << answer->entry_id() << " instead of " << e.id);
    }
  }
  CHECK(asked > 600);
  CHECK(correct == asked);
}

TEST_CASE("Held-out paraphrases mostly retrieve the right entry", "[engine][retrieval]") {
  auto engine = faq_engine();
  std::ifstream in(rapidqa::testing::bundled_paraphrases());
  REQUIRE(in);
  std::string line;
  std::size_t asked = 0, correct = 0;
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line);
    const auto answer = engine->ask(j.at("question").get<std::string>(), no_cache());
    REQUIRE(answer.is_ok());
    ++asked;
    bool in_top3 = false;
    for (const auto& m : answer->matches) in_top3 = in_top3 || m.entry_id == j.at("expected_id");
    if (answer->entry_id() == j.at("expected_id")) ++correct;
    else WARN(j.at("question").get<std::string>() << " -> " << answer->entry_id() << (in_top3 ? " (in top 3)" : ""));
  }
  REQUIRE(asked == 80);
  // A weightless lexical encoder: most, not all, paraphrases are found.
  CHECK(static_cast<double>(correct) / static_cast<double>(asked) >= 0.75);
}

TEST_CASE("A repeated question is answered by the result cache - a similar one by the semantic cache", "[engine]") {
  EngineOptions options;
  options.semantic_cache.similarity_threshold = 0.8f;
  auto engine = faq_engine(options);
  const auto first = engine->ask("How do I reset my password?");
  REQUIRE(first->tier == AnswerTier::kKnowledge);
  const auto again = engine->ask("how do i RESET my password");
  REQUIRE(again.is_ok());
  CHECK(again->tier == AnswerTier::kResultCache);
  CHECK(again->entry_id() == "shop-en-reset-password");
  CHECK(again->timings[rapidqa::Stage::kRetrieve].count() == 0);

  const auto similar = engine->ask("how can i reset my password");
  REQUIRE(similar.is_ok());
  CHECK(similar->tier == AnswerTier::kSemanticCache);
  CHECK(similar->entry_id() == "shop-en-reset-password");

  const auto bypass = engine->ask("How do I reset my password?", no_cache());
  CHECK(bypass->tier == AnswerTier::kKnowledge);

  const auto m = engine->metrics();
  CHECK(m.asks == 4);
  CHECK(m.result_cache.hits == 1);
  CHECK(m.semantic_cache.hits == 1);
  CHECK(m.result_cache.hit_ratio() == Approx(1.0 / 3.0));
  CHECK(m.stage(rapidqa::Stage::kTotal).count == 4);
  CHECK(m.stage(rapidqa::Stage::kRetrieve).count == 2);
}

TEST_CASE("embed gives the vectors the engine retrieves with, beside knowledge reloads", "[engine]") {
  auto engine = faq_engine();
  std::vector<float> embedded, direct;
  REQUIRE(engine->embed({"How do I RESET my password?!", "退货"}, embedded).is_ok());
  REQUIRE(engine->encoder()
              .encode({rapidqa::normalize_text("How do I RESET my password?!").value(),
                       rapidqa::normalize_text("退货").value()},
                      direct)
              .is_ok());
  REQUIRE(embedded == direct);
  std::vector<float> out;
  REQUIRE(engine->embed({std::string("bad \xff utf-8")}, out).code() == StatusCode::kInvalidArgument);
  // Concurrent with reloads that refit the hashing encoder: no torn reads
  // (ThreadSanitizer checks this in the long checks), every call succeeds.
  std::atomic<bool> stop{false};
  std::atomic<int> failed_reloads{0};
  std::thread reloads([&] {  // Catch2's assertions are not for other threads
    while (!stop) {
      if (!engine->load_knowledge(RAPIDQA_SOURCE_DIR "/examples/data/faq.jsonl").is_ok()) ++failed_reloads;
    }
  });
  for (int i = 0; i < 200; ++i) REQUIRE(engine->embed({"reset password"}, out).is_ok());
  stop = true;
  reloads.join();
  REQUIRE(failed_reloads == 0);
}

TEST_CASE("ask_cached answers only result-cache hits and counts no miss", "[engine]") {
  auto engine = faq_engine();
  CHECK_FALSE(engine->ask_cached("How do I reset my password?").has_value());
  REQUIRE(engine->ask("How do I reset my password?")->tier == AnswerTier::kKnowledge);
  const auto hit = engine->ask_cached("how do i RESET my password");
  REQUIRE(hit.has_value());
  CHECK(hit->tier == AnswerTier::kResultCache);
  CHECK(hit->entry_id() == "shop-en-reset-password");
  CHECK(hit->timings[rapidqa::Stage::kTotal].count() > 0);
  // Tenants stay apart, options that bypass the caches never hit, bad text is ask()'s to refuse.
  AskOptions other;
  other.tenant = "other";
  CHECK_FALSE(engine->ask_cached("How do I reset my password?", other).has_value());
  CHECK_FALSE(engine->ask_cached("How do I reset my password?", no_cache()).has_value());
  CHECK_FALSE(engine->ask_cached("").has_value());
  CHECK_FALSE(engine->ask_cached("\xff\xfe").has_value());
  const auto m = engine->metrics();
  CHECK(m.asks == 2);                  // the ask and the one hit
  CHECK(m.result_cache.hits == 1);
  CHECK(m.result_cache.misses == 1);   // the ask's own look; ask_cached's misses are not counted

  // An update drops the cached answer: ask_cached never serves the old one.
  // The question was hit, so the engine may ask it again in the background
  // (a hot-question rebuild) and cache the new answer.
  auto changed = *engine->entry("shop-en-reset-password");
  changed.answer = "Use the reset link.";
  REQUIRE(engine->update_entry(changed).is_ok());
  for (int look = 0; look < 2; ++look) {
    const auto after = engine->ask_cached("How do I reset my password?");
    if (after) CHECK(after->text == "Use the reset link.");
    engine->wait_for_rebuilds();
  }
}

TEST_CASE("An unrelated question gets the fallback - which is never cached", "[engine]") {
  auto engine = faq_engine();
  const auto answer = engine->ask("what is the airspeed velocity of an unladen swallow");
  REQUIRE(answer.is_ok());
  CHECK(answer->tier == AnswerTier::kFallback);
  CHECK(answer->text == EngineOptions{}.fallback_answer);
  CHECK(engine->ask("what is the airspeed velocity of an unladen swallow")->tier == AnswerTier::kFallback);
  CHECK(engine->metrics().fallback_answers == 2);
}

TEST_CASE("Updates and removals are never answered from a stale cache", "[engine]") {
  EngineOptions no_rebuilds;  // so the tier after an update is deterministic
  no_rebuilds.rebuild_workers = 0;
  auto engine = make_engine(no_rebuilds);
  REQUIRE(engine->load_entries({entry("hours", "What are your opening hours?", "9 to 5"),
                                entry("ship", "How long does shipping take?", "3 days")})
              .is_ok());
  REQUIRE(engine->ask("What are your opening hours?")->text == "9 to 5");
  REQUIRE(engine->ask("What are your opening hours?")->tier == AnswerTier::kResultCache);

  REQUIRE(engine->update_entry(entry("hours", "What are your opening hours?", "8 to 8")).is_ok());
  CHECK(engine->entry("hours")->version == 2);
  const auto updated = engine->ask("What are your opening hours?");
  CHECK(updated->text == "8 to 8");
  CHECK(updated->tier == AnswerTier::kKnowledge);

  REQUIRE(engine->remove_entry("hours").is_ok());
  const auto removed = engine->ask("What are your opening hours?");
  CHECK(removed->entry_id() != "hours");
  CHECK(removed->text != "8 to 8");
  CHECK(engine->entry("hours").status().code() == StatusCode::kNotFound);

  REQUIRE(engine->add_entry(entry("hours", "When are you open?", "always")).is_ok());
  CHECK(engine->ask("When are you open?")->text == "always");
  CHECK(engine->entry_count() == 2);
}

TEST_CASE("Bad input gets clear errors and changes nothing", "[engine]") {
  auto engine = make_engine();
  REQUIRE(engine->load_entries({entry("a", "question a", "answer a")}).is_ok());
  CHECK(engine->ask("").status().code() == StatusCode::kInvalidArgument);
  CHECK(engine->ask("???").status().code() == StatusCode::kInvalidArgument);
  CHECK(engine->ask(std::string("bad \xff utf8")).status().code() == StatusCode::kInvalidArgument);
  CHECK(engine->ask(std::string(5000, 'x')).status().code() == StatusCode::kOutOfRange);
  CHECK(engine->add_entry(entry("a", "q", "a")).code() == StatusCode::kAlreadyExists);
  CHECK(engine->update_entry(entry("zz", "q", "a")).code() == StatusCode::kNotFound);
  CHECK(engine->remove_entry("zz").code() == StatusCode::kNotFound);
  const auto bad = engine->add_entry(entry("b", "q", ""));
  CHECK(bad.code() == StatusCode::kInvalidArgument);
  CHECK(bad.message().find("answer") != std::string::npos);
  CHECK(engine->update_entry(entry("a", "!!!", "x")).code() == StatusCode::kInvalidArgument);
  CHECK(engine->ask("question a")->text == "answer a");  // the failed update left it alone
  CHECK(engine->load_entries({entry("x", "q", "a"), entry("x", "q2", "a2")}).status().code() ==
        StatusCode::kAlreadyExists);
  CHECK(engine->entry_count() == 1);

  const std::string path = (std::filesystem::temp_directory_path() / "rapidqa-engine-test-bad.jsonl").string();
  {
    std::ofstream out(path);
    out << "{\"id\":\"n\",\"question\":\"q\",\"answer\":\"a\"}\n{\"id\":\"m\"}\n";
  }
  const auto loaded = engine->load_knowledge(path);
  std::remove(path.c_str());
  REQUIRE_FALSE(loaded.is_ok());
  CHECK(loaded.status().message().find("line 2") != std::string::npos);
  CHECK(engine->entry_count() == 1);
  CHECK(engine->ask("question a")->text == "answer a");
  CHECK(engine->metrics().errors == 4);
}

TEST_CASE("Engine options are validated", "[engine]") {
  EngineOptions options;
  options.min_answer_score = 2.0f;
  CHECK(QAEngine::create(options).status().code() == StatusCode::kInvalidArgument);
  options = {};
  options.top_k = 0;
  CHECK(QAEngine::create(options).status().code() == StatusCode::kInvalidArgument);
  options = {};
  options.semantic_cache.similarity_threshold = 0.0f;
  CHECK(QAEngine::create(options).status().code() == StatusCode::kInvalidArgument);
}

TEST_CASE("ask_batch answers each question in order", "[engine]") {
  auto engine = faq_engine();
  const auto answers = engine->ask_batch({"How do I reset my password?", "", "如何重置密码？"});
  REQUIRE(answers.size() == 3);
  CHECK(answers[0]->entry_id() == "shop-en-reset-password");
  CHECK_FALSE(answers[1].is_ok());
  CHECK(answers[2]->entry_id() == "shop-zh-reset-password");
}

TEST_CASE("Cache TTLs follow the injected clock", "[engine]") {
  auto clock = std::make_shared<rapidqa::ManualClock>();
  EngineOptions options;
  options.clock = clock;
  auto engine = faq_engine(options);
  AskOptions similar;
  similar.semantic_threshold = 0.5f;
  REQUIRE(engine->ask("How do I reset my password?")->tier == AnswerTier::kKnowledge);
  clock->advance(4min);
  CHECK(engine->ask("How do I reset my password?")->tier == AnswerTier::kResultCache);
  clock->advance(2min);  // result tier (5 min) expired, knowledge (24 h) and semantic (1 h) tiers not
  CHECK(engine->ask("How do I reset my password?")->tier == AnswerTier::kKnowledgeCache);
  CHECK(engine->ask("how can I reset my password", similar)->tier == AnswerTier::kSemanticCache);
  clock->advance(61min);
  CHECK(engine->ask("How do I reset my password?")->tier == AnswerTier::kKnowledgeCache);
  CHECK(engine->ask("how could I reset my password", similar)->tier == AnswerTier::kKnowledge);
  clock->advance(24h);
  CHECK(engine->ask("How do I reset my password?")->tier == AnswerTier::kKnowledge);
}

TEST_CASE("Eight threads asking while an entry is updated see consistent - never older answers", "[engine][concurrency]") {
  auto engine = make_engine();
  std::vector<KnowledgeEntry> entries;
  for (int i = 0; i < 50; ++i) {
    entries.push_back(entry("topic-" + std::to_string(i), "tell me about topic number " + std::to_string(i) + " please",
                            "topic " + std::to_string(i)));
  }
  entries.push_back(entry("live", "what is the current live version", "version 0"));
  REQUIRE(engine->load_entries(entries).is_ok());

  std::atomic<bool> stop{false};
  std::atomic<int> inconsistencies{0};
  std::atomic<long> asks{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 8; ++t) {
    readers.emplace_back([&, t] {
      int last_version = 0;
      // Bounded as well as stopped, so readers can never starve the writer.
      for (int i = t; i < t + 50000 && !stop.load(); ++i) {
        const bool live = (i % 3) == 0;
        const std::string q = live ? "what is the current live version"
                                   : "tell me about topic number " + std::to_string(i % 50) + " please";
        const auto a = engine->ask(q);
        ++asks;
        if (!a.is_ok()) {
          ++inconsistencies;
        } else if (live) {
          // The answer always belongs to the entry asked about, and a reader
          // never goes back to an older version once it saw a newer one.
          const int version = std::stoi(a->text.substr(a->text.find(' ') + 1));
          if (a->entry_id() != "live" || version < last_version) ++inconsistencies;
          last_version = version;
        } else if (a->text != "topic " + std::to_string(i % 50)) {
          ++inconsistencies;
        }
      }
    });
  }
  // The updates start once the readers are asking: on a fast machine the
  // writer could otherwise finish before any reader ran.
  while (asks.load() < 200) std::this_thread::yield();
  for (int v = 1; v <= 200; ++v) {
    REQUIRE(engine->update_entry(entry("live", "what is the current live version", "version " + std::to_string(v)))
                .is_ok());
  }
  stop = true;
  for (auto& r : readers) r.join();
  CHECK(inconsistencies.load() == 0);
  CHECK(asks.load() > 100);
  CHECK(engine->ask("what is the current live version")->text == "version 200");
  CHECK(engine->entry("live")->version == 201);
}

TEST_CASE("A near miss is not answered from the semantic cache even with a loose threshold", "[engine][guard]") {
  auto engine = faq_engine();
  REQUIRE(engine->ask("How do I open a bank account?")->entry_id() == "bank-en-open-account");
  AskOptions loose;
  loose.semantic_threshold = 0.3f;  // close enough as vectors: only the guard stands between
  const auto close = engine->ask("How do I close my bank account?", loose);
  REQUIRE(close.is_ok());
  CHECK(close->tier == AnswerTier::kKnowledge);
  CHECK(close->entry_id() == "bank-en-close-account");
  CHECK(close->near_miss_reason == "open/close");
  CHECK(close->nearest_cached_similarity > 0.3f);
  AskOptions bad;
  bad.semantic_threshold = 1.5f;
  CHECK(engine->ask("anything", bad).status().code() == StatusCode::kInvalidArgument);
}

TEST_CASE("Tenants never share cached answers", "[engine][tenant]") {
  auto engine = faq_engine();
  AskOptions a, b;
  a.tenant = "shop-a";
  b.tenant = "shop-b";
  REQUIRE(engine->ask("How do I reset my password?", a)->tier == AnswerTier::kKnowledge);
  CHECK(engine->ask("How do I reset my password?", a)->tier == AnswerTier::kResultCache);
  CHECK(engine->ask("How do I reset my password?", b)->tier == AnswerTier::kKnowledge);
  CHECK(engine->ask("How do I reset my password?")->tier == AnswerTier::kKnowledge);
}

TEST_CASE("A corrected cached answer is served until its entry changes", "[engine][correction]") {
  // No hot-question rebuild: the update below would re-answer the corrected
  // (and so hit) question in the background, and a rebuild that lands after
  // the first delete_cached_answer puts the answer back before the second.
  EngineOptions options;
  options.rebuild_workers = 0;
  auto engine = make_engine(options);
  REQUIRE(engine->load_entries({entry("hours", "What are your opening hours?", "9 to 5")}).is_ok());
  REQUIRE(engine->ask("What are your opening hours?")->text == "9 to 5");
  REQUIRE(engine->correct_cached_answer("What are your opening hours?", "9 to 6 on weekdays").is_ok());
  CHECK(engine->ask("what are your opening hours")->text == "9 to 6 on weekdays");
  AskOptions similar;
  similar.semantic_threshold = 0.5f;
  CHECK(engine->ask("what are your opening hours today", similar)->text == "9 to 6 on weekdays");
  // The correction keeps its provenance: updating the entry drops it.
  REQUIRE(engine->update_entry(entry("hours", "What are your opening hours?", "8 to 8")).is_ok());
  CHECK(engine->ask("What are your opening hours?")->text == "8 to 8");
  CHECK(engine->delete_cached_answer("What are your opening hours?").value() == 3);  // result, knowledge, semantic
  CHECK(engine->delete_cached_answer("What are your opening hours?").value() == 0);
  CHECK(engine->correct_cached_answer("", "x").code() == StatusCode::kInvalidArgument);
  CHECK(engine->invalidate_entry("nope").status().code() == StatusCode::kNotFound);
}

TEST_CASE("A cache snapshot round-trips and a bad one is refused with a cold start", "[engine][snapshot]") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / "rapidqa-snapshot-test";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string path = (dir / "semantic.snap").string();
  AskOptions tenant_a;
  tenant_a.tenant = "a";
  {
    auto engine = faq_engine();
    REQUIRE(engine->ask("How do I reset my password?", tenant_a)->tier == AnswerTier::kKnowledge);
    REQUIRE(engine->ask("如何重置密码？")->tier == AnswerTier::kKnowledge);
    REQUIRE(engine->save_cache_snapshot(path).is_ok());
  }
  CHECK_FALSE(fs::exists(path + ".tmp"));
  auto engine = faq_engine();
  const auto loaded = engine->load_cache_snapshot(path);
  REQUIRE(loaded.is_ok());
  CHECK(loaded.value() == 2);
  // Preloaded: answered from the semantic tier, in the right namespace only.
  const auto hit = engine->ask("How do I reset my password?", tenant_a);
  CHECK(hit->tier == AnswerTier::kSemanticCache);
  CHECK(hit->entry_id() == "shop-en-reset-password");
  CHECK(engine->ask("How do I reset my password?")->tier == AnswerTier::kKnowledge);

  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign((std::istreambuf_iterator<char>(in)), {});
  }
  auto write = [&](const std::string& name, const std::string& content) {
    const std::string p = (dir / name).string();
    std::ofstream(p, std::ios::binary).write(content.data(), static_cast<std::streamsize>(content.size()));
    return p;
  };
  std::string corrupt = bytes;
  corrupt[corrupt.size() / 2] = static_cast<char>(corrupt[corrupt.size() / 2] ^ 0x5a);
  std::string wrong_version = bytes;
  wrong_version[8] = 9;
  const std::vector<std::pair<std::string, std::string>> bad = {
      {write("corrupt.snap", corrupt), "checksum"},
      {write("truncated.snap", bytes.substr(0, bytes.size() - 10)), "truncated"},
      {write("version.snap", wrong_version), "version 9"},
      {write("garbage.snap", "not a snapshot at all"), "bad header"}};
  for (const auto& [file, reason] : bad) {
    INFO(file);
    REQUIRE(engine->ask("如何重置密码？")->tier != AnswerTier::kKnowledge);  // warm before
    const auto refused = engine->load_cache_snapshot(file);
    REQUIRE_FALSE(refused.is_ok());
    CHECK(refused.status().message().find(reason) != std::string::npos);
    engine->clear_caches();  // the result tier; the semantic tier is already cold
    CHECK(engine->ask("如何重置密码？")->tier == AnswerTier::kKnowledge);
  }
  CHECK(engine->load_cache_snapshot((dir / "missing.snap").string()).status().code() == StatusCode::kNotFound);

  // An answer built from an entry that changed since is not loaded.
  auto changed = faq_engine();
  auto pw = changed->entry("shop-en-reset-password").value();
  pw.answer = "Call the help desk.";
  REQUIRE(changed->update_entry(pw).is_ok());
  CHECK(changed->load_cache_snapshot(path).value() == 1);  // only the Chinese answer is current
  CHECK(changed->ask("How do I reset my password?", tenant_a)->text == "Call the help desk.");

  // Answers built from entries the knowledge no longer has are not loaded.
  auto smaller = make_engine();
  REQUIRE(smaller->load_entries({entry("other", "something else entirely", "x")}).is_ok());
  CHECK(smaller->load_cache_snapshot(path).value() == 0);
}

TEST_CASE("Top intents group the cached questions by meaning - largest first", "[engine][intents]") {
  auto engine = faq_engine();
  const std::vector<std::string> password = {"How do I reset my password?", "I forgot my password, how can I reset it?",
                                             "reset my password please", "password reset", "how to reset password"};
  const std::vector<std::string> chinese = {"如何开户？", "我想开户", "怎么开一个银行账户"};
  for (const auto& q : password) REQUIRE(engine->ask(q).is_ok());
  for (const auto& q : chinese) REQUIRE(engine->ask(q).is_ok());
  const auto intents = engine->top_intents(2);
  REQUIRE(intents.size() == 2);
  CHECK(intents[0].questions >= intents[1].questions);
  CHECK(intents[0].questions + intents[1].questions == 8);  // every cached question is in a group
  CHECK(intents[0].entry_id == "shop-en-reset-password");
  CHECK(intents[1].entry_id.find("-zh-") != std::string::npos);
  CHECK(engine->top_intents(2, "other-tenant").empty());
}

TEST_CASE("Hot questions are re-answered in the background after an update", "[engine][rebuild]") {
  auto engine = make_engine();
  REQUIRE(engine->load_entries({entry("hours", "What are your opening hours?", "9 to 5"),
                                entry("ship", "How long does shipping take?", "3 days")})
              .is_ok());
  AskOptions tenant;
  tenant.tenant = "t1";
  // Hot: asked, then hit once. Cold: asked once only.
  REQUIRE(engine->ask("What are your opening hours?", tenant)->tier == AnswerTier::kKnowledge);
  REQUIRE(engine->ask("What are your opening hours?", tenant)->tier == AnswerTier::kResultCache);
  REQUIRE(engine->ask("opening hours", tenant)->entry_id() == "hours");
  REQUIRE(engine->update_entry(entry("hours", "What are your opening hours?", "8 to 8")).is_ok());
  engine->wait_for_rebuilds();
  const auto hot = engine->ask("What are your opening hours?", tenant);
  CHECK(hot->tier == AnswerTier::kResultCache);  // already answered afresh, in its own tenant
  CHECK(hot->text == "8 to 8");
  CHECK(engine->ask("opening hours", tenant)->tier != AnswerTier::kResultCache);
  CHECK(engine->metrics().rebuilds.completed == 1);
}

TEST_CASE("Every hot question is rebuilt or counted as dropped", "[engine][rebuild]") {
  EngineOptions options;
  options.rebuild_workers = 1;
  options.rebuild_queue_capacity = 1;
  options.enable_semantic_cache = false;  // every phrasing keeps its own result-cache entry
  auto engine = make_engine(options);
  std::vector<std::string> phrasings;
  for (int i = 0; i < 30; ++i) phrasings.push_back("opening hours variant number " + std::to_string(i));
  REQUIRE(engine->load_entries({entry("hours", "What are your opening hours?", "9 to 5", phrasings)}).is_ok());
  for (const auto& p : phrasings) {
    REQUIRE(engine->ask(p).is_ok());
    REQUIRE(engine->ask(p)->tier == AnswerTier::kResultCache);
  }
  REQUIRE(engine->update_entry(entry("hours", "What are your opening hours?", "8 to 8", phrasings)).is_ok());
  engine->wait_for_rebuilds();
  // How many fit depends on how fast the worker drains the queue; every
  // hot question is either rebuilt or counted as dropped, none is lost.
  const auto m = engine->metrics();
  CHECK(m.rebuilds.completed + m.rebuilds.dropped == 30);
  CHECK(m.rebuilds.completed >= 1);
}

TEST_CASE("A full rebuild queue drops new work instead of growing", "[engine][rebuild]") {
  rapidqa::engine::RebuildPool pool(1, 1);
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::promise<void> started;
  REQUIRE(pool.submit([&] {
    started.set_value();
    released.wait();  // keeps the only worker busy
  }));
  started.get_future().wait();
  std::atomic<int> ran{0};
  CHECK(pool.submit([&] { ++ran; }));        // fills the queue
  for (int i = 0; i < 4; ++i) CHECK_FALSE(pool.submit([&] { ++ran; }));  // dropped
  release.set_value();
  pool.drain();
  CHECK(ran.load() == 1);
  CHECK(pool.completed() == 2);
  CHECK(pool.dropped() == 4);
}

TEST_CASE("An entry's cache TTL bounds every tier", "[engine][policy]") {
  auto clock = std::make_shared<rapidqa::ManualClock>();
  EngineOptions options;
  options.clock = clock;
  auto engine = make_engine(options);
  auto hours = entry("hours", "What are your opening hours today?", "9 to 5");
  hours.cache_ttl = 1min;
  REQUIRE(engine->load_entries({hours, entry("returns", "How do I return an item?", "Use the form")}).is_ok());
  REQUIRE(engine->ask("What are your opening hours today?")->tier == AnswerTier::kKnowledge);
  REQUIRE(engine->ask("How do I return an item?")->tier == AnswerTier::kKnowledge);
  clock->advance(30s);
  CHECK(engine->ask("What are your opening hours today?")->tier == AnswerTier::kResultCache);
  clock->advance(31s);
  // Past the entry's minute: no tier may answer from the cache any more.
  CHECK(engine->ask("What are your opening hours today?")->tier == AnswerTier::kKnowledge);
  CHECK(engine->ask("How do I return an item?")->tier == AnswerTier::kResultCache);
}

TEST_CASE("An answer from the knowledge tier is checked against the entries' versions", "[engine]") {
  auto clock = std::make_shared<rapidqa::ManualClock>();
  EngineOptions options;
  options.clock = clock;
  options.enable_semantic_cache = false;
  auto engine = make_engine(options);
  REQUIRE(engine->load_entries({entry("fee", "What is the delivery fee?", "5 euro")}).is_ok());
  REQUIRE(engine->ask("What is the delivery fee?")->text == "5 euro");
  clock->advance(10min);  // past the result tier
  const auto cached = engine->ask("What is the delivery fee?");
  CHECK(cached->tier == AnswerTier::kKnowledgeCache);
  CHECK(cached->matches.front().version == 1);
  REQUIRE(engine->update_entry(entry("fee", "What is the delivery fee?", "free")).is_ok());
  const auto fresh = engine->ask("What is the delivery fee?");
  CHECK(fresh->text == "free");
  CHECK(fresh->tier == AnswerTier::kKnowledge);
  CHECK(fresh->matches.front().version == 2);
}

TEST_CASE("An added entry takes over the cached questions it answers better", "[engine]") {
  auto engine = make_engine();
  REQUIRE(engine->load_entries({entry("place", "How do I place an order?", "Add items to the cart"),
                                entry("hours", "What are your opening hours?", "9 to 5")})
              .is_ok());
  const auto before = engine->ask("How do I cancel an order?");
  REQUIRE(before->entry_id() == "place");  // the best there is, for now
  REQUIRE(engine->ask("What are your opening hours?")->tier == AnswerTier::kKnowledge);
  REQUIRE(engine->add_entry(entry("cancel", "How do I cancel an order?", "Open the order and press cancel")).is_ok());
  const auto after = engine->ask("How do I cancel an order?");
  CHECK(after->entry_id() == "cancel");
  CHECK(after->tier == AnswerTier::kKnowledge);
  // Questions the new entry does not beat keep their cached answers.
  CHECK(engine->ask("What are your opening hours?")->tier == AnswerTier::kResultCache);
  CHECK(engine->metrics().caches.displacements >= 1);
}

TEST_CASE("A request with retrieval settings of its own neither gets nor leaves cached answers", "[engine]") {
  auto engine = faq_engine();
  const std::string paraphrase = "I forgot my password, how can I reset it?";
  REQUIRE(engine->ask(paraphrase)->tier == AnswerTier::kKnowledge);
  AskOptions strict;
  strict.min_answer_score = 0.99f;
  const auto refused = engine->ask(paraphrase, strict);
  CHECK(refused->tier == AnswerTier::kFallback);  // not the cached answer of the default setting
  AskOptions wide;
  wide.top_k = 10;
  CHECK(engine->ask("How do I reset my password?", wide)->matches.size() == 10);
  AskOptions loose;
  loose.min_answer_score = -1.0f;
  REQUIRE(engine->ask("what is the airspeed velocity of an unladen swallow", loose)->tier == AnswerTier::kKnowledge);
  CHECK(engine->ask("what is the airspeed velocity of an unladen swallow")->tier == AnswerTier::kFallback);
}

TEST_CASE("A tenant's own semantic threshold sits between the global one and the request's", "[engine][tenant]") {
  auto engine = faq_engine();
  AskOptions lenient, strict;
  lenient.tenant = "lenient";
  strict.tenant = "strict";
  for (const auto* o : {&lenient, &strict}) REQUIRE(engine->ask("How do I reset my password?", *o).is_ok());
  REQUIRE(engine->set_tenant_semantic_threshold("lenient", 0.5f).is_ok());
  CHECK(engine->ask("how can I reset my password", lenient)->tier == AnswerTier::kSemanticCache);
  CHECK(engine->ask("how can I reset my password", strict)->tier != AnswerTier::kSemanticCache);
  CHECK(engine->set_tenant_semantic_threshold("x", 0.0f).code() == StatusCode::kInvalidArgument);
}

TEST_CASE("Bounded tiers evict and the engine's metrics count it", "[engine][policy]") {
  EngineOptions options;
  options.result_cache.capacity = 4;
  options.result_cache.shards = 1;
  options.knowledge_cache.capacity = 4;
  options.knowledge_cache.shards = 1;
  options.semantic_cache.capacity_bytes = 16 * 1024;
  auto engine = faq_engine(options);
  for (const char* q : {"How do I reset my password?", "如何重置密码？", "How do I open a bank account?",
                        "Where is my order?", "How do I return an item?", "How do I close my account?",
                        "What payment methods do you accept?", "How do I change my address?"}) {
    REQUIRE(engine->ask(q).is_ok());
  }
  const auto m = engine->metrics();
  CHECK(m.caches.evictions >= 8);  // 4 from each exact tier at least
  CHECK(m.caches.entries <= 4 + 4 + 8);
  CHECK(m.caches.bytes > 0);
  CHECK(m.caches.bytes <= 2 * 4 * 4096 + 16 * 1024);
}

TEST_CASE("Preloading hot questions warms every tier and reports bad lines", "[engine][preload]") {
  auto engine = faq_engine();
  const std::string path = "rapidqa-preload-test.txt";
  {
    std::ofstream out(path);
    out << "# hot questions\nHow do I reset my password?\n\n如何重置密码？\nwhat is the airspeed velocity of an unladen swallow\n" << std::string("\xff") << "\n";
  }
  std::size_t last_progress = 0;
  const auto report = engine->preload_questions_file(path, {}, [&](std::size_t done, std::size_t) { last_progress = done; });
  REQUIRE(report.is_ok());
  CHECK(report->questions == 4);
  CHECK(report->cached == 2);
  CHECK(report->fallbacks == 1);
  REQUIRE(report->rejected.size() == 1);
  CHECK(report->rejected.front().line == 6);
  CHECK(last_progress == 4);
  CHECK(engine->ask("How do I reset my password?")->tier == AnswerTier::kResultCache);
  CHECK(engine->ask("如何重置密码？")->tier == AnswerTier::kResultCache);
  std::remove(path.c_str());
  CHECK(engine->preload_questions_file("/no/such/file").status().code() == StatusCode::kNotFound);
}

#include <catch2/catch.hpp>

#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

#include "knowledge/entry_reader.h"
#include "rapidqa/knowledge_file.h"
#include "test_support.h"

using rapidqa::KnowledgeFileOptions;
using rapidqa::parse_knowledge_jsonl;
using rapidqa::StatusCode;

namespace {
rapidqa::Result<rapidqa::KnowledgeFile> parse(const std::string& text, KnowledgeFileOptions options = {}) {
  std::istringstream in(text);
  return parse_knowledge_jsonl(in, "faq.jsonl", options);
}
}  // namespace

TEST_CASE("A well-formed file parses every field", "[knowledge]") {
  const auto file = parse(
      "# comment line\n"
      "{\"id\":\"a\",\"question\":\"Q1\",\"alternates\":[\"Q1b\",\"Q1c\"],\"answer\":\"A1\",\"context\":\"C\",\"tags\":[\"t\"]}\n"
      "\n"
      "{\"id\":\"b\",\"question\":\"问题\",\"answer\":\"答案\"}\r\n");
  REQUIRE(file.is_ok());
  REQUIRE(file->entries.size() == 2);
  const auto& a = file->entries[0];
  CHECK(a.id == "a");
  CHECK(a.alternates == std::vector<std::string>{"Q1b", "Q1c"});
  CHECK(a.context == "C");
  CHECK(a.tags == std::vector<std::string>{"t"});
  CHECK(file->entries[1].answer == "答案");
  CHECK(file->skipped.empty());
}

TEST_CASE("A bad line rejects the whole file and names line and field", "[knowledge]") {
  const std::string text =
      "{\"id\":\"a\",\"question\":\"Q\",\"answer\":\"A\"}\n"
      "{\"id\":\"b\",\"question\":\"Q\"}\n"
      "{\"id\":\"c\",\"question\":\"Q\",\"answer\":\"A\",\"alternates\":\"not a list\"}\n"
      "{\"id\":\"d\",\"question\":\"Q\",\"answer\":\"A\"\n"
      "{\"id\":\"a\",\"question\":\"Q\",\"answer\":\"A\"}\n"
      "[1,2]\n"
      "{\"id\":\"e\",\"question\":\"Q\",\"answer\":\"A\",\"colour\":\"red\"}\n"
      "{\"id\":\"f\",\"question\":\"  \",\"answer\":\"A\"}\n";
  const auto file = parse(text);
  REQUIRE_FALSE(file.is_ok());
  CHECK(file.status().code() == StatusCode::kInvalidArgument);
  const std::string& m = file.status().message();
  CHECK(m.find("7 invalid lines, nothing loaded") != std::string::npos);
  CHECK(m.find("line 2: field 'answer' is missing") != std::string::npos);
  CHECK(m.find("line 3: field 'alternates': expected an array of strings, got string") != std::string::npos);
  CHECK(m.find("line 4: not valid JSON") != std::string::npos);
  CHECK(m.find("line 5: field 'id': duplicate id 'a' (first used on line 1)") != std::string::npos);
  CHECK(m.find("line 6: expected a JSON object, got array") != std::string::npos);
  CHECK(m.find("line 7: unknown field 'colour'") != std::string::npos);
  CHECK(m.find("line 8: field 'question': expected a non-empty string") != std::string::npos);
}

TEST_CASE("With skip_invalid_lines the good lines are kept and the bad reported", "[knowledge]") {
  KnowledgeFileOptions options;
  options.skip_invalid_lines = true;
  const auto file = parse(
      "{\"id\":\"a\",\"question\":\"Q\",\"answer\":\"A\"}\n"
      "{\"id\":\"b\",\"question\":5,\"answer\":\"A\"}\n"
      "{\"id\":\"c\",\"question\":\"Q\",\"answer\":\"A\"}\n",
      options);
  REQUIRE(file.is_ok());
  REQUIRE(file->entries.size() == 2);
  CHECK(file->entries[1].id == "c");
  REQUIRE(file->skipped.size() == 1);
  CHECK(file->skipped[0].line == 2);
  CHECK(file->skipped[0].message == "field 'question': expected a string, got number");
}

TEST_CASE("Invalid UTF-8 inside a field is named", "[knowledge]") {
  const auto file = parse("{\"id\":\"a\",\"question\":\"Q\",\"answer\":\"ok\",\"tags\":[\"\xff\"]}\n");
  REQUIRE_FALSE(file.is_ok());
  // nlohmann-json refuses invalid UTF-8 itself; either way the line is named.
  CHECK(file.status().message().find("line 1:") != std::string::npos);
}

TEST_CASE("A missing file is kNotFound with its path", "[knowledge]") {
  const auto file = rapidqa::read_knowledge_file("/nonexistent/faq.jsonl");
  CHECK(file.status().code() == StatusCode::kNotFound);
  CHECK(file.status().message().find("/nonexistent/faq.jsonl") != std::string::npos);
}

TEST_CASE("The bundled FAQ is valid and bilingual", "[knowledge]") {
  const auto file = rapidqa::read_knowledge_file(rapidqa::testing::bundled_faq());
  REQUIRE(file.is_ok());
  CHECK(file->entries.size() >= 150);
  std::size_t chinese = 0;
  for (const auto& e : file->entries) {
    CHECK(e.alternates.size() >= 2);
    if (e.id.find("-zh-") != std::string::npos) ++chinese;
  }
  CHECK(chinese >= 50);
  CHECK(file->entries.size() - chinese >= 50);
}

TEST_CASE("A single entry parses from JSON for run-time adds", "[knowledge]") {
  const auto e = rapidqa::parse_knowledge_entry_json("{\"id\":\"x\",\"question\":\"Q\",\"answer\":\"A\"}");
  REQUIRE(e.is_ok());
  CHECK(e->id == "x");
  CHECK(rapidqa::parse_knowledge_entry_json("{\"id\":\"x\"}").status().code() == StatusCode::kInvalidArgument);
  rapidqa::KnowledgeEntry long_id{std::string(300, 'x'), "Q", {}, "A", "", {}, 0};
  CHECK(rapidqa::validate_entry(long_id).message().find("300 bytes") != std::string::npos);
}

TEST_CASE("An entry's cache TTL is read, checked and written back", "[knowledge]") {
  const auto e = rapidqa::parse_knowledge_entry_json(
      R"({"id":"hours","question":"When are you open?","answer":"9 to 5","cache_ttl_seconds":60})");
  REQUIRE(e.is_ok());
  CHECK(e->cache_ttl == std::chrono::minutes(1));
  const auto again = rapidqa::parse_knowledge_entry_json(rapidqa::knowledge_entry_to_json(*e));
  REQUIRE(again.is_ok());
  CHECK(again->cache_ttl == std::chrono::minutes(1));
  CHECK(again->question == e->question);
  const auto bad = rapidqa::parse_knowledge_entry_json(R"({"id":"x","question":"Q","answer":"A","cache_ttl_seconds":-5})");
  CHECK(bad.status().message().find("cache_ttl_seconds") != std::string::npos);
  const auto text = rapidqa::parse_knowledge_entry_json(R"({"id":"x","question":"Q","answer":"A","cache_ttl_seconds":"1h"})");
  CHECK(text.status().message().find("expected a number") != std::string::npos);
}

TEST_CASE("Escapes and nulls and repeated keys read as the JSON says on every path", "[knowledge]") {
  // Common lines take a fast reader and unusual ones the full parser: both
  // must give the same entry, and the same refusals.
  const auto e = rapidqa::parse_knowledge_entry_json(
      R"({"answer":"A\n\"q\"","question":"caf\u00e9 \ud83d\ude00","id":"x","alternates":[],"tags":["a\\b"],)"
      R"("cache_ttl_seconds":2})");
  REQUIRE(e);
  CHECK(e->question == "caf\xC3\xA9 \xF0\x9F\x98\x80");
  CHECK(e->answer == "A\n\"q\"");
  CHECK(e->alternates.empty());
  CHECK(e->tags == std::vector<std::string>{"a\\b"});
  CHECK(e->cache_ttl == std::chrono::milliseconds(2000));

  // A null optional field is absent (the full parser's reading).
  const auto with_null = rapidqa::parse_knowledge_entry_json(
      R"({"id":"x","question":"Q","answer":"A","context":null,"alternates":null,"cache_ttl_seconds":0.5})");
  REQUIRE(with_null);
  CHECK(with_null->context.empty());
  CHECK(with_null->cache_ttl == std::chrono::milliseconds(500));

  const auto refused = [](const std::string& line) {
    const auto parsed = rapidqa::parse_knowledge_entry_json(line);
    REQUIRE_FALSE(parsed.is_ok());
    CHECK(parsed.status().code() == StatusCode::kInvalidArgument);
    return parsed.status().message();
  };
  CHECK_THAT(refused(R"({"id":"x","question":"Q","answer":"A","id":"y"})"),
             Catch::Matchers::Contains("duplicate"));
  CHECK_THAT(refused(R"({"id":"x","question":"Q","answer":"A","extra":1})"), Catch::Matchers::Contains("extra"));
  CHECK_THAT(refused(R"({"id":"x","question":"Q","answer":"A","alternates":[["nested"]]})"),
             Catch::Matchers::Contains("alternates"));
  CHECK_THAT(refused(R"({"id":"x","question":"Q","answer":" "})"), Catch::Matchers::Contains("answer"));
  CHECK_THAT(refused(R"({"id":"x","question":"Q","answer":"A","alternates":["ok"," "]})"),
             Catch::Matchers::Contains("alternates[1]"));
  CHECK_THAT(refused(R"({"id":"x","question":"Q","answer":"A"} trailing)"), Catch::Matchers::Contains("JSON"));
  CHECK_THAT(refused(R"(["id","x"])"), Catch::Matchers::Contains("object"));
  CHECK_THAT(refused(R"({"id":"x","question":"Q","answer":"A","cache_ttl_seconds":4e7})"),
             Catch::Matchers::Contains("cache_ttl_seconds"));
}

TEST_CASE("The fast entry reader reads what a general JSON parser reads or stops", "[knowledge]") {
  // Differential: every line either reads exactly as nlohmann's parser
  // reads it or is left to it (false). Strings of every kind of character,
  // written both by a JSON writer and with hand-made escapes.
  std::mt19937 random(2024);
  const std::vector<std::string> pieces = {"a", "Z", " ", "\"", "\\", "/", "\n", "\t", "\x01", "\x1f", "\x7f",
                                           "\xC3\xA9", "\xE4\xB8\xAD", "\xF0\x9F\x98\x80", "\xED\x9F\xBF"};
  const auto random_text = [&] {
    std::string text;
    for (int i = std::uniform_int_distribution<int>(0, 12)(random); i > 0; --i) {
      text += pieces[std::uniform_int_distribution<std::size_t>(0, pieces.size() - 1)(random)];
    }
    return text;
  };
  std::vector<std::string> lines = {
      R"({"id":"a","question":"caf\u00e9 \ud83d\ude00 \/ \b\f\n\r\t","answer":"x"})",
      R"( { "id" : "a" , "question" : "q" , "answer" : "x" , "alternates" : [ ] , "tags" : [ "t" , "u" ] } )",
      R"({"id":"a","question":"\ud83d","answer":"x"})",          // lone high surrogate
      R"({"id":"a","question":"\udc00","answer":"x"})",          // lone low surrogate
      R"({"id":"a","question":"\ud83d\u0041","answer":"x"})",    // high surrogate, then no low one
      R"({"id":"a","question":"\x","answer":"x"})",              // unknown escape
      R"({"id":"a","question":"\u12G4","answer":"x"})",          // bad hex
      "{\"id\":\"a\",\"question\":\"raw\ttab\",\"answer\":\"x\"}",  // raw control character
      R"({"id":"a","question":"q","answer":"x"}x)",
      R"({"id":"a","question":"q","answer":"x",})",
      R"({"id":"a","question":"q","answer":"x","alternates":["a",]})",
      R"({"id":"a","question":"q","answer":"x","alternates":["a"})",
      R"({"id":"a","question":"q","answer":"x","alternates":"a"})",
      R"({"id":"a","question":"q"})",
      R"({"id":"a","question":"q","answer":"x","id":"b"})",
      R"({"id":"a","question":"q","answer":"x","cache_ttl_seconds":5})",
      R"({"id":"a","question":"q","answer":"x","context":null})",
      R"({"id":"a","question":"q","answer":"x","extra":"y"})",
      R"({"id":"a","question":"q","answer":"x")",
      R"({"id":"a","question":"q)",
      "",
      "{}",
      "[]",
  };
  for (int i = 0; i < 2000; ++i) {
    nlohmann::json object = {{"id", random_text()}, {"question", random_text()}, {"answer", random_text()}};
    if (i % 2) object["alternates"] = {random_text(), random_text()};
    if (i % 3) object["context"] = random_text();
    if (i % 5 == 0) object["tags"] = {random_text()};
    lines.push_back(object.dump(i % 7 == 0 ? 2 : -1, ' ', i % 4 == 0));
  }
  std::size_t read_fast = 0;
  for (const std::string& line : lines) {
    CAPTURE(line);
    rapidqa::KnowledgeEntry fast;
    const bool fast_read = rapidqa::detail::read_common_entry(line, fast);
    nlohmann::json general;
    try {
      general = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception&) {
      CHECK_FALSE(fast_read);  // what the general parser refuses, the fast one must not take
      continue;
    }
    if (!fast_read) continue;
    ++read_fast;
    REQUIRE(general.is_object());
    CHECK(fast.id == general.at("id").get<std::string>());
    CHECK(fast.question == general.at("question").get<std::string>());
    CHECK(fast.answer == general.at("answer").get<std::string>());
    CHECK(fast.context == general.value("context", std::string()));
    CHECK(fast.alternates == general.value("alternates", std::vector<std::string>()));
    CHECK(fast.tags == general.value("tags", std::vector<std::string>()));
  }
  CHECK(read_fast >= 2000);  // the writer's lines are all common ones
}

#include <catch2/catch.hpp>

#include <sstream>

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

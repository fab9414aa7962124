// Feeds the knowledge-base readers: the input as a JSONL file
// (parse_knowledge_jsonl, strict and with skip_invalid_lines) and as one
// entry's JSON object (parse_knowledge_entry_json, what add/update and the
// C ABI's rqa_engine_add_entry take). Every entry that is accepted must
// come back unchanged through knowledge_entry_to_json and a second parse:
// the format must never lose or alter what it accepted.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

#include "fuzz_support.h"
#include "rapidqa/knowledge_file.h"

namespace {

void check_round_trip(const rapidqa::KnowledgeEntry& e) {
  using rapidqa::fuzz::check;
  check(rapidqa::validate_entry(e).is_ok(), "an accepted entry fails validate_entry", e.id);
  const std::string json = rapidqa::knowledge_entry_to_json(e);
  auto back = rapidqa::parse_knowledge_entry_json(json);
  check(back.is_ok(), "an accepted entry does not parse back", back.is_ok() ? "" : back.status().message());
  const auto& b = back.value();
  check(b.id == e.id && b.question == e.question && b.answer == e.answer && b.context == e.context &&
            b.alternates == e.alternates && b.tags == e.tags && b.cache_ttl == e.cache_ttl,
        "an entry changed on its way through knowledge_entry_to_json", json);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  for (const bool skip : {false, true}) {
    std::istringstream in(text);
    rapidqa::KnowledgeFileOptions options;
    options.skip_invalid_lines = skip;
    auto file = rapidqa::parse_knowledge_jsonl(in, "fuzz.jsonl", options);
    if (!file.is_ok()) continue;
    for (const auto& entry : file->entries) check_round_trip(entry);
  }
  auto entry = rapidqa::parse_knowledge_entry_json(text);
  if (entry.is_ok()) check_round_trip(entry.value());
  return 0;
}

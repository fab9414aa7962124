#include <fstream>
#include <sstream>
#include <unordered_map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/bounded_json.h"
#include "common/guard.h"
#include "common/line_reader.h"
#include "knowledge/entry_reader.h"
#include "rapidqa/knowledge_file.h"
#include "text/utf8.h"

namespace rapidqa {
namespace {

constexpr std::size_t kMaxIdBytes = 256;

using json = nlohmann::json;

// Reads a required or optional string field; returns an error message or "".
std::string read_string(const json& obj, const char* field, bool required, std::string& out) {
  const auto it = obj.find(field);
  if (it == obj.end() || it->is_null()) {
    return required ? fmt::format("field '{}' is missing", field) : "";
  }
  if (!it->is_string()) return fmt::format("field '{}': expected a string, got {}", field, it->type_name());
  out = it->get<std::string>();
  return "";
}

std::string read_string_array(const json& obj, const char* field, std::vector<std::string>& out) {
  const auto it = obj.find(field);
  if (it == obj.end() || it->is_null()) return "";
  if (!it->is_array()) return fmt::format("field '{}': expected an array of strings, got {}", field, it->type_name());
  for (std::size_t i = 0; i < it->size(); ++i) {
    const auto& item = (*it)[i];
    if (!item.is_string()) {
      return fmt::format("field '{}'[{}]: expected a string, got {}", field, i, item.type_name());
    }
    out.push_back(item.get<std::string>());
  }
  return "";
}

// The common line through the fast reader (entry_reader.h); false sends it
// to the general parser below, which words any refusal.
bool parse_common_line(std::string_view line, KnowledgeEntry& entry) {
  KnowledgeEntry read;
  if (!detail::read_common_entry(line, read) || !validate_entry(read).is_ok()) return false;
  entry = std::move(read);
  return true;
}

// Parses one JSON line into an entry; returns "" or what is wrong with it.
std::string parse_line(std::string_view line, KnowledgeEntry& entry) {
  if (parse_common_line(line, entry)) return "";
  auto parsed = detail::parse_json_bounded(line);
  if (!parsed) return parsed.status().message();
  const json& obj = parsed.value();
  if (!obj.is_object()) return fmt::format("expected a JSON object, got {}", obj.type_name());
  for (const auto& [key, value] : obj.items()) {
    static const char* const kKnown[] = {"id", "question", "alternates", "answer", "context", "tags",
                                         "cache_ttl_seconds"};
    bool known = false;
    for (const char* k : kKnown) known = known || key == k;
    if (!known) {
      return fmt::format(
          "unknown field '{}' (expected id, question, alternates, answer, context, tags, cache_ttl_seconds)",
          detail::clip_for_message(key, 48));
    }
  }
  if (const auto ttl = obj.find("cache_ttl_seconds"); ttl != obj.end() && !ttl->is_null()) {
    if (!ttl->is_number()) return fmt::format("field 'cache_ttl_seconds': expected a number, got {}", ttl->type_name());
    const double seconds = ttl->get<double>();
    // At least a millisecond, at most a year: anything else is a typo.
    if (!(seconds >= 0.001 && seconds <= 366.0 * 24 * 3600)) {
      return fmt::format("field 'cache_ttl_seconds': {} is outside [0.001, 31622400]",
                         detail::clip_for_message(ttl->dump(), 32));
    }
    entry.cache_ttl = std::chrono::milliseconds(static_cast<std::int64_t>(seconds * 1000.0 + 0.5));
  }
  for (const auto& message : {read_string(obj, "id", true, entry.id),
                              read_string(obj, "question", true, entry.question),
                              read_string(obj, "answer", true, entry.answer),
                              read_string(obj, "context", false, entry.context),
                              read_string_array(obj, "alternates", entry.alternates),
                              read_string_array(obj, "tags", entry.tags)}) {
    if (!message.empty()) return message;
  }
  const Status valid = validate_entry(entry);
  return valid.is_ok() ? "" : valid.message();
}

bool is_blank(const std::string& s) {
  return s.find_first_not_of(" \t\r\n") == std::string::npos;
}

}  // namespace

Status validate_entry(const KnowledgeEntry& entry) {
  // The field is named only once a value fails: formatting "alternates[3]"
  // for every valid phrasing of a million entries costs more than checking it.
  auto problem_with = [](const std::string& value, auto&& field_name) -> std::string {
    if (is_blank(value)) return fmt::format("field '{}': expected a non-empty string", field_name());
    if (text::find_invalid_utf8(value) != std::string::npos) return fmt::format("field '{}': not valid UTF-8", field_name());
    return "";
  };
  auto non_empty = [&](const char* field, const std::string& value) {
    return problem_with(value, [field] { return std::string(field); });
  };
  auto non_empty_item = [&](const char* field, std::size_t i, const std::string& value) {
    return problem_with(value, [field, i] { return fmt::format("{}[{}]", field, i); });
  };
  std::string problem = non_empty("id", entry.id);
  if (problem.empty() && entry.id.size() > kMaxIdBytes) {
    problem = fmt::format("field 'id': {} bytes, more than the limit of {}", entry.id.size(), kMaxIdBytes);
  }
  // An id travels through C strings, URLs and log lines: a NUL would cut
  // it short (the entry could never be reached through the C ABI again).
  for (std::size_t i = 0; problem.empty() && i < entry.id.size(); ++i) {
    const auto c = static_cast<unsigned char>(entry.id[i]);
    if (c < 0x20 || c == 0x7f) problem = fmt::format("field 'id': control character 0x{:02x} at byte {}", c, i);
  }
  if (problem.empty()) problem = non_empty("question", entry.question);
  if (problem.empty()) problem = non_empty("answer", entry.answer);
  for (std::size_t i = 0; problem.empty() && i < entry.alternates.size(); ++i) {
    problem = non_empty_item("alternates", i, entry.alternates[i]);
  }
  if (problem.empty() && entry.cache_ttl.count() < 0) problem = "field 'cache_ttl_seconds': must not be negative";
  if (problem.empty() && text::find_invalid_utf8(entry.context) != std::string::npos) {
    problem = "field 'context': not valid UTF-8";
  }
  for (std::size_t i = 0; problem.empty() && i < entry.tags.size(); ++i) {
    problem = non_empty_item("tags", i, entry.tags[i]);
  }
  if (!problem.empty()) return Status::invalid_argument(problem);
  return Status::ok();
}

Result<KnowledgeFile> parse_knowledge_jsonl(std::istream& in, const std::string& source,
                                            const KnowledgeFileOptions& options) {
  return detail::guarded("reading knowledge", [&]() -> Result<KnowledgeFile> {
    if (options.max_line_bytes == 0) return Status::invalid_argument("max_line_bytes must be positive");
    KnowledgeFile file;
    std::vector<KnowledgeLineError> errors;
    std::unordered_map<std::string, std::size_t> first_line_of_id;
    std::string line;
    std::size_t line_number = 0;
    for (;;) {
      const detail::LineRead read = detail::read_bounded_line(in, line, options.max_line_bytes);
      if (read == detail::LineRead::kEnd) break;
      ++line_number;
      if (read == detail::LineRead::kTooLong) {
        // Where the line ends cannot be known without reading it all (from
        // /dev/zero, never): the file is refused, skip_invalid_lines or not.
        return Status::out_of_range(fmt::format("{}: line {} is longer than the limit of {} bytes (max_line_bytes)",
                                                source, line_number, options.max_line_bytes));
      }
      if (line_number == 1 && line.rfind("\xEF\xBB\xBF", 0) == 0) line.erase(0, 3);  // UTF-8 byte order mark
      if (is_blank(line) || line[line.find_first_not_of(" \t")] == '#') continue;
      KnowledgeEntry entry;
      std::string problem = parse_line(line, entry);
      if (problem.empty()) {
        const auto [it, fresh] = first_line_of_id.emplace(entry.id, line_number);
        if (!fresh) {
          problem = fmt::format("field 'id': duplicate id '{}' (first used on line {})",
                                detail::clip_for_message(entry.id, 64), it->second);
        }
      }
      if (!problem.empty()) {
        errors.push_back({line_number, std::move(problem)});
        continue;
      }
      file.entries.push_back(std::move(entry));
    }
    if (in.bad()) return Status::io_error(fmt::format("{}: read failed after line {}", source, line_number));
    if (!errors.empty() && !options.skip_invalid_lines) {
      std::string message = fmt::format("{}: {} invalid line{}, nothing loaded", source, errors.size(),
                                         errors.size() == 1 ? "" : "s");
      for (std::size_t i = 0; i < errors.size() && i < options.max_errors_reported; ++i) {
        message += fmt::format("\n  line {}: {}", errors[i].line, errors[i].message);
      }
      if (errors.size() > options.max_errors_reported) {
        message += fmt::format("\n  ... and {} more", errors.size() - options.max_errors_reported);
      }
      return Status::invalid_argument(message);
    }
    file.skipped = std::move(errors);
    return file;
  });
}

std::string knowledge_entry_to_json(const KnowledgeEntry& entry) {
  json obj = {{"id", entry.id}, {"question", entry.question}, {"answer", entry.answer}};
  if (!entry.alternates.empty()) obj["alternates"] = entry.alternates;
  if (!entry.context.empty()) obj["context"] = entry.context;
  if (!entry.tags.empty()) obj["tags"] = entry.tags;
  if (entry.cache_ttl.count() > 0) obj["cache_ttl_seconds"] = static_cast<double>(entry.cache_ttl.count()) / 1000.0;
  return obj.dump();
}

Result<KnowledgeEntry> parse_knowledge_entry_json(const std::string& json_object) {
  return detail::parse_knowledge_entry(json_object);
}

namespace detail {

Result<KnowledgeEntry> parse_knowledge_entry(std::string_view json_object) {
  return detail::guarded("parsing an entry", [&]() -> Result<KnowledgeEntry> {
    KnowledgeEntry entry;
    std::string problem = parse_line(json_object, entry);
    if (!problem.empty()) return Status::invalid_argument(problem);
    return entry;
  });
}

}  // namespace detail

Result<KnowledgeFile> read_knowledge_file(const std::string& path, const KnowledgeFileOptions& options) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return Status::not_found(fmt::format("knowledge file '{}' cannot be opened (missing or unreadable)", path));
  }
  return parse_knowledge_jsonl(in, path, options);
}

}  // namespace rapidqa

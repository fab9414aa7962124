#include "cache/change_message.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/bounded_json.h"
#include "rapidqa/knowledge_file.h"

namespace rapidqa::cache {
namespace {

using json = nlohmann::json;
// Written in field order, so "v" leads and a person reading the log sees it first.
using ordered_json = nlohmann::ordered_json;
using Kind = KnowledgeChange::Kind;

const char* kind_name(Kind kind) {
  switch (kind) {
    case Kind::kUpsert: return "upsert";
    case Kind::kRemove: return "remove";
    case Kind::kInvalidate: return "invalidate";
    case Kind::kReload: return "reload";
  }
  return "invalidate";
}

constexpr const char* kGapKind = "gap";

ordered_json envelope(const std::string& origin, const char* kind) {
  ordered_json message = ordered_json::object();
  message["v"] = kChangeMessageVersion;
  message["origin"] = origin;
  message["kind"] = kind;
  return message;
}

Status malformed(const std::string& why) { return Status::invalid_argument("malformed change message: " + why); }

}  // namespace

std::string encode_change_message(const KnowledgeChange& change) {
  ordered_json message = envelope(change.origin, kind_name(change.kind));
  message["entry_id"] = change.entry_id;
  message["version"] = change.version;
  std::string text = message.dump(-1, ' ', false, ordered_json::error_handler_t::replace);
  if (change.kind == Kind::kUpsert && change.entry) {
    // The entry is already JSON in the knowledge-file format: appended as
    // text, not parsed and dumped again (this runs under the engine's
    // writer lock).
    text.pop_back();
    text += ",\"entry\":";
    text += knowledge_entry_to_json(*change.entry);
    text += '}';
  }
  return text;
}

std::string encode_gap_message(const std::string& origin) {
  return envelope(origin, kGapKind).dump(-1, ' ', false, ordered_json::error_handler_t::replace);
}

Result<ChangeMessage> parse_change_message(std::string_view text) {
  // A message comes from any client of the Redis server: bounded nesting,
  // no duplicate keys, errors that quote little of it.
  auto parsed_message = detail::parse_json_bounded(text);
  if (!parsed_message) return malformed(parsed_message.status().message());
  const json& message = parsed_message.value();
  if (!message.is_object()) return malformed(fmt::format("expected a JSON object, got {}", message.type_name()));

  const auto version = message.find("v");
  if (version == message.end() || !version->is_number_integer()) return malformed("field 'v' (format version) is missing");
  if (version->get<std::int64_t>() != kChangeMessageVersion) {
    return malformed(fmt::format("format version {} is not {}, the one this library reads",
                                 version->get<std::int64_t>(), kChangeMessageVersion));
  }
  auto string_field = [&](const char* name, bool required, std::string& out) -> Status {
    const auto it = message.find(name);
    if (it == message.end()) return required ? malformed(fmt::format("field '{}' is missing", name)) : Status::ok();
    if (!it->is_string()) return malformed(fmt::format("field '{}': expected a string, got {}", name, it->type_name()));
    out = it->get<std::string>();
    return Status::ok();
  };

  ChangeMessage out;
  std::string kind;
  for (Status s : {string_field("origin", true, out.change.origin), string_field("kind", true, kind),
                   string_field("stream_id", false, out.stream_id)}) {
    if (!s.is_ok()) return s;
  }
  if (out.change.origin.empty()) return malformed("field 'origin' is empty");
  if (kind == kGapKind) {
    out.origin_dropped_changes = true;
    return out;
  }
  if (kind == "upsert") out.change.kind = Kind::kUpsert;
  else if (kind == "remove") out.change.kind = Kind::kRemove;
  else if (kind == "invalidate") out.change.kind = Kind::kInvalidate;
  else if (kind == "reload") out.change.kind = Kind::kReload;
  else return malformed(fmt::format("unknown kind '{}'", detail::clip_for_message(kind, 32)));

  if (out.change.kind != Kind::kReload) {
    Status id = string_field("entry_id", true, out.change.entry_id);
    if (!id.is_ok()) return id;
    if (out.change.entry_id.empty()) return malformed("field 'entry_id' is empty");
  }
  if (const auto v = message.find("version"); v != message.end()) {
    if (!v->is_number_unsigned()) return malformed("field 'version': expected a non-negative integer");
    out.change.version = v->get<std::uint64_t>();
  }
  if (out.change.kind == Kind::kUpsert) {
    const auto entry = message.find("entry");
    if (entry == message.end() || !entry->is_object()) return malformed("an upsert needs an 'entry' object");
    auto parsed = parse_knowledge_entry_json(entry->dump(-1, ' ', false, json::error_handler_t::replace));
    if (!parsed) return malformed("field 'entry': " + parsed.status().message());
    if (parsed->id != out.change.entry_id) {
      return malformed(fmt::format("entry id '{}' differs from entry_id '{}'", parsed->id,
                                   detail::clip_for_message(out.change.entry_id, 64)));
    }
    parsed->version = out.change.version;
    out.change.entry = std::move(parsed).value();
  }
  return out;
}

}  // namespace rapidqa::cache

#include "text/special_layout.h"

#include <string>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/bounded_json.h"

namespace rapidqa::text {

namespace {

Status layout_error(const std::string& field, const std::string& what) {
  return Status::invalid_argument(fmt::format("field '{}': {}", field, what));
}

}  // namespace

SpecialLayout::SpecialLayout(std::int32_t second_type_id)
    : single_{Item{0, {}, 0}}, pair_{Item{0, {}, 0}, Item{1, {}, second_type_id}} {}

SpecialLayout::SpecialLayout(std::vector<Item> single, std::vector<Item> pair)
    : single_(std::move(single)), pair_(std::move(pair)) {}

SpecialLayout SpecialLayout::roberta(std::int32_t cls, std::int32_t sep) {
  return SpecialLayout({{-1, {cls}, 0}, {0, {}, 0}, {-1, {sep}, 0}},
                       {{-1, {cls}, 0}, {0, {}, 0}, {-1, {sep, sep}, 0}, {1, {}, 0}, {-1, {sep}, 0}});
}

SpecialLayout SpecialLayout::bert(std::int32_t cls, std::int32_t sep) {
  return SpecialLayout({{-1, {cls}, 0}, {0, {}, 0}, {-1, {sep}, 0}},
                       {{-1, {cls}, 0}, {0, {}, 0}, {-1, {sep}, 0}, {1, {}, 1}, {-1, {sep}, 1}});
}

Result<SpecialLayout> SpecialLayout::from_template(const nlohmann::json& step) {
  auto single = read_template(step, "single", 1);
  if (!single) return single.status();
  auto pair = read_template(step, "pair", 2);
  if (!pair) return pair.status();
  return SpecialLayout(std::move(single).value(), std::move(pair).value());
}

Result<std::vector<SpecialLayout::Item>> SpecialLayout::read_template(const nlohmann::json& step, const char* field,
                                                                       int texts) {
  using Json = nlohmann::json;
  const auto it = step.find(field);
  const std::string where = std::string("post_processor.") + field;
  if (it == step.end() || !it->is_array()) return layout_error(where, "expected a list");
  const auto specials = step.find("special_tokens");
  std::vector<Item> out;
  int seen = 0;
  for (const Json& item : *it) {
    const bool is_special = item.is_object() && item.contains("SpecialToken");
    const bool is_text = item.is_object() && item.contains("Sequence");
    const Json& body = is_special ? item["SpecialToken"] : is_text ? item["Sequence"] : item;
    if ((!is_special && !is_text) || !body.is_object() || !body.contains("id") || !body["id"].is_string()) {
      return layout_error(where, "an item is neither a SpecialToken nor a Sequence");
    }
    Item entry;
    entry.type_id = body.contains("type_id") && body["type_id"].is_number_integer() ? body["type_id"].get<std::int32_t>()
                                                                                   : 0;
    const std::string id = body["id"].get<std::string>();
    if (is_text) {
      if ((id != "A" && id != "B") || (id == "B" && texts < 2)) {
        return layout_error(where, fmt::format("sequence '{}' is not A{}", detail::clip_for_message(id),
                                               texts < 2 ? "" : " or B"));
      }
      entry.sequence = id == "A" ? 0 : 1;
      if (seen & (1 << entry.sequence)) return layout_error(where, "does not hold each text once");
      seen |= 1 << entry.sequence;
      out.push_back(std::move(entry));
      continue;
    }
    const bool listed = specials != step.end() && specials->is_object() && specials->contains(id);
    const Json* special = listed ? &(*specials)[id] : nullptr;
    if (!special || !special->is_object() || !special->contains("ids") || !(*special)["ids"].is_array() ||
        (*special)["ids"].empty()) {
      return layout_error(where, fmt::format("special '{}' is not in special_tokens with its ids",
                                             detail::clip_for_message(id)));
    }
    for (const Json& n : (*special)["ids"]) {
      if (!n.is_number_integer()) return layout_error(where, "a special token's ids are not integers");
      entry.ids.push_back(n.get<std::int32_t>());
    }
    out.push_back(std::move(entry));
  }
  if (seen != (texts == 2 ? 3 : 1)) return layout_error(where, "does not hold each text once");
  return out;
}

std::size_t SpecialLayout::specials(bool pair) const {
  std::size_t count = 0;
  for (const Item& item : pair ? pair_ : single_) count += item.ids.size();
  return count;
}

TokenizedText SpecialLayout::assemble(const std::vector<TextPiece>& first, const std::vector<TextPiece>* second,
                                      std::size_t truncated) const {
  TokenizedText t;
  t.truncated_tokens = truncated;
  for (const Item& item : second ? pair_ : single_) {
    if (item.sequence < 0) {
      for (const std::int32_t id : item.ids) {
        t.input_ids.push_back(id);
        t.token_type_ids.push_back(item.type_id);
        t.offsets.emplace_back(0, 0);
        t.sequence_ids.push_back(-1);
      }
      continue;
    }
    for (const TextPiece& p : item.sequence == 0 ? first : *second) {
      t.input_ids.push_back(p.id);
      t.token_type_ids.push_back(item.type_id);
      t.offsets.emplace_back(p.begin, p.end);
      t.sequence_ids.push_back(static_cast<std::int8_t>(item.sequence));
    }
  }
  t.attention_mask.assign(t.input_ids.size(), 1);
  return t;
}

Result<TokenizedText> SpecialLayout::fit(std::vector<TextPiece> text, std::size_t max_length) const {
  const std::size_t reserved = specials(false);
  if (max_length < reserved + 1) {
    return Status::invalid_argument(
        fmt::format("max_length {} leaves no room for a token beside {} special tokens", max_length, reserved));
  }
  std::size_t truncated = 0;
  if (text.size() > max_length - reserved) {
    truncated = text.size() - (max_length - reserved);
    text.resize(max_length - reserved);
  }
  return assemble(text, nullptr, truncated);
}

Result<TokenizedText> SpecialLayout::fit_pair(std::vector<TextPiece> first, std::vector<TextPiece> second,
                                              std::size_t max_length) const {
  const std::size_t reserved = specials(true);
  if (max_length < reserved + 2) {
    return Status::invalid_argument(
        fmt::format("max_length {} leaves no room for two texts beside {} special tokens", max_length, reserved));
  }
  std::size_t truncated = 0;
  while (first.size() + second.size() > max_length - reserved) {
    (second.size() >= first.size() ? second : first).pop_back();
    ++truncated;
  }
  return assemble(first, &second, truncated);
}

Result<TokenizedText> LaidOutTokenizer::encode(std::string_view text, std::size_t max_length) const {
  auto p = pieces(text);
  if (!p) return p.status();
  return layout_.fit(std::move(p).value(), max_length);
}

Result<TokenizedText> LaidOutTokenizer::encode_pair(std::string_view first, std::string_view second,
                                                    std::size_t max_length) const {
  auto a = pieces(first);
  if (!a) return Status::invalid_argument(fmt::format("first text: {}", a.status().message()));
  auto b = pieces(second);
  if (!b) return Status::invalid_argument(fmt::format("second text: {}", b.status().message()));
  return layout_.fit_pair(std::move(a).value(), std::move(b).value(), max_length);
}

}  // namespace rapidqa::text

#include "text/byte_level_bpe.h"

#include <utf8proc.h>

#include <algorithm>
#include <limits>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/bounded_file.h"
#include "common/bounded_json.h"
#include "text/utf8.h"

namespace rapidqa::text {
namespace {

using Json = nlohmann::json;

constexpr std::size_t kMaxTokenizerJsonBytes = 128u << 20;
constexpr std::int32_t kSpaceSymbol = 0x120;  // 'Ġ': the byte-level symbol of ' '

// GPT-2's map of bytes to printable code points: printable Latin-1 bytes
// stand for themselves, the others for 256 and up, in byte order.
std::int32_t byte_symbol(unsigned char b) {
  static const auto table = [] {
    std::vector<std::int32_t> t(256, -1);
    for (int c = '!'; c <= '~'; ++c) t[static_cast<std::size_t>(c)] = c;
    for (int c = 0xA1; c <= 0xAC; ++c) t[static_cast<std::size_t>(c)] = c;
    for (int c = 0xAE; c <= 0xFF; ++c) t[static_cast<std::size_t>(c)] = c;
    std::int32_t next = 256;
    for (std::size_t b = 0; b < 256; ++b) {
      if (t[b] < 0) t[b] = next++;
    }
    return t;
  }();
  return table[b];
}

// One character of a piece and the original bytes it stands for.
struct Char {
  std::int32_t code_point;
  std::size_t begin, end;  // in the original text; a prepended space is (begin, begin) of the first character
};

// GPT-2's pre-tokenizing split of chars [0, n):
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// The first alternative that matches at a position wins, as in the regex.
std::vector<std::pair<std::size_t, std::size_t>> gpt2_split(const std::vector<Char>& chars) {
  std::vector<std::pair<std::size_t, std::size_t>> out;
  const std::size_t n = chars.size();
  auto cp = [&](std::size_t i) { return chars[i].code_point; };
  auto other = [&](std::int32_t c) { return !is_white_space(c) && !is_letter(c) && !is_number(c); };
  std::size_t i = 0;
  while (i < n) {
    std::size_t end = i;
    if (cp(i) == '\'' && i + 1 < n) {
      const std::int32_t a = cp(i + 1), b = i + 2 < n ? cp(i + 2) : 0;
      if (a == 's' || a == 't' || a == 'm' || a == 'd') {
        end = i + 2;
      } else if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) {
        end = i + 3;
      }
    }
    if (end == i) {
      for (auto klass : {+[](std::int32_t c) { return is_letter(c); }, +[](std::int32_t c) { return is_number(c); }}) {
        std::size_t j = i + (cp(i) == ' ' && i + 1 < n && klass(cp(i + 1)) ? 1 : 0);
        if (j < n && klass(cp(j))) {
          while (j < n && klass(cp(j))) ++j;
          end = j;
          break;
        }
      }
    }
    if (end == i) {
      std::size_t j = i + (cp(i) == ' ' && i + 1 < n && other(cp(i + 1)) ? 1 : 0);
      if (j < n && other(cp(j))) {
        while (j < n && other(cp(j))) ++j;
        end = j;
      }
    }
    if (end == i && is_white_space(cp(i))) {
      std::size_t j = i;
      while (j < n && is_white_space(cp(j))) ++j;
      // \s+(?!\S): all of the run at the end; before a non-space, all but
      // its last character, which then opens the next word (" ?\p{L}+").
      end = j == n || j - i < 2 ? j : j - 1;
    }
    if (end == i) end = i + 1;  // unreachable: every character is one of the classes
    out.emplace_back(i, end);
    i = end;
  }
  return out;
}

std::uint64_t pair_key(std::int32_t a, std::int32_t b) {
  return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(a)) << 32) | static_cast<std::uint32_t>(b);
}

Status field_error(const std::string& field, const std::string& what) {
  return Status::invalid_argument(fmt::format("field '{}': {}", field, what));
}

// A boolean option that must hold `expected` (or be absent / null).
Status require_flag(const Json& j, const char* field, const std::string& where, bool expected) {
  const auto it = j.find(field);
  if (it == j.end() || it->is_null()) return Status::ok();
  if (!it->is_boolean() || it->get<bool>() != expected) {
    return field_error(where + "." + field, fmt::format("only {} is supported", expected ? "true" : "false"));
  }
  return Status::ok();
}

bool flag(const Json& j, const char* field, bool fallback) {
  const auto it = j.find(field);
  return it != j.end() && it->is_boolean() ? it->get<bool>() : fallback;
}

}  // namespace

bool ByteLevelBpeTokenizer::is_bpe(const Json& root) {
  if (!root.is_object()) return false;
  const auto model = root.find("model");
  return model != root.end() && model->is_object() && model->value("type", "") == "BPE";
}

Result<ByteLevelBpeTokenizer> ByteLevelBpeTokenizer::from_tokenizer_json(const std::string& path) {
  auto text = detail::read_file_bounded(path, kMaxTokenizerJsonBytes, "tokenizer.json");
  if (!text) return text.status();
  return from_json_text(text.value(), fmt::format("tokenizer.json '{}'", path));
}

Result<ByteLevelBpeTokenizer> ByteLevelBpeTokenizer::from_json_text(std::string_view json, const std::string& source) {
  auto parsed = detail::parse_json_bounded(json);
  if (!parsed) return Status::invalid_argument(fmt::format("{}: {}", source, parsed.status().message()));
  return from_json(parsed.value(), source);
}

Result<ByteLevelBpeTokenizer> ByteLevelBpeTokenizer::from_json(const Json& root, const std::string& source) {
  auto fail = [&](const Status& s) { return Status::invalid_argument(fmt::format("{}: {}", source, s.message())); };
  if (!root.is_object()) return fail(Status::invalid_argument("not a JSON object"));
  if (!is_bpe(root)) return fail(field_error("model.type", "expected \"BPE\""));
  if (const auto n = root.find("normalizer"); n != root.end() && !n->is_null()) {
    return fail(field_error("normalizer", fmt::format("'{}' is not supported with byte-level BPE (only null)",
                                                      n->is_object() ? n->value("type", "?") : "?")));
  }
  ByteLevelBpeTokenizer t;
  if (Status s = t.read_model(root["model"]); !s.is_ok()) return fail(s);
  if (Status s = t.read_pre_tokenizer(root); !s.is_ok()) return fail(s);
  // The post-processor's special ids are checked once the added tokens are
  // in the vocabulary.
  if (const auto post = root.find("post_processor"); post != root.end() && !post->is_null()) {
    if (Status s = t.read_post_processor(*post); !s.is_ok()) return fail(s);
  }
  if (const auto added = root.find("added_tokens"); added != root.end() && !added->is_null()) {
    if (Status s = t.read_added_tokens(*added); !s.is_ok()) return fail(s);
  }
  for (const auto* layout : {&t.layout_.single(), &t.layout_.pair()}) {
    for (const SpecialLayout::Item& item : *layout) {
      for (const std::int32_t id : item.ids) {
        if (id < 0 || static_cast<std::size_t>(id) >= t.id_to_token_.size()) {
          return fail(field_error("post_processor", fmt::format("special id {} is outside the vocabulary", id)));
        }
      }
    }
  }
  const auto padding = root.find("padding");
  if (padding != root.end() && padding->is_object() && padding->contains("pad_id") &&
      (*padding)["pad_id"].is_number_integer()) {
    t.pad_id_ = (*padding)["pad_id"].get<std::int32_t>();
  } else if (const auto pad = t.token_to_id_.find("<pad>"); pad != t.token_to_id_.end()) {
    t.pad_id_ = pad->second;
  }
  // What trim_offsets takes off each token, counted once here rather than
  // on every encode.
  t.space_ends_.assign(t.id_to_token_.size(), {0, 0});
  for (std::size_t id = 0; id < t.id_to_token_.size(); ++id) {
    std::vector<std::int32_t> cps;
    const std::string& token = t.id_to_token_[id];
    for (std::size_t at = 0; at < token.size();) {
      std::size_t length = 0;
      cps.push_back(decode_at(token, at, length));
      at += length;
    }
    auto spacey = [](std::int32_t c) { return c == kSpaceSymbol || is_white_space(c); };
    std::uint32_t leading = 0, trailing = 0;
    while (leading < cps.size() && spacey(cps[leading])) ++leading;
    while (trailing < cps.size() && spacey(cps[cps.size() - 1 - trailing])) ++trailing;
    t.space_ends_[id] = {leading, trailing};
  }
  return t;
}

Status ByteLevelBpeTokenizer::read_model(const Json& model) {
  for (const char* unsupported : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    const auto it = model.find(unsupported);
    if (it != model.end() && !it->is_null() && !(it->is_string() && it->get<std::string>().empty())) {
      return field_error(std::string("model.") + unsupported, "not supported for byte-level BPE");
    }
  }
  if (Status s = require_flag(model, "byte_fallback", "model", false); !s.is_ok()) return s;
  if (const auto dropout = model.find("dropout"); dropout != model.end() && !dropout->is_null()) {
    return field_error("model.dropout", "only null (no dropout at inference) is supported");
  }
  fuse_unk_ = flag(model, "fuse_unk", false);
  ignore_merges_ = flag(model, "ignore_merges", false);
  const auto vocab = model.find("vocab");
  if (vocab == model.end() || !vocab->is_object() || vocab->empty()) {
    return field_error("model.vocab", "expected an object of token -> id");
  }
  if (vocab->size() > static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max() / 2)) {
    return field_error("model.vocab", "too large");
  }
  std::vector<std::string> by_id(vocab->size());
  std::vector<bool> taken(vocab->size(), false);
  for (const auto& [token, id] : vocab->items()) {
    if (!id.is_number_integer() || id.get<std::int64_t>() < 0 ||
        id.get<std::int64_t>() >= static_cast<std::int64_t>(vocab->size()) ||
        taken[static_cast<std::size_t>(id.get<std::int64_t>())]) {
      return field_error("model.vocab", fmt::format("token '{}' has an id that is not one of 0..{} once",
                                                         detail::clip_for_message(token), vocab->size() - 1));
    }
    const auto index = static_cast<std::size_t>(id.get<std::int64_t>());
    taken[index] = true;
    by_id[index] = token;
    token_to_id_.emplace(token, static_cast<std::int32_t>(index));
  }
  id_to_token_ = std::move(by_id);
  const auto merges = model.find("merges");
  if (merges == model.end() || !merges->is_array()) return field_error("model.merges", "expected a list");
  std::int32_t rank = 0;
  for (const Json& m : *merges) {
    std::string left, right;
    if (m.is_string()) {
      const std::string line = m.get<std::string>();
      const std::size_t space = line.find(' ');
      if (space == std::string::npos || line.find(' ', space + 1) != std::string::npos) {
        return field_error("model.merges", fmt::format("'{}' is not two tokens", detail::clip_for_message(line)));
      }
      left = line.substr(0, space);
      right = line.substr(space + 1);
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      left = m[0].get<std::string>();
      right = m[1].get<std::string>();
    } else {
      return field_error("model.merges", "an entry is neither \"a b\" nor [\"a\", \"b\"]");
    }
    const auto a = token_to_id_.find(left), b = token_to_id_.find(right),
               merged = token_to_id_.find(left + right);
    if (a == token_to_id_.end() || b == token_to_id_.end() || merged == token_to_id_.end()) {
      return field_error("model.merges", fmt::format("merge '{} {}' names a token outside the vocabulary",
                                                          detail::clip_for_message(left),
                                                          detail::clip_for_message(right)));
    }
    // A pair listed twice keeps its first (lowest) rank.
    merges_.try_emplace(pair_key(a->second, b->second), rank, merged->second);
    ++rank;
  }
  if (const auto unk = model.find("unk_token"); unk != model.end() && !unk->is_null()) {
    if (!unk->is_string() || !token_to_id_.count(unk->get<std::string>())) {
      return field_error("model.unk_token", "not a token of the vocabulary");
    }
    unk_id_ = token_to_id_.at(unk->get<std::string>());
  }
  byte_ids_.assign(256, -1);
  for (std::size_t b = 0; b < 256; ++b) {
    std::string symbol;
    append_utf8(symbol, byte_symbol(static_cast<unsigned char>(b)));
    if (const auto it = token_to_id_.find(symbol); it != token_to_id_.end()) byte_ids_[b] = it->second;
  }
  return Status::ok();
}

Status ByteLevelBpeTokenizer::read_pre_tokenizer(const Json& root) {
  // ByteLevel, alone or as the only member of a Sequence
  const auto pre = root.find("pre_tokenizer");
  const Json* byte_level = nullptr;
  if (pre != root.end() && pre->is_object()) {
    if (pre->value("type", "") == "ByteLevel") {
      byte_level = &*pre;
    } else if (pre->value("type", "") == "Sequence") {
      const auto members = pre->find("pretokenizers");
      if (members != pre->end() && members->is_array() && members->size() == 1 && (*members)[0].is_object() &&
          (*members)[0].value("type", "") == "ByteLevel") {
        byte_level = &(*members)[0];
      }
    }
  }
  if (!byte_level) return field_error("pre_tokenizer", "expected ByteLevel");
  add_prefix_space_ = flag(*byte_level, "add_prefix_space", false);
  use_regex_ = flag(*byte_level, "use_regex", true);
  return Status::ok();
}

namespace {

// RobertaProcessing's "cls" or "sep": [token, id].
Status read_roberta_special(const Json& step, const char* field, std::int32_t& id) {
  const auto it = step.find(field);
  if (it == step.end() || !it->is_array() || it->size() != 2 || !(*it)[0].is_string() ||
      !(*it)[1].is_number_integer()) {
    return field_error(std::string("post_processor.") + field, "expected [token, id]");
  }
  id = (*it)[1].get<std::int32_t>();
  return Status::ok();
}

}  // namespace

Status ByteLevelBpeTokenizer::read_post_processor(const Json& post) {
  std::vector<const Json*> steps;
  if (post.is_object() && post.value("type", "") == "Sequence" && post.contains("processors") &&
      post["processors"].is_array()) {
    for (const Json& step : post["processors"]) steps.push_back(&step);
  } else {
    steps.push_back(&post);
  }
  bool laid_out = false;
  for (const Json* step : steps) {
    const std::string type = step->is_object() ? step->value("type", "") : "";
    if (type == "ByteLevel" || type == "RobertaProcessing") {
      trim_offsets_ = flag(*step, "trim_offsets", true);
      post_add_prefix_space_ = flag(*step, "add_prefix_space", true);
      if (type == "ByteLevel") continue;
    }
    if (laid_out) return field_error("post_processor", "more than one layout of special tokens");
    laid_out = true;
    if (type == "RobertaProcessing") {
      std::int32_t cls = -1, sep = -1;
      if (Status s = read_roberta_special(*step, "cls", cls); !s.is_ok()) return s;
      if (Status s = read_roberta_special(*step, "sep", sep); !s.is_ok()) return s;
      layout_ = SpecialLayout::roberta(cls, sep);
    } else if (type == "TemplateProcessing") {
      auto layout = SpecialLayout::from_template(*step);
      if (!layout) return layout.status();
      layout_ = std::move(layout).value();
    } else {
      return field_error("post_processor",
                         fmt::format("'{}' is not supported (RobertaProcessing, TemplateProcessing, ByteLevel, "
                                     "a Sequence of those, null)",
                                     detail::clip_for_message(type)));
    }
  }
  return Status::ok();
}

Status ByteLevelBpeTokenizer::read_added_tokens(const Json& added) {
  if (!added.is_array()) return field_error("added_tokens", "expected a list");
  for (const Json& a : added) {
    if (!a.is_object() || !a.contains("id") || !a["id"].is_number_integer() || !a.contains("content") ||
        !a["content"].is_string() || a["content"].get<std::string>().empty() || a["id"].get<std::int64_t>() < 0 ||
        a["id"].get<std::int64_t>() > std::numeric_limits<std::int32_t>::max() / 2) {
      return field_error("added_tokens", "an entry needs an id and a non-empty content");
    }
    if (flag(a, "single_word", false)) return field_error("added_tokens.single_word", "only false is supported");
    AddedToken token;
    token.content = a["content"].get<std::string>();
    token.id = a["id"].get<std::int32_t>();
    token.lstrip = flag(a, "lstrip", false);
    token.rstrip = flag(a, "rstrip", false);
    token.normalized = flag(a, "normalized", !flag(a, "special", false));
    if (static_cast<std::size_t>(token.id) >= id_to_token_.size()) id_to_token_.resize(token.id + 1);
    id_to_token_[static_cast<std::size_t>(token.id)] = token.content;
    token_to_id_[token.content] = token.id;
    added_.push_back(std::move(token));
  }
  return Status::ok();
}

Result<ByteLevelBpeTokenizer> ByteLevelBpeTokenizer::from_vocab_and_merges(const std::string& vocab_json_path,
                                                                           const std::string& merges_path,
                                                                           std::string_view tokenizer_config_json) {
  auto vocab_text = detail::read_file_bounded(vocab_json_path, kMaxTokenizerJsonBytes, "vocab.json");
  if (!vocab_text) return vocab_text.status();
  auto vocab = detail::parse_json_bounded(vocab_text.value());
  if (!vocab || !vocab->is_object()) {
    return Status::invalid_argument(fmt::format("vocab.json '{}': expected an object of token -> id", vocab_json_path));
  }
  auto merges_text = detail::read_file_bounded(merges_path, kMaxTokenizerJsonBytes, "merges.txt");
  if (!merges_text) return merges_text.status();
  Json merges = Json::array();
  std::size_t line_number = 0;
  for (std::size_t at = 0; at < merges_text->size();) {
    std::size_t end = merges_text->find('\n', at);
    if (end == std::string::npos) end = merges_text->size();
    std::string line = merges_text->substr(at, end - at);
    at = end + 1;
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || (line_number == 1 && line.rfind("#version", 0) == 0)) continue;
    merges.push_back(line);
  }
  // tokenizer_config.json's settings, where it has them.
  bool add_prefix_space = false;
  std::string bos = "<s>", eos = "</s>";
  if (!tokenizer_config_json.empty()) {
    auto config = detail::parse_json_bounded(tokenizer_config_json);
    if (config && config->is_object()) {
      add_prefix_space = flag(*config, "add_prefix_space", false);
      auto token = [&](const char* field, std::string& out) {
        const auto it = config->find(field);
        if (it == config->end()) return;
        if (it->is_string()) out = it->get<std::string>();
        if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) out = (*it)["content"];
      };
      token("bos_token", bos);
      token("eos_token", eos);
    }
  }
  const auto id_of = [&](const std::string& token) -> std::int64_t {
    const auto it = vocab->find(token);
    return it != vocab->end() && it->is_number_integer() ? it->get<std::int64_t>() : -1;
  };
  if (id_of(bos) < 0 || id_of(eos) < 0) {
    return Status::invalid_argument(fmt::format("vocab.json '{}': no '{}' or '{}' for RoBERTa's specials",
                                                vocab_json_path, detail::clip_for_message(bos),
                                                detail::clip_for_message(eos)));
  }
  Json added = Json::array();
  for (const std::string& special : {std::string("<s>"), std::string("<pad>"), std::string("</s>"), std::string("<unk>"),
                                    std::string("<mask>"), bos, eos}) {
    const std::int64_t id = id_of(special);
    if (id < 0) continue;
    bool seen = false;
    for (const Json& a : added) seen = seen || a["content"] == special;
    if (seen) continue;
    added.push_back({{"id", id}, {"content", special}, {"single_word", false}, {"lstrip", special == "<mask>"},
                     {"rstrip", false}, {"normalized", special != "<mask>"}, {"special", true}});
  }
  const Json json = {
      {"added_tokens", added},
      {"normalizer", nullptr},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", add_prefix_space}, {"trim_offsets", true},
                         {"use_regex", true}}},
      {"post_processor", {{"type", "RobertaProcessing"}, {"sep", {eos, id_of(eos)}}, {"cls", {bos, id_of(bos)}},
                          {"trim_offsets", true}, {"add_prefix_space", add_prefix_space}}},
      {"model", {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"fuse_unk", false},
                 {"vocab", *vocab}, {"merges", merges}}},
  };
  return from_json(json, fmt::format("vocab.json '{}' and merges.txt '{}'", vocab_json_path, merges_path));
}

std::int32_t ByteLevelBpeTokenizer::token_to_id(std::string_view token) const {
  const auto it = token_to_id_.find(std::string(token));
  return it == token_to_id_.end() ? -1 : it->second;
}

const std::string& ByteLevelBpeTokenizer::id_to_token(std::int32_t id) const {
  if (id < 0 || static_cast<std::size_t>(id) >= id_to_token_.size()) {
    return unk_id_ >= 0 ? id_to_token_[static_cast<std::size_t>(unk_id_)] : empty_;
  }
  return id_to_token_[static_cast<std::size_t>(id)];
}

// Cuts the added tokens of one pass (those matched on the raw text, or
// those matched after normalization) out of [from, to), leftmost first,
// the longest at a position, appending to `out` the stretches between them
// and the tokens themselves, in order. lstrip and rstrip take the white
// space beside a match (never reaching back past the previous one); it is
// then in no segment at all, as the library reports it.
void ByteLevelBpeTokenizer::split_added(std::string_view text, std::size_t from, std::size_t to, bool normalized_pass,
                                        std::vector<Segment>& out) const {
  std::size_t start_offset = from;
  for (std::size_t at = from; at < to;) {
    const AddedToken* best = nullptr;
    for (const AddedToken& a : added_) {
      if (a.normalized != normalized_pass || a.content.size() > to - at) continue;
      if (text.compare(at, a.content.size(), a.content) == 0 && (!best || a.content.size() > best->content.size())) {
        best = &a;
      }
    }
    if (!best) {
      ++at;
      continue;
    }
    std::size_t start = at, stop = at + best->content.size();
    if (best->lstrip) {
      std::size_t s = start;
      while (s > start_offset) {
        std::size_t back = s - 1;
        while (back > start_offset && (static_cast<unsigned char>(text[back]) & 0xC0) == 0x80) --back;
        std::size_t length = 0;
        if (!is_white_space(decode_at(text, back, length))) break;
        s = back;
      }
      start = s;
    }
    if (best->rstrip) {
      while (stop < to) {
        std::size_t length = 0;
        if (!is_white_space(decode_at(text, stop, length))) break;
        stop += length;
      }
    }
    if (start_offset < start) out.push_back({-1, start_offset, start});
    out.push_back({best->id, at, at + best->content.size()});
    start_offset = stop;
    at = stop;
  }
  if (start_offset < to) out.push_back({-1, start_offset, to});
}

void ByteLevelBpeTokenizer::bpe_word(const std::vector<std::int32_t>& symbols,
                                     const std::vector<std::pair<std::size_t, std::size_t>>& spans,
                                     std::vector<Piece>& out) const {
  struct Symbol {
    std::int32_t id;
    std::size_t begin, end;
  };
  std::vector<Symbol> word;
  for (std::size_t i = 0; i < symbols.size(); ++i) {
    std::int32_t id = symbols[i];
    if (id < 0) {
      if (unk_id_ < 0) continue;  // a byte outside the vocabulary, and no unknown token: dropped
      if (fuse_unk_ && !word.empty() && word.back().id == unk_id_) {
        word.back().end = std::max(word.back().end, spans[i].second);
        continue;
      }
      id = unk_id_;
    }
    word.push_back({id, spans[i].first, spans[i].second});
  }
  for (;;) {
    std::int32_t best_rank = std::numeric_limits<std::int32_t>::max(), merged = -1;
    std::size_t best = 0;
    for (std::size_t i = 0; i + 1 < word.size(); ++i) {
      const auto it = merges_.find(pair_key(word[i].id, word[i + 1].id));
      if (it != merges_.end() && it->second.first < best_rank) {
        best_rank = it->second.first;
        merged = it->second.second;
        best = i;
      }
    }
    if (merged < 0) break;
    word[best] = {merged, std::min(word[best].begin, word[best + 1].begin), std::max(word[best].end, word[best + 1].end)};
    word.erase(word.begin() + static_cast<std::ptrdiff_t>(best) + 1);
  }
  for (const Symbol& s : word) out.push_back({s.id, s.begin, s.end});
}

void ByteLevelBpeTokenizer::bpe_piece(std::string_view text, std::size_t begin, std::size_t end,
                                      std::vector<Piece>& out) const {
  if (begin == end) return;
  std::vector<Char> chars;
  for (std::size_t at = begin; at < end;) {
    std::size_t length = 0;
    const std::int32_t c = decode_at(text, at, length);
    chars.push_back({c, at, at + length});
    at += length;
  }
  const bool prepended = add_prefix_space_ && chars.front().code_point != ' ';
  if (prepended) {
    // The space stands at the first character's start, as Hugging Face
    // aligns a prepended character.
    chars.insert(chars.begin(), Char{' ', chars.front().begin, chars.front().begin});
  }
  std::vector<std::pair<std::size_t, std::size_t>> words;
  if (use_regex_) {
    words = gpt2_split(chars);
  } else {
    words.emplace_back(0, chars.size());
  }
  for (const auto& [first, last] : words) {
    std::vector<std::int32_t> symbols;
    std::vector<std::pair<std::size_t, std::size_t>> spans;
    for (std::size_t i = first; i < last; ++i) {
      const Char& c = chars[i];
      const std::string_view bytes = prepended && i == 0 ? std::string_view(" ") : text.substr(c.begin, c.end - c.begin);
      for (const char b : bytes) {
        symbols.push_back(byte_ids_[static_cast<unsigned char>(b)]);
        spans.emplace_back(c.begin, c.end);
      }
    }
    if (ignore_merges_) {
      // A word the vocabulary holds whole is one token, merges or not.
      std::string whole;
      for (std::size_t i = first; i < last; ++i) {
        const std::string_view bytes =
            prepended && i == 0 ? std::string_view(" ") : text.substr(chars[i].begin, chars[i].end - chars[i].begin);
        for (const char b : bytes) append_utf8(whole, byte_symbol(static_cast<unsigned char>(b)));
      }
      if (const auto it = token_to_id_.find(whole); it != token_to_id_.end()) {
        out.push_back({it->second, spans.front().first, spans.back().second});
        continue;
      }
    }
    bpe_word(symbols, spans, out);
  }
}

Result<std::vector<ByteLevelBpeTokenizer::Piece>> ByteLevelBpeTokenizer::pieces(std::string_view text) const {
  if (const std::size_t bad = find_invalid_utf8(text); bad != std::string_view::npos) {
    return Status::invalid_argument(fmt::format("text is not valid UTF-8 at byte {}", bad));
  }
  // Added tokens matched on the raw text, then those matched after
  // normalization (the same text here: there is no normalizer) in what is
  // left; every other stretch goes through ByteLevel and BPE.
  std::vector<Segment> raw;
  split_added(text, 0, text.size(), /*normalized_pass=*/false, raw);
  std::vector<Piece> out;
  for (const Segment& r : raw) {
    if (r.added_id >= 0) {
      out.push_back({r.added_id, r.begin, r.end});
      continue;
    }
    std::vector<Segment> segments;
    split_added(text, r.begin, r.end, /*normalized_pass=*/true, segments);
    for (const Segment& g : segments) {
      if (g.added_id >= 0) {
        out.push_back({g.added_id, g.begin, g.end});
      } else {
        bpe_piece(text, g.begin, g.end, out);
      }
    }
  }
  if (trim_offsets_) {
    // Leading and trailing 'Ġ' of a token leave its offsets, except the
    // space added before the first word (Hugging Face's process_offsets).
    for (std::size_t i = 0; i < out.size(); ++i) {
      Piece& p = out[i];
      auto [leading, trailing] = space_ends_[static_cast<std::size_t>(p.id)];
      if (leading == 0 && trailing == 0) continue;
      if (leading > 0 && (i == 0 || p.begin == 0) && post_add_prefix_space_ && leading == 1) leading = 0;
      p.begin = std::min<std::size_t>(p.begin + leading, p.end);
      p.end = p.end >= trailing ? std::max<std::size_t>(p.end - trailing, p.begin) : p.begin;
    }
  }
  return out;
}

}  // namespace rapidqa::text

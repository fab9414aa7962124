#include "text/pipeline_tokenizer.h"

#include <utf8proc.h>

#include <algorithm>
#include <limits>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/bounded_file.h"
#include "common/bounded_json.h"
#include "text/chars_map.h"
#include "text/special_layout.h"
#include "text/unicode_tables.h"
#include "text/utf8.h"

namespace rapidqa::text {
namespace {

using Json = nlohmann::json;
using Split = PipelineTokenizer::Split;
using NormalizeStep = PipelineTokenizer::NormalizeStep;
using PreTokenizeStep = PipelineTokenizer::PreTokenizeStep;

constexpr std::size_t kMaxTokenizerJsonBytes = 128u << 20;
constexpr std::int32_t kSpaceSymbol = 0x120;  // 'Ġ': the byte-level symbol of ' '

Status field_error(std::string_view field, std::string_view message) {
  return Status::invalid_argument(fmt::format("{}: {}", field, message));
}

bool flag(const Json& j, const char* field, bool fallback) {
  const auto it = j.find(field);
  return it != j.end() && it->is_boolean() ? it->get<bool>() : fallback;
}

Result<std::string> string_field(const Json& j, const char* field, std::string_view where) {
  const auto it = j.find(field);
  if (it == j.end() || !it->is_string()) return field_error(fmt::format("{}.{}", where, field), "expected a string");
  return it->get<std::string>();
}

bool is_bert_chinese(std::int32_t cp) {
  return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) || (cp >= 0x20000 && cp <= 0x2A6DF) ||
         (cp >= 0x2A700 && cp <= 0x2B73F) || (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B920 && cp <= 0x2CEAF) ||
         (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

// --- Precompiled: sentencepiece's character map (chars_map.h) -------------

Result<std::string> decode_base64(std::string_view text) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  std::string out;
  std::uint32_t bits = 0;
  int count = 0;
  std::size_t i = 0;
  for (; i < text.size() && text[i] != '='; ++i) {
    const int v = value(text[i]);
    if (v < 0) return field_error("normalizer.precompiled_charsmap", "is not base64");
    bits = (bits << 6) | static_cast<std::uint32_t>(v);
    count += 6;
    if (count >= 8) {
      count -= 8;
      out.push_back(static_cast<char>((bits >> count) & 0xFF));
    }
  }
  for (; i < text.size(); ++i) {
    if (text[i] != '=') return field_error("normalizer.precompiled_charsmap", "is not base64");
  }
  return out;
}

// The library's Precompiled normalizer: each grapheme cluster under 6 bytes
// replaced whole where the map has it, otherwise character by character. A
// replacement longer than what it replaces counts its last characters as
// inserted; a shorter one puts the characters removed on its last.
void precompiled_normalize(const CharsMap& map, NormalizedString& text) {
  const std::string& s = text.get();
  std::vector<CharChange> changes;
  bool modified = false;
  auto push_replacement = [&](std::string_view old_part, std::string_view replacement) {
    const std::vector<std::int32_t> new_chars = code_points(replacement);
    const auto diff = static_cast<std::ptrdiff_t>(new_chars.size()) -
                      static_cast<std::ptrdiff_t>(code_points(old_part).size());
    for (const std::int32_t c : new_chars) changes.push_back({c, 0});
    if (diff > 0) {
      // The last diff changes pushed so far (the library counts back over
      // all of them, not only this replacement's).
      for (std::size_t k = 0; k < static_cast<std::size_t>(diff) && k < changes.size(); ++k) {
        changes[changes.size() - 1 - k].change = 1;
      }
    } else if (diff < 0 && !changes.empty()) {
      changes.back().change += diff;
    }
  };
  std::size_t pos = 0;
  while (pos < s.size()) {
    // One extended grapheme cluster.
    std::size_t end = pos, length = 0;
    std::int32_t previous = decode_at(s, pos, length);
    end += length;
    utf8proc_int32_t state = 0;
    while (end < s.size()) {
      const std::int32_t next = decode_at(s, end, length);
      if (utf8proc_grapheme_break_stateful(previous, next, &state)) break;
      previous = next;
      end += length;
    }
    const std::string_view grapheme(s.data() + pos, end - pos);
    if (grapheme.size() < 6) {
      if (const auto replacement = map.transform(grapheme)) {
        modified = true;
        push_replacement(grapheme, *replacement);
        pos = end;
        continue;
      }
    }
    for (std::size_t at = pos; at < end; at += length) {
      const std::int32_t cp = decode_at(s, at, length);
      const std::string_view part(s.data() + at, length);
      if (const auto replacement = map.transform(part)) {
        modified = true;
        push_replacement(part, *replacement);
      } else {
        changes.push_back({cp, 0});
      }
    }
    pos = end;
  }
  if (modified) text.transform(changes, 0);
}

Result<std::shared_ptr<const Regex>> read_pattern(const Json& step, std::string_view where) {
  const auto it = step.find("pattern");
  if (it == step.end() || !it->is_object() || it->size() != 1) {
    return field_error(fmt::format("{}.pattern", where), "expected {\"String\": ...} or {\"Regex\": ...}");
  }
  if (it->contains("String") && (*it)["String"].is_string()) return Regex::literal((*it)["String"].get<std::string>());
  if (it->contains("Regex") && (*it)["Regex"].is_string()) {
    auto regex = Regex::compile((*it)["Regex"].get<std::string>());
    if (!regex) return field_error(fmt::format("{}.pattern", where), regex.status().message());
    return regex;
  }
  return field_error(fmt::format("{}.pattern", where), "expected {\"String\": ...} or {\"Regex\": ...}");
}

// --- normalizers -----------------------------------------------------------

Status read_normalizer(const Json& n, std::vector<NormalizeStep>& out, int depth = 0) {
  if (n.is_null()) return Status::ok();
  const std::string type = n.is_object() ? n.value("type", "") : "";
  const std::string where = "normalizer";
  if (type == "Sequence") {
    const auto members = n.find("normalizers");
    if (members == n.end() || !members->is_array() || depth > 8) return field_error(where, "a Sequence needs normalizers");
    for (const Json& m : *members) {
      if (Status s = read_normalizer(m, out, depth + 1); !s) return s;
    }
    return Status::ok();
  }
  if (type == "BertNormalizer") {
    const bool clean = flag(n, "clean_text", true), chinese = flag(n, "handle_chinese_chars", true);
    const bool lower = flag(n, "lowercase", true);
    const bool strip = flag(n, "strip_accents", lower);
    out.push_back([clean, chinese, strip, lower](NormalizedString& t) {
      if (clean) {
        t.filter([](std::int32_t c) { return !library_unicode::is_bert_removed(c); });
        t.map([](std::int32_t c) { return library_unicode::is_bert_space(c) ? ' ' : c; });
      }
      if (chinese) {
        std::vector<CharChange> changes;
        for (std::int32_t c : code_points(t.get())) {
          if (is_bert_chinese(c)) {  // the space before takes the character's place
            changes.push_back({' ', 0});
            changes.push_back({c, 1});
            changes.push_back({' ', 1});
          } else {
            changes.push_back({c, 0});
          }
        }
        t.transform(changes, 0);
      }
      if (strip) {
        t.nfd();
        t.filter([](std::int32_t c) { return !library_unicode::is_bert_strip_mark(c); });
      }
      if (lower) t.lowercase();
    });
    return Status::ok();
  }
  if (type == "NFC") return out.push_back([](NormalizedString& t) { t.nfc(); }), Status::ok();
  if (type == "NFD") return out.push_back([](NormalizedString& t) { t.nfd(); }), Status::ok();
  if (type == "NFKC") return out.push_back([](NormalizedString& t) { t.nfkc(); }), Status::ok();
  if (type == "NFKD") return out.push_back([](NormalizedString& t) { t.nfkd(); }), Status::ok();
  if (type == "Lowercase") return out.push_back([](NormalizedString& t) { t.lowercase(); }), Status::ok();
  if (type == "StripAccents") {
    out.push_back([](NormalizedString& t) { t.filter([](std::int32_t c) { return !library_unicode::is_strip_mark(c); }); });
    return Status::ok();
  }
  if (type == "Strip") {
    const bool left = flag(n, "strip_left", true), right = flag(n, "strip_right", true);
    out.push_back([left, right](NormalizedString& t) { t.strip(left, right); });
    return Status::ok();
  }
  if (type == "Replace") {
    auto pattern = read_pattern(n, "normalizer.Replace");
    if (!pattern) return pattern.status();
    auto content = string_field(n, "content", "normalizer.Replace");
    if (!content) return content.status();
    out.push_back([regex = std::move(pattern).value(), content = std::move(content).value()](NormalizedString& t) {
      t.replace(regex->find_matches(t.get()), content);
    });
    return Status::ok();
  }
  if (type == "Prepend") {
    auto prepend = string_field(n, "prepend", "normalizer.Prepend");
    if (!prepend) return prepend.status();
    out.push_back([p = std::move(prepend).value()](NormalizedString& t) { t.prepend(p); });
    return Status::ok();
  }
  if (type == "Precompiled") {
    auto text = string_field(n, "precompiled_charsmap", "normalizer.Precompiled");
    if (!text) return text.status();
    auto blob = decode_base64(text.value());
    if (!blob) return blob.status();
    auto map = CharsMap::parse(blob.value(), "normalizer.precompiled_charsmap");
    if (!map) return map.status();
    out.push_back([m = std::make_shared<const CharsMap>(std::move(map).value())](NormalizedString& t) {
      precompiled_normalize(*m, t);
    });
    return Status::ok();
  }
  return field_error(where, fmt::format("'{}' is not supported (BertNormalizer, NFC, NFD, NFKC, NFKD, Lowercase, "
                                        "StripAccents, Strip, Replace, Prepend, Precompiled, Sequence, null)",
                                        detail::clip_for_message(type)));
}

// --- pre-tokenizers ----------------------------------------------------------

// The library's PreTokenizedString::split: each stretch not yet a token is
// cut by `cut`; empty pieces are dropped.
template <typename Cut>
void split_each(std::vector<Split>& splits, Cut&& cut) {
  std::vector<Split> out;
  out.reserve(splits.size());
  for (Split& split : splits) {
    if (split.added) {
      out.push_back(std::move(split));
      continue;
    }
    for (NormalizedString& piece : cut(split.text)) {
      if (!piece.empty()) out.push_back({std::move(piece), false, -1});
    }
  }
  splits = std::move(out);
}

// GPT-2's symbol for each byte: printable Latin-1 bytes stand for
// themselves, the others for 256 and up, in byte order.
std::int32_t byte_symbol(unsigned char b) {
  static const auto table = [] {
    std::vector<std::int32_t> t(256, -1);
    for (int c = '!'; c <= '~'; ++c) t[static_cast<std::size_t>(c)] = c;
    for (int c = 0xA1; c <= 0xAC; ++c) t[static_cast<std::size_t>(c)] = c;
    for (int c = 0xAE; c <= 0xFF; ++c) t[static_cast<std::size_t>(c)] = c;
    std::int32_t next = 256;
    for (std::size_t i = 0; i < 256; ++i) {
      if (t[i] < 0) t[i] = next++;
    }
    return t;
  }();
  return table[b];
}

const char* const kGpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

Result<std::shared_ptr<const Regex>> compiled(const char* pattern) {
  auto regex = Regex::compile(pattern);
  if (!regex) return Status::internal(fmt::format("a built-in pattern failed: {}", regex.status().message()));
  return regex;
}

// What the post-processors need to know of a ByteLevel pre-tokenizer.
struct PreTokenizerFacts {
  bool byte_level = false;
};

Status read_pre_tokenizer(const Json& p, std::vector<PreTokenizeStep>& out, PreTokenizerFacts& facts, int depth = 0) {
  if (p.is_null()) return Status::ok();
  const std::string type = p.is_object() ? p.value("type", "") : "";
  const std::string where = "pre_tokenizer";
  if (type == "Sequence") {
    const auto members = p.find("pretokenizers");
    if (members == p.end() || !members->is_array() || depth > 8) return field_error(where, "a Sequence needs pretokenizers");
    for (const Json& m : *members) {
      if (Status s = read_pre_tokenizer(m, out, facts, depth + 1); !s) return s;
    }
    return Status::ok();
  }
  auto split_by_char = [&](std::function<bool(std::int32_t)> is_match, SplitBehavior behavior) {
    out.push_back([is_match = std::move(is_match), behavior](std::vector<Split>& splits) {
      split_each(splits, [&](NormalizedString& t) { return t.split(find_char_matches(t.get(), is_match), behavior); });
    });
    return Status::ok();
  };
  if (type == "WhitespaceSplit") return split_by_char(is_white_space, SplitBehavior::kRemoved);
  if (type == "BertPreTokenizer") {
    (void)split_by_char(is_white_space, SplitBehavior::kRemoved);  // always ok
    return split_by_char(library_unicode::is_punctuation, SplitBehavior::kIsolated);
  }
  if (type == "Punctuation") {
    const auto behavior = split_behavior_from_name(p.value("behavior", "Isolated"));
    if (!behavior) return field_error("pre_tokenizer.Punctuation.behavior", "is not a split behavior");
    return split_by_char(library_unicode::is_punctuation, *behavior);
  }
  if (type == "Digits") {
    return split_by_char(library_unicode::is_numeric, flag(p, "individual_digits", false) ? SplitBehavior::kIsolated
                                                                        : SplitBehavior::kContiguous);
  }
  if (type == "CharDelimiterSplit") {
    auto delimiter = string_field(p, "delimiter", "pre_tokenizer.CharDelimiterSplit");
    if (!delimiter) return delimiter.status();
    const std::vector<std::int32_t> cps = code_points(delimiter.value());
    if (cps.size() != 1) return field_error("pre_tokenizer.CharDelimiterSplit.delimiter", "expected one character");
    const std::int32_t d = cps[0];
    return split_by_char([d](std::int32_t c) { return c == d; }, SplitBehavior::kRemoved);
  }
  if (type == "Whitespace") {
    // \w+|[^\w\s]+ (Rust's regex crate, whose \w the tables hold): runs of
    // word characters and runs of other non-space characters are kept, the
    // white space between them removed.
    out.push_back([](std::vector<Split>& splits) {
      split_each(splits, [](NormalizedString& t) {
        const std::string& s = t.get();
        Matches m;
        std::size_t previous = 0;
        int run = 0;  // 0 none, 1 word, 2 other
        std::size_t run_begin = 0;
        auto close = [&](std::size_t at) {
          if (run == 0) return;
          if (previous < run_begin) m.push_back({{previous, run_begin}, true});
          m.push_back({{run_begin, at}, false});
          previous = at;
          run = 0;
        };
        for (std::size_t pos = 0, length = 0; pos < s.size(); pos += length) {
          const std::int32_t cp = decode_at(s, pos, length);
          const int kind = library_unicode::is_word(cp) ? 1 : is_white_space(cp) ? 0 : 2;
          if (kind != run) {
            close(pos);
            if (kind != 0) {
              run = kind;
              run_begin = pos;
            }
          }
        }
        close(s.size());
        if (previous < s.size()) m.push_back({{previous, s.size()}, true});
        return t.split(m, SplitBehavior::kRemoved);
      });
    });
    return Status::ok();
  }
  if (type == "Split") {
    auto pattern = read_pattern(p, "pre_tokenizer.Split");
    if (!pattern) return pattern.status();
    const auto behavior = split_behavior_from_name(p.value("behavior", ""));
    if (!behavior) return field_error("pre_tokenizer.Split.behavior", "is not a split behavior");
    const bool invert = flag(p, "invert", false);
    out.push_back([re = std::move(pattern).value(), b = *behavior, invert](std::vector<Split>& splits) {
      split_each(splits, [&](NormalizedString& t) {
        Matches m = re->find_matches(t.get());
        if (invert) invert_matches(m);
        return t.split(m, b);
      });
    });
    return Status::ok();
  }
  if (type == "Metaspace") {
    std::string replacement = "\xE2\x96\x81";  // ▁
    if (p.contains("replacement")) {
      auto r = string_field(p, "replacement", "pre_tokenizer.Metaspace");
      if (!r) return r.status();
      replacement = r.value();
    }
    const std::vector<std::int32_t> rc = code_points(replacement);
    if (rc.size() != 1) return field_error("pre_tokenizer.Metaspace.replacement", "expected one character");
    // prepend_scheme (newer files) or add_prefix_space (older ones).
    std::string scheme = flag(p, "add_prefix_space", true) ? "always" : "never";
    if (p.contains("prepend_scheme")) scheme = p.value("prepend_scheme", "");
    if (scheme != "always" && scheme != "first" && scheme != "never") {
      return field_error("pre_tokenizer.Metaspace.prepend_scheme", "expected always, first or never");
    }
    const bool split = flag(p, "split", true);
    const std::int32_t rep = rc[0];
    out.push_back([replacement, rep, scheme, split](std::vector<Split>& splits) {
      split_each(splits, [&](NormalizedString& t) {
        t.replace(find_char_matches(t.get(), [](std::int32_t c) { return c == ' '; }), replacement);
        const bool starts = t.get().compare(0, replacement.size(), replacement) == 0;
        if (!starts && (scheme == "always" || (scheme == "first" && t.original_shift() == 0))) t.prepend(replacement);
        if (!split) return std::vector<NormalizedString>{t};
        return t.split(find_char_matches(t.get(), [rep](std::int32_t c) { return c == rep; }),
                       SplitBehavior::kMergedWithNext);
      });
    });
    return Status::ok();
  }
  if (type == "ByteLevel") {
    facts.byte_level = true;
    const bool add_prefix_space = flag(p, "add_prefix_space", true), use_regex = flag(p, "use_regex", true);
    auto regex = compiled(kGpt2Pattern);
    if (!regex) return regex.status();
    out.push_back([re = std::move(regex).value(), add_prefix_space, use_regex](std::vector<Split>& splits) {
      split_each(splits, [&](NormalizedString& t) {
        if (add_prefix_space && t.get().rfind(' ', 0) != 0) t.prepend(" ");
        if (!use_regex) return std::vector<NormalizedString>{t};
        return t.split(re->find_matches(t.get()), SplitBehavior::kIsolated);
      });
      for (Split& split : splits) {
        if (split.added) continue;
        std::vector<CharChange> changes;
        const std::string& s = split.text.get();
        for (std::size_t pos = 0, length = 0; pos < s.size(); pos += length) {
          decode_at(s, pos, length);
          for (std::size_t i = 0; i < length; ++i) {
            changes.push_back({byte_symbol(static_cast<unsigned char>(s[pos + i])), i > 0 ? 1 : 0});
          }
        }
        split.text.transform(changes, 0);
      }
    });
    return Status::ok();
  }
  return field_error(where, fmt::format("'{}' is not supported (BertPreTokenizer, Whitespace, WhitespaceSplit, "
                                        "ByteLevel, Metaspace, Split, Punctuation, Digits, CharDelimiterSplit, "
                                        "Sequence, null)",
                                        detail::clip_for_message(type)));
}

// RobertaProcessing's "cls" or "sep", BertProcessing's too: [token, id].
Status read_pair_special(const Json& step, const char* field, std::int32_t& id) {
  const auto it = step.find(field);
  if (it == step.end() || !it->is_array() || it->size() != 2 || !(*it)[0].is_string() ||
      !(*it)[1].is_number_integer()) {
    return field_error(std::string("post_processor.") + field, "expected [token, id]");
  }
  id = (*it)[1].get<std::int32_t>();
  return Status::ok();
}

// The library's ByteLevel offset trimming: leading and trailing 'Ġ' or
// white space characters of the token's text come off its offsets, one
// character of the original text per character (the library trims offsets
// already counted in characters), except a first token's single leading
// space when a prefix space was added. Offsets here are characters.
void trim_offsets(const std::string& value, std::size_t index, bool add_prefix_space, std::size_t& begin,
                  std::size_t& end) {
  const std::vector<std::int32_t> cps = code_points(value);
  auto is_space = [](std::int32_t c) { return c == kSpaceSymbol || is_white_space(c); };
  std::size_t leading = 0, trailing = 0;
  while (leading < cps.size() && is_space(cps[leading])) ++leading;
  while (trailing < cps.size() && is_space(cps[cps.size() - 1 - trailing])) ++trailing;
  if (leading > 0) {
    const bool is_first = index == 0 || begin == 0;
    if (is_first && add_prefix_space && leading == 1) leading = 0;
    begin = std::min(begin + leading, end);
  }
  if (trailing > 0 && end >= trailing) end = std::max(end - trailing, begin);
}

}  // namespace

// --- reading ---------------------------------------------------------------

Result<PipelineTokenizer> PipelineTokenizer::from_tokenizer_json(const std::string& path) {
  auto text = detail::read_file_bounded(path, kMaxTokenizerJsonBytes, "tokenizer.json");
  if (!text) return text.status();
  return from_json_text(text.value(), path);
}

Result<PipelineTokenizer> PipelineTokenizer::from_json_text(std::string_view json, const std::string& source) {
  auto parsed = detail::parse_json_bounded(json);
  if (!parsed) return Status::invalid_argument(fmt::format("tokenizer.json '{}': {}", source, parsed.status().message()));
  return from_json(parsed.value(), source);
}

Result<PipelineTokenizer> PipelineTokenizer::from_json(const Json& root, const std::string& source) {
  auto fail = [&](const Status& s) {
    return Status::invalid_argument(fmt::format("tokenizer.json '{}': {}", source, s.message()));
  };
  try {
    if (!root.is_object()) return fail(Status::invalid_argument("not a JSON object"));
    PipelineTokenizer t;
    const auto model = root.find("model");
    if (model == root.end()) return fail(field_error("model", "missing"));
    auto read = read_subword_model(*model);
    if (!read) return fail(read.status());
    t.model_ = std::shared_ptr<SubwordModel>(std::move(read).value());
    if (const auto n = root.find("normalizer"); n != root.end()) {
      if (Status s = read_normalizer(*n, t.normalizer_); !s) return fail(s);
    }
    PreTokenizerFacts facts;
    if (const auto p = root.find("pre_tokenizer"); p != root.end()) {
      if (Status s = read_pre_tokenizer(*p, t.pre_tokenizer_, facts); !s) return fail(s);
    }
    if (const auto added = root.find("added_tokens"); added != root.end() && !added->is_null()) {
      if (Status s = t.read_added_tokens(*added); !s) return fail(s);
    }
    if (const auto post = root.find("post_processor"); post != root.end() && !post->is_null()) {
      if (Status s = t.read_post_processor(*post); !s) return fail(s);
    }
    for (const auto* layout : {&t.layout_.single(), &t.layout_.pair()}) {
      for (const SpecialLayout::Item& item : *layout) {
        for (const std::int32_t id : item.ids) {
          if (!t.model_->id_to_token(id)) {
            return fail(field_error("post_processor", fmt::format("special id {} is outside the vocabulary", id)));
          }
        }
      }
    }
    const auto padding = root.find("padding");
    if (padding != root.end() && padding->is_object() && padding->contains("pad_id") &&
        (*padding)["pad_id"].is_number_integer()) {
      t.pad_id_ = (*padding)["pad_id"].get<std::int32_t>();
    } else {
      for (const char* name : {"<pad>", "[PAD]"}) {
        if (const std::int32_t id = t.model_->token_to_id(name); id >= 0) {
          t.pad_id_ = id;
          break;
        }
      }
    }
    return t;
  } catch (const std::exception& e) {
    return Status::internal(fmt::format("reading tokenizer.json '{}' failed: {}", source, e.what()));
  }
}

Status PipelineTokenizer::read_added_tokens(const Json& added) {
  if (!added.is_array()) return field_error("added_tokens", "expected a list");
  for (const Json& a : added) {
    if (!a.is_object() || !a.contains("id") || !a["id"].is_number_integer() || !a.contains("content") ||
        !a["content"].is_string() || a["content"].get<std::string>().empty() || a["id"].get<std::int64_t>() < 0 ||
        a["id"].get<std::int64_t>() >= (1 << 24)) {
      return field_error("added_tokens", "an entry needs an id and a non-empty content");
    }
    AddedToken token;
    token.content = a["content"].get<std::string>();
    if (find_invalid_utf8(token.content) != std::string::npos) return field_error("added_tokens", "a content is not UTF-8");
    // The library gives a token the model already has the model's id,
    // whatever the file says.
    const std::int32_t model_id = model_->token_to_id(token.content);
    token.id = model_id >= 0 ? model_id : a["id"].get<std::int32_t>();
    token.lstrip = flag(a, "lstrip", false);
    token.rstrip = flag(a, "rstrip", false);
    token.single_word = flag(a, "single_word", false);
    token.normalized = flag(a, "normalized", !flag(a, "special", false));
    token.normalized_form = token.content;
    if (token.normalized) {
      NormalizedString n(token.content);
      for (const NormalizeStep& step : normalizer_) step(n);
      token.normalized_form = n.get();
    }
    model_->name_id(token.id, token.content);
    added_.push_back(std::move(token));
  }
  return Status::ok();
}

Status PipelineTokenizer::read_processor(const Json& step, bool& laid_out) {
  const std::string type = step.is_object() ? step.value("type", "") : "";
  if (type == "ByteLevel") {
    if (flag(step, "trim_offsets", true)) trims_.push_back({flag(step, "add_prefix_space", true)});
    return Status::ok();
  }
  if (laid_out) return field_error("post_processor", "more than one layout of special tokens");
  laid_out = true;
  if (type == "RobertaProcessing" || type == "BertProcessing") {
    std::int32_t cls = -1, sep = -1;
    if (Status s = read_pair_special(step, "cls", cls); !s) return s;
    if (Status s = read_pair_special(step, "sep", sep); !s) return s;
    if (type == "RobertaProcessing") {
      if (flag(step, "trim_offsets", true)) trims_.push_back({flag(step, "add_prefix_space", true)});
      layout_ = SpecialLayout::roberta(cls, sep);
    } else {
      layout_ = SpecialLayout::bert(cls, sep);
    }
    return Status::ok();
  }
  if (type == "TemplateProcessing") {
    auto layout = SpecialLayout::from_template(step);
    if (!layout) return layout.status();
    layout_ = std::move(layout).value();
    return Status::ok();
  }
  return field_error("post_processor",
                     fmt::format("'{}' is not supported (BertProcessing, RobertaProcessing, TemplateProcessing, "
                                 "ByteLevel, a Sequence of those, null)",
                                 detail::clip_for_message(type)));
}

Status PipelineTokenizer::read_post_processor(const Json& post) {
  bool laid_out = false;
  if (post.is_object() && post.value("type", "") == "Sequence") {
    const auto steps = post.find("processors");
    if (steps == post.end() || !steps->is_array()) return field_error("post_processor", "a Sequence needs processors");
    for (const Json& step : *steps) {
      if (Status s = read_processor(step, laid_out); !s) return s;
    }
    return Status::ok();
  }
  return read_processor(post, laid_out);
}

// --- encoding ----------------------------------------------------------------

const std::string& PipelineTokenizer::id_to_token(std::int32_t id) const {
  const std::string* token = model_->id_to_token(id);
  return token ? *token : empty_;
}

// The library's added-token extraction over each stretch not yet a token:
// leftmost match first, the longest there; single_word matches need no
// word character (\w) beside them; lstrip and rstrip take the white space
// beside the token into its split.
void PipelineTokenizer::split_added(std::vector<Split>& splits, bool normalized_pass) const {
  std::vector<Split> out;
  out.reserve(splits.size());
  for (Split& split : splits) {
    if (split.added) {
      out.push_back(std::move(split));
      continue;
    }
    NormalizedString& t = split.text;
    if (normalized_pass) {
      for (const NormalizeStep& step : normalizer_) step(t);
    }
    const std::string& s = t.get();
    std::vector<std::pair<Offsets, std::int32_t>> found;  // (bytes, id or -1)
    std::size_t start_offset = 0;
    auto form_of = [&](const AddedToken& a) -> const std::string& {
      return normalized_pass ? a.normalized_form : a.content;
    };
    for (std::size_t at = 0; at < s.size() && !added_.empty();) {
      const AddedToken* best = nullptr;
      for (const AddedToken& a : added_) {
        if (a.normalized != normalized_pass) continue;
        const std::string& form = form_of(a);
        if (form.empty() || form.size() > s.size() - at || s.compare(at, form.size(), form) != 0) continue;
        if (!best || form.size() > form_of(*best).size()) best = &a;
      }
      // The matcher moves one character at a time: a token never starts
      // inside one.
      std::size_t step = 1;
      decode_at(s, at, step);
      if (!best) {
        at += step;
        continue;
      }
      std::size_t start = at, stop = at + form_of(*best).size();
      auto previous_char = [&](std::size_t b) {
        std::size_t back = b - 1, l = 0;
        while (back > 0 && (static_cast<unsigned char>(s[back]) & 0xC0) == 0x80) --back;
        return std::pair{back, decode_at(s, back, l)};
      };
      if (best->single_word) {
        std::size_t l = 0;
        const bool word_before = start > 0 && library_unicode::is_word(previous_char(start).second);
        const bool word_after = stop < s.size() && library_unicode::is_word(decode_at(s, stop, l));
        if (word_before || word_after) {
          at += step;
          continue;
        }
      }
      if (best->lstrip) {
        std::size_t b = start;
        while (b > 0) {
          const auto [back, cp] = previous_char(b);
          if (!is_white_space(cp)) break;
          b = back;
        }
        start = std::max(b, start_offset);
      }
      if (best->rstrip) {
        std::size_t l = 0;
        while (stop < s.size() && is_white_space(decode_at(s, stop, l))) stop += l;
      }
      if (start_offset < start) found.push_back({{start_offset, start}, -1});
      found.push_back({{start, stop}, best->id});
      start_offset = stop;
      at = stop;
    }
    if (found.empty()) {
      if (!t.empty()) out.push_back({std::move(t), false, -1});
      continue;
    }
    if (start_offset < s.size()) found.push_back({{start_offset, s.size()}, -1});
    for (const auto& [offsets, id] : found) {
      NormalizedString piece = t.slice(offsets.first, offsets.second);
      if (!piece.empty()) out.push_back({std::move(piece), id >= 0, id});
    }
  }
  splits = std::move(out);
}

Result<std::vector<PipelineTokenizer::Piece>> PipelineTokenizer::pieces(std::string_view text) const {
  if (const std::size_t bad = find_invalid_utf8(text); bad != std::string_view::npos) {
    return Status::invalid_argument(fmt::format("text is not valid UTF-8 at byte {}", bad));
  }
  std::vector<Split> splits;
  if (!text.empty()) splits.push_back({NormalizedString(text), false, -1});
  split_added(splits, /*normalized_pass=*/false);
  split_added(splits, /*normalized_pass=*/true);
  for (const PreTokenizeStep& step : pre_tokenizer_) step(splits);
  std::vector<Piece> out;
  std::vector<std::string> values;
  std::vector<PieceToken> tokens;
  for (const Split& split : splits) {
    tokens.clear();
    if (split.added) {
      tokens.push_back({split.added_id, split.text.get(), {0, split.text.size()}});
    } else if (Status s = model_->tokenize(split.text.get(), tokens); !s) {
      return s;
    }
    for (PieceToken& token : tokens) {
      const auto original = split.text.original_offsets(token.offsets.first, token.offsets.second);
      const Offsets o = original ? *original
                                 : Offsets{split.text.original_shift() + token.offsets.first,
                                           split.text.original_shift() + token.offsets.second};
      out.push_back({token.id, o.first, o.second});
      values.push_back(std::move(token.value));
    }
  }
  if (!trims_.empty()) {
    // Trimming counts characters: byte offsets become character offsets
    // and back.
    std::vector<std::size_t> char_at_byte(text.size() + 1), byte_at_char;
    std::size_t chars = 0;
    for (std::size_t pos = 0; pos < text.size(); ++pos) {
      if ((static_cast<unsigned char>(text[pos]) & 0xC0) != 0x80) {
        byte_at_char.push_back(pos);
        ++chars;
      }
      char_at_byte[pos] = (static_cast<unsigned char>(text[pos]) & 0xC0) != 0x80 ? chars - 1 : chars - 1;
    }
    char_at_byte[text.size()] = chars;
    byte_at_char.push_back(text.size());
    for (Piece& p : out) {
      p.begin = char_at_byte[std::min(p.begin, text.size())];
      p.end = char_at_byte[std::min(p.end, text.size())];
    }
    for (const Trim& trim : trims_) {
      for (std::size_t i = 0; i < out.size(); ++i) trim_offsets(values[i], i, trim.add_prefix_space, out[i].begin, out[i].end);
    }
    for (Piece& p : out) {
      p.begin = byte_at_char[std::min(p.begin, chars)];
      p.end = byte_at_char[std::min(p.end, chars)];
    }
  }
  return out;
}

}  // namespace rapidqa::text

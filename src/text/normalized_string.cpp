#include "text/normalized_string.h"

#include <oniguruma.h>
#include <utf8proc.h>

#include <algorithm>
#include <mutex>
#include <unordered_map>

#include <fmt/format.h>

#include "common/bounded_json.h"
#include "text/unicode_tables.h"
#include "text/utf8.h"

namespace rapidqa::text {
namespace {

std::size_t utf8_length(std::int32_t cp) { return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4; }

// Oniguruma keeps global tables; it is set up once, before any compile.
void initialise_oniguruma() {
  static std::once_flag once;
  std::call_once(once, [] {
    OnigEncoding encodings[] = {ONIG_ENCODING_UTF8};
    onig_initialize(encodings, 1);
  });
}

bool is_hangul_syllable(std::int32_t cp) { return cp >= 0xAC00 && cp <= 0xD7A3; }

// The primary composite of starter and next, or -1. Every composite's
// second character is U+0300 or above, so most pairs are settled at once;
// the rest ask utf8proc (NFC of the pair is one character exactly when the
// pair composes) and are remembered.
std::int32_t compose_pair(std::int32_t starter, std::int32_t next) {
  if (next < 0x300) return -1;
  static std::mutex mutex;
  static std::unordered_map<std::uint64_t, std::int32_t> known;
  const std::uint64_t key = (static_cast<std::uint64_t>(starter) << 32) | static_cast<std::uint32_t>(next);
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (auto it = known.find(key); it != known.end()) return it->second;
  }
  utf8proc_int32_t buffer[8] = {starter, next};
  const utf8proc_ssize_t n =
      utf8proc_normalize_utf32(buffer, 2, static_cast<utf8proc_option_t>(UTF8PROC_COMPOSE | UTF8PROC_STABLE));
  std::int32_t composite = n == 1 ? buffer[0] : -1;
  std::size_t count = 0;
  if (composite >= 0 && !is_hangul_syllable(composite) &&
      !library_unicode::decomposition(composite, /*compatibility=*/false, count)) {
    composite = -1;  // a composite newer than the library's tables
  }
  std::lock_guard<std::mutex> lock(mutex);
  known.emplace(key, composite);
  return composite;
}

// The class where the library knows the character has one (its tables
// are older than utf8proc's); 0 otherwise.
int combining_class(std::int32_t cp) {
  return library_unicode::has_combining_class(cp) ? utf8proc_get_property(cp)->combining_class : 0;
}


}  // namespace

std::vector<std::int32_t> code_points(std::string_view text) {
  std::vector<std::int32_t> out;
  out.reserve(text.size());
  for (std::size_t pos = 0, length = 0; pos < text.size(); pos += length) out.push_back(decode_at(text, pos, length));
  return out;
}

// --- Regex -----------------------------------------------------------------

Result<std::shared_ptr<const Regex>> Regex::compile(std::string_view pattern) {
  return compile_with_syntax(pattern, ONIG_SYNTAX_DEFAULT);
}

// A literal compiles as is (Oniguruma's ASIS syntax has no metacharacters).
Result<std::shared_ptr<const Regex>> Regex::literal(std::string_view literal) {
  return compile_with_syntax(literal, ONIG_SYNTAX_ASIS);
}

Result<std::shared_ptr<const Regex>> Regex::compile_with_syntax(std::string_view pattern, void* syntax) {
  initialise_oniguruma();
  std::shared_ptr<Regex> regex(new Regex());
  regex_t* compiled = nullptr;
  OnigErrorInfo info;
  const auto* begin = reinterpret_cast<const OnigUChar*>(pattern.data());
  const int rc = onig_new(&compiled, begin, begin + pattern.size(), ONIG_OPTION_NONE, ONIG_ENCODING_UTF8,
                          static_cast<OnigSyntaxType*>(syntax), &info);
  if (rc != ONIG_NORMAL) {
    OnigUChar message[ONIG_MAX_ERROR_MESSAGE_LEN];
    onig_error_code_to_str(message, rc, &info);
    return Status::invalid_argument(fmt::format("the pattern '{}' does not compile: {}",
                                                detail::clip_for_message(std::string(pattern)),
                                                reinterpret_cast<const char*>(message)));
  }
  regex->regex_ = compiled;
  return std::shared_ptr<const Regex>(std::move(regex));
}

Regex::~Regex() {
  if (regex_) onig_free(static_cast<regex_t*>(regex_));
}

std::vector<Offsets> Regex::find_all(std::string_view text) const {
  std::vector<Offsets> out;
  auto* reg = static_cast<regex_t*>(regex_);
  OnigRegion* region = onig_region_new();
  const auto* str = reinterpret_cast<const OnigUChar*>(text.data());
  const auto* end = str + text.size();
  std::size_t from = 0;
  std::optional<std::size_t> last_match_end;
  while (from <= text.size()) {
    onig_region_clear(region);
    const int at = onig_search(reg, str, end, str + from, end, region, ONIG_OPTION_NONE);
    if (at < 0) break;
    const auto b = static_cast<std::size_t>(region->beg[0]), e = static_cast<std::size_t>(region->end[0]);
    if (b == e && last_match_end && *last_match_end == e) {
      // No empty match right after the previous one: step one character.
      std::size_t length = 1;
      if (from < text.size()) decode_at(text, from, length);
      from += length;
      continue;
    }
    from = e;
    last_match_end = e;
    out.emplace_back(b, e);
    if (b == e && from >= text.size()) break;
  }
  onig_region_free(region, 1);
  return out;
}

Matches Regex::find_matches(std::string_view text) const {
  if (text.empty()) return {{{0, 0}, false}};
  Matches out;
  std::size_t previous = 0;
  for (const auto& [b, e] : find_all(text)) {
    if (previous != b) out.push_back({{previous, b}, false});
    out.push_back({{b, e}, true});
    previous = e;
  }
  if (previous != text.size()) out.push_back({{previous, text.size()}, false});
  return out;
}

Matches find_char_matches(std::string_view text, const std::function<bool(std::int32_t)>& is_match) {
  if (text.empty()) return {{{0, 0}, false}};
  Matches out;
  std::size_t last_offset = 0;
  for (std::size_t pos = 0, length = 0; pos < text.size(); pos += length) {
    const std::int32_t cp = decode_at(text, pos, length);
    if (!is_match(cp)) continue;
    if (last_offset < pos) out.push_back({{last_offset, pos}, false});
    out.push_back({{pos, pos + length}, true});
    last_offset = pos + length;
  }
  if (text.size() > last_offset) out.push_back({{last_offset, text.size()}, false});
  return out;
}

void invert_matches(Matches& matches) {
  for (auto& m : matches) m.second = !m.second;
}

std::optional<SplitBehavior> split_behavior_from_name(std::string_view name) {
  if (name == "Removed") return SplitBehavior::kRemoved;
  if (name == "Isolated") return SplitBehavior::kIsolated;
  if (name == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (name == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (name == "Contiguous") return SplitBehavior::kContiguous;
  return std::nullopt;
}

// --- NormalizedString -------------------------------------------------------

NormalizedString::NormalizedString(std::string_view original, std::size_t original_shift)
    : normalized_(original), original_size_(original.size()), original_shift_(original_shift) {
  alignments_.reserve(original.size());
  for (std::size_t pos = 0, length = 0; pos < original.size(); pos += length) {
    decode_at(original, pos, length);
    for (std::size_t i = 0; i < length; ++i) alignments_.emplace_back(pos, pos + length);
  }
}

std::optional<Offsets> NormalizedString::original_offsets(std::size_t begin, std::size_t end) const {
  if (begin == end) return Offsets{original_shift_ + begin, original_shift_ + end};
  if (begin > end) return std::nullopt;
  if (end > alignments_.size()) return std::nullopt;
  return Offsets{original_shift_ + alignments_[begin].first, original_shift_ + alignments_[end - 1].second};
}

std::optional<Offsets> NormalizedString::normalized_offsets_of_original(std::size_t begin, std::size_t end) const {
  if (begin == end) return Offsets{begin, end};
  if (begin > end) return std::nullopt;
  if (original_size_ == 0 && begin == 0 && end == 0) return Offsets{0, normalized_.size()};
  std::optional<std::size_t> start, stop;
  for (std::size_t i = 0; i < alignments_.size(); ++i) {
    const Offsets& a = alignments_[i];
    if (end < a.second) break;
    if (!start && begin <= a.first && a.first != a.second) start = i;
    stop = i + 1;
  }
  if (start && stop) return Offsets{*start, *stop};
  if (start) return Offsets{*start, *start};
  if (stop) return Offsets{*stop, *stop};
  return std::nullopt;
}

void NormalizedString::transform_range(std::size_t begin, std::size_t end, const std::vector<CharChange>& dest,
                                       std::size_t initial_offset) {
  // The characters being replaced, consumed in order as dest replaces them.
  const std::string_view replaced(normalized_.data() + begin, end - begin);
  std::size_t cursor = 0;  // bytes of `replaced` consumed
  auto consume = [&](std::size_t chars) {
    std::size_t bytes = 0;
    for (std::size_t i = 0; i < chars && cursor < replaced.size(); ++i) {
      std::size_t length = 1;
      decode_at(replaced, cursor, length);
      cursor += length;
      bytes += length;
    }
    return bytes;
  };
  std::size_t offset = begin + consume(initial_offset);
  std::string out;
  std::vector<Offsets> aligned;
  out.reserve(end - begin);
  aligned.reserve(end - begin);
  const Offsets past_end = alignments_.empty() ? Offsets{0, 0} : alignments_.back();
  auto alignment_at = [&](std::size_t i) { return i < alignments_.size() ? alignments_[i] : past_end; };
  for (const CharChange& c : dest) {
    Offsets align;
    if (c.change > 0) {
      align = offset < 1 ? Offsets{0, 0} : alignment_at(offset - 1);
    } else {
      align = alignment_at(offset);
      offset += consume(1);
      if (c.change < 0) offset += consume(static_cast<std::size_t>(-c.change));
    }
    const std::size_t before = out.size();
    append_utf8(out, c.code_point);
    aligned.insert(aligned.end(), out.size() - before, align);
  }
  alignments_.erase(alignments_.begin() + static_cast<std::ptrdiff_t>(begin),
                    alignments_.begin() + static_cast<std::ptrdiff_t>(end));
  alignments_.insert(alignments_.begin() + static_cast<std::ptrdiff_t>(begin), aligned.begin(), aligned.end());
  normalized_.replace(begin, end - begin, out);
}

void NormalizedString::transform(const std::vector<CharChange>& dest, std::size_t initial_offset) {
  const auto range = normalized_offsets_of_original(0, original_size_);
  if (!range) return;
  transform_range(range->first, range->second, dest, initial_offset);
}

NormalizedString NormalizedString::slice(std::size_t begin, std::size_t end) const {
  NormalizedString out;
  const auto original = original_offsets(begin, end);
  const std::size_t shift = original ? original->first - original_shift_ : 0;
  out.normalized_ = normalized_.substr(begin, end - begin);
  out.alignments_.assign(alignments_.begin() + static_cast<std::ptrdiff_t>(begin),
                         alignments_.begin() + static_cast<std::ptrdiff_t>(end));
  // Unsigned arithmetic wraps as the library's does; offsets come back
  // right once the shift is added again.
  for (auto& a : out.alignments_) a = {a.first - shift, a.second - shift};
  out.original_size_ = original ? original->second - original->first : 0;
  out.original_shift_ = original_shift_ + shift;
  return out;
}

std::vector<NormalizedString> NormalizedString::split(const Matches& matches, SplitBehavior behavior) const {
  std::vector<std::pair<Offsets, bool>> splits;  // (offsets, remove)
  switch (behavior) {
    case SplitBehavior::kIsolated:
      for (const auto& m : matches) splits.push_back({m.first, false});
      break;
    case SplitBehavior::kRemoved:
      splits = matches;
      break;
    case SplitBehavior::kContiguous: {
      bool previous = false;
      for (const auto& [offsets, is_match] : matches) {
        if (is_match == previous && !splits.empty()) {
          splits.back().first.second = offsets.second;
        } else {
          splits.push_back({offsets, false});
        }
        previous = is_match;
      }
      break;
    }
    case SplitBehavior::kMergedWithPrevious: {
      bool previous = false;
      for (const auto& [offsets, is_match] : matches) {
        if (is_match && !previous && !splits.empty()) {
          splits.back().first.second = offsets.second;
        } else {
          splits.push_back({offsets, false});
        }
        previous = is_match;
      }
      break;
    }
    case SplitBehavior::kMergedWithNext: {
      bool previous = false;
      for (auto it = matches.rbegin(); it != matches.rend(); ++it) {
        if (it->second && !previous && !splits.empty()) {
          splits.back().first.first = it->first.first;
        } else {
          splits.push_back({it->first, false});
        }
        previous = it->second;
      }
      std::reverse(splits.begin(), splits.end());
      break;
    }
  }
  std::vector<NormalizedString> out;
  for (const auto& [offsets, remove] : splits) {
    if (!remove) out.push_back(slice(offsets.first, offsets.second));
  }
  return out;
}

// Decomposition (each character's first part replaces it, the rest are
// inserted), canonical reordering carrying each character's change, then,
// for the composed forms, canonical composition: a character absorbed into
// the starter before it removes one more character there.
void NormalizedString::unicode_normalize(bool compose, bool compatibility) {
  std::vector<CharChange> chars;
  chars.reserve(normalized_.size());
  utf8proc_int32_t parts[32];
  std::size_t run_begin = 0;  // first character of the current run of non-starters
  auto reorder = [&](std::size_t end) {
    std::stable_sort(chars.begin() + static_cast<std::ptrdiff_t>(run_begin),
                     chars.begin() + static_cast<std::ptrdiff_t>(end), [](const CharChange& a, const CharChange& b) {
                       return combining_class(a.code_point) < combining_class(b.code_point);
                     });
  };
  for (std::int32_t cp : code_points(normalized_)) {
    utf8proc_ssize_t n = 1;
    const std::int32_t* from = &cp;
    std::size_t count = 0;
    if (is_hangul_syllable(cp)) {
      utf8proc_int32_t last_boundclass = 0;
      n = utf8proc_decompose_char(cp, parts, 32, UTF8PROC_DECOMPOSE, &last_boundclass);
      from = parts;
    } else if (const std::int32_t* d = library_unicode::decomposition(cp, compatibility, count)) {
      from = d;
      n = static_cast<utf8proc_ssize_t>(count);
    }
    for (utf8proc_ssize_t i = 0; i < n; ++i) {
      if (combining_class(from[i]) == 0) {
        reorder(chars.size());
        run_begin = chars.size() + 1;
      }
      chars.push_back({from[i], i == 0 ? 0 : 1});
    }
  }
  reorder(chars.size());
  if (compose) {
    std::vector<CharChange> composed;
    composed.reserve(chars.size());
    std::ptrdiff_t starter = -1;  // index in composed of the last starter
    int last_class = -1;          // class of the last character after the starter (-1: none)
    for (const CharChange& c : chars) {
      const int cls = combining_class(c.code_point);
      if (starter >= 0 && (last_class < 0 || (last_class < cls))) {
        const std::int32_t composite = compose_pair(composed[static_cast<std::size_t>(starter)].code_point, c.code_point);
        if (composite >= 0) {
          CharChange& s = composed[static_cast<std::size_t>(starter)];
          s.code_point = composite;
          s.change += c.change - 1;
          continue;
        }
      }
      if (cls == 0) {
        starter = static_cast<std::ptrdiff_t>(composed.size());
        last_class = -1;
      } else {
        last_class = cls;
      }
      composed.push_back(c);
    }
    chars = std::move(composed);
  }
  transform(chars, 0);
}

void NormalizedString::nfd() { unicode_normalize(false, false); }
void NormalizedString::nfkd() { unicode_normalize(false, true); }
void NormalizedString::nfc() { unicode_normalize(true, false); }
void NormalizedString::nfkc() { unicode_normalize(true, true); }

void NormalizedString::lowercase() {
  std::vector<CharChange> chars;
  chars.reserve(normalized_.size());
  for (std::int32_t cp : code_points(normalized_)) {
    std::int32_t lower[3];
    const std::size_t n = library_unicode::lowercase(cp, lower);
    for (std::size_t i = 0; i < n; ++i) chars.push_back({lower[i], i > 0 ? 1 : 0});
  }
  transform(chars, 0);
}

void NormalizedString::filter(const std::function<bool(std::int32_t)>& keep) {
  std::ptrdiff_t removed = 0;
  std::size_t removed_start = 0;
  std::vector<CharChange> chars;
  std::optional<std::int32_t> last;
  for (std::int32_t cp : code_points(normalized_)) {
    if (keep(cp)) {
      if (last) {
        chars.push_back({*last, -removed});
      } else {
        removed_start = static_cast<std::size_t>(removed);
      }
      last = cp;
      removed = 0;
    } else {
      ++removed;
    }
  }
  if (last) chars.push_back({*last, -removed});
  transform(chars, removed_start);
}

void NormalizedString::map(const std::function<std::int32_t(std::int32_t)>& to) {
  std::vector<CharChange> chars;
  for (std::int32_t cp : code_points(normalized_)) chars.push_back({to(cp), 0});
  transform(chars, 0);
}

void NormalizedString::prepend(std::string_view s) {
  if (normalized_.empty()) return;
  std::size_t next_length = 1;
  const std::int32_t next = decode_at(normalized_, 0, next_length);
  std::vector<CharChange> chars;
  bool first = true;
  for (std::int32_t cp : code_points(s)) {
    chars.push_back({cp, first ? 0 : 1});
    first = false;
  }
  chars.push_back({next, 1});
  transform_range(0, next_length, chars, 0);
}

void NormalizedString::strip(bool left, bool right) {
  const std::vector<std::int32_t> cps = code_points(normalized_);
  std::size_t leading = 0, trailing = 0;
  if (left) {
    while (leading < cps.size() && is_white_space(cps[leading])) ++leading;
  }
  if (right) {
    while (trailing < cps.size() && is_white_space(cps[cps.size() - 1 - trailing])) ++trailing;
  }
  if (leading == 0 && trailing == 0) return;
  std::vector<CharChange> chars;
  const std::size_t n = cps.size();
  for (std::size_t i = 0; i < n; ++i) {
    if (i < leading || i + trailing >= n) continue;
    chars.push_back({cps[i], i + trailing + 1 == n ? -static_cast<std::ptrdiff_t>(trailing) : 0});
  }
  transform(chars, leading);
}

void NormalizedString::replace(const Matches& matches, std::string_view content) {
  const std::vector<std::int32_t> content_chars = code_points(content);
  std::ptrdiff_t shift = 0;
  for (const auto& [offsets, is_match] : matches) {
    if (!is_match) continue;
    const auto begin = static_cast<std::size_t>(static_cast<std::ptrdiff_t>(offsets.first) + shift);
    const auto end = static_cast<std::size_t>(static_cast<std::ptrdiff_t>(offsets.second) + shift);
    const std::size_t removed_chars = code_points(std::string_view(normalized_).substr(begin, end - begin)).size();
    std::vector<CharChange> chars;
    for (std::int32_t cp : content_chars) chars.push_back({cp, 1});
    transform_range(begin, end, chars, removed_chars);
    shift += static_cast<std::ptrdiff_t>(content.size()) - static_cast<std::ptrdiff_t>(end - begin);
  }
}

}  // namespace rapidqa::text

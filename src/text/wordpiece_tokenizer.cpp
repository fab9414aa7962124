#include "text/wordpiece_tokenizer.h"

#include <utf8proc.h>

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/bounded_file.h"
#include "common/bounded_json.h"
#include "text/utf8.h"

namespace rapidqa::text {
namespace {

using Json = nlohmann::json;

// Tokens and type names echoed in errors come from the file: at most this
// much of each.
std::string clip(std::string_view text) { return detail::clip_for_message(text, 64); }

// The largest vocab.txt and tokenizer.json read. Real WordPiece files are
// at most a few megabytes (250k tokens); these leave ample room.
constexpr std::size_t kMaxVocabFileBytes = 64u << 20;
constexpr std::size_t kMaxTokenizerJsonBytes = 128u << 20;

// The character classes below are BERT's own, not Unicode's: a model was
// trained on exactly these splits, so "close enough" would change ids.

// HF's _is_control: every C* category (Cc, Cf, Cs, Co, Cn) except the three
// ASCII controls BERT treats as white space.
bool is_bert_control(std::int32_t cp) {
  if (cp == '\t' || cp == '\n' || cp == '\r') return false;
  switch (utf8proc_category(cp)) {
    case UTF8PROC_CATEGORY_CN: case UTF8PROC_CATEGORY_CC: case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_CS: case UTF8PROC_CATEGORY_CO:
      return true;
    default:
      return false;
  }
}

// HF's _is_whitespace: narrower than utf8.h's is_space (no \v, \f, Zl, Zp),
// which clean_text drops or keeps instead.
bool is_bert_whitespace(std::int32_t cp) {
  return cp == ' ' || cp == '\t' || cp == '\n' || cp == '\r' ||
         utf8proc_category(cp) == UTF8PROC_CATEGORY_ZS;
}

// What Python's str.split() splits on (HF's whitespace_tokenize). After
// clean_text only ' ', U+2028 and U+2029 can still be here, but without
// clean_text the whole set matters.
bool is_python_space(std::int32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 ||
         cp == 0x2028 || cp == 0x2029 || utf8proc_category(cp) == UTF8PROC_CATEGORY_ZS;
}

// BERT's CJK ranges; utf8.h's is_cjk also takes kana, which BERT keeps in words.
bool is_bert_cjk(std::int32_t cp) {
  return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
         (cp >= 0x20000 && cp <= 0x2A6DF) || (cp >= 0x2A700 && cp <= 0x2B73F) ||
         (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B820 && cp <= 0x2CEAF) ||
         (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

// All non-alphanumeric ASCII counts as punctuation for BERT, even symbols
// such as $ ^ ` that Unicode files under S*.
bool is_bert_punctuation(std::int32_t cp) {
  return (cp >= 33 && cp <= 47) || (cp >= 58 && cp <= 64) || (cp >= 91 && cp <= 96) ||
         (cp >= 123 && cp <= 126) || is_punctuation(cp);
}

int combining_class(std::int32_t cp) { return utf8proc_get_property(cp)->combining_class; }

std::vector<std::int32_t> decode_all(std::string_view utf8) {
  std::vector<std::int32_t> out;
  for (std::size_t pos = 0; pos < utf8.size();) {
    std::size_t len = 0;
    out.push_back(decode_at(utf8, pos, len));
    pos += len;
  }
  return out;
}

}  // namespace

// ---------------------------------------------------------------------------
// Normalisation with alignment. Each step maps code points to code points and
// carries every output's original byte range along, so word pieces can be
// traced back to the caller's text after case mapping, NFC and NFD.

namespace {

// Python's str.lower() on one character. The simple mapping utf8proc keeps is
// the full one for everything except U+0130, whose lower case is "i" plus a
// combining dot; dropping the dot would change ids when accents are kept.
template <typename Char, typename Out>
void append_lower(const Char& c, Out& out) {
  if (c.code_point < 0x80) {
    const std::int32_t cp = c.code_point >= 'A' && c.code_point <= 'Z' ? c.code_point + 32 : c.code_point;
    out.push_back({cp, c.begin, c.end});
  } else if (c.code_point == 0x130) {
    out.push_back({'i', c.begin, c.end});
    out.push_back({0x307, c.begin, c.end});
  } else {
    out.push_back({utf8proc_tolower(c.code_point), c.begin, c.end});
  }
}

template <typename Char>
std::vector<std::int32_t> nfc_of(const Char* first, const Char* last) {
  std::string utf8;
  for (const Char* c = first; c != last; ++c) append_utf8(utf8, c->code_point);
  utf8proc_uint8_t* mapped = nullptr;
  const auto n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(utf8.data()),
                              static_cast<utf8proc_ssize_t>(utf8.size()), &mapped,
                              static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> owner(mapped, &std::free);
  if (n < 0) {  // only for invalid code points, which decoding never yields
    std::vector<std::int32_t> same;
    for (const Char* c = first; c != last; ++c) same.push_back(c->code_point);
    return same;
  }
  return decode_all(std::string_view(reinterpret_cast<const char*>(mapped), static_cast<std::size_t>(n)));
}

template <typename Char>
bool same_code_points(const Char* first, const Char* last, const std::vector<std::int32_t>& cps) {
  if (static_cast<std::size_t>(last - first) != cps.size()) return false;
  for (std::size_t i = 0; i < cps.size(); ++i) {
    if (first[i].code_point != cps[i]) return false;
  }
  return true;
}

// NFC of one word. Unchanged characters keep their own ranges; a run NFC
// rewrites ("e" + U+0301 -> "é", Hangul jamo -> a syllable) maps every output
// character to the whole run. Runs are found by cutting before each starter
// and re-joining neighbours whose NFC is not the NFC of each half.
template <typename Word>
void nfc_aligned(Word& word) {
  using Char = typename Word::value_type;
  // Nothing below U+0300 composes or changes under NFC.
  if (std::all_of(word.begin(), word.end(), [](const Char& c) { return c.code_point < 0x300; })) return;
  const Char* data = word.data();
  const std::size_t n = word.size();
  const std::vector<std::int32_t> whole = nfc_of(data, data + n);
  if (same_code_points(data, data + n, whole)) return;

  std::vector<std::size_t> starts;
  for (std::size_t i = 0; i < n; ++i) {
    if (i == 0 || combining_class(data[i].code_point) == 0) starts.push_back(i);
  }
  starts.push_back(n);
  std::vector<std::pair<std::size_t, std::size_t>> groups;
  std::size_t group_begin = starts[0];
  std::size_t group_end = starts[1];
  std::vector<std::int32_t> group_nfc = nfc_of(data + group_begin, data + group_end);
  for (std::size_t s = 1; s + 1 < starts.size(); ++s) {
    const std::vector<std::int32_t> segment_nfc = nfc_of(data + starts[s], data + starts[s + 1]);
    const std::vector<std::int32_t> joined = nfc_of(data + group_begin, data + starts[s + 1]);
    std::vector<std::int32_t> apart = group_nfc;
    apart.insert(apart.end(), segment_nfc.begin(), segment_nfc.end());
    if (joined == apart) {
      groups.emplace_back(group_begin, group_end);
      group_begin = starts[s];
      group_nfc = segment_nfc;
    } else {
      group_nfc = joined;
    }
    group_end = starts[s + 1];
  }
  groups.emplace_back(group_begin, group_end);

  Word out;
  std::vector<std::int32_t> concatenated;
  for (const auto& [b, e] : groups) {
    const std::vector<std::int32_t> g = nfc_of(data + b, data + e);
    concatenated.insert(concatenated.end(), g.begin(), g.end());
    if (same_code_points(data + b, data + e, g)) {
      out.insert(out.end(), data + b, data + e);
      continue;
    }
    std::size_t lo = data[b].begin, hi = data[b].end;
    for (std::size_t i = b; i < e; ++i) {
      lo = std::min(lo, data[i].begin);
      hi = std::max(hi, data[i].end);
    }
    for (std::int32_t cp : g) out.push_back({cp, lo, hi});
  }
  if (concatenated != whole) {
    // Composition reached across the groups in a way the cuts missed: the
    // whole word becomes one run rather than risk a wrong alignment.
    std::size_t lo = word.front().begin, hi = word.front().end;
    for (const Char& c : word) {
      lo = std::min(lo, c.begin);
      hi = std::max(hi, c.end);
    }
    out.clear();
    for (std::int32_t cp : whole) out.push_back({cp, lo, hi});
  }
  word = std::move(out);
}

// HF's _run_strip_accents: NFD, then drop Mn. Each character decomposes on
// its own (keeping its range); canonical ordering then sorts each run of
// non-starters by combining class, as NFD of the whole word would.
template <typename Word>
void strip_accents_aligned(Word& word) {
  using Char = typename Word::value_type;
  if (std::all_of(word.begin(), word.end(), [](const Char& c) { return c.code_point < 0x80; })) return;
  Word out;
  out.reserve(word.size() + 4);
  for (const Char& c : word) {
    if (c.code_point < 0x80) {
      out.push_back(c);
      continue;
    }
    utf8proc_int32_t buffer[32];
    int boundclass = 0;
    const auto n = utf8proc_decompose_char(c.code_point, buffer, 32, UTF8PROC_DECOMPOSE, &boundclass);
    if (n <= 0 || n > 32) {  // no canonical decomposition is that long
      out.push_back(c);
      continue;
    }
    for (utf8proc_ssize_t i = 0; i < n; ++i) out.push_back({buffer[i], c.begin, c.end});
  }
  for (std::size_t i = 0; i < out.size();) {
    if (combining_class(out[i].code_point) == 0) {
      ++i;
      continue;
    }
    std::size_t j = i;
    while (j < out.size() && combining_class(out[j].code_point) != 0) ++j;
    std::stable_sort(out.begin() + static_cast<std::ptrdiff_t>(i), out.begin() + static_cast<std::ptrdiff_t>(j),
                     [](const Char& a, const Char& b) {
                       return combining_class(a.code_point) < combining_class(b.code_point);
                     });
    i = j;
  }
  out.erase(std::remove_if(out.begin(), out.end(),
                           [](const Char& c) { return utf8proc_category(c.code_point) == UTF8PROC_CATEGORY_MN; }),
            out.end());
  word = std::move(out);
}

}  // namespace

// ---------------------------------------------------------------------------
// Tokenisation.

// A special token that only forms after clean_text or NFC ("[CLS" U+200B "]")
// escapes the raw-text cut; HF then keeps it whole here.
bool WordPieceTokenizer::is_never_split(const Word& word) const {
  std::string utf8;
  for (const std::string& special : never_split_) {
    if (word.size() > special.size()) continue;  // a token has at most one code point per byte
    if (utf8.empty()) {
      for (const AlignedChar& c : word) append_utf8(utf8, c.code_point);
    }
    if (utf8 == special) return true;
  }
  return false;
}

void WordPieceTokenizer::word_piece(const Word& word, std::vector<WordPiece>& out) const {
  if (word.empty()) return;
  std::size_t word_begin = word.front().begin, word_end = word.front().end;
  for (const AlignedChar& c : word) {
    word_begin = std::min(word_begin, c.begin);
    word_end = std::max(word_end, c.end);
  }
  if (word.size() > options_.max_input_chars_per_word) {
    out.push_back({unk_id_, word_begin, word_end});
    return;
  }
  std::string utf8;
  std::vector<std::size_t> byte_at;  // byte offset in utf8 of each code point, plus the end
  byte_at.reserve(word.size() + 1);
  for (const AlignedChar& c : word) {
    byte_at.push_back(utf8.size());
    append_utf8(utf8, c.code_point);
  }
  byte_at.push_back(utf8.size());

  const std::size_t first_piece = out.size();
  std::string candidate;
  for (std::size_t start = 0; start < word.size();) {
    std::int32_t found = -1;
    std::size_t end = word.size();
    for (; end > start; --end) {
      candidate.assign(start > 0 ? options_.continuing_subword_prefix : std::string());
      candidate.append(utf8, byte_at[start], byte_at[end] - byte_at[start]);
      const auto it = token_to_id_.find(candidate);
      if (it != token_to_id_.end()) {
        found = it->second;
        break;
      }
    }
    if (found < 0) {
      // One unmatched rest makes the whole word unknown, as in BERT.
      out.resize(first_piece);
      out.push_back({unk_id_, word_begin, word_end});
      return;
    }
    std::size_t begin = word[start].begin, piece_end = word[start].end;
    for (std::size_t i = start; i < end; ++i) {
      begin = std::min(begin, word[i].begin);
      piece_end = std::max(piece_end, word[i].end);
    }
    out.push_back({found, begin, piece_end});
    start = end;
  }
}

// One whitespace-separated word after NFC: HF's per-token steps, then
// WordPiece on each punctuation-separated part.
void WordPieceTokenizer::normalize_word(Word& word, std::vector<Word>& tokens) const {
  nfc_aligned(word);
  if (is_never_split(word)) {
    tokens.push_back(std::move(word));
    return;
  }
  if (options_.lower_case) {
    Word lowered;
    lowered.reserve(word.size());
    for (const AlignedChar& c : word) append_lower(c, lowered);
    word = std::move(lowered);
  }
  if (strip_accents_) strip_accents_aligned(word);
  Word current;
  for (const AlignedChar& c : word) {
    if (is_bert_punctuation(c.code_point)) {
      if (!current.empty()) tokens.push_back(std::move(current));
      current.clear();
      tokens.push_back(Word{c});
    } else {
      current.push_back(c);
    }
  }
  if (!current.empty()) tokens.push_back(std::move(current));
}

template <typename OnWord>
void WordPieceTokenizer::basic_tokenize(std::string_view text, std::size_t begin, std::size_t end,
                                        OnWord&& on_word) const {
  // HF lower-cases the text one character at a time before clean_text, CJK
  // spacing and NFC; the per-word lower() later is then nearly always a no-op.
  Word stream;
  stream.reserve(end - begin + 8);
  Word lowered;
  for (std::size_t pos = begin; pos < end;) {
    std::size_t len = 0;
    const std::int32_t decoded = decode_at(text, pos, len);
    const AlignedChar original{decoded, pos, std::min(pos + len, end)};
    pos += len;
    lowered.clear();
    if (options_.lower_case) {
      append_lower(original, lowered);
    } else {
      lowered.push_back(original);
    }
    for (const AlignedChar& c : lowered) {
      const std::int32_t cp = c.code_point;
      if (options_.clean_text) {
        if (cp == 0 || cp == 0xFFFD || is_bert_control(cp)) continue;
        if (is_bert_whitespace(cp)) {
          stream.push_back({' ', c.begin, c.end});
          continue;
        }
      }
      if (options_.tokenize_chinese_chars && is_bert_cjk(cp)) {
        stream.push_back({' ', c.begin, c.begin});
        stream.push_back(c);
        stream.push_back({' ', c.end, c.end});
      } else {
        stream.push_back(c);
      }
    }
  }

  Word word;
  std::vector<Word> tokens;
  auto flush = [&] {
    if (word.empty()) return;
    tokens.clear();
    normalize_word(word, tokens);
    for (const Word& token : tokens) on_word(token);
    word.clear();
  };
  for (const AlignedChar& c : stream) {
    if (is_python_space(c.code_point)) {
      flush();
    } else {
      word.push_back(c);
    }
  }
  flush();
}

template <typename OnWord, typename OnSpecial>
void WordPieceTokenizer::split_words(std::string_view text, OnWord&& on_word, OnSpecial&& on_special) const {
  // Special tokens are cut out of the raw text first and never normalised
  // (HF's added-token trie); everything between goes through BasicTokenizer.
  // next[i] caches where never_split_[i] occurs next, so many specials in a
  // long text cost one scan each rather than one per occurrence.
  std::vector<std::size_t> next(never_split_.size());
  for (std::size_t i = 0; i < never_split_.size(); ++i) next[i] = text.find(never_split_[i]);
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t best = never_split_.size();
    for (std::size_t i = 0; i < never_split_.size(); ++i) {
      if (next[i] != std::string_view::npos && next[i] < pos) next[i] = text.find(never_split_[i], pos);
      if (next[i] == std::string_view::npos) continue;
      // Leftmost match; on a tie the longer token, as the trie's lookahead.
      if (best == never_split_.size() || next[i] < next[best] ||
          (next[i] == next[best] && never_split_[i].size() > never_split_[best].size())) {
        best = i;
      }
    }
    if (best == never_split_.size()) break;
    const std::size_t match = next[best];
    basic_tokenize(text, pos, match, on_word);
    on_special(token_to_id_.at(never_split_[best]), match, match + never_split_[best].size());
    pos = match + never_split_[best].size();
  }
  if (pos < text.size()) basic_tokenize(text, pos, text.size(), on_word);
}

void WordPieceTokenizer::pieces_of(std::string_view text, std::vector<WordPiece>& out) const {
  split_words(
      text, [&](const Word& word) { word_piece(word, out); },
      [&](std::int32_t id, std::size_t begin, std::size_t end) { out.push_back({id, begin, end}); });
}

std::vector<std::string> WordPieceTokenizer::tokenize(std::string_view text) const {
  std::vector<WordPiece> pieces;
  pieces_of(text, pieces);
  std::vector<std::string> tokens;
  tokens.reserve(pieces.size());
  for (const WordPiece& p : pieces) tokens.push_back(id_to_token_[static_cast<std::size_t>(p.id)]);
  return tokens;
}

Result<std::vector<WordPiece>> WordPieceTokenizer::word_pieces(std::string_view text) const {
  const std::size_t bad = find_invalid_utf8(text);
  if (bad != std::string_view::npos) {
    return Status::invalid_argument(fmt::format("text is not valid UTF-8 (bad byte at offset {})", bad));
  }
  std::vector<WordPiece> pieces;
  pieces_of(text, pieces);
  return pieces;
}

Result<std::vector<std::string>> WordPieceTokenizer::basic_tokens(std::string_view text) const {
  const std::size_t bad = find_invalid_utf8(text);
  if (bad != std::string_view::npos) {
    return Status::invalid_argument(fmt::format("text is not valid UTF-8 (bad byte at offset {})", bad));
  }
  std::vector<std::string> words;
  split_words(
      text,
      [&](const Word& word) {
        std::string utf8;
        for (const AlignedChar& c : word) append_utf8(utf8, c.code_point);
        words.push_back(std::move(utf8));
      },
      [&](std::int32_t id, std::size_t, std::size_t) { words.push_back(id_to_token_[static_cast<std::size_t>(id)]); });
  return words;
}

TokenizedText WordPieceTokenizer::assemble(const std::vector<WordPiece>& first,
                                           const std::vector<WordPiece>* second,
                                           std::size_t truncated) const {
  TokenizedText t;
  const std::size_t n = first.size() + (second ? second->size() + 3 : 2);
  t.input_ids.reserve(n);
  t.token_type_ids.reserve(n);
  t.offsets.reserve(n);
  t.sequence_ids.reserve(n);
  auto add = [&t](std::int32_t id, std::int32_t type, std::int8_t sequence, std::size_t b, std::size_t e) {
    t.input_ids.push_back(id);
    t.token_type_ids.push_back(type);
    t.offsets.emplace_back(b, e);
    t.sequence_ids.push_back(sequence);
  };
  add(cls_id_, 0, -1, 0, 0);
  for (const WordPiece& p : first) add(p.id, 0, 0, p.begin, p.end);
  add(sep_id_, 0, -1, 0, 0);
  if (second) {
    for (const WordPiece& p : *second) add(p.id, 1, 1, p.begin, p.end);
    add(sep_id_, 1, -1, 0, 0);
  }
  t.attention_mask.assign(t.input_ids.size(), 1);
  t.truncated_tokens = truncated;
  return t;
}

Result<TokenizedText> WordPieceTokenizer::encode(std::string_view text, std::size_t max_length) const {
  if (max_length < 2) {
    return Status::invalid_argument(fmt::format(
        "max_length {} cannot hold [CLS] and [SEP] (at least 2 needed)", max_length));
  }
  auto pieces = word_pieces(text);
  if (!pieces.is_ok()) return pieces.status();
  std::vector<WordPiece>& kept = pieces.value();
  const std::size_t room = max_length - 2;
  const std::size_t truncated = kept.size() > room ? kept.size() - room : 0;
  kept.resize(kept.size() - truncated);
  return assemble(kept, nullptr, truncated);
}

Result<TokenizedText> WordPieceTokenizer::encode_pair(std::string_view first, std::string_view second,
                                                      std::size_t max_length) const {
  if (max_length < 3) {
    return Status::invalid_argument(fmt::format(
        "max_length {} cannot hold [CLS] and two [SEP] (at least 3 needed)", max_length));
  }
  auto a = word_pieces(first);
  if (!a.is_ok()) return Status::invalid_argument("first " + a.status().message());
  auto b = word_pieces(second);
  if (!b.is_ok()) return Status::invalid_argument("second " + b.status().message());
  std::size_t keep_a = a->size(), keep_b = b->size();
  const std::size_t total = keep_a + keep_b + 3;
  const std::size_t truncated = total > max_length ? total - max_length : 0;
  for (std::size_t i = 0; i < truncated; ++i) {
    if (keep_a > keep_b) {
      --keep_a;
    } else {
      --keep_b;
    }
  }
  a->resize(keep_a);
  b->resize(keep_b);
  return assemble(a.value(), &b.value(), truncated);
}

std::int32_t WordPieceTokenizer::token_to_id(std::string_view token) const {
  const auto it = token_to_id_.find(std::string(token));
  return it == token_to_id_.end() ? -1 : it->second;
}

const std::string& WordPieceTokenizer::id_to_token(std::int32_t id) const {
  if (id < 0 || static_cast<std::size_t>(id) >= id_to_token_.size()) return options_.unk_token;
  return id_to_token_[static_cast<std::size_t>(id)];
}

// ---------------------------------------------------------------------------
// Construction.

Result<WordPieceTokenizer> WordPieceTokenizer::build(std::vector<std::string> vocab, WordPieceOptions options,
                                                     std::vector<std::string> never_split,
                                                     const std::string& source, const char* position_word) {
  // Files are counted in lines from 1, token lists in indices from 0.
  const bool lines = std::string_view(position_word) == "line";
  auto position = [lines](std::size_t i) { return lines ? i + 1 : i; };
  if (vocab.empty()) return Status::invalid_argument(source + " is empty (no tokens)");
  if (vocab.size() > static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max())) {
    return Status::invalid_argument(fmt::format("{} has {} tokens, more than int32 ids can number", source, vocab.size()));
  }
  WordPieceTokenizer t;
  t.token_to_id_.reserve(vocab.size());
  for (std::size_t i = 0; i < vocab.size(); ++i) {
    const auto [it, inserted] = t.token_to_id_.emplace(vocab[i], static_cast<std::int32_t>(i));
    if (!inserted) {
      return Status::invalid_argument(fmt::format(
          "{} {} {}: duplicate token '{}' (first at {} {})", source, position_word, position(i), clip(vocab[i]),
          position_word, position(static_cast<std::size_t>(it->second))));
    }
  }
  const std::pair<const char*, const std::string*> required[] = {
      {"unk_token", &options.unk_token}, {"cls_token", &options.cls_token},
      {"sep_token", &options.sep_token}, {"pad_token", &options.pad_token}};
  std::int32_t* const ids[] = {&t.unk_id_, &t.cls_id_, &t.sep_id_, &t.pad_id_};
  for (std::size_t i = 0; i < 4; ++i) {
    const auto it = t.token_to_id_.find(*required[i].second);
    if (it == t.token_to_id_.end()) {
      return Status::invalid_argument(fmt::format("{} has no '{}' token (the {})", source,
                                                  clip(*required[i].second), required[i].first));
    }
    *ids[i] = it->second;
  }
  // A special token missing from the vocabulary stays ordinary text: HF would
  // give it a new id past the vocabulary, which the model cannot embed.
  for (std::string& s : never_split) {
    if (s.empty() || t.token_to_id_.count(s) == 0) continue;
    if (std::find(t.never_split_.begin(), t.never_split_.end(), s) != t.never_split_.end()) continue;
    t.never_split_.push_back(std::move(s));
  }
  t.strip_accents_ = options.strip_accents.value_or(options.lower_case);
  t.id_to_token_ = std::move(vocab);
  t.options_ = std::move(options);
  return t;
}

Result<WordPieceTokenizer> WordPieceTokenizer::from_tokens(std::vector<std::string> vocab, WordPieceOptions options) {
  try {
    std::vector<std::string> specials = {options.unk_token, options.sep_token, options.pad_token,
                                         options.cls_token, options.mask_token};
    return build(std::move(vocab), std::move(options), std::move(specials), "vocabulary", "index");
  } catch (const std::exception& e) {
    return Status::internal(std::string("building the WordPiece vocabulary failed: ") + e.what());
  }
}

Result<WordPieceTokenizer> WordPieceTokenizer::from_vocab_file(const std::string& vocab_txt_path,
                                                               WordPieceOptions options) {
  try {
    // Bounded: `vocab.txt -> /dev/zero`, or one endless line, must be refused
    // rather than read until memory runs out.
    auto read = detail::read_file_bounded(vocab_txt_path, kMaxVocabFileBytes, "vocab file");
    if (!read) return read.status();
    const std::string& content = read.value();
    const std::string source = fmt::format("vocab file '{}'", vocab_txt_path);
    // HF reads the file in Python text mode: \n, \r\n and \r all end a line,
    // and a last line without an ending still counts.
    std::vector<std::string> vocab;
    for (std::size_t pos = 0; pos < content.size();) {
      std::size_t stop = content.find_first_of("\r\n", pos);
      if (stop == std::string::npos) stop = content.size();
      std::string token = content.substr(pos, stop - pos);
      const std::size_t bad = find_invalid_utf8(token);
      if (bad != std::string::npos) {
        return Status::invalid_argument(fmt::format("{} line {}: not valid UTF-8 (bad byte at column {})", source,
                                                    vocab.size() + 1, bad + 1));
      }
      vocab.push_back(std::move(token));
      pos = stop;
      if (pos < content.size()) pos += content.compare(pos, 2, "\r\n") == 0 ? std::size_t{2} : std::size_t{1};
    }
    std::vector<std::string> specials = {options.unk_token, options.sep_token, options.pad_token,
                                         options.cls_token, options.mask_token};
    return build(std::move(vocab), std::move(options), std::move(specials), source, "line");
  } catch (const std::exception& e) {
    return Status::internal(fmt::format("reading vocab file '{}' failed: {}", vocab_txt_path, e.what()));
  }
}

// ---------------------------------------------------------------------------
// tokenizer.json

namespace {

struct JsonSettings {
  std::vector<std::string> vocab;
  WordPieceOptions options;
  std::vector<std::string> never_split;
  bool has_added_tokens = false;
};

// Optional fields: absent or null keeps the default; a wrong type is an error.
Status read_bool(const Json& object, const char* key, const std::string& field, bool& out) {
  const auto it = object.find(key);
  if (it == object.end() || it->is_null()) return Status::ok();
  if (!it->is_boolean()) return Status::invalid_argument(field + " must be true or false");
  out = it->get<bool>();
  return Status::ok();
}

Status read_string(const Json& object, const char* key, const std::string& field, std::string& out) {
  const auto it = object.find(key);
  if (it == object.end() || it->is_null()) return Status::ok();
  if (!it->is_string()) return Status::invalid_argument(field + " must be a string");
  out = it->get<std::string>();
  return Status::ok();
}

std::string type_of(const Json& object) {
  const auto it = object.find("type");
  return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
}

Status read_model(const Json& root, JsonSettings& s) {
  const auto model = root.find("model");
  if (model == root.end() || !model->is_object()) return Status::invalid_argument("model: missing or not an object");
  if (type_of(*model) != "WordPiece") {
    return Status::invalid_argument("model.type is '" + clip(type_of(*model)) + "'; only WordPiece is supported");
  }
  const auto vocab = model->find("vocab");
  if (vocab == model->end() || !vocab->is_object()) return Status::invalid_argument("model.vocab: missing or not an object");
  if (vocab->empty()) return Status::invalid_argument("model.vocab is empty (no tokens)");
  s.vocab.assign(vocab->size(), std::string());
  std::vector<bool> seen(vocab->size(), false);
  for (const auto& [token, id] : vocab->items()) {
    if (!id.is_number_integer() || id.get<std::int64_t>() < 0 ||
        id.get<std::int64_t>() >= static_cast<std::int64_t>(s.vocab.size()) ||
        seen[static_cast<std::size_t>(id.get<std::int64_t>())]) {
      return Status::invalid_argument(fmt::format(
          "model.vocab: token '{}' has id {}; ids must be 0..{}, each used once", clip(token), clip(id.dump()),
          s.vocab.size() - 1));
    }
    seen[static_cast<std::size_t>(id.get<std::int64_t>())] = true;
    s.vocab[static_cast<std::size_t>(id.get<std::int64_t>())] = token;
  }
  if (Status st = read_string(*model, "unk_token", "model.unk_token", s.options.unk_token); !st) return st;
  if (Status st = read_string(*model, "continuing_subword_prefix", "model.continuing_subword_prefix",
                              s.options.continuing_subword_prefix); !st) {
    return st;
  }
  const auto max_chars = model->find("max_input_chars_per_word");
  if (max_chars != model->end() && !max_chars->is_null()) {
    if (!max_chars->is_number_unsigned()) {
      return Status::invalid_argument("model.max_input_chars_per_word must be a non-negative integer");
    }
    s.options.max_input_chars_per_word = max_chars->get<std::size_t>();
  }
  return Status::ok();
}

Status read_normalizer(const Json& root, JsonSettings& s) {
  const auto normalizer = root.find("normalizer");
  if (normalizer == root.end() || !normalizer->is_object()) {
    return Status::invalid_argument("normalizer: missing; expected a BertNormalizer");
  }
  if (type_of(*normalizer) != "BertNormalizer") {
    return Status::invalid_argument("normalizer.type is '" + clip(type_of(*normalizer)) +
                                    "'; only BertNormalizer is supported");
  }
  if (Status st = read_bool(*normalizer, "clean_text", "normalizer.clean_text", s.options.clean_text); !st) return st;
  if (Status st = read_bool(*normalizer, "handle_chinese_chars", "normalizer.handle_chinese_chars",
                            s.options.tokenize_chinese_chars); !st) {
    return st;
  }
  if (Status st = read_bool(*normalizer, "lowercase", "normalizer.lowercase", s.options.lower_case); !st) return st;
  const auto strip = normalizer->find("strip_accents");
  if (strip != normalizer->end() && !strip->is_null()) {
    if (!strip->is_boolean()) return Status::invalid_argument("normalizer.strip_accents must be true, false or null");
    s.options.strip_accents = strip->get<bool>();
  }
  return Status::ok();
}

Status read_pre_tokenizer(const Json& root) {
  const auto pre = root.find("pre_tokenizer");
  if (pre == root.end() || pre->is_null()) return Status::ok();
  if (!pre->is_object() || type_of(*pre) != "BertPreTokenizer") {
    return Status::invalid_argument("pre_tokenizer.type is '" + clip(pre->is_object() ? type_of(*pre) : pre->dump()) +
                                    "'; only BertPreTokenizer is supported");
  }
  return Status::ok();
}

// One piece of a TemplateProcessing template: a special token or a sequence.
bool template_piece(const Json& piece, const char* kind, std::string& id, std::int64_t& type_id) {
  const auto body = piece.find(kind);
  if (!piece.is_object() || body == piece.end() || !body->is_object()) return false;
  const auto id_it = body->find("id");
  const auto type_it = body->find("type_id");
  if (id_it == body->end() || !id_it->is_string()) return false;
  id = id_it->get<std::string>();
  type_id = type_it != body->end() && type_it->is_number_integer() ? type_it->get<std::int64_t>() : 0;
  return true;
}

// Only BERT's "[CLS] $A [SEP]" / "[CLS] $A [SEP] $B:1 [SEP]:1" is accepted,
// since encode() and encode_pair() build exactly that.
Status read_post_processor(const Json& root, JsonSettings& s) {
  const auto post = root.find("post_processor");
  if (post == root.end() || post->is_null()) return Status::ok();
  const std::string type = post->is_object() ? type_of(*post) : std::string();
  if (type == "BertProcessing") {
    for (const char* key : {"cls", "sep"}) {
      const auto it = post->find(key);
      if (it == post->end() || !it->is_array() || it->empty() || !(*it)[0].is_string()) {
        return Status::invalid_argument(std::string("post_processor.") + key + " must be [token, id]");
      }
      (std::string_view(key) == "cls" ? s.options.cls_token : s.options.sep_token) = (*it)[0].get<std::string>();
    }
    return Status::ok();
  }
  if (type != "TemplateProcessing") {
    return Status::invalid_argument("post_processor.type is '" + clip(type) +
                                    "'; only BertProcessing or a BERT TemplateProcessing is supported");
  }
  const char* const shape = "'[CLS] $A [SEP]' and '[CLS] $A [SEP] $B:1 [SEP]:1' are the only supported templates";
  const auto single = post->find("single");
  std::string cls, a, sep;
  std::int64_t t0 = 0, t1 = 0, t2 = 0;
  if (single == post->end() || !single->is_array() || single->size() != 3 ||
      !template_piece((*single)[0], "SpecialToken", cls, t0) || !template_piece((*single)[1], "Sequence", a, t1) ||
      !template_piece((*single)[2], "SpecialToken", sep, t2) || a != "A" || t0 != 0 || t1 != 0 || t2 != 0) {
    return Status::invalid_argument(std::string("post_processor.single: ") + shape);
  }
  const auto pair = post->find("pair");
  if (pair != post->end() && !pair->is_null()) {
    std::string p_cls, p_a, p_sep1, p_b, p_sep2;
    std::int64_t types[5] = {};
    if (!pair->is_array() || pair->size() != 5 || !template_piece((*pair)[0], "SpecialToken", p_cls, types[0]) ||
        !template_piece((*pair)[1], "Sequence", p_a, types[1]) ||
        !template_piece((*pair)[2], "SpecialToken", p_sep1, types[2]) ||
        !template_piece((*pair)[3], "Sequence", p_b, types[3]) ||
        !template_piece((*pair)[4], "SpecialToken", p_sep2, types[4]) || p_cls != cls || p_a != "A" ||
        p_sep1 != sep || p_b != "B" || p_sep2 != sep || types[0] != 0 || types[1] != 0 || types[2] != 0 ||
        types[3] != 1 || types[4] != 1) {
      return Status::invalid_argument(std::string("post_processor.pair: ") + shape);
    }
  }
  s.options.cls_token = cls;
  s.options.sep_token = sep;
  return Status::ok();
}

Status read_added_tokens(const Json& root, JsonSettings& s) {
  const auto padding = root.find("padding");
  if (padding != root.end() && padding->is_object()) {
    if (Status st = read_string(*padding, "pad_token", "padding.pad_token", s.options.pad_token); !st) return st;
  }
  const auto added = root.find("added_tokens");
  if (added == root.end() || added->is_null()) return Status::ok();
  if (!added->is_array()) return Status::invalid_argument("added_tokens must be an array");
  s.has_added_tokens = true;
  for (std::size_t i = 0; i < added->size(); ++i) {
    const Json& token = (*added)[i];
    const std::string field = fmt::format("added_tokens[{}]", i);
    const auto content = token.find("content");
    const auto id = token.find("id");
    if (!token.is_object() || content == token.end() || !content->is_string() || id == token.end() ||
        !id->is_number_integer()) {
      return Status::invalid_argument(field + " must have a string 'content' and an integer 'id'");
    }
    const std::string text = content->get<std::string>();
    const std::int64_t index = id->get<std::int64_t>();
    if (index < 0 || index >= static_cast<std::int64_t>(s.vocab.size()) ||
        s.vocab[static_cast<std::size_t>(index)] != text) {
      return Status::invalid_argument(
          fmt::format("{} ('{}', id {}) is not in model.vocab with that id", field, clip(text), index));
    }
    bool special = false, single_word = false;
    if (Status st = read_bool(token, "special", field + ".special", special); !st) return st;
    if (Status st = read_bool(token, "single_word", field + ".single_word", single_word); !st) return st;
    if (!special) {
      return Status::invalid_argument(
          fmt::format("{} ('{}'): only special added tokens are supported", field, clip(text)));
    }
    if (single_word) {
      return Status::invalid_argument(fmt::format("{}.single_word ('{}'): must be false", field, clip(text)));
    }
    s.never_split.push_back(text);
  }
  return Status::ok();
}

}  // namespace

Result<WordPieceTokenizer> WordPieceTokenizer::from_tokenizer_json(const std::string& path) {
  auto text = detail::read_file_bounded(path, kMaxTokenizerJsonBytes, "tokenizer.json");
  if (!text) return text.status();
  auto parsed = detail::parse_json_bounded(text.value());
  if (!parsed) {
    return Status::invalid_argument(fmt::format("tokenizer.json '{}': {}", path, parsed.status().message()));
  }
  return from_tokenizer_json(parsed.value(), path);
}

Result<WordPieceTokenizer> WordPieceTokenizer::from_tokenizer_json(const Json& root, const std::string& path) {
  try {
    if (!root.is_object()) return Status::invalid_argument(fmt::format("tokenizer.json '{}' is not a JSON object", path));
    JsonSettings s;
    for (Status st : {read_model(root, s), read_normalizer(root, s), read_pre_tokenizer(root),
                      read_post_processor(root, s)}) {
      if (!st) return Status::invalid_argument(fmt::format("tokenizer.json '{}': {}", path, st.message()));
    }
    if (Status st = read_added_tokens(root, s); !st) {
      return Status::invalid_argument(fmt::format("tokenizer.json '{}': {}", path, st.message()));
    }
    if (!s.has_added_tokens) {
      s.never_split = {s.options.unk_token, s.options.sep_token, s.options.pad_token, s.options.cls_token,
                       s.options.mask_token};
    }
    return build(std::move(s.vocab), std::move(s.options), std::move(s.never_split),
                 fmt::format("tokenizer.json '{}' model.vocab", path), "index");
  } catch (const std::exception& e) {
    return Status::internal(fmt::format("reading tokenizer.json '{}' failed: {}", path, e.what()));
  }
}

}  // namespace rapidqa::text

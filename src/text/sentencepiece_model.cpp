#include "text/sentencepiece_model.h"

#include <algorithm>
#include <cfloat>
#include <cstring>
#include <functional>
#include <queue>
#include <utility>

#include <fmt/format.h>

#include "common/bounded_json.h"
#include "text/utf8.h"

namespace rapidqa::text {

namespace {

constexpr std::string_view kSpaceSymbol = "\xE2\x96\x81";  // U+2581, sentencepiece's escaped space
constexpr float kUnknownPenalty = 10.0f;

// --- the protobuf wire format, as far as a ModelProto needs it --------------

class WireReader {
 public:
  explicit WireReader(std::string_view bytes) : bytes_(bytes) {}

  bool done() const { return pos_ >= bytes_.size(); }
  bool failed() const { return failed_; }
  void fail() { failed_ = true; }

  // The next field's number and wire type; false at the end or on error.
  bool next(std::uint32_t& field, std::uint32_t& wire_type) {
    if (done() || failed_) return false;
    const std::uint64_t key = varint();
    field = static_cast<std::uint32_t>(key >> 3);
    wire_type = static_cast<std::uint32_t>(key & 7);
    if (field == 0) failed_ = true;
    return !failed_;
  }
  std::uint64_t varint() {
    std::uint64_t value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos_ >= bytes_.size()) break;
      const auto b = static_cast<unsigned char>(bytes_[pos_++]);
      value |= static_cast<std::uint64_t>(b & 0x7F) << shift;
      if (!(b & 0x80)) return value;
    }
    failed_ = true;
    return 0;
  }
  std::string_view bytes() {
    const std::uint64_t length = varint();
    if (failed_ || length > bytes_.size() - pos_) {
      failed_ = true;
      return {};
    }
    const std::string_view out = bytes_.substr(pos_, length);
    pos_ += length;
    return out;
  }
  float fixed32_float() {
    if (bytes_.size() - pos_ < 4) {
      failed_ = true;
      return 0;
    }
    std::uint32_t bits = 0;
    for (int i = 0; i < 4; ++i) bits |= static_cast<std::uint32_t>(static_cast<unsigned char>(bytes_[pos_ + i])) << (8 * i);
    pos_ += 4;
    float value;
    std::memcpy(&value, &bits, sizeof value);
    return value;
  }
  void skip(std::uint32_t wire_type) {
    switch (wire_type) {
      case 0: varint(); return;
      case 1: advance(8); return;
      case 2: bytes(); return;
      case 5: advance(4); return;
      default: failed_ = true;  // groups: not in a ModelProto
    }
  }

 private:
  void advance(std::size_t n) {
    if (bytes_.size() - pos_ < n) {
      failed_ = true;
    } else {
      pos_ += n;
    }
  }
  std::string_view bytes_;
  std::size_t pos_ = 0;
  bool failed_ = false;
};

struct TrainerSpec {
  std::uint64_t model_type = 1;
  bool byte_fallback = false;
  bool whitespace_as_suffix = false;
  std::string unk_piece = "<unk>", bos_piece = "<s>", eos_piece = "</s>", pad_piece = "<pad>";
};

struct NormalizerSpec {
  std::string charsmap;
  bool add_dummy_prefix = true, remove_extra_whitespaces = true, escape_whitespaces = true;
};

// Calls on_field(reader, field, wire_type) for each field of a message; it
// reads the fields it knows and returns false for the others, which are
// skipped. False when the message is malformed.
template <typename OnField>
bool read_fields(std::string_view bytes, OnField&& on_field) {
  WireReader r(bytes);
  std::uint32_t field = 0, wire = 0;
  while (r.next(field, wire)) {
    if (!on_field(r, field, wire)) r.skip(wire);
  }
  return !r.failed();
}

bool read_entry(std::string_view bytes, SentencePieceModel::Entry& entry) {
  return read_fields(bytes, [&](WireReader& r, std::uint32_t field, std::uint32_t wire) {
    if (field == 1 && wire == 2) {
      entry.piece = std::string(r.bytes());
    } else if (field == 2 && wire == 5) {
      entry.score = r.fixed32_float();
    } else if (field == 3 && wire == 0) {
      const std::uint64_t type = r.varint();
      if (type < 1 || type > 6) r.fail();
      entry.type = static_cast<SentencePieceModel::PieceType>(type);
    } else {
      return false;
    }
    return true;
  });
}

bool read_trainer_spec(std::string_view bytes, TrainerSpec& spec) {
  return read_fields(bytes, [&](WireReader& r, std::uint32_t field, std::uint32_t wire) {
    if (wire == 0 && (field == 3 || field == 24 || field == 35)) {
      const std::uint64_t value = r.varint();
      if (field == 3) spec.model_type = value;
      if (field == 24) spec.whitespace_as_suffix = value != 0;
      if (field == 35) spec.byte_fallback = value != 0;
    } else if (wire == 2 && field >= 45 && field <= 48) {
      (field == 45 ? spec.unk_piece : field == 46 ? spec.bos_piece : field == 47 ? spec.eos_piece : spec.pad_piece) =
          std::string(r.bytes());
    } else {
      return false;
    }
    return true;
  });
}

bool read_normalizer_spec(std::string_view bytes, NormalizerSpec& spec) {
  return read_fields(bytes, [&](WireReader& r, std::uint32_t field, std::uint32_t wire) {
    if (field == 2 && wire == 2) {
      spec.charsmap = std::string(r.bytes());
    } else if (wire == 0 && field >= 3 && field <= 5) {
      const bool value = r.varint() != 0;
      (field == 3 ? spec.add_dummy_prefix : field == 4 ? spec.remove_extra_whitespaces : spec.escape_whitespaces) =
          value;
    } else {
      return false;
    }
    return true;
  });
}

// sentencepiece's character length: by the first byte alone.
std::size_t one_char_length(std::string_view text, std::size_t at) {
  static constexpr unsigned char kLengths[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return std::min<std::size_t>(kLengths[static_cast<unsigned char>(text[at]) >> 4], text.size() - at);
}

// "<0x41>" -> 0x41; -1 for anything else.
int byte_of_piece(std::string_view piece) {
  if (piece.size() != 6 || piece.substr(0, 3) != "<0x" || piece[5] != '>') return -1;
  int value = 0;
  for (const char c : piece.substr(3, 2)) {
    const int digit = c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
    if (digit < 0) return -1;
    value = value * 16 + digit;
  }
  return value;
}

}  // namespace

Result<SentencePieceModel> SentencePieceModel::parse(std::string_view bytes, const std::string& source) {
  auto fail = [&](std::string_view what) {
    return Status::invalid_argument(fmt::format("sentencepiece model '{}': {}", source, what));
  };
  SentencePieceModel m;
  TrainerSpec trainer;
  NormalizerSpec normalizer;
  WireReader r(bytes);
  std::uint32_t field = 0, wire = 0;
  while (r.next(field, wire)) {
    if (wire == 2 && field >= 1 && field <= 3) {
      const std::string_view body = r.bytes();
      if (r.failed()) break;
      if (field == 1) {
        Entry entry;
        if (!read_entry(body, entry)) return fail(fmt::format("piece {} is malformed", m.entries_.size()));
        m.entries_.push_back(std::move(entry));
      } else if (field == 2 ? !read_trainer_spec(body, trainer) : !read_normalizer_spec(body, normalizer)) {
        return fail(field == 2 ? "its trainer spec is malformed" : "its normalizer spec is malformed");
      }
    } else {
      r.skip(wire);
    }
  }
  if (r.failed()) return fail("is not a sentencepiece model (malformed protobuf)");
  if (m.entries_.empty()) return fail("holds no pieces");
  if (trainer.model_type != 1 && trainer.model_type != 2) {
    return fail(fmt::format("model type {} is not read (Unigram, BPE)", trainer.model_type));
  }
  m.bpe_ = trainer.model_type == 2;
  m.byte_fallback_ = trainer.byte_fallback;
  m.whitespace_as_suffix_ = trainer.whitespace_as_suffix;
  m.add_dummy_prefix_ = normalizer.add_dummy_prefix;
  m.remove_extra_whitespaces_ = normalizer.remove_extra_whitespaces;
  m.escape_whitespaces_ = normalizer.escape_whitespaces;
  if (!normalizer.charsmap.empty()) {
    auto map = CharsMap::parse(normalizer.charsmap, fmt::format("sentencepiece model '{}': character map", source));
    if (!map) return map.status();
    m.chars_map_ = std::move(map).value();
  }
  m.byte_ids_.assign(256, -1);
  std::unordered_map<std::string, std::int32_t> reserved;  // control, unknown, byte pieces
  m.min_score_ = FLT_MAX;
  m.max_score_ = FLT_MIN;
  for (std::size_t i = 0; i < m.entries_.size(); ++i) {
    const Entry& e = m.entries_[i];
    const auto id = static_cast<std::int32_t>(i);
    if (e.piece.empty()) return fail(fmt::format("piece {} is empty", i));
    if (find_invalid_utf8(e.piece) != std::string::npos) return fail(fmt::format("piece {} is not UTF-8", i));
    const bool normal = e.type == PieceType::kNormal || e.type == PieceType::kUserDefined || e.type == PieceType::kUnused;
    if (!(normal ? m.ids_ : reserved).emplace(e.piece, id).second) {
      return fail(fmt::format("piece '{}' is defined twice", detail::clip_for_message(e.piece)));
    }
    if (e.type == PieceType::kNormal) {
      m.min_score_ = std::min(m.min_score_, e.score);
      m.max_score_ = std::max(m.max_score_, e.score);
    }
    if (normal) m.max_piece_bytes_ = std::max(m.max_piece_bytes_, e.piece.size());
    if (e.type == PieceType::kUserDefined) m.user_defined_.push_back(e.piece);
    if (e.type == PieceType::kUnknown) {
      if (m.unk_id_ >= 0) return fail("has two unknown pieces");
      m.unk_id_ = id;
    }
    if (e.type == PieceType::kByte) {
      const int byte = byte_of_piece(e.piece);
      if (!m.byte_fallback_ || byte < 0) {
        return fail(fmt::format("byte piece '{}' without byte fallback", detail::clip_for_message(e.piece)));
      }
      m.byte_ids_[byte] = id;
    }
  }
  if (m.unk_id_ < 0) return fail("has no unknown piece");
  if (m.min_score_ == FLT_MAX) m.min_score_ = 0;
  if (m.max_score_ == FLT_MIN) m.max_score_ = 0;
  auto control = [&](const std::string& piece) {
    const auto it = reserved.find(piece);
    return it != reserved.end() && m.entries_[it->second].type == PieceType::kControl ? it->second : -1;
  };
  m.bos_id_ = control(trainer.bos_piece);
  m.eos_id_ = control(trainer.eos_piece);
  m.pad_id_ = control(trainer.pad_piece);
  return m;
}

std::int32_t SentencePieceModel::find(const std::string& piece) const {
  const auto it = ids_.find(piece);
  return it == ids_.end() ? -1 : it->second;
}

std::size_t SentencePieceModel::user_defined_prefix(std::string_view input) const {
  std::size_t longest = 0;
  for (const std::string& piece : user_defined_) {
    if (piece.size() > longest && input.substr(0, piece.size()) == piece) longest = piece.size();
  }
  return longest;
}

std::pair<std::string_view, std::size_t> SentencePieceModel::normalize_prefix(std::string_view input) const {
  if (const std::size_t n = user_defined_prefix(input)) return {input.substr(0, n), n};
  if (chars_map_) {
    if (const auto match = chars_map_->longest_prefix(input)) return {match->replacement, match->length};
  }
  std::size_t length = 0;
  decode_at(input, 0, length);
  return {input.substr(0, length), length};
}

SentencePieceModel::Normalized SentencePieceModel::normalize(std::string_view input) const {
  Normalized out;
  std::size_t consumed = 0;
  if (remove_extra_whitespaces_) {
    while (!input.empty()) {
      const auto [normalized, length] = normalize_prefix(input);
      if (normalized != " ") break;
      input.remove_prefix(length);
      consumed += length;
    }
  }
  if (input.empty()) return out;
  auto add_space = [&] {
    const std::string_view space = escape_whitespaces_ ? kSpaceSymbol : std::string_view(" ");
    out.text.append(space);
    out.to_original.insert(out.to_original.end(), space.size(), consumed);
  };
  if (!whitespace_as_suffix_ && add_dummy_prefix_) add_space();
  bool previous_space = remove_extra_whitespaces_;
  while (!input.empty()) {
    auto [normalized, length] = normalize_prefix(input);
    while (previous_space && !normalized.empty() && normalized.front() == ' ') normalized.remove_prefix(1);
    if (!normalized.empty()) {
      for (const char c : normalized) {
        if (escape_whitespaces_ && c == ' ') {
          out.text.append(kSpaceSymbol);
          out.to_original.insert(out.to_original.end(), kSpaceSymbol.size(), consumed);
        } else {
          out.text.push_back(c);
          out.to_original.push_back(consumed);
        }
      }
      previous_space = normalized.back() == ' ';
    }
    consumed += length;
    input.remove_prefix(length);
    if (!remove_extra_whitespaces_) previous_space = false;
  }
  if (remove_extra_whitespaces_) {
    const std::string_view space = escape_whitespaces_ ? kSpaceSymbol : std::string_view(" ");
    while (out.text.size() >= space.size() &&
           std::string_view(out.text).substr(out.text.size() - space.size()) == space) {
      const std::size_t length = out.text.size() - space.size();
      consumed = out.to_original[length];
      out.text.resize(length);
      out.to_original.resize(length);
    }
  }
  if (whitespace_as_suffix_ && add_dummy_prefix_) add_space();
  out.to_original.push_back(consumed);
  return out;
}

std::vector<std::pair<std::string_view, std::int32_t>> SentencePieceModel::unigram(std::string_view text) const {
  struct Best {
    std::int32_t id = -1;
    float score = 0;
    std::ptrdiff_t starts_at = -1;
  };
  const std::size_t size = text.size();
  const float unknown_score = min_score_ - kUnknownPenalty;
  std::vector<Best> best(size + 1);
  std::string key;
  for (std::size_t start = 0; start < size;) {
    const float score_here = best[start].score;
    const std::size_t char_length = one_char_length(text, start);
    bool has_single = false;
    const std::size_t limit = std::min(size, start + max_piece_bytes_);
    for (std::size_t end = start + 1; end <= limit; ++end) {
      key.assign(text.data() + start, end - start);
      const auto it = ids_.find(key);
      if (it == ids_.end()) continue;
      const Entry& e = entries_[it->second];
      if (e.type == PieceType::kUnused) continue;
      const std::size_t length = end - start;
      // A user-defined piece always wins (sentencepiece's bonus, in double).
      const double score = e.type == PieceType::kUserDefined ? length * max_score_ - 0.1 : e.score;
      const double candidate = score + score_here;
      Best& target = best[end];
      if (target.starts_at == -1 || candidate > target.score) {
        target = {it->second, static_cast<float>(candidate), static_cast<std::ptrdiff_t>(start)};
      }
      if (length == char_length) has_single = true;
    }
    if (!has_single) {
      Best& target = best[start + char_length];
      const float candidate = unknown_score + score_here;
      if (target.starts_at == -1 || candidate > target.score) {
        target = {unk_id_, candidate, static_cast<std::ptrdiff_t>(start)};
      }
    }
    start += char_length;
  }
  // Back along the best path; a run of unknown characters is one piece.
  std::vector<std::pair<std::string_view, std::int32_t>> out;
  for (std::size_t end = size; end > 0;) {
    const Best& node = best[end];
    const auto start = static_cast<std::size_t>(node.starts_at);
    if (node.id == unk_id_ && !out.empty() && out.back().second == unk_id_) {
      out.back().first = text.substr(start, end - start + out.back().first.size());
    } else {
      out.emplace_back(text.substr(start, end - start), node.id);
    }
    end = start;
  }
  std::reverse(out.begin(), out.end());
  return out;
}

std::vector<std::pair<std::string_view, std::int32_t>> SentencePieceModel::bpe(std::string_view text) const {
  struct Symbol {
    std::ptrdiff_t prev = -1, next = -1;
    bool frozen = false;
    std::string_view piece;
  };
  struct Pair {
    std::ptrdiff_t left = 0, right = 0;
    float score = 0;
    std::size_t size = 0;
  };
  // Highest score first; on a tie, the leftmost.
  auto lower = [](const Pair& a, const Pair& b) { return a.score < b.score || (a.score == b.score && a.left > b.left); };
  std::priority_queue<Pair, std::vector<Pair>, decltype(lower)> agenda(lower);
  std::vector<Symbol> symbols;
  std::unordered_map<std::string_view, std::pair<std::string_view, std::string_view>> unmerge;
  std::string key;
  auto maybe_add = [&](std::ptrdiff_t left, std::ptrdiff_t right) {
    if (left < 0 || right < 0 || symbols[left].frozen || symbols[right].frozen) return;
    const std::string_view merged(symbols[left].piece.data(), symbols[left].piece.size() + symbols[right].piece.size());
    key.assign(merged);
    const auto it = ids_.find(key);
    if (it == ids_.end()) return;
    agenda.push({left, right, entries_[it->second].score, merged.size()});
    if (entries_[it->second].type == PieceType::kUnused) unmerge[merged] = {symbols[left].piece, symbols[right].piece};
  };
  for (std::size_t at = 0; at < text.size();) {
    Symbol s;
    const std::size_t user = user_defined_prefix(text.substr(at));
    const std::size_t length = user ? user : one_char_length(text, at);
    s.frozen = user > 0;
    s.piece = text.substr(at, length);
    s.prev = static_cast<std::ptrdiff_t>(symbols.size()) - 1;
    at += length;
    s.next = at < text.size() ? static_cast<std::ptrdiff_t>(symbols.size()) + 1 : -1;
    symbols.push_back(s);
  }
  if (symbols.empty()) return {};
  for (std::size_t i = 1; i < symbols.size(); ++i) maybe_add(static_cast<std::ptrdiff_t>(i) - 1, static_cast<std::ptrdiff_t>(i));
  while (!agenda.empty()) {
    const Pair top = agenda.top();
    agenda.pop();
    Symbol& left = symbols[top.left];
    Symbol& right = symbols[top.right];
    if (left.piece.empty() || right.piece.empty() || left.piece.size() + right.piece.size() != top.size) continue;
    left.piece = std::string_view(left.piece.data(), left.piece.size() + right.piece.size());
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = top.left;
    right.piece = {};
    maybe_add(left.prev, top.left);
    maybe_add(top.left, left.next);
  }
  std::vector<std::pair<std::string_view, std::int32_t>> out;
  std::function<void(std::string_view)> resegment = [&](std::string_view piece) {
    key.assign(piece);
    const auto it = ids_.find(key);
    const std::int32_t id = it == ids_.end() ? unk_id_ : it->second;
    const auto split = unmerge.find(piece);
    if (it == ids_.end() || entries_[id].type != PieceType::kUnused || split == unmerge.end()) {
      out.emplace_back(piece, id);
      return;
    }
    resegment(split->second.first);
    resegment(split->second.second);
  };
  for (std::ptrdiff_t i = 0; i != -1; i = symbols[i].next) resegment(symbols[i].piece);
  return out;
}

std::vector<TextPiece> SentencePieceModel::encode(std::string_view text) const {
  const Normalized normalized = normalize(text);
  std::vector<TextPiece> out;
  if (normalized.text.empty()) return out;
  const std::string_view n(normalized.text);
  std::size_t consumed = 0;
  for (const auto& [piece, id] : bpe_ ? bpe(n) : unigram(n)) {
    const std::size_t begin = normalized.to_original[consumed];
    const std::size_t end = normalized.to_original[consumed + piece.size()];
    consumed += piece.size();
    if (entries_[id].type == PieceType::kControl) {
      out.push_back({id, begin, begin});
      continue;
    }
    if (id == unk_id_ && byte_fallback_) {
      // The unknown piece as its bytes; the last holds the character's span.
      for (std::size_t i = 0; i < piece.size(); ++i) {
        const std::int32_t byte_id = byte_ids_[static_cast<unsigned char>(piece[i])];
        const bool last = i + 1 == piece.size();
        out.push_back({byte_id >= 0 ? byte_id : unk_id_, begin, last ? end : begin});
      }
      continue;
    }
    out.push_back({id, begin, end});
  }
  return out;
}

}  // namespace rapidqa::text

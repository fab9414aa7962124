#include "text/subword_models.h"

#include <array>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <optional>
#include <queue>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/bounded_json.h"
#include "text/utf8.h"

namespace rapidqa::text {
namespace {

using Json = nlohmann::json;

// Ids index arrays; no real vocabulary comes near this.
constexpr std::int64_t kMaxTokenId = 1 << 24;

Status model_error(std::string_view field, std::string_view message) {
  return Status::invalid_argument(fmt::format("model.{}: {}", field, message));
}

// An optional string field: nullopt when absent or null.
Result<std::optional<std::string>> optional_string(const Json& model, const char* field) {
  const auto it = model.find(field);
  if (it == model.end() || it->is_null()) return std::optional<std::string>();
  if (!it->is_string()) return model_error(field, "expected a string or null");
  return std::optional<std::string>(it->get<std::string>());
}

bool flag(const Json& model, const char* field, bool fallback) {
  const auto it = model.find(field);
  return it != model.end() && it->is_boolean() ? it->get<bool>() : fallback;
}

// A Unigram score as Hugging Face's tokenizers reads it from tokenizer.json.
// The library parses numbers with serde_json's default parser, which is not
// correctly rounded: it takes the decimal digits as one integer (rounded to a
// double above 2^53) and then multiplies or divides by a power of ten,
// rounding a second time. A score of 17 significant digits, as float32 scores
// print, can land one unit in the last place away from the nearest double.
// That unit decides ties between the same pieces in two orders ("aa" "a"
// against "a" "aa": P + s1 + s2 against P + s2 + s1 round differently), so
// the scores are read the library's way. The digits are those of the
// shortest representation, which is what the library, Python and JavaScript
// write.
double score_as_the_library_reads_it(double nearest) {
  std::array<char, 64> text{};
  const auto written = std::to_chars(text.data(), text.data() + text.size(), std::fabs(nearest),
                                     std::chars_format::scientific);
  if (written.ec != std::errc()) return nearest;
  std::uint64_t significand = 0;
  int exponent = 0;
  bool after_point = false;
  const char* p = text.data();
  for (; p != written.ptr && *p != 'e'; ++p) {
    if (*p == '.') {
      after_point = true;
      continue;
    }
    significand = significand * 10 + static_cast<std::uint64_t>(*p - '0');
    exponent -= after_point ? 1 : 0;
  }
  if (p == written.ptr) return nearest;
  exponent += std::atoi(p + 1);
  static const std::array<double, 309> powers_of_ten = [] {
    std::array<double, 309> powers{};
    for (std::size_t i = 0; i < powers.size(); ++i) powers[i] = std::strtod(fmt::format("1e{}", i).c_str(), nullptr);
    return powers;
  }();
  auto value = static_cast<double>(significand);
  for (;;) {
    const auto index = static_cast<std::size_t>(exponent < 0 ? -exponent : exponent);
    if (index < powers_of_ten.size()) {
      value = exponent >= 0 ? value * powers_of_ten[index] : value / powers_of_ten[index];
      break;
    }
    if (value == 0 || exponent >= 0) break;
    value /= 1e308;
    exponent += 308;
  }
  return std::isfinite(value) ? std::copysign(value, nearest) : nearest;
}

// "<0xNN>", the byte-fallback token of b.
std::string byte_token(unsigned char b) { return fmt::format("<0x{:02X}>", b); }

class WordPieceModel final : public SubwordModel {
 public:
  static Result<std::unique_ptr<SubwordModel>> read(const Json& model);
  Status tokenize(std::string_view piece, std::vector<PieceToken>& out) const override;

 private:
  std::string unk_token_ = "[UNK]";
  std::string prefix_ = "##";
  std::size_t max_chars_ = 100;
};

class BpeModel final : public SubwordModel {
 public:
  static Result<std::unique_ptr<SubwordModel>> read(const Json& model);
  Status tokenize(std::string_view piece, std::vector<PieceToken>& out) const override;

 private:
  struct Symbol {
    std::int32_t id;
    std::ptrdiff_t prev, next;
    std::size_t begin, end;  // bytes of the piece
  };
  void merge_all(std::vector<Symbol>& symbols) const;

  std::unordered_map<std::uint64_t, std::pair<std::uint32_t, std::int32_t>> merges_;  // (a, b) -> (rank, merged)
  std::optional<std::string> unk_token_, prefix_, suffix_;
  bool fuse_unk_ = false, byte_fallback_ = false, ignore_merges_ = false;
};

class UnigramModel final : public SubwordModel {
 public:
  static Result<std::unique_ptr<SubwordModel>> read(const Json& model);
  Status tokenize(std::string_view piece, std::vector<PieceToken>& out) const override;

 private:
  // A byte trie over the pieces: node -> (byte -> child), and each node's
  // piece id (-1 where no piece ends).
  std::int32_t child(std::int32_t node, unsigned char byte) const {
    const auto it = edges_.find((static_cast<std::uint64_t>(node) << 8) | byte);
    return it == edges_.end() ? -1 : it->second;
  }
  std::unordered_map<std::uint64_t, std::int32_t> edges_;
  std::vector<std::int32_t> node_piece_{-1};
  std::vector<double> scores_;
  std::optional<std::int32_t> unk_id_;
  double min_score_ = 0;
  bool byte_fallback_ = false;
};

class WordLevelModel final : public SubwordModel {
 public:
  static Result<std::unique_ptr<SubwordModel>> read(const Json& model);
  Status tokenize(std::string_view piece, std::vector<PieceToken>& out) const override;

 private:
  std::string unk_token_;
};

// A vocabulary given as {token: id} (WordPiece, BPE, WordLevel).
Status read_vocab_object(const Json& model, std::vector<std::string>& id_to_token,
                         std::unordered_map<std::string, std::int32_t>& token_to_id) {
  const auto it = model.find("vocab");
  if (it == model.end() || !it->is_object()) return model_error("vocab", "expected an object of token: id");
  for (const auto& [token, id] : it->items()) {
    if (!id.is_number_integer() || id.get<std::int64_t>() < 0 || id.get<std::int64_t>() >= kMaxTokenId) {
      return model_error("vocab", fmt::format("'{}' has no valid id", detail::clip_for_message(token)));
    }
    const auto n = static_cast<std::size_t>(id.get<std::int64_t>());
    if (n >= id_to_token.size()) id_to_token.resize(n + 1);
    if (!id_to_token[n].empty()) {
      return model_error("vocab", fmt::format("id {} is given to '{}' and '{}'", n,
                                              detail::clip_for_message(id_to_token[n]),
                                              detail::clip_for_message(token)));
    }
    id_to_token[n] = token;
    token_to_id[token] = static_cast<std::int32_t>(n);
  }
  return Status::ok();
}

Result<std::unique_ptr<SubwordModel>> WordPieceModel::read(const Json& model) {
  auto out = std::make_unique<WordPieceModel>();
  if (Status s = read_vocab_object(model, out->id_to_token_, out->token_to_id_); !s) return s;
  auto unk = optional_string(model, "unk_token");
  auto prefix = optional_string(model, "continuing_subword_prefix");
  if (!unk) return unk.status();
  if (!prefix) return prefix.status();
  if (unk.value()) out->unk_token_ = *unk.value();
  if (prefix.value()) out->prefix_ = *prefix.value();
  if (const auto it = model.find("max_input_chars_per_word"); it != model.end() && !it->is_null()) {
    if (!it->is_number_unsigned()) return model_error("max_input_chars_per_word", "expected a count");
    out->max_chars_ = it->get<std::size_t>();
  }
  return std::unique_ptr<SubwordModel>(std::move(out));
}

Status WordPieceModel::tokenize(std::string_view piece, std::vector<PieceToken>& out) const {
  auto unknown = [&]() -> Status {
    const std::int32_t id = token_to_id(unk_token_);
    if (id < 0) return Status::invalid_argument(fmt::format("the unknown token '{}' is not in the vocabulary", unk_token_));
    out.push_back({id, unk_token_, {0, piece.size()}});
    return Status::ok();
  };
  if (code_points(piece).size() > max_chars_) return unknown();
  const std::size_t first = out.size();
  std::string candidate;
  for (std::size_t start = 0; start < piece.size();) {
    std::size_t end = piece.size();
    bool found = false;
    while (start < end) {
      candidate.assign(start > 0 ? prefix_ : std::string());
      candidate.append(piece.substr(start, end - start));
      if (const auto it = token_to_id_.find(candidate); it != token_to_id_.end()) {
        out.push_back({it->second, candidate, {start, end}});
        found = true;
        break;
      }
      // Back off by the candidate's last character.
      std::size_t last = end - 1;
      while (last > start && (static_cast<unsigned char>(piece[last]) & 0xC0) == 0x80) --last;
      end = last;
    }
    if (!found) {
      out.resize(first);
      return unknown();
    }
    start = end;
  }
  return Status::ok();
}

Result<std::unique_ptr<SubwordModel>> BpeModel::read(const Json& model) {
  auto out = std::make_unique<BpeModel>();
  if (Status s = read_vocab_object(model, out->id_to_token_, out->token_to_id_); !s) return s;
  for (auto [field, target] : {std::pair{"unk_token", &out->unk_token_}, std::pair{"continuing_subword_prefix", &out->prefix_},
                               std::pair{"end_of_word_suffix", &out->suffix_}}) {
    auto value = optional_string(model, field);
    if (!value) return value.status();
    *target = value.value();
  }
  if (const auto it = model.find("dropout"); it != model.end() && !it->is_null()) {
    if (!it->is_number() || it->get<double>() != 0.0) {
      return model_error("dropout", "must be null or 0 (dropout drops merges at random; the model saw one tokenization)");
    }
  }
  out->fuse_unk_ = flag(model, "fuse_unk", false);
  out->byte_fallback_ = flag(model, "byte_fallback", false);
  out->ignore_merges_ = flag(model, "ignore_merges", false);
  const auto merges = model.find("merges");
  if (merges == model.end() || !merges->is_array()) return model_error("merges", "expected a list");
  const std::size_t prefix_length = out->prefix_ ? out->prefix_->size() : 0;
  std::uint32_t rank = 0;
  for (const Json& merge : *merges) {
    std::string a, b;
    if (merge.is_string()) {
      const std::string text = merge.get<std::string>();
      const std::size_t space = text.find(' ');
      if (space == std::string::npos || text.find(' ', space + 1) != std::string::npos) {
        return model_error("merges", fmt::format("'{}' is not two tokens", detail::clip_for_message(text)));
      }
      a = text.substr(0, space);
      b = text.substr(space + 1);
    } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string()) {
      a = merge[0].get<std::string>();
      b = merge[1].get<std::string>();
    } else {
      return model_error("merges", "an entry is neither \"a b\" nor [a, b]");
    }
    const std::int32_t a_id = out->token_to_id(a), b_id = out->token_to_id(b);
    if (a_id < 0 || b_id < 0 || b.size() < prefix_length) {
      return model_error("merges", fmt::format("'{} {}' names a token not in the vocabulary",
                                               detail::clip_for_message(a), detail::clip_for_message(b)));
    }
    const std::int32_t merged = out->token_to_id(a + b.substr(prefix_length));
    if (merged < 0) {
      return model_error("merges", fmt::format("'{} {}' makes a token not in the vocabulary",
                                               detail::clip_for_message(a), detail::clip_for_message(b)));
    }
    // A pair listed twice keeps its last rank, as the library's map does.
    out->merges_[(static_cast<std::uint64_t>(a_id) << 32) | static_cast<std::uint32_t>(b_id)] = {rank++, merged};
  }
  if (out->unk_token_ && out->token_to_id(*out->unk_token_) < 0) {
    return model_error("unk_token", fmt::format("'{}' is not in the vocabulary", *out->unk_token_));
  }
  return std::unique_ptr<SubwordModel>(std::move(out));
}

Status BpeModel::tokenize(std::string_view piece, std::vector<PieceToken>& out) const {
  if (piece.empty()) return Status::ok();
  if (ignore_merges_) {
    if (const auto it = token_to_id_.find(std::string(piece)); it != token_to_id_.end()) {
      out.push_back({it->second, std::string(piece), {0, piece.size()}});
      return Status::ok();
    }
  }
  std::vector<Symbol> symbols;
  auto add = [&](std::int32_t id, std::size_t length) {
    const std::size_t begin = symbols.empty() ? 0 : symbols.back().end;
    const auto index = static_cast<std::ptrdiff_t>(symbols.size());
    symbols.push_back({id, index - 1, index + 1, begin, begin + length});
  };
  std::optional<std::pair<std::int32_t, std::size_t>> unknown;  // (id, bytes) not yet added
  std::string s;
  for (std::size_t pos = 0, length = 0; pos < piece.size(); pos += length) {
    decode_at(piece, pos, length);
    s.assign(pos > 0 && prefix_ ? *prefix_ : std::string());
    s.append(piece.substr(pos, length));
    if (pos + length == piece.size() && suffix_) s += *suffix_;
    if (const auto it = token_to_id_.find(s); it != token_to_id_.end()) {
      if (unknown) {
        add(unknown->first, unknown->second);
        unknown.reset();
      }
      add(it->second, length);
      continue;
    }
    if (byte_fallback_) {
      std::vector<std::int32_t> bytes;
      for (unsigned char b : s) {
        const std::int32_t id = token_to_id(byte_token(b));
        if (id < 0) break;
        bytes.push_back(id);
      }
      if (bytes.size() == s.size()) {
        for (std::int32_t id : bytes) add(id, 1);
        continue;
      }
    }
    if (!unk_token_) continue;  // without an unknown token the library drops the character
    const std::int32_t unk = token_to_id(*unk_token_);
    if (unknown && fuse_unk_) {
      unknown->second += length;
    } else {
      if (unknown) add(unknown->first, unknown->second);
      unknown = std::pair{unk, length};
    }
  }
  if (unknown) add(unknown->first, unknown->second);
  if (!symbols.empty()) symbols.back().next = -1;
  merge_all(symbols);
  for (const Symbol& symbol : symbols) {
    if (symbol.id < 0) continue;  // merged into the symbol before it
    out.push_back({symbol.id, id_to_token_[static_cast<std::size_t>(symbol.id)], {symbol.begin, symbol.end}});
  }
  return Status::ok();
}

// Merges by rank, leftmost first on a tie; a merged-away symbol's id
// becomes -1.
void BpeModel::merge_all(std::vector<Symbol>& symbols) const {
  struct Merge {
    std::uint32_t rank;
    std::size_t pos;
    std::int32_t merged;
    bool operator>(const Merge& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  auto find = [&](std::int32_t a, std::int32_t b) {
    const auto it = merges_.find((static_cast<std::uint64_t>(a) << 32) | static_cast<std::uint32_t>(b));
    return it == merges_.end() ? nullptr : &it->second;
  };
  std::priority_queue<Merge, std::vector<Merge>, std::greater<Merge>> queue;
  for (std::size_t i = 0; i + 1 < symbols.size(); ++i) {
    if (const auto* m = find(symbols[i].id, symbols[i + 1].id)) queue.push({m->first, i, m->second});
  }
  while (!queue.empty()) {
    const Merge top = queue.top();
    queue.pop();
    Symbol& left = symbols[top.pos];
    if (left.id < 0 || left.next < 0) continue;
    Symbol& right = symbols[static_cast<std::size_t>(left.next)];
    const auto* m = find(left.id, right.id);
    if (!m || m->second != top.merged) continue;
    left.id = top.merged;
    left.end = right.end;
    left.next = right.next;
    right.id = -1;
    if (right.next >= 0) symbols[static_cast<std::size_t>(right.next)].prev = static_cast<std::ptrdiff_t>(top.pos);
    if (left.prev >= 0) {
      const Symbol& prev = symbols[static_cast<std::size_t>(left.prev)];
      if (const auto* p = find(prev.id, left.id)) queue.push({p->first, static_cast<std::size_t>(left.prev), p->second});
    }
    if (left.next >= 0) {
      const Symbol& next = symbols[static_cast<std::size_t>(left.next)];
      if (const auto* n = find(left.id, next.id)) queue.push({n->first, top.pos, n->second});
    }
  }
}

Result<std::unique_ptr<SubwordModel>> UnigramModel::read(const Json& model) {
  auto out = std::make_unique<UnigramModel>();
  const auto vocab = model.find("vocab");
  if (vocab == model.end() || !vocab->is_array()) return model_error("vocab", "expected a list of [piece, score]");
  if (vocab->size() >= static_cast<std::size_t>(kMaxTokenId)) return model_error("vocab", "too many pieces");
  out->min_score_ = std::numeric_limits<double>::infinity();
  for (const Json& entry : *vocab) {
    if (!entry.is_array() || entry.size() != 2 || !entry[0].is_string() || !entry[1].is_number() ||
        !std::isfinite(entry[1].get<double>())) {
      return model_error("vocab", "an entry is not [piece, score]");
    }
    const std::string piece = entry[0].get<std::string>();
    const auto id = static_cast<std::int32_t>(out->id_to_token_.size());
    if (out->token_to_id_.count(piece)) {
      return model_error("vocab", fmt::format("'{}' is listed twice", detail::clip_for_message(piece)));
    }
    out->id_to_token_.push_back(piece);
    out->token_to_id_[piece] = id;
    out->scores_.push_back(score_as_the_library_reads_it(entry[1].get<double>()));
    out->min_score_ = std::min(out->min_score_, out->scores_.back());
    std::int32_t node = 0;
    for (unsigned char byte : piece) {
      std::int32_t next = out->child(node, byte);
      if (next < 0) {
        next = static_cast<std::int32_t>(out->node_piece_.size());
        out->node_piece_.push_back(-1);
        out->edges_[(static_cast<std::uint64_t>(node) << 8) | byte] = next;
      }
      node = next;
    }
    if (node != 0) out->node_piece_[static_cast<std::size_t>(node)] = id;
  }
  if (const auto it = model.find("unk_id"); it != model.end() && !it->is_null()) {
    if (!it->is_number_unsigned() || it->get<std::size_t>() >= out->id_to_token_.size()) {
      return model_error("unk_id", "expected the index of a piece");
    }
    out->unk_id_ = it->get<std::int32_t>();
  }
  out->byte_fallback_ = flag(model, "byte_fallback", false);
  return std::unique_ptr<SubwordModel>(std::move(out));
}

Status UnigramModel::tokenize(std::string_view piece, std::vector<PieceToken>& out) const {
  if (piece.empty()) return Status::ok();
  struct Best {
    std::int32_t id = 0;
    double score = 0;
    std::ptrdiff_t starts_at = -1;
  };
  const double unk_score = min_score_ - 10.0;
  std::vector<Best> best(piece.size() + 1);
  for (std::size_t start = 0, length = 0; start < piece.size(); start += length) {
    decode_at(piece, start, length);
    const double here = best[start].score;
    bool single = false;
    auto offer = [&](std::size_t end, std::int32_t id, double score) {
      Best& target = best[end];
      const double candidate = score + here;
      if (target.starts_at < 0 || candidate > target.score) target = {id, candidate, static_cast<std::ptrdiff_t>(start)};
    };
    std::int32_t node = 0;
    for (std::size_t pos = start; pos < piece.size(); ++pos) {
      node = child(node, static_cast<unsigned char>(piece[pos]));
      if (node < 0) break;
      const std::int32_t id = node_piece_[static_cast<std::size_t>(node)];
      if (id < 0) continue;
      offer(pos + 1, id, scores_[static_cast<std::size_t>(id)]);
      if (pos + 1 - start == length) single = true;
    }
    if (!single) {
      if (!unk_id_) return Status::invalid_argument("the Unigram model has no unknown token (unk_id) for a character");
      offer(start + length, *unk_id_, unk_score);
    }
  }
  // Back from the end; neighbouring unknown stretches fuse into one.
  struct Stretch {
    std::size_t begin, end;
    bool unknown;
  };
  std::vector<Stretch> stretches;
  for (std::size_t end = piece.size(); end > 0;) {
    const Best& node = best[end];
    const auto start = static_cast<std::size_t>(node.starts_at);
    const bool unknown = unk_id_ && node.id == *unk_id_;
    if (unknown && !stretches.empty() && stretches.back().unknown) {
      stretches.back().begin = start;
    } else {
      stretches.push_back({start, end, unknown});
    }
    end = start;
  }
  for (auto it = stretches.rbegin(); it != stretches.rend(); ++it) {
    std::string text(piece.substr(it->begin, it->end - it->begin));
    const Offsets offsets{it->begin, it->end};
    if (const auto found = token_to_id_.find(text); found != token_to_id_.end()) {
      out.push_back({found->second, std::move(text), offsets});
      continue;
    }
    if (byte_fallback_) {
      std::vector<PieceToken> bytes;
      for (unsigned char b : text) {
        std::string name = byte_token(b);
        const std::int32_t id = token_to_id(name);
        if (id < 0) break;
        bytes.push_back({id, std::move(name), offsets});
      }
      if (bytes.size() == text.size()) {
        for (PieceToken& t : bytes) out.push_back(std::move(t));
        continue;
      }
    }
    out.push_back({*unk_id_, std::move(text), offsets});
  }
  return Status::ok();
}

Result<std::unique_ptr<SubwordModel>> WordLevelModel::read(const Json& model) {
  auto out = std::make_unique<WordLevelModel>();
  if (Status s = read_vocab_object(model, out->id_to_token_, out->token_to_id_); !s) return s;
  auto unk = optional_string(model, "unk_token");
  if (!unk) return unk.status();
  out->unk_token_ = unk.value().value_or("");
  return std::unique_ptr<SubwordModel>(std::move(out));
}

Status WordLevelModel::tokenize(std::string_view piece, std::vector<PieceToken>& out) const {
  if (const auto it = token_to_id_.find(std::string(piece)); it != token_to_id_.end()) {
    out.push_back({it->second, it->first, {0, piece.size()}});
    return Status::ok();
  }
  const std::int32_t unk = token_to_id(unk_token_);
  if (unk < 0) return Status::invalid_argument("a piece is not in the WordLevel vocabulary, which has no unknown token");
  out.push_back({unk, unk_token_, {0, piece.size()}});
  return Status::ok();
}

}  // namespace

std::int32_t SubwordModel::token_to_id(std::string_view token) const {
  const auto it = token_to_id_.find(std::string(token));
  return it == token_to_id_.end() ? -1 : it->second;
}

const std::string* SubwordModel::id_to_token(std::int32_t id) const {
  if (id < 0 || static_cast<std::size_t>(id) >= id_to_token_.size()) return nullptr;
  return &id_to_token_[static_cast<std::size_t>(id)];
}

void SubwordModel::name_id(std::int32_t id, const std::string& token) {
  if (id < 0 || id >= kMaxTokenId) return;
  if (static_cast<std::size_t>(id) >= id_to_token_.size()) id_to_token_.resize(static_cast<std::size_t>(id) + 1);
  if (id_to_token_[static_cast<std::size_t>(id)].empty()) id_to_token_[static_cast<std::size_t>(id)] = token;
}

Result<std::unique_ptr<SubwordModel>> read_subword_model(const Json& model) {
  if (!model.is_object()) return Status::invalid_argument("model: expected an object");
  std::string type = model.value("type", "");
  if (type.empty()) {
    // Older files leave the type out; the fields say which model it is.
    if (model.contains("merges")) type = "BPE";
    else if (model.contains("vocab") && model["vocab"].is_array()) type = "Unigram";
    else if (model.contains("continuing_subword_prefix") || model.contains("max_input_chars_per_word")) type = "WordPiece";
  }
  if (type == "WordPiece") return WordPieceModel::read(model);
  if (type == "BPE") return BpeModel::read(model);
  if (type == "Unigram") return UnigramModel::read(model);
  if (type == "WordLevel") return WordLevelModel::read(model);
  return Status::invalid_argument(fmt::format("model.type: '{}' is not supported (WordPiece, BPE, Unigram, WordLevel)",
                                              detail::clip_for_message(type)));
}

}  // namespace rapidqa::text

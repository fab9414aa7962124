// NormalizedString: a piece of text as a Hugging Face tokenizer.json
// pipeline changes it, with where each of its bytes came from in the
// original text. Normalizers rewrite it; pre-tokenizers cut it into pieces;
// models tokenize each piece; a token's offsets in the original text come
// from the alignments of the bytes it covers. Every operation moves the
// alignments exactly as Hugging Face's tokenizers library moves them, so
// offsets agree with it even where they are surprising (an inserted
// character takes the alignment of the one before it).
//
// Pattern matches (split points) come from a character test, a literal
// string or an Oniguruma regular expression (the engine the library uses).
//
// Thread safety: a value type; a Regex is immutable and shared freely.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "rapidqa/status.h"

namespace rapidqa::text {

// One character of a transformation and what it does to the string before:
//   0   replaces the next character
//   >0  is inserted (it takes the alignment of the character before)
//   -n  replaces the next character and removes the n after it
struct CharChange {
  std::int32_t code_point;
  std::ptrdiff_t change;
};

using Offsets = std::pair<std::size_t, std::size_t>;
// A pattern's view of a text: every stretch, in order, and whether it matched.
using Matches = std::vector<std::pair<Offsets, bool>>;

// A compiled Oniguruma expression (Ruby syntax, UTF-8), as the library
// compiles its Split and Replace patterns.
class Regex {
 public:
  // kInvalidArgument naming the pattern when it does not compile.
  static Result<std::shared_ptr<const Regex>> compile(std::string_view pattern);
  // The expression matching exactly `literal`.
  static Result<std::shared_ptr<const Regex>> literal(std::string_view literal);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Every match, leftmost first, an empty match right after the previous
  // match skipped (the library's find_iter).
  std::vector<Offsets> find_all(std::string_view text) const;
  Matches find_matches(std::string_view text) const;

 private:
  Regex() = default;
  static Result<std::shared_ptr<const Regex>> compile_with_syntax(std::string_view pattern, void* syntax);
  void* regex_ = nullptr;  // regex_t*
};

// The stretches of text split at each character where is_match holds (each
// such character a match of its own).
Matches find_char_matches(std::string_view text, const std::function<bool(std::int32_t)>& is_match);
void invert_matches(Matches& matches);

enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };
// "Removed", "Isolated", ... as tokenizer.json names them; nullopt otherwise.
std::optional<SplitBehavior> split_behavior_from_name(std::string_view name);

class NormalizedString {
 public:
  // The original text, which starts at original_shift in the whole input.
  explicit NormalizedString(std::string_view original, std::size_t original_shift = 0);

  const std::string& get() const { return normalized_; }
  std::size_t size() const { return normalized_.size(); }
  bool empty() const { return normalized_.empty(); }
  std::size_t original_size() const { return original_size_; }
  // Where this piece starts in the whole input.
  std::size_t original_shift() const { return original_shift_; }

  // Normalized bytes [begin, end) as original bytes of the whole input;
  // nullopt where the library has none (out of range).
  std::optional<Offsets> original_offsets(std::size_t begin, std::size_t end) const;

  // The library's transform_range over normalized bytes [begin, end), and
  // transform over the whole string.
  void transform_range(std::size_t begin, std::size_t end, const std::vector<CharChange>& dest,
                       std::size_t initial_offset);
  void transform(const std::vector<CharChange>& dest, std::size_t initial_offset);

  // Normalized bytes [begin, end) as a piece of their own (on character
  // boundaries).
  NormalizedString slice(std::size_t begin, std::size_t end) const;
  // The pieces the matches cut this into, by behavior (empty ones kept).
  std::vector<NormalizedString> split(const Matches& matches, SplitBehavior behavior) const;

  // The library's edits.
  void nfd();
  void nfkd();
  void nfc();
  void nfkc();
  void lowercase();
  void filter(const std::function<bool(std::int32_t)>& keep);
  void map(const std::function<std::int32_t(std::int32_t)>& to);
  void prepend(std::string_view s);
  void strip(bool left, bool right);
  void replace(const Matches& matches, std::string_view content);

 private:
  NormalizedString() = default;
  // Original bytes [begin, end) of this piece as normalized bytes; nullopt
  // where the library has none.
  std::optional<Offsets> normalized_offsets_of_original(std::size_t begin, std::size_t end) const;
  void unicode_normalize(bool compose, bool compatibility);

  std::string normalized_;
  std::vector<Offsets> alignments_;  // per normalized byte: original bytes, relative to original_shift_
  std::size_t original_size_ = 0;
  std::size_t original_shift_ = 0;
};

// Code points of valid UTF-8 (the pipeline checks validity up front).
std::vector<std::int32_t> code_points(std::string_view text);

}  // namespace rapidqa::text

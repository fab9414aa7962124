// WordDictionary: a word-frequency list and the most probable segmentation
// of CJK text into its words (each path's probability is the product of its
// words' relative frequencies; a character the list lacks is a word of
// count 1), the dictionary-based method of common Chinese segmenters.
//
// Thread safety: immutable after load; segment() may run concurrently.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "rapidqa/status.h"

namespace rapidqa::retrieval {

class WordDictionary {
 public:
  // Reads one "word count [tag]" per line (UTF-8; blank lines skipped).
  // Errors: kNotFound when the file cannot be opened; kInvalidArgument
  // naming the line for a missing or non-positive count or invalid UTF-8;
  // kOutOfRange for a file over 256 MiB.
  static Result<WordDictionary> load(const std::string& path);
  // From (word, count) pairs, for tests and callers with their own list.
  static WordDictionary from_counts(const std::vector<std::pair<std::string, double>>& counts);

  std::size_t size() const { return log_probability_.size(); }

  // Splits a run of characters (each a code point's UTF-8 bytes, views
  // that must stay valid) into words: returns each word's first character
  // index, ascending, starting with 0.
  std::vector<std::size_t> segment(const std::vector<std::string_view>& characters) const;

 private:
  void add(std::string word, double count);
  void finish();

  std::unordered_map<std::string, double> log_probability_;  // log(count / total)
  double total_ = 0;
  double unknown_log_probability_ = 0;  // log(1 / total)
  std::size_t longest_word_ = 1;        // characters
};

}  // namespace rapidqa::retrieval

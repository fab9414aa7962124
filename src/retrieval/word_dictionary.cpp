#include "retrieval/word_dictionary.h"

#include <cmath>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "text/utf8.h"

namespace rapidqa::retrieval {
namespace {

constexpr std::size_t kMaxFileBytes = std::size_t{256} << 20;
// Longer entries (idioms, names) are kept out of the search so one lookup
// per position and length stays cheap; a run longer than this is split.
constexpr std::size_t kMaxWordCharacters = 8;

std::size_t character_count(std::string_view word) {
  std::size_t n = 0;
  for (std::size_t pos = 0; pos < word.size(); ++n) {
    std::size_t len = 0;
    text::decode_at(word, pos, len);
    pos += len;
  }
  return n;
}

}  // namespace

Result<WordDictionary> WordDictionary::load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::not_found(fmt::format("word dictionary '{}' cannot be opened", path));
  in.seekg(0, std::ios::end);
  const auto bytes = static_cast<std::size_t>(in.tellg());
  if (bytes > kMaxFileBytes) {
    return Status::out_of_range(fmt::format("word dictionary '{}' is {} bytes, over the {} limit", path, bytes, kMaxFileBytes));
  }
  in.seekg(0);
  WordDictionary dictionary;
  std::string line;
  std::size_t line_number = 0;
  while (std::getline(in, line)) {
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    std::istringstream fields(line);
    std::string word, count_text;
    fields >> word >> count_text;
    const auto bad = [&](const std::string& why) {
      return Status::invalid_argument(fmt::format("word dictionary '{}' line {}: {}", path, line_number, why));
    };
    if (text::find_invalid_utf8(word) != std::string_view::npos) return bad("the word is not valid UTF-8");
    char* end = nullptr;
    const double count = std::strtod(count_text.c_str(), &end);
    if (count_text.empty() || *end != '\0' || !(count > 0) || !std::isfinite(count)) {
      return bad(fmt::format("expected \"word count [tag]\" with a positive count, got \"{}\"", line.substr(0, 80)));
    }
    dictionary.add(std::move(word), count);
  }
  if (dictionary.log_probability_.empty()) {
    return Status::invalid_argument(fmt::format("word dictionary '{}' holds no words", path));
  }
  dictionary.finish();
  return dictionary;
}

WordDictionary WordDictionary::from_counts(const std::vector<std::pair<std::string, double>>& counts) {
  WordDictionary dictionary;
  for (const auto& [word, count] : counts) {
    if (count > 0 && std::isfinite(count) && text::find_invalid_utf8(word) == std::string_view::npos) dictionary.add(word, count);
  }
  dictionary.finish();
  return dictionary;
}

void WordDictionary::add(std::string word, double count) {
  const std::size_t characters = character_count(word);
  if (characters == 0 || characters > kMaxWordCharacters) return;
  longest_word_ = std::max(longest_word_, characters);
  total_ += count;
  log_probability_[std::move(word)] += count;  // a repeated word adds up
}

void WordDictionary::finish() {
  const double total = std::max(total_, 1.0);
  for (auto& [word, count] : log_probability_) count = std::log(count / total);
  unknown_log_probability_ = std::log(1.0 / total);
}

std::vector<std::size_t> WordDictionary::segment(const std::vector<std::string_view>& characters) const {
  const std::size_t n = characters.size();
  // best[i]: the most probable path's log probability over characters[i..n).
  std::vector<double> best(n + 1, 0.0);
  std::vector<std::size_t> next(n + 1, n);
  std::string word;
  for (std::size_t i = n; i-- > 0;) {
    best[i] = unknown_log_probability_ + best[i + 1];  // the character on its own
    next[i] = i + 1;
    word.assign(characters[i]);
    if (const auto it = log_probability_.find(word); it != log_probability_.end()) best[i] = it->second + best[i + 1];
    for (std::size_t j = i + 2; j <= n && j - i <= longest_word_; ++j) {
      word.append(characters[j - 1]);
      const auto it = log_probability_.find(word);
      if (it == log_probability_.end()) continue;
      const double score = it->second + best[j];
      if (score > best[i]) {
        best[i] = score;
        next[i] = j;
      }
    }
  }
  std::vector<std::size_t> starts;
  for (std::size_t i = 0; i < n; i = next[i]) starts.push_back(i);
  return starts;
}

}  // namespace rapidqa::retrieval

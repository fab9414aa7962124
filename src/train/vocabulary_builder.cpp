#include "train/vocabulary_builder.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <tuple>
#include <unordered_map>

#include <fmt/format.h>

#include "text/utf8.h"

namespace rapidqa::train {

namespace {

// Byte-pair merges over the words' characters. Pieces are interned as ints
// so a pair is one 64-bit key; ties between equally frequent pairs go to
// the pair whose pieces sort first, so the result depends on nothing but
// the counts.
std::vector<std::string> learn_merges(const std::map<std::string, std::size_t>& word_counts, std::size_t merges) {
  std::vector<std::string> pieces;
  std::map<std::string, std::uint32_t> id_of;
  auto intern = [&](const std::string& piece) {
    const auto [it, inserted] = id_of.emplace(piece, static_cast<std::uint32_t>(pieces.size()));
    if (inserted) pieces.push_back(piece);
    return it->second;
  };
  struct Word {
    std::vector<std::uint32_t> symbols;
    std::size_t count;
  };
  std::vector<Word> words;
  for (const auto& [word, count] : word_counts) {
    Word w{{}, count};
    for (std::size_t pos = 0; pos < word.size();) {
      std::size_t length = 0;
      text::decode_at(word, pos, length);
      w.symbols.push_back(intern((pos == 0 ? "" : "##") + word.substr(pos, length)));
      pos += length;
    }
    words.push_back(std::move(w));
  }
  std::vector<std::string> learned;
  std::set<std::string> known(pieces.begin(), pieces.end());
  auto key = [](std::uint32_t a, std::uint32_t b) { return (static_cast<std::uint64_t>(a) << 32) | b; };
  while (learned.size() < merges) {
    std::unordered_map<std::uint64_t, std::size_t> pair_counts;
    for (const Word& w : words) {
      for (std::size_t i = 0; i + 1 < w.symbols.size(); ++i) pair_counts[key(w.symbols[i], w.symbols[i + 1])] += w.count;
    }
    std::uint64_t best = 0;
    std::size_t best_count = 0;
    for (const auto& [pair, count] : pair_counts) {
      const auto a = static_cast<std::uint32_t>(pair >> 32), b = static_cast<std::uint32_t>(pair);
      const auto ba = static_cast<std::uint32_t>(best >> 32), bb = static_cast<std::uint32_t>(best);
      if (count > best_count ||
          (count == best_count && std::tie(pieces[a], pieces[b]) < std::tie(pieces[ba], pieces[bb]))) {
        best = pair;
        best_count = count;
      }
    }
    if (best_count < 2) break;  // a pair seen once would only memorise its word
    const auto a = static_cast<std::uint32_t>(best >> 32), b = static_cast<std::uint32_t>(best);
    const std::string merged = pieces[a] + pieces[b].substr(2);  // b always continues a word
    const std::uint32_t m = intern(merged);
    for (Word& w : words) {
      std::vector<std::uint32_t> out;
      out.reserve(w.symbols.size());
      for (std::size_t i = 0; i < w.symbols.size(); ++i) {
        if (i + 1 < w.symbols.size() && w.symbols[i] == a && w.symbols[i + 1] == b) {
          out.push_back(m);
          ++i;
        } else {
          out.push_back(w.symbols[i]);
        }
      }
      w.symbols = std::move(out);
    }
    if (known.insert(merged).second) learned.push_back(merged);
  }
  return learned;
}

}  // namespace

const std::vector<std::string>& special_tokens() {
  static const std::vector<std::string> specials = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
  return specials;
}

Result<text::WordPieceTokenizer> tokenizer_for(std::vector<std::string> vocabulary, bool lower_case) {
  text::WordPieceOptions options;
  options.lower_case = lower_case;
  return text::WordPieceTokenizer::from_tokens(std::move(vocabulary), options);
}

Result<std::vector<std::string>> build_wordpiece_vocabulary(const std::vector<std::string>& texts,
                                                            const VocabularyOptions& options) {
  // A tokenizer that knows only the specials still normalises and splits
  // words exactly as the final one will: that is all basic_tokens needs.
  auto splitter = tokenizer_for(special_tokens(), options.lower_case);
  if (!splitter) return splitter.status();
  std::map<std::string, std::size_t> word_counts;
  std::set<std::int32_t> characters;
  for (std::size_t t = 0; t < texts.size(); ++t) {
    auto words = splitter->basic_tokens(texts[t]);
    if (!words) return Status::invalid_argument(fmt::format("text {}: {}", t, words.status().message()));
    for (const std::string& word : *words) {
      if (std::find(special_tokens().begin(), special_tokens().end(), word) != special_tokens().end()) continue;
      std::size_t code_points = 0;
      for (std::size_t pos = 0; pos < word.size(); ++code_points) {
        std::size_t length = 0;
        characters.insert(text::decode_at(word, pos, length));
        pos += length;
      }
      if (code_points > 1) ++word_counts[word];
    }
  }
  std::vector<std::string> vocabulary = special_tokens();
  std::vector<std::string> singles;
  for (std::int32_t cp : characters) {
    std::string utf8;
    text::append_utf8(utf8, cp);
    singles.push_back(std::move(utf8));
  }
  vocabulary.insert(vocabulary.end(), singles.begin(), singles.end());
  for (const std::string& c : singles) vocabulary.push_back("##" + c);
  if (options.subword_merges > 0) {
    for (std::string& piece : learn_merges(word_counts, options.subword_merges)) vocabulary.push_back(std::move(piece));
    return vocabulary;
  }
  std::vector<std::pair<std::string, std::size_t>> words;
  for (const auto& [word, count] : word_counts) {
    if (count >= std::max<std::size_t>(1, options.min_word_count)) words.emplace_back(word, count);
  }
  std::stable_sort(words.begin(), words.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  for (auto& [word, count] : words) vocabulary.push_back(std::move(word));
  return vocabulary;
}

}  // namespace rapidqa::train

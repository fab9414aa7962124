// LexicalIndex: a BM25 inverted index over the phrasings of a knowledge
// base, and the lexical evidence the hybrid ranker weighs for a question
// and one phrasing.
//
// A phrasing (normalised text) becomes units: each CJK character, and each
// run of other letters and digits. Its BM25 terms are the units, each pair
// of adjacent units, and the character trigrams of each non-CJK unit
// (marked "<word>", so spelling variants share most of theirs); with a word dictionary, its CJK runs are also
// segmented into words for the word-overlap evidence. Terms are 64-bit
// hashes (a collision merges two terms' statistics, nothing worse).
//
// Thread safety: thread-compatible; the const methods may run concurrently.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "retrieval/word_dictionary.h"

namespace rapidqa::retrieval {

// A text as the index reads it.
struct AnalyzedText {
  std::vector<std::uint64_t> units;    // in text order (for the common subsequence)
  std::vector<std::uint64_t> unigrams; // distinct, sorted
  std::vector<std::uint64_t> bigrams;  // distinct, sorted
  std::vector<std::uint64_t> words;    // distinct, sorted; empty without a dictionary
  std::vector<std::uint64_t> grams;    // character trigrams of "<word>" for each non-CJK word: distinct, sorted
  // BM25 term frequencies (unigrams, bigrams and trigrams), sorted by term.
  std::vector<std::pair<std::uint64_t, std::uint16_t>> term_counts;
  std::uint32_t length = 0;            // BM25 document length: unigrams + bigrams, with repeats
  // A stored phrasing's IDF mass over each set, taken when it was indexed
  // (or at the last refresh_weights): the evidence then needs no lookup
  // per phrasing term. Zero for a question.
  float unigram_mass = 0, bigram_mass = 0, word_mass = 0, gram_mass = 0;
};

// Lexical evidence for one (question, phrasing) pair, each in [0, 1]-ish.
struct LexicalEvidence {
  float bm25 = 0;                 // the phrasing's BM25 score for the question
  float bm25_per_question_idf = 0;// bm25 / the question's IDF mass
  float shared_of_question = 0;   // IDF mass of shared terms / the question's
  float shared_of_phrasing = 0;   // ... / the phrasing's
  float units_of_question = 0;    // the same over single units
  float units_of_phrasing = 0;
  float pairs_of_question = 0;    // ... over adjacent pairs
  float pairs_of_phrasing = 0;
  float words_of_question = 0;    // ... over dictionary words (0 without one)
  float words_of_phrasing = 0;
  float grams_of_question = 0;    // ... over the trigrams of non-CJK words (spelling variants: "reset", "resetting")
  float grams_of_phrasing = 0;
  float subsequence_dice = 0;     // 2 LCS / (|q| + |p|), in units
  float subsequence_of_question = 0;  // LCS / |q|
  float length_gap = 0;           // | |q| - |p| | / (|q| + |p| + 1)
  bool identical = false;         // same units
};

class LexicalIndex {
 public:
  // `words` (may be null) must outlive the index.
  explicit LexicalIndex(std::shared_ptr<const WordDictionary> words);

  AnalyzedText analyze(std::string_view normalized) const;

  // Adds (or replaces) a phrasing under a label; `entry` names the entry it
  // belongs to (any key equal for an entry's phrasings), so evidence can be
  // gathered per entry.
  void add(std::int64_t label, std::string_view normalized, std::uint64_t entry = 0);
  void remove(std::int64_t label);
  void clear();
  // Retakes every phrasing's IDF masses from the current statistics: after
  // many phrasings were added at once.
  void refresh_weights();
  std::size_t size() const { return label_to_slot_.size(); }
  bool contains(std::int64_t label) const { return label_to_slot_.count(label) != 0; }
  // The analysis stored for a label (null when absent).
  const AnalyzedText* text_of(std::int64_t label) const;
  std::uint64_t entry_of(std::int64_t label) const;  // 0 when absent

  struct Scored {
    std::int64_t label;
    float bm25;
  };
  // The best `k` phrasings by BM25, best first (ties by label), leaving
  // `skip` out; phrasings sharing no term are never returned.
  std::vector<Scored> top(const AnalyzedText& question, std::size_t k, std::int64_t skip = -1) const;
  // A question's term weights, computed once for all its candidates.
  struct QuestionWeights {
    std::vector<float> unigrams, bigrams, words, grams, terms;  // IDF, aligned with the AnalyzedText's sets and term_counts
    float unigram_mass = 0, bigram_mass = 0, word_mass = 0, gram_mass = 0;  // each set's sum, in order
  };
  QuestionWeights weigh(const AnalyzedText& question) const;
  // The evidence for a stored phrasing (which must be present).
  LexicalEvidence evidence(const AnalyzedText& question, const QuestionWeights& weights, std::int64_t label) const;

 private:
  struct Posting {
    std::uint32_t slot;
    std::uint16_t count;
  };
  float idf(std::uint64_t term) const;  // BM25 IDF; 0 for a term no phrasing has
  float word_idf(std::uint64_t word) const;
  float bm25(const AnalyzedText& question, const QuestionWeights& weights, const AnalyzedText& phrasing) const;
  void take_masses(AnalyzedText& phrasing) const;

  std::shared_ptr<const WordDictionary> words_;
  std::vector<AnalyzedText> slots_;
  std::vector<std::int64_t> slot_label_;  // -1 for a free slot
  std::vector<float> slot_length_;        // each slot's BM25 length, packed for the posting loop
  std::vector<std::uint64_t> slot_entry_;
  std::vector<std::uint32_t> free_slots_;
  std::unordered_map<std::int64_t, std::uint32_t> label_to_slot_;
  std::unordered_map<std::uint64_t, std::vector<Posting>> postings_;
  std::unordered_map<std::uint64_t, std::uint32_t> word_frequency_;  // phrasings holding each word
  std::uint64_t total_length_ = 0;
};

}  // namespace rapidqa::retrieval

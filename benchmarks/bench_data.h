// Deterministic data for rapidqa-bench: a synthetic vocabulary, knowledge
// bases of any size built from it, paraphrases that reach an entry through
// retrieval, and fixed sample questions. The same arguments give the same
// text on every machine and standard library (no std::*_distribution), so
// runs are comparable.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "rapidqa/answer.h"
#include "rapidqa/knowledge_entry.h"

namespace rapidqa::bench {

// Small deterministic generator (splitmix64): portable, unlike the
// standard distributions.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next();
  // Uniform in [0, n) up to a negligible modulo bias; n > 0.
  std::size_t below(std::size_t n) { return static_cast<std::size_t>(next() % n); }
  // Uniform in [0, 1).
  float unit() { return static_cast<float>(next() >> 40) / static_cast<float>(1ULL << 24); }

 private:
  std::uint64_t state_;
};

inline constexpr std::size_t kVocabularySize = 4000;
// kVocabularySize distinct pronounceable synthetic words ("dovaret",
// "kilumo"), 2 to 4 syllables each.
const std::vector<std::string>& vocabulary();
inline constexpr std::size_t kWordsPerQuestion = 8;

// Entry i of a generated knowledge base: id "gen-<i>", a question made of
// kWordsPerQuestion distinct vocabulary words and topic number i, up to 2
// alternates (the words shuffled; two words dropped), and an answer. Entry
// i is the same whatever the size of the base it belongs to.
KnowledgeEntry generated_entry(std::size_t i, std::size_t alternates = 2);
std::vector<KnowledgeEntry> generated_entries(std::size_t count, std::size_t alternates = 2);

// An answer of the size the engine caches for entry i: its answer
// sentence and top-3 matches (entry i first).
Answer typical_answer(std::size_t i);

// A phrasing of entry i's question that is none of its stored phrasings:
// two of its words dropped, two other vocabulary words added, reordered,
// and a different template. Different `variant`s give different text.
std::string paraphrase_of(std::size_t i, std::uint64_t variant);

// Entry i's canonical question reworded around its content words ("Do I
// ... for topic 42?", "How how do I ... for topic 42?" for "How do I ...
// for topic 42?"): each of the kRewordings variants normalises to a
// different cache key, yet encodes at a cosine similarity of about 0.96 or
// more to the canonical question with the default HashingEncoder (measured
// on 1k, 10k and 100k generated bases), so it is a semantic-cache hit once
// the canonical question was answered.
inline constexpr std::size_t kRewordings = 10;
std::string reworded_question(std::size_t i, std::size_t rewording);

// count random vectors of `dimension` floats, each L2-normalised, row after
// row: the vectors of indexes and caches benchmarked on their own.
std::vector<float> random_unit_vectors(std::size_t count, std::size_t dimension, std::uint64_t seed);

// Whether the large sizes run (100k-entry knowledge base, 100k-vector HNSW
// index): each needs an HNSW graph of 100k vectors, which takes many
// minutes to build with a baseline (non-SIMD) FAISS on a small machine.
// Set RAPIDQA_BENCH_LARGE=1 in the environment to include them.
bool large_sizes_enabled();

// Typical FAQ questions, for the text and encoder stages.
const std::vector<std::string>& english_questions();
const std::vector<std::string>& chinese_questions();

}  // namespace rapidqa::bench

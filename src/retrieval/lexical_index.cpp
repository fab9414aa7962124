#include "retrieval/lexical_index.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <string>

#include "text/feature_hash.h"
#include "text/utf8.h"

namespace rapidqa::retrieval {
namespace {

constexpr float kK1 = 1.2f;  // BM25's usual term-frequency saturation
constexpr float kB = 0.75f;  // and length normalisation
// The common subsequence reads at most this many units of each side, so a
// long phrasing costs a bounded table.
constexpr std::size_t kMaxSubsequenceUnits = 96;
// Postings a question's candidate search reads at most (beyond its rarest
// term's): bounds the miss path's cost whatever the base's size.
constexpr std::size_t kPostingBudget = 4096;

enum class TermKind : std::uint64_t { kUnit = 1, kPair, kWord, kGram };

using text::mix64;

std::uint64_t hash_text(TermKind kind, std::string_view bytes) {
  return mix64(text::fnv1a(text::kFnvOffset ^ static_cast<std::uint64_t>(kind), bytes));
}

std::uint64_t pair_hash(std::uint64_t a, std::uint64_t b) {
  return mix64(a * 0x9e3779b97f4a7c15ULL ^ mix64(b + static_cast<std::uint64_t>(TermKind::kPair)));
}

// The character trigrams of "<word>" (the whole marked word when shorter).
void add_trigrams(std::string_view word, std::vector<std::uint64_t>& out) {
  const text::MarkedWord marked = text::mark_word(word);
  const std::size_t chars = marked.characters();
  if (chars <= 3) {
    out.push_back(hash_text(TermKind::kGram, marked.text));
    return;
  }
  for (std::size_t i = 0; i + 3 <= chars; ++i) out.push_back(hash_text(TermKind::kGram, marked.gram(i, 3)));
}

void sort_unique(std::vector<std::uint64_t>& v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
}

// The weight of what two sorted, distinct sets share; `weight(i)` is the
// weight of mine[i]. The merge steps without a branch: at a few dozen terms
// a side, per candidate, mispredicted comparisons were most of its cost.
// Shared weights are added in mine's order, as a branching merge would.
template <typename Weight>
float shared_weight(const std::vector<std::uint64_t>& mine, const std::vector<std::uint64_t>& other,
                    const Weight& weight) {
  float shared = 0;
  std::size_t i = 0, j = 0;
  while (i < mine.size() && j < other.size()) {
    const std::uint64_t a = mine[i], b = other[j];
    shared += a == b ? weight(i) : 0.0f;
    i += a <= b;
    j += b <= a;
  }
  return shared;
}

float mass(const std::vector<float>& weights) {
  float total = 0;
  for (const float w : weights) total += w;
  return total;
}

float ratio(float part, float whole) { return whole > 0 ? part / whole : 0.0f; }

// The length of the longest common subsequence of a and b (at most
// kMaxSubsequenceUnits of each). Where b fits in one 64-bit word it runs
// bit-parallel (Hyyro's formulation of Allison and Dix): one pass over a,
// each step a branch-free match mask and three word operations, where the
// table below carries a dependent max along every row.
std::size_t common_subsequence(const std::vector<std::uint64_t>& a, const std::vector<std::uint64_t>& b) {
  const std::size_t n = std::min(a.size(), kMaxSubsequenceUnits), m = std::min(b.size(), kMaxSubsequenceUnits);
  if (n == 0 || m == 0) return 0;
  if (m <= 64) {
    const std::uint64_t all = m == 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << m) - 1;
    std::uint64_t v = all;  // a zero bit j: column j ends a step of the subsequence so far
    for (std::size_t i = 0; i < n; ++i) {
      std::uint64_t match = 0;
      for (std::size_t j = 0; j < m; ++j) match |= static_cast<std::uint64_t>(a[i] == b[j]) << j;
      const std::uint64_t u = v & match;
      v = ((v + u) | (v - u)) & all;
    }
    return m - static_cast<std::size_t>(__builtin_popcountll(v));
  }
  std::array<std::uint16_t, kMaxSubsequenceUnits + 1> row{};  // on the stack: this runs per candidate
  for (std::size_t i = 0; i < n; ++i) {
    std::uint16_t diagonal = 0;
    for (std::size_t j = 0; j < m; ++j) {
      const std::uint16_t above = row[j + 1];
      row[j + 1] = a[i] == b[j] ? static_cast<std::uint16_t>(diagonal + 1) : std::max(row[j + 1], row[j]);
      diagonal = above;
    }
  }
  return row[m];
}

}  // namespace

LexicalIndex::LexicalIndex(std::shared_ptr<const WordDictionary> words) : words_(std::move(words)) {}

AnalyzedText LexicalIndex::analyze(std::string_view normalized) const {
  AnalyzedText out;
  // Units, and the CJK runs (as character views) for the segmenter.
  std::vector<std::string_view> run;
  auto close_run = [&] {
    if (run.empty()) return;
    if (words_) {
      const auto starts = words_->segment(run);
      for (std::size_t w = 0; w < starts.size(); ++w) {
        const std::size_t end = w + 1 < starts.size() ? starts[w + 1] : run.size();
        std::string word;
        for (std::size_t c = starts[w]; c < end; ++c) word.append(run[c]);
        out.words.push_back(hash_text(TermKind::kWord, word));
      }
    }
    run.clear();
  };
  std::size_t word_start = std::string_view::npos;
  bool word_has_alnum = false;
  auto close_word = [&](std::size_t end) {
    if (word_start == std::string_view::npos) return;
    if (word_has_alnum) {
      const std::string_view word = normalized.substr(word_start, end - word_start);
      out.units.push_back(hash_text(TermKind::kUnit, word));
      add_trigrams(word, out.grams);
      if (words_) out.words.push_back(hash_text(TermKind::kWord, word));
    }
    word_start = std::string_view::npos;
    word_has_alnum = false;
  };
  for (std::size_t pos = 0; pos < normalized.size();) {
    std::size_t len = 0;
    const std::int32_t cp = text::decode_at(normalized, pos, len);
    if (text::is_cjk(cp)) {
      close_word(pos);
      const std::string_view character = normalized.substr(pos, len);
      out.units.push_back(hash_text(TermKind::kUnit, character));
      run.push_back(character);
    } else {
      close_run();
      if (text::is_space(cp) || text::is_punctuation(cp)) {
        close_word(pos);
      } else {
        if (word_start == std::string_view::npos) word_start = pos;
        word_has_alnum = word_has_alnum || text::is_letter(cp) || text::is_number(cp);
      }
    }
    pos += len;
  }
  close_word(normalized.size());
  close_run();

  std::vector<std::uint64_t> terms = out.units;
  for (std::size_t i = 0; i + 1 < out.units.size(); ++i) out.bigrams.push_back(pair_hash(out.units[i], out.units[i + 1]));
  terms.insert(terms.end(), out.bigrams.begin(), out.bigrams.end());
  terms.insert(terms.end(), out.grams.begin(), out.grams.end());
  out.length = static_cast<std::uint32_t>(terms.size());
  std::sort(terms.begin(), terms.end());
  for (std::size_t i = 0; i < terms.size();) {
    std::size_t j = i;
    while (j < terms.size() && terms[j] == terms[i]) ++j;
    out.term_counts.emplace_back(terms[i], static_cast<std::uint16_t>(std::min<std::size_t>(j - i, 65535)));
    i = j;
  }
  out.unigrams = out.units;
  sort_unique(out.unigrams);
  sort_unique(out.bigrams);
  sort_unique(out.words);
  sort_unique(out.grams);
  return out;
}

void LexicalIndex::add(std::int64_t label, std::string_view normalized, std::uint64_t entry) {
  remove(label);
  std::uint32_t slot;
  if (!free_slots_.empty()) {
    slot = free_slots_.back();
    free_slots_.pop_back();
  } else {
    slot = static_cast<std::uint32_t>(slots_.size());
    slots_.emplace_back();
    slot_label_.push_back(-1);
    slot_length_.push_back(0);
    slot_entry_.push_back(0);
  }
  slots_[slot] = analyze(normalized);
  slot_label_[slot] = label;
  slot_length_[slot] = static_cast<float>(slots_[slot].length);
  slot_entry_[slot] = entry;
  label_to_slot_[label] = slot;
  const AnalyzedText& text = slots_[slot];
  for (const auto& [term, count] : text.term_counts) postings_[term].push_back({slot, count});
  for (const std::uint64_t word : text.words) ++word_frequency_[word];
  total_length_ += text.length;
  take_masses(slots_[slot]);
}

void LexicalIndex::take_masses(AnalyzedText& phrasing) const {
  phrasing.unigram_mass = phrasing.bigram_mass = phrasing.word_mass = phrasing.gram_mass = 0;
  for (const std::uint64_t t : phrasing.grams) phrasing.gram_mass += idf(t);
  for (const std::uint64_t t : phrasing.unigrams) phrasing.unigram_mass += idf(t);
  for (const std::uint64_t t : phrasing.bigrams) phrasing.bigram_mass += idf(t);
  for (const std::uint64_t t : phrasing.words) phrasing.word_mass += word_idf(t);
}

void LexicalIndex::refresh_weights() {
  for (std::size_t slot = 0; slot < slots_.size(); ++slot) {
    if (slot_label_[slot] >= 0) take_masses(slots_[slot]);
  }
}

void LexicalIndex::remove(std::int64_t label) {
  const auto it = label_to_slot_.find(label);
  if (it == label_to_slot_.end()) return;
  const std::uint32_t slot = it->second;
  AnalyzedText& text = slots_[slot];
  for (const auto& [term, count] : text.term_counts) {
    auto list = postings_.find(term);
    if (list == postings_.end()) continue;
    auto& postings = list->second;
    postings.erase(std::remove_if(postings.begin(), postings.end(), [&](const Posting& p) { return p.slot == slot; }),
                   postings.end());
    if (postings.empty()) postings_.erase(list);
  }
  for (const std::uint64_t word : text.words) {
    auto w = word_frequency_.find(word);
    if (w != word_frequency_.end() && --w->second == 0) word_frequency_.erase(w);
  }
  total_length_ -= text.length;
  text = AnalyzedText{};
  slot_label_[slot] = -1;
  free_slots_.push_back(slot);
  label_to_slot_.erase(it);
}

void LexicalIndex::clear() {
  slots_.clear();
  slot_label_.clear();
  slot_length_.clear();
  slot_entry_.clear();
  free_slots_.clear();
  label_to_slot_.clear();
  postings_.clear();
  word_frequency_.clear();
  total_length_ = 0;
}

const AnalyzedText* LexicalIndex::text_of(std::int64_t label) const {
  const auto it = label_to_slot_.find(label);
  return it == label_to_slot_.end() ? nullptr : &slots_[it->second];
}

std::uint64_t LexicalIndex::entry_of(std::int64_t label) const {
  const auto it = label_to_slot_.find(label);
  return it == label_to_slot_.end() ? 0 : slot_entry_[it->second];
}

float LexicalIndex::idf(std::uint64_t term) const {
  const auto it = postings_.find(term);
  if (it == postings_.end()) return 0.0f;
  const double n = static_cast<double>(size()), df = static_cast<double>(it->second.size());
  return static_cast<float>(std::log(1.0 + (n - df + 0.5) / (df + 0.5)));
}

float LexicalIndex::word_idf(std::uint64_t word) const {
  const double n = static_cast<double>(size());
  const auto it = word_frequency_.find(word);
  const double df = it == word_frequency_.end() ? 0.0 : static_cast<double>(it->second);
  return static_cast<float>(std::log(1.0 + (n - df + 0.5) / (df + 0.5)));
}

float LexicalIndex::bm25(const AnalyzedText& question, const QuestionWeights& weights,
                         const AnalyzedText& phrasing) const {
  const float average = size() ? static_cast<float>(total_length_) / static_cast<float>(size()) : 1.0f;
  const float norm = kK1 * (1 - kB + kB * static_cast<float>(phrasing.length) / std::max(average, 1.0f));
  // A branch-free merge (see shared_weight): each step's term is scored and
  // kept only where the two sides meet, in the phrasing's order.
  float score = 0;
  const auto& p = phrasing.term_counts;
  const auto& q = question.term_counts;
  std::size_t i = 0, j = 0;
  while (i < p.size() && j < q.size()) {
    const std::uint64_t a = p[i].first, b = q[j].first;
    const float tf = p[i].second;
    const float term = weights.terms[j] * tf * (kK1 + 1) / (tf + norm);
    score += a == b ? term : 0.0f;
    i += a <= b;
    j += b <= a;
  }
  return score;
}

std::vector<LexicalIndex::Scored> LexicalIndex::top(const AnalyzedText& question, std::size_t k,
                                                    std::int64_t skip) const {
  std::vector<Scored> out;
  if (k == 0 || size() == 0) return out;
  // Accumulators per slot, reused by the thread: a question touches a
  // fraction of the slots, and only those are reset.
  thread_local std::vector<float> thread_score;
  thread_local std::vector<std::uint32_t> thread_touched;
  std::vector<float>& score = thread_score;  // one TLS lookup, not one per posting
  std::vector<std::uint32_t>& touched = thread_touched;
  if (score.size() < slots_.size()) score.resize(slots_.size(), 0.0f);
  std::size_t touched_count = 0;
  const float average = std::max(static_cast<float>(total_length_) / static_cast<float>(size()), 1.0f);
  // Rarest terms first, and the commonest left out once the posting budget
  // is spent: they add little to any score and most of the work, and the
  // ranker rescores every candidate exactly. The rarest term is always read.
  std::vector<const std::vector<Posting>*> lists;
  for (const auto& [term, unused] : question.term_counts) {
    const auto it = postings_.find(term);
    if (it != postings_.end()) lists.push_back(&it->second);
  }
  std::sort(lists.begin(), lists.end(), [](const auto* a, const auto* b) { return a->size() < b->size(); });
  std::size_t read = 0;
  const double n = static_cast<double>(size());
  for (const std::vector<Posting>* list : lists) {
    if (read > 0 && read + list->size() > kPostingBudget) break;
    read += list->size();
    const double df = static_cast<double>(list->size());
    const float w = static_cast<float>(std::log(1.0 + (n - df + 0.5) / (df + 0.5)));
    // Every posting's slot is written at the end of `touched`, and kept (the
    // count moved on) only on its first score: no branch per posting, so
    // the divisions of consecutive postings overlap.
    if (touched.size() < touched_count + list->size()) touched.resize(touched_count + list->size());
    std::uint32_t* const touched_slots = touched.data();
    for (const Posting& p : *list) {
      const float before = score[p.slot];
      touched_slots[touched_count] = p.slot;
      touched_count += before == 0.0f;  // IDF is positive: a touched slot is never 0
      const float tf = p.count;
      const float norm = kK1 * (1 - kB + kB * slot_length_[p.slot] / average);
      score[p.slot] = before + w * tf * (kK1 + 1) / (tf + norm);
    }
  }
  out.reserve(touched_count);
  for (std::size_t t = 0; t < touched_count; ++t) {
    const std::uint32_t slot = touched[t];
    if (slot_label_[slot] != skip) out.push_back({slot_label_[slot], score[slot]});
    score[slot] = 0.0f;
  }
  const auto better = [](const Scored& a, const Scored& b) {
    return a.bm25 != b.bm25 ? a.bm25 > b.bm25 : a.label < b.label;
  };
  if (out.size() > k) {
    std::nth_element(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(k), out.end(), better);
    out.resize(k);
  }
  std::sort(out.begin(), out.end(), better);
  return out;
}

LexicalIndex::QuestionWeights LexicalIndex::weigh(const AnalyzedText& question) const {
  QuestionWeights w;
  w.terms.reserve(question.term_counts.size());
  for (const auto& [t, count] : question.term_counts) w.terms.push_back(idf(t));
  // Units, pairs and grams are all among the BM25 terms (sorted, like
  // each set), so their IDFs are read off the terms' in one merge each
  // instead of looked up again.
  const auto from_terms = [&](const std::vector<std::uint64_t>& set, std::vector<float>& out) {
    out.reserve(set.size());
    std::size_t j = 0;
    for (const std::uint64_t t : set) {
      while (j < question.term_counts.size() && question.term_counts[j].first < t) ++j;
      out.push_back(j < question.term_counts.size() && question.term_counts[j].first == t ? w.terms[j] : idf(t));
    }
  };
  from_terms(question.unigrams, w.unigrams);
  from_terms(question.bigrams, w.bigrams);
  from_terms(question.grams, w.grams);
  w.unigram_mass = mass(w.unigrams);
  w.bigram_mass = mass(w.bigrams);
  w.gram_mass = mass(w.grams);
  if (words_) {
    for (const std::uint64_t t : question.words) w.words.push_back(word_idf(t));
    w.word_mass = mass(w.words);
  }
  return w;
}

LexicalEvidence LexicalIndex::evidence(const AnalyzedText& question, const QuestionWeights& weights,
                                       std::int64_t label) const {
  LexicalEvidence e;
  const AnalyzedText* phrasing = text_of(label);
  if (!phrasing) return e;
  const float q_units = weights.unigram_mass, q_pairs = weights.bigram_mass;
  const float shared_units = shared_weight(question.unigrams, phrasing->unigrams, [&](std::size_t i) { return weights.unigrams[i]; });
  const float shared_pairs = shared_weight(question.bigrams, phrasing->bigrams, [&](std::size_t i) { return weights.bigrams[i]; });
  const float p_units = phrasing->unigram_mass, p_pairs = phrasing->bigram_mass;
  e.bm25 = bm25(question, weights, *phrasing);
  const float q_grams = weights.gram_mass;
  const float shared_grams = shared_weight(question.grams, phrasing->grams, [&](std::size_t i) { return weights.grams[i]; });
  e.grams_of_question = ratio(shared_grams, q_grams);
  e.grams_of_phrasing = ratio(shared_grams, phrasing->gram_mass);
  e.bm25_per_question_idf = ratio(e.bm25, q_units + q_pairs);
  e.shared_of_question = ratio(shared_units + shared_pairs, q_units + q_pairs);
  e.shared_of_phrasing = ratio(shared_units + shared_pairs, p_units + p_pairs);
  e.units_of_question = ratio(shared_units, q_units);
  e.units_of_phrasing = ratio(shared_units, p_units);
  e.pairs_of_question = ratio(shared_pairs, q_pairs);
  e.pairs_of_phrasing = ratio(shared_pairs, p_pairs);
  if (words_) {
    const float q_words = weights.word_mass;
    const float shared_words = shared_weight(question.words, phrasing->words, [&](std::size_t i) { return weights.words[i]; });
    const float p_words = phrasing->word_mass;
    e.words_of_question = ratio(shared_words, q_words);
    e.words_of_phrasing = ratio(shared_words, p_words);
  }
  const float q_len = static_cast<float>(question.units.size()), p_len = static_cast<float>(phrasing->units.size());
  const float lcs = static_cast<float>(common_subsequence(question.units, phrasing->units));
  e.subsequence_dice = ratio(2 * lcs, q_len + p_len);
  e.subsequence_of_question = ratio(lcs, q_len);
  e.length_gap = std::fabs(q_len - p_len) / (q_len + p_len + 1);
  e.identical = question.units == phrasing->units;
  return e;
}

}  // namespace rapidqa::retrieval

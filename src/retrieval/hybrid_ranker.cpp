#include "retrieval/hybrid_ranker.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <unordered_map>

#include "index/inner_product.h"

namespace rapidqa::retrieval {
namespace {

enum Feature : std::size_t {
  kBm25OfBest,        // BM25 / the best candidate's BM25
  kBm25PerIdf,
  kSharedOfQuestion,
  kSharedOfPhrasing,
  kUnitsOfQuestion,
  kUnitsOfPhrasing,
  kSubsequenceDice,
  kSubsequenceOfQuestion,
  kLengthGap,
  kLexicalRank,       // 1 / (1 + BM25 rank)
  kIdentical,
  kWordsOfQuestion,
  kWordsOfPhrasing,
  kPairsOfQuestion,
  kPairsOfPhrasing,
  kGramsOfQuestion,
  kGramsOfPhrasing,
  kEntryLexicalSum,   // the BM25 (as a share of the best) of all the entry's candidate phrasings
  kEntryCosineMax,    // the best cosine among the entry's candidate phrasings
  kCosine,
};
static_assert(kCosine + 1 == kRankerFeatures);

// BM25 order first, the cosine as the tie-breaker: what an unfitted ranker
// does, and where fitting starts from and is pulled back to.
RankerWeights prior_weights() {
  RankerWeights w{};
  w[kBm25OfBest] = 5.0f;
  w[kCosine] = 1.0f;
  return w;
}

constexpr double kLearningRate = 0.5;
constexpr double kQuickLearningRate = 1.0;  // for the cross-validation's shorter fits

constexpr int kSteps = 400;
// The cross-validation only compares pulls: shorter fits at a larger step
// rank them as the full ones do, at a third of the cost.
constexpr int kQuickSteps = 150;
// How hard the fit is pulled toward the prior (L2, as if the prior had been
// seen this many times over the questions): chosen per base by two-fold
// cross-validation over its own phrasings, since a small base with
// formulaic alternates overfits at the pull a large one wants.
constexpr double kPullCandidates[] = {0.0005, 0.002, 0.01, 0.05};

struct FitQuestion {
  std::vector<std::array<float, kRankerFeatures>> features;
  std::vector<float> target;  // 1 / (right answers) on each right answer
  std::size_t fold;           // by entry, so siblings never straddle folds
};

RankerWeights cosine_only() {
  RankerWeights w{};
  w[kCosine] = 1.0f;
  return w;
}

// Softmax regression of the questions in `fold` (or all, when fold is 2)
// from the prior, pulled toward it with strength `pull`. Returns the
// weights and the mean cross-entropy before and after.
struct Trained {
  RankerWeights weights;
  double loss_before, loss_after;
};
Trained train(const std::vector<FitQuestion>& questions, std::size_t fold, double pull, int steps,
              double learning_rate) {
  const RankerWeights prior = prior_weights();
  std::array<double, kRankerFeatures> w{};
  for (std::size_t i = 0; i < kRankerFeatures; ++i) w[i] = prior[i];
  std::size_t used = 0;
  for (const FitQuestion& q : questions) used += fold == 2 || q.fold == fold;
  std::vector<double> scores;
  const auto step = [&](bool update) {
    std::array<double, kRankerFeatures> gradient{};
    double loss = 0;
    for (const FitQuestion& q : questions) {
      if (fold != 2 && q.fold != fold) continue;
      scores.assign(q.features.size(), 0.0);
      double top = -1e300;
      for (std::size_t c = 0; c < q.features.size(); ++c) {
        for (std::size_t i = 0; i < kRankerFeatures; ++i) scores[c] += w[i] * q.features[c][i];
        top = std::max(top, scores[c]);
      }
      double sum = 0, right = 0;
      for (double& score : scores) {
        score = std::exp(score - top);
        sum += score;
      }
      for (std::size_t c = 0; c < scores.size(); ++c) {
        scores[c] /= sum;
        if (q.target[c] > 0) right += scores[c];
        const double error = scores[c] - q.target[c];
        for (std::size_t i = 0; i < kRankerFeatures; ++i) gradient[i] += error * q.features[c][i];
      }
      loss -= std::log(std::max(right, 1e-12));
    }
    if (update) {
      for (std::size_t i = 0; i < kRankerFeatures; ++i) {
        w[i] -= learning_rate * (gradient[i] / static_cast<double>(used) + pull * (w[i] - prior[i]));
      }
    }
    return loss / static_cast<double>(std::max<std::size_t>(used, 1));
  };
  Trained out{};
  out.loss_before = step(false);
  for (int s = 0; s < steps; ++s) step(true);
  out.loss_after = step(false);
  for (std::size_t i = 0; i < kRankerFeatures; ++i) out.weights[i] = static_cast<float>(w[i]);
  return out;
}

// Questions of `fold` whose best-scored candidate is a right answer.
std::size_t right_first(const std::vector<FitQuestion>& questions, std::size_t fold, const RankerWeights& w) {
  std::size_t right = 0;
  for (const FitQuestion& q : questions) {
    if (q.fold != fold) continue;
    std::size_t best = 0;
    float best_score = -std::numeric_limits<float>::infinity();
    for (std::size_t c = 0; c < q.features.size(); ++c) {
      float score = 0;
      for (std::size_t i = 0; i < kRankerFeatures; ++i) score += w[i] * q.features[c][i];
      if (score > best_score) {
        best_score = score;
        best = c;
      }
    }
    right += q.target[best] > 0;
  }
  return right;
}
// The HNSW breadth (efSearch) of the dense candidate search: BM25 brings
// candidates of its own, so the few nearest by cosine need less breadth
// than a search that ranks alone.
constexpr int kDenseCandidateBreadth = 48;
constexpr float kRankConstant = 60.0f;  // reciprocal rank fusion's usual k
constexpr float kRepeatedPhrasingBonus = 1e4f;  // above any fused score

}  // namespace

HybridRanker::HybridRanker(RetrievalOptions options, std::shared_ptr<const WordDictionary> words)
    : options_(std::move(options)), words_(std::move(words)), lexical_(words_), weights_(prior_weights()) {}

std::vector<HybridRanker::Candidate> HybridRanker::candidates(const AnalyzedText& question, const float* vector,
                                                              const index::VectorIndex& dense,
                                                              std::int64_t skip) const {
  std::vector<std::int64_t> labels;
  labels.reserve(options_.lexical_candidates + options_.dense_candidates + 1);
  for (const auto& s : lexical_.top(question, options_.lexical_candidates, skip)) labels.push_back(s.label);
  if (options_.dense_candidates > 0 && dense.size() > 0) {
    for (const auto& n : dense.search(vector, options_.dense_candidates + (skip >= 0 ? 1 : 0), kDenseCandidateBreadth)) {
      if (n.label != skip && lexical_.contains(n.label) &&
          std::find(labels.begin(), labels.end(), n.label) == labels.end()) {
        labels.push_back(n.label);
      }
    }
  }
  std::vector<Candidate> out;
  out.reserve(labels.size());
  float best_bm25 = 0;
  const LexicalIndex::QuestionWeights weights = lexical_.weigh(question);
  for (const std::int64_t label : labels) {
    const LexicalEvidence e = lexical_.evidence(question, weights, label);
    const float* v = dense.vector_of(label);
    Candidate c{label, {}, v ? index::inner_product(vector, v, dense.dimension()) : 0.0f, 0, 0, lexical_.entry_of(label)};
    auto& f = c.features;
    f[kBm25OfBest] = e.bm25;
    f[kBm25PerIdf] = e.bm25_per_question_idf;
    f[kSharedOfQuestion] = e.shared_of_question;
    f[kSharedOfPhrasing] = e.shared_of_phrasing;
    f[kUnitsOfQuestion] = e.units_of_question;
    f[kUnitsOfPhrasing] = e.units_of_phrasing;
    f[kSubsequenceDice] = e.subsequence_dice;
    f[kSubsequenceOfQuestion] = e.subsequence_of_question;
    f[kLengthGap] = e.length_gap;
    f[kIdentical] = e.identical ? 1.0f : 0.0f;
    f[kWordsOfQuestion] = e.words_of_question;
    f[kWordsOfPhrasing] = e.words_of_phrasing;
    f[kPairsOfQuestion] = e.pairs_of_question;
    f[kPairsOfPhrasing] = e.pairs_of_phrasing;
    f[kGramsOfQuestion] = e.grams_of_question;
    f[kGramsOfPhrasing] = e.grams_of_phrasing;
    f[kCosine] = c.cosine;
    best_bm25 = std::max(best_bm25, e.bm25);
    out.push_back(c);
  }
  // Ranks within the candidates, each list by its own score (ties by label).
  std::vector<std::size_t> order(out.size());
  const auto rank_by = [&](auto key, std::size_t Candidate::*rank) {
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      const float ka = key(out[a]), kb = key(out[b]);
      return ka != kb ? ka > kb : out[a].label < out[b].label;
    });
    for (std::size_t r = 0; r < order.size(); ++r) out[order[r]].*rank = r;
  };
  rank_by([](const Candidate& c) { return c.features[kBm25OfBest]; }, &Candidate::lexical_rank);
  rank_by([](const Candidate& c) { return c.cosine; }, &Candidate::dense_rank);
  // Per entry, over its candidates: the sum of BM25 shares and the best
  // cosine. A few dozen candidates: a flat table searched in place beats a
  // hash map's allocation per entry.
  struct EntrySums {
    std::uint64_t entry;
    float lexical_sum, cosine_max;
  };
  std::vector<EntrySums> per_entry;
  per_entry.reserve(out.size());
  const auto sums_of = [&](std::uint64_t entry) {
    return std::find_if(per_entry.begin(), per_entry.end(), [&](const EntrySums& s) { return s.entry == entry; });
  };
  for (Candidate& c : out) {
    c.features[kBm25OfBest] = best_bm25 > 0 ? c.features[kBm25OfBest] / best_bm25 : 0.0f;
    c.features[kLexicalRank] = 1.0f / (1.0f + static_cast<float>(c.lexical_rank));
    auto it = sums_of(c.entry);
    if (it == per_entry.end()) it = per_entry.insert(per_entry.end(), {c.entry, 0.0f, c.cosine});
    it->lexical_sum += c.features[kBm25OfBest];
    it->cosine_max = std::max(it->cosine_max, c.cosine);
  }
  for (Candidate& c : out) {
    const auto it = sums_of(c.entry);
    c.features[kEntryLexicalSum] = it->lexical_sum;
    c.features[kEntryCosineMax] = it->cosine_max;
  }
  return out;
}

float HybridRanker::score(const Candidate& c) const {
  // A phrasing the question repeats (same units) comes first whatever the
  // fit learned: asking a stored phrasing must find its entry.
  const float repeated = c.features[kIdentical] > 0 ? kRepeatedPhrasingBonus : 0.0f;
  return repeated + fused_score(c);
}

float HybridRanker::fused_score(const Candidate& c) const {
  if (options_.fusion == RetrievalFusion::kReciprocalRank) {
    return 1.0f / (kRankConstant + 1 + static_cast<float>(c.lexical_rank)) +
           1.0f / (kRankConstant + 1 + static_cast<float>(c.dense_rank));
  }
  if (options_.fusion == RetrievalFusion::kDense) return c.cosine;
  float s = 0;
  for (std::size_t i = 0; i < kRankerFeatures; ++i) s += weights_[i] * c.features[i];
  return s;
}

std::vector<RankedPhrasing> HybridRanker::rank(std::string_view normalized_question, const float* vector,
                                               const index::VectorIndex& dense, std::size_t k) const {
  const AnalyzedText question = lexical_.analyze(normalized_question);
  std::vector<RankedPhrasing> out;
  for (const Candidate& c : candidates(question, vector, dense, -1)) out.push_back({c.label, score(c), c.cosine, c.features[kIdentical] > 0});
  std::sort(out.begin(), out.end(), [](const RankedPhrasing& a, const RankedPhrasing& b) {
    return a.score != b.score ? a.score > b.score : a.label < b.label;
  });
  if (out.size() > k) out.resize(k);
  return out;
}

RankerFit HybridRanker::fit(const std::vector<std::vector<std::int64_t>>& entries, const index::VectorIndex& dense) {
  weights_ = prior_weights();
  RankerFit report;
  if (options_.fusion != RetrievalFusion::kFitted) return report;
  std::unordered_map<std::int64_t, std::size_t> entry_of;
  std::vector<std::int64_t> askers;  // phrasings that have a sibling to find
  for (std::size_t e = 0; e < entries.size(); ++e) {
    for (const std::int64_t label : entries[e]) entry_of[label] = e;
    if (entries[e].size() > 1) askers.insert(askers.end(), entries[e].begin(), entries[e].end());
  }
  // Evenly strided when there are more than wanted, so every part of the
  // base is asked.
  std::vector<std::int64_t> asked;
  const std::size_t wanted = std::min(askers.size(), options_.max_fit_questions);
  for (std::size_t i = 0; i < wanted; ++i) asked.push_back(askers[i * askers.size() / wanted]);

  std::vector<FitQuestion> questions;
  for (const std::int64_t label : asked) {
    const AnalyzedText* text = lexical_.text_of(label);
    const float* vector = dense.vector_of(label);
    if (!text || !vector) continue;
    const std::size_t entry = entry_of[label];
    FitQuestion q;
    q.fold = entry % 2;
    std::size_t right = 0;
    for (const Candidate& c : candidates(*text, vector, dense, label)) {
      q.features.push_back(c.features);
      const auto it = entry_of.find(c.label);
      const bool is_right = it != entry_of.end() && it->second == entry;
      q.target.push_back(is_right ? 1.0f : 0.0f);
      right += is_right;
    }
    if (right == 0 || right == q.target.size()) continue;  // nothing to learn from
    for (float& t : q.target) t /= static_cast<float>(right);
    questions.push_back(std::move(q));
  }
  report.questions = questions.size();
  if (questions.empty()) return report;

  // Each pull is fitted on one fold and judged on the other, both ways; the
  // cosine alone and the prior are judged too, and the fit is kept only
  // where it finds more right entries first than both.
  const auto held_out = [&](const auto& weights_for_fold) {
    return right_first(questions, 0, weights_for_fold(1)) + right_first(questions, 1, weights_for_fold(0));
  };
  report.held_out_questions = questions.size();
  report.held_out_right_cosine = held_out([](std::size_t) { return cosine_only(); });
  report.held_out_right_prior = held_out([](std::size_t) { return prior_weights(); });
  double best_pull = kPullCandidates[0];
  std::size_t best_right = 0;
  for (const double pull : kPullCandidates) {
    const std::size_t right = held_out([&](std::size_t fold) { return train(questions, fold, pull, kQuickSteps, kQuickLearningRate).weights; });
    if (right > best_right) {
      best_right = right;
      best_pull = pull;
    }
  }
  report.held_out_right_fitted = best_right;
  report.pull = best_pull;
  const Trained all = train(questions, 2, best_pull, kSteps, kLearningRate);
  report.loss_before = all.loss_before;
  report.loss_after = all.loss_after;
  if (best_right > std::max(report.held_out_right_cosine, report.held_out_right_prior)) {
    weights_ = all.weights;
    report.choice = RankerChoice::kFitted;
  } else if (report.held_out_right_cosine > report.held_out_right_prior) {
    weights_ = cosine_only();
    report.choice = RankerChoice::kCosine;
  } else {
    report.choice = RankerChoice::kPrior;
  }
  return report;
}

}  // namespace rapidqa::retrieval

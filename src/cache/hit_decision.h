// ErrorBoundLearner: how close a new question must be to a cached one for
// the semantic tier to serve the cached answer while keeping the share of
// wrong hits at or under a target the user sets (SemanticCacheOptions::
// target_error_rate), learned from verified outcomes in the spirit of
// vCache ("Verified Semantic Prompt Caching", 2025).
//
// An outcome is a comparison of a cached answer with what full retrieval
// answers for the new question: right when both name the same entry. Every
// miss yields one for free (its nearest cached question's answer against
// the retrieval that follows); a sampled share of would-be hits is verified
// too, and weighs 1 / that share, so the weighted outcomes stand for every
// decision. The target bounds the share of all decisions that are wrong
// hits, as vCache's error rate does.
//
// What decides is the similarity to the nearest cached question and its
// lead over the next nearest: a question close to one cached question and
// clearly farther from every other is likelier the same question than one
// as close to several. A weighted logistic regression over the recent
// outcomes (a sliding window, since a filling cache changes what the
// nearest neighbour looks like) scores both; the cut-off admits the
// best-scored outcomes while the one-sided 95% Wilson upper bound of the
// weighted wrong ones over all outcomes stays at or under the target. So
// each lookup's threshold on similarity depends on its lead: lower where
// the nearest cached question stands clear. A cached question seen wrong at
// some similarity needs more than that from then on.
//
// Thread safety: thread-compatible; SemanticCache guards it, and runs
// fit() (the costly part, a fraction of a millisecond) outside its lock.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <unordered_map>
#include <vector>

namespace rapidqa::cache {

class ErrorBoundLearner {
 public:
  static constexpr std::size_t kWindow = 2000;         // recent outcomes learned from
  static constexpr std::size_t kWarmUpOutcomes = 200;  // before these, the starting threshold stands
  static constexpr std::size_t kRelearnEvery = 16;     // outcomes between two fits
  // A threshold no cosine reaches: nothing hits.
  static constexpr float kNoHit = 1.01f;

  ErrorBoundLearner(float target_error_rate, float starting_threshold);

  struct Outcome {
    float similarity, lead;
    bool right;
    double weight;
  };
  // The fit: standardised (similarity, lead) -> log-odds of right, and the
  // log-odds a lookup needs (infinite: none qualifies).
  struct Model {
    std::array<double, 2> mean{}, scale{1, 1}, weights{};
    double bias = 0, cut = 0;
  };

  // One verified outcome of cached question `cached`: the new question's
  // similarity to it and lead over the next cached question (its similarity
  // when there is none); weight is 1 / the probability it was verified.
  // Returns true when a new model is due (see relearn_from).
  bool record(std::int64_t cached, float similarity, float lead, bool right, double weight);
  // The outcomes a new model learns from.
  std::vector<Outcome> window() const { return {window_.begin(), window_.end()}; }
  // Fits a model to outcomes, starting from `from` (the current model, so
  // few steps are needed): pure, so it can run without the lock that
  // guards the learner. Then install() it.
  static Model fit(const std::vector<Outcome>& outcomes, double target, const Model& from, bool first);
  const Model& model() const { return model_; }
  void install(const Model& model);
  // fit() and install() in one, for a caller that holds no lock.
  void learn() { install(fit(window(), target_, model_, !learned_)); }
  float target() const { return target_; }
  // The similarity a new question needs to this cached question, given its
  // lead, and why in a few words.
  float threshold_for(std::int64_t cached, float lead, std::string* why = nullptr) const;
  // The cached question is gone: its record goes with it.
  void forget(std::int64_t cached) { wrong_above_.erase(cached); }

  bool learned() const { return learned_; }
  std::size_t outcomes() const { return recorded_; }

 private:
  float target_;
  float starting_threshold_;
  std::deque<Outcome> window_;
  std::size_t recorded_ = 0;
  bool learned_ = false;
  Model model_;
  std::unordered_map<std::int64_t, float> wrong_above_;  // highest similarity a wrong outcome was seen at
};

}  // namespace rapidqa::cache

// Answer quality without a model: the calibrated confidence and its
// threshold, the fallback for questions with too little to match, and the
// semantic tier's error-bound hit decision.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <thread>
#include <string>
#include <vector>

#include "cache/hit_decision.h"
#include "rapidqa/qa_engine.h"
#include "rapidqa/semantic_cache.h"
#include "retrieval/answer_calibration.h"
#include "test_support.h"

using rapidqa::cache::ErrorBoundLearner;
using rapidqa::retrieval::AnswerCalibration;
using rapidqa::retrieval::RetrievalEvidence;

namespace {

std::unique_ptr<rapidqa::QAEngine> faq_engine(rapidqa::EngineOptions options = {}) {
  auto engine = rapidqa::QAEngine::create(std::move(options));
  REQUIRE(engine.is_ok());
  REQUIRE((*engine)->load_knowledge(rapidqa::testing::bundled_faq()).is_ok());
  return std::move(engine).value();
}

}  // namespace

TEST_CASE("The confidence is the share of unanswerable scores below the cosine", "[calibration]") {
  std::vector<float> unanswerable;
  for (int i = 0; i < 100; ++i) unanswerable.push_back(0.3f + 0.004f * static_cast<float>(i));  // 0.300 .. 0.696
  unanswerable.push_back(NAN);  // ignored
  const AnswerCalibration c = AnswerCalibration::fit(unanswerable);
  REQUIRE(c.fitted());
  CHECK(c.reference_scores() == 100);
  CHECK(c.confidence({0.1f, false}) == 0.0f);
  CHECK(c.confidence({0.5f, false}) == Approx(0.5f).margin(0.011));
  CHECK(c.confidence({0.9f, false}) == 1.0f);
  CHECK(c.confidence({0.45f, false}) < c.confidence({0.55f, false}));
  // A repeated phrasing is certain; a non-finite cosine is unknown.
  CHECK(c.confidence({0.1f, true}) == 1.0f);
  CHECK(c.confidence({NAN, false}) == -1.0f);
  CHECK_THAT(c.summary(), Catch::Contains("calibrated on 100"));
}

TEST_CASE("Without enough reference scores nothing is calibrated", "[calibration]") {
  const AnswerCalibration c = AnswerCalibration::fit({0.4f, 0.5f, 0.6f});
  CHECK_FALSE(c.fitted());
  CHECK(c.confidence({0.9f, false}) == -1.0f);
  CHECK(c.confidence({0.9f, true}) == 1.0f);
  CHECK_THAT(c.summary(), Catch::Contains("not calibrated"));
  CHECK_FALSE(AnswerCalibration::fit({}).fitted());
}

TEST_CASE("Every fusion calibrates its confidence from the knowledge base", "[calibration][engine]") {
  for (const auto fusion : {rapidqa::RetrievalFusion::kFitted, rapidqa::RetrievalFusion::kReciprocalRank,
                            rapidqa::RetrievalFusion::kDense}) {
    rapidqa::EngineOptions options;
    options.retrieval.fusion = fusion;
    auto engine = faq_engine(options);
    auto report = engine->load_knowledge(rapidqa::testing::bundled_faq());
    REQUIRE(report.is_ok());
    CHECK_THAT(report->ranking, Catch::Contains("confidence calibrated on"));
    rapidqa::AskOptions uncached;
    uncached.use_cache = false;
    auto paraphrase = engine->ask("I can't remember the password of my account, what now?", uncached);
    REQUIRE(paraphrase.is_ok());
    CHECK(paraphrase->confidence >= 0.0f);
    CHECK(paraphrase->confidence <= 1.0f);
    // A stored phrasing asked word for word is answered with certainty.
    auto stored = engine->ask("I forgot my password", uncached);
    REQUIRE(stored.is_ok());
    CHECK(stored->confidence == 1.0f);
    auto unrelated = engine->ask("what is the boiling point of liquid nitrogen at sea level", uncached);
    REQUIRE(unrelated.is_ok());
    CHECK(unrelated->confidence < paraphrase->confidence);
    CHECK(unrelated->confidence < 0.5f);  // scores lower than most questions the base cannot answer
  }
}

TEST_CASE("min_answer_confidence gives the fallback with the reason, per engine or per ask", "[calibration][engine]") {
  rapidqa::EngineOptions options;
  options.min_answer_confidence = 0.999f;
  auto strict = faq_engine(options);
  auto refused = strict->ask("I can't remember the password of my account, what now?");
  REQUIRE(refused.is_ok());
  REQUIRE(refused->tier == rapidqa::AnswerTier::kFallback);
  CHECK_THAT(refused->fallback_reason, Catch::Contains("min_answer_confidence"));
  CHECK(refused->confidence >= 0.0f);
  CHECK(refused->confidence < 0.999f);
  CHECK_FALSE(refused->matches.empty());  // what matched is still reported
  // A stored phrasing passes any threshold.
  auto stored = strict->ask("I forgot my password");
  REQUIRE(stored.is_ok());
  CHECK(stored->tier == rapidqa::AnswerTier::kKnowledge);
  CHECK(stored->fallback_reason.empty());

  auto lenient = faq_engine();
  rapidqa::AskOptions ask;
  ask.min_answer_confidence = 0.999f;
  auto per_ask = lenient->ask("I can't remember the password of my account, what now?", ask);
  REQUIRE(per_ask.is_ok());
  CHECK(per_ask->tier == rapidqa::AnswerTier::kFallback);
  auto default_ask = lenient->ask("I can't remember the password of my account, what now?");
  REQUIRE(default_ask.is_ok());
  CHECK(default_ask->tier == rapidqa::AnswerTier::kKnowledge);

  // Out of range is refused, with the option named.
  ask.min_answer_confidence = 1.5f;
  auto bad = lenient->ask("anything", ask);
  REQUIRE_FALSE(bad.is_ok());
  CHECK_THAT(bad.status().message(), Catch::Contains("min_answer_confidence"));
  options.min_answer_confidence = NAN;
  CHECK_FALSE(rapidqa::QAEngine::create(options).is_ok());
}

TEST_CASE("A question with too little to match gets the fallback and the reason", "[engine]") {
  auto engine = faq_engine();
  for (const char* question : {"q", "\xF0\x9F\x98\x80", "\xE9\x92\xB1", "q ?", "\xF0\x9F\x98\x80\xF0\x9F\x98\x80"}) {
    auto answer = engine->ask(question);
    REQUIRE(answer.is_ok());
    INFO(question);
    CHECK(answer->tier == rapidqa::AnswerTier::kFallback);
    CHECK_THAT(answer->fallback_reason, Catch::Contains("too little to match"));
    CHECK(answer->matches.empty());
  }
  // Punctuation alone is no question at all: an error, as before.
  CHECK_FALSE(engine->ask("?!").is_ok());
  // Two letters are enough to try.
  auto two = engine->ask("ok");
  REQUIRE(two.is_ok());
  CHECK(two->fallback_reason.find("too little") == std::string::npos);

  rapidqa::EngineOptions one_character;
  one_character.min_question_characters = 1;
  auto lenient = faq_engine(one_character);
  auto single = lenient->ask("q");
  REQUIRE(single.is_ok());
  CHECK(single->fallback_reason.find("too little") == std::string::npos);
  one_character.min_question_characters = 0;
  auto refused = rapidqa::QAEngine::create(one_character);
  REQUIRE_FALSE(refused.is_ok());
  CHECK_THAT(refused.status().message(), Catch::Contains("min_question_characters"));
}

TEST_CASE("The error-bound learner starts at the given threshold and learns from outcomes", "[semantic][error-bound]") {
  ErrorBoundLearner learner(0.02f, 0.92f);
  std::string why;
  CHECK(learner.threshold_for(1, 0.1f, &why) == Approx(0.92f));
  CHECK_THAT(why, Catch::Contains("starting threshold"));
  // Right when the similarity is high or the lead is wide.
  std::mt19937 random(3);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  for (int i = 0; i < 1000; ++i) {
    const float s = unit(random), lead = 0.3f * unit(random);
    const bool right = s + lead > 0.95f;
    if (learner.record(100 + i, s, lead, right, 1.0)) learner.learn();
  }
  REQUIRE(learner.learned());
  const float narrow = learner.threshold_for(1, 0.0f, &why), wide = learner.threshold_for(1, 0.25f);
  CHECK_THAT(why, Catch::Contains("learned"));
  CHECK(wide < narrow);  // a clear lead needs less similarity
  CHECK(narrow > 0.8f);
  CHECK(narrow <= ErrorBoundLearner::kNoHit);
}

TEST_CASE("A cached question seen wrong needs more than that similarity from then on", "[semantic][error-bound]") {
  ErrorBoundLearner learner(0.05f, 0.80f);
  learner.record(7, 0.86f, 0.1f, false, 1.0);
  std::string why;
  CHECK(learner.threshold_for(7, 0.1f, &why) > 0.86f);
  CHECK_THAT(why, Catch::Contains("wrong outcome"));
  CHECK(learner.threshold_for(8, 0.1f) == Approx(0.80f));
  learner.forget(7);
  CHECK(learner.threshold_for(7, 0.1f) == Approx(0.80f));
}

TEST_CASE("When nothing keeps errors under the target, nothing hits", "[semantic][error-bound]") {
  ErrorBoundLearner learner(0.01f, 0.9f);
  for (int i = 0; i < 400; ++i) {
    if (learner.record(i, 0.5f + 0.001f * static_cast<float>(i), 0.05f, i % 2 == 0, 1.0)) learner.learn();
  }
  std::string why;
  CHECK(learner.threshold_for(100000, 0.05f, &why) == Approx(ErrorBoundLearner::kNoHit));
  CHECK_THAT(why, Catch::Contains("under the target"));
}

TEST_CASE("The learner keeps wrong hits under its target on a simulated stream", "[semantic][error-bound]") {
  // Outcomes drawn from a fixed model: right with probability rising with
  // similarity and lead. The learner decides, sees every miss and 5% of hits
  // (weighted), and its wrong hits over all decisions stay under target.
  for (const float target : {0.01f, 0.03f}) {
    ErrorBoundLearner learner(target, 0.95f);
    std::mt19937 random(11);
    std::uniform_real_distribution<float> unit(0.0f, 1.0f);
    std::size_t decisions = 0, hits = 0, wrong_hits = 0;
    for (int i = 0; i < 20000; ++i) {
      const float s = 0.4f + 0.6f * unit(random), lead = 0.2f * unit(random) * unit(random);
      const double p_right = 1.0 / (1.0 + std::exp(-(18.0 * (s - 0.8) + 25.0 * (lead - 0.05))));
      const bool right = unit(random) < p_right;
      ++decisions;
      if (s >= learner.threshold_for(i, lead)) {
        if (unit(random) < 0.05f) {
          if (learner.record(i, s, lead, right, 20.0)) learner.learn();
        } else {
          ++hits;
          wrong_hits += !right;
        }
      } else {
        if (learner.record(i, s, lead, right, 1.0)) learner.learn();
      }
    }
    INFO("target " << target << ": hits " << hits << ", wrong " << wrong_hits);
    CHECK(static_cast<double>(wrong_hits) / static_cast<double>(decisions) <= target);
    CHECK(hits > decisions / 20);  // and it does hit
  }
}

TEST_CASE("The semantic cache in error-bound mode explains and verifies its decisions", "[semantic][error-bound]") {
  rapidqa::SemanticCacheOptions options;
  options.dimension = 4;
  options.similarity_threshold = 0.9f;
  options.target_error_rate = 0.02f;
  options.verification_rate = 1.0f;  // every would-be hit is checked
  auto cache = rapidqa::SemanticCache::create(options);
  REQUIRE(cache.is_ok());
  rapidqa::Answer answer;
  answer.text = "cached";
  answer.tier = rapidqa::AnswerTier::kKnowledge;
  answer.score = 0.8f;
  answer.matches.push_back({"entry-a", 0.8f, 1});
  const float cached[4] = {1, 0, 0, 0};
  (*cache)->insert(cached, "how do i pay", answer);

  const float close[4] = {0.99f, 0.141f, 0, 0};
  auto verify = (*cache)->lookup(close, "how can i pay");
  CHECK_FALSE(verify.answer);  // answered by retrieval, to check
  REQUIRE(verify.observation);
  CHECK(verify.observation->entry_id == "entry-a");
  CHECK(verify.observation->weight == Approx(1.0));
  CHECK_THAT(verify.decision, Catch::Contains("verifying"));
  CHECK(verify.threshold == Approx(0.9f));
  (*cache)->record_outcome(*verify.observation, "entry-a");

  const float far[4] = {0.5f, 0.866f, 0, 0};
  auto miss = (*cache)->lookup(far, "what is the weather");
  CHECK_FALSE(miss.answer);
  REQUIRE(miss.observation);
  CHECK_THAT(miss.decision, Catch::Contains("miss: similarity 0.500 under 0.900"));
  (*cache)->record_outcome(*miss.observation, "entry-b");
  const auto stats = (*cache)->stats();
  CHECK(stats.outcomes == 2);
  CHECK(stats.wrong_outcomes == 1);
  CHECK(stats.verifications == 1);

  // A fixed threshold explains itself too, and asks for no outcome.
  rapidqa::SemanticQuery fixed;
  fixed.similarity_threshold = 0.9f;
  auto hit = (*cache)->lookup(close, "how can i pay", fixed);
  REQUIRE(hit.answer);
  CHECK_FALSE(hit.observation);
  CHECK_THAT(hit.decision, Catch::Contains("hit: similarity"));
  CHECK_THAT(hit.answer->cache_decision, Catch::Contains("fixed threshold"));
  CHECK(hit.answer->cache_threshold == Approx(0.9f));

  options.target_error_rate = 0.7f;
  CHECK_FALSE(rapidqa::SemanticCache::create(options).is_ok());
  options.target_error_rate = 0.02f;
  options.verification_rate = 0.0f;
  CHECK_FALSE(rapidqa::SemanticCache::create(options).is_ok());
}

TEST_CASE("Lookups, outcomes and refits run together from many threads", "[semantic][error-bound]") {
  rapidqa::SemanticCacheOptions options;
  options.dimension = 8;
  options.similarity_threshold = 0.5f;
  options.target_error_rate = 0.05f;
  options.verification_rate = 0.2f;
  auto cache = rapidqa::SemanticCache::create(options);
  REQUIRE(cache.is_ok());
  rapidqa::SemanticCache& c = **cache;
  const auto unit_vector = [](std::mt19937& random) {
    std::normal_distribution<float> normal;
    std::vector<float> v(8);
    float norm = 0;
    for (float& x : v) {
      x = normal(random);
      norm += x * x;
    }
    for (float& x : v) x /= std::sqrt(norm);
    return v;
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 random(static_cast<unsigned>(t));
      for (int i = 0; i < 1500; ++i) {
        const auto v = unit_vector(random);
        const std::string question = "how do i pay";  // one text: the near-miss guard (numbers) stays out of it
        auto found = c.lookup(v.data(), question);
        if (found.observation) c.record_outcome(*found.observation, i % 3 == 0 ? "other" : found.observation->entry_id);
        if (!found.answer) {
          rapidqa::Answer a;
          a.text = "answer";
          a.tier = rapidqa::AnswerTier::kKnowledge;
          a.score = 0.9f;
          a.matches.push_back({"entry-" + std::to_string(i % 50), 0.9f, 1});
          c.insert(v.data(), question, a);
        }
        if (t == 0 && i % 500 == 499) c.clear();
      }
    });
  }
  for (auto& thread : threads) thread.join();
  const auto stats = c.stats();
  CHECK(stats.outcomes > 1000);
  CHECK(stats.wrong_outcomes > 0);
  CHECK(stats.hits + stats.misses == 6000);
}

TEST_CASE("The engine records the semantic tier's outcomes and says what it decided", "[semantic][error-bound][engine]") {
  rapidqa::EngineOptions options;
  options.semantic_cache.target_error_rate = 0.02f;
  options.enable_result_cache = false;
  options.enable_knowledge_cache = false;
  auto engine = faq_engine(options);
  REQUIRE(engine->ask("How do I reset my password?").is_ok());
  auto next = engine->ask("How can I recover a forgotten password?");
  REQUIRE(next.is_ok());
  CHECK_FALSE(next->cache_decision.empty());
  CHECK(next->cache_threshold > 0.0f);
  const auto caches = engine->metrics().caches;
  CHECK(caches.semantic_outcomes >= 1);
  CHECK_THAT(engine->metrics().format_prometheus(), Catch::Contains("semantic_outcomes_total"));
}

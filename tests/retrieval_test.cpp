// Hybrid retrieval: word segmentation, the BM25 index, the fitted ranker,
// and the knowledge tier ranking with them.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <unistd.h>
#include <fstream>
#include <string>
#include <vector>

#include "engine/knowledge_base.h"
#include "index/vector_index.h"
#include "rapidqa/hashing_encoder.h"
#include "rapidqa/qa_engine.h"
#include "retrieval/hybrid_ranker.h"
#include "retrieval/lexical_index.h"
#include "retrieval/word_dictionary.h"
#include "test_support.h"

using rapidqa::retrieval::LexicalIndex;
using rapidqa::retrieval::WordDictionary;

namespace {

std::vector<std::string_view> characters(std::string_view text) {
  std::vector<std::string_view> out;
  for (std::size_t pos = 0; pos < text.size();) {
    std::size_t len = 1;
    const auto lead = static_cast<unsigned char>(text[pos]);
    if (lead >= 0xF0) len = 4; else if (lead >= 0xE0) len = 3; else if (lead >= 0xC0) len = 2;
    out.push_back(text.substr(pos, len));
    pos += len;
  }
  return out;
}

std::vector<std::string> words_of(const WordDictionary& d, std::string_view text) {
  const auto chars = characters(text);
  const auto starts = d.segment(chars);
  std::vector<std::string> out;
  for (std::size_t w = 0; w < starts.size(); ++w) {
    const std::size_t end = w + 1 < starts.size() ? starts[w + 1] : chars.size();
    std::string word;
    for (std::size_t c = starts[w]; c < end; ++c) word.append(chars[c]);
    out.push_back(word);
  }
  return out;
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("rapidqa-retrieval-" + std::to_string(::getpid()) + "-" + name)).string();
}

std::string write_file(const std::string& name, const std::string& text) {
  const std::string path = temp_path(name);
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

}  // namespace

TEST_CASE("The word dictionary takes the most probable path through its words", "[retrieval]") {
  const auto d = WordDictionary::from_counts({{"北京", 100}, {"大学", 100}, {"北京大学", 500}, {"生", 10},
                                              {"大学生", 80}, {"京大", 1}, {"活", 5}, {"生活", 90}});
  CHECK(words_of(d, "北京大学") == std::vector<std::string>{"北京大学"});
  CHECK(words_of(d, "北京大学生活") == std::vector<std::string>{"北京大学", "生活"});
  // Characters the list lacks stand alone.
  CHECK(words_of(d, "我在北京") == std::vector<std::string>{"我", "在", "北京"});
  CHECK(words_of(d, "").empty());
}

TEST_CASE("A word dictionary file is read whole or refused with its line", "[retrieval]") {
  auto good = WordDictionary::load(write_file("words-good.txt", "北京 100 ns\n大学 100\n\n北京大学 500 nt\r\n"));
  REQUIRE(good.is_ok());
  CHECK(good->size() == 3);
  CHECK(words_of(*good, "北京大学") == std::vector<std::string>{"北京大学"});

  auto bad_count = WordDictionary::load(write_file("words-bad.txt", "北京 100\n大学 many\n"));
  REQUIRE_FALSE(bad_count.is_ok());
  CHECK(bad_count.status().code() == rapidqa::StatusCode::kInvalidArgument);
  CHECK_THAT(bad_count.status().message(), Catch::Contains("line 2"));

  auto zero = WordDictionary::load(write_file("words-zero.txt", "北京 0\n"));
  REQUIRE_FALSE(zero.is_ok());
  CHECK_THAT(zero.status().message(), Catch::Contains("positive count"));

  auto invalid = WordDictionary::load(write_file("words-utf8.txt", std::string("\xff\xfe 3\n")));
  REQUIRE_FALSE(invalid.is_ok());
  CHECK_THAT(invalid.status().message(), Catch::Contains("UTF-8"));

  auto missing = WordDictionary::load(temp_path("no-such-words.txt"));
  REQUIRE_FALSE(missing.is_ok());
  CHECK(missing.status().code() == rapidqa::StatusCode::kNotFound);

  auto empty = WordDictionary::load(write_file("words-empty.txt", "\n\n"));
  REQUIRE_FALSE(empty.is_ok());
  CHECK_THAT(empty.status().message(), Catch::Contains("no words"));
}

TEST_CASE("The BM25 index scores as the formula says and forgets what is removed", "[retrieval]") {
  LexicalIndex index(nullptr);
  index.add(1, "甲乙");
  index.add(2, "丙丁戊");
  index.add(3, "甲丙");
  const auto question = index.analyze("甲乙");
  // Terms: 甲, 乙, (甲,乙). Phrasing 1 holds all three, each once; lengths
  // 3, 5, 3 (units plus pairs), average 11/3.
  const double n = 3, average = 11.0 / 3, k1 = 1.2, b = 0.75;
  const auto idf = [&](double df) { return std::log(1 + (n - df + 0.5) / (df + 0.5)); };
  const auto part = [&](double length) { return (k1 + 1) / (1 + k1 * (1 - b + b * length / average)); };
  const double expected1 = (idf(2) + idf(1) + idf(1)) * part(3);
  const double expected3 = idf(2) * part(3);
  const auto top = index.top(question, 10);
  REQUIRE(top.size() == 2);
  CHECK(top[0].label == 1);
  CHECK(top[0].bm25 == Approx(expected1).epsilon(1e-5));
  CHECK(top[1].label == 3);
  CHECK(top[1].bm25 == Approx(expected3).epsilon(1e-5));
  // The question's own phrasing can be left out (how the ranker is fitted).
  CHECK(index.top(question, 10, 1).front().label == 3);

  const auto weights = index.weigh(question);
  const auto e = index.evidence(question, weights, 1);
  CHECK(e.identical);
  CHECK(e.shared_of_question == Approx(1.0));
  CHECK(e.subsequence_dice == Approx(1.0));
  const auto e3 = index.evidence(question, weights, 3);
  CHECK_FALSE(e3.identical);
  CHECK(e3.subsequence_of_question == Approx(0.5));
  CHECK(e3.bm25 == Approx(expected3).epsilon(1e-5));

  index.remove(1);
  CHECK(index.size() == 2);
  CHECK_FALSE(index.contains(1));
  const auto after = index.top(index.analyze("乙"), 10);
  CHECK(after.empty());  // no phrasing holds 乙 any more
  index.add(4, "乙甲");  // takes the freed slot
  CHECK(index.top(index.analyze("乙"), 10).front().label == 4);
}

TEST_CASE("The common subsequence is exact at every length, on both sides of 64 units", "[retrieval]") {
  // Words drawn from a small vocabulary so that long texts share many, in
  // orders that differ; lengths around the bit-parallel path's 64 units and
  // past the 96 the evidence reads.
  LexicalIndex index(nullptr);
  const std::vector<std::string> vocabulary = {"alpha", "bravo", "charlie", "delta", "echo", "foxtrot"};
  std::uint64_t state = 12345;
  const auto next = [&] {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<std::size_t>(state >> 33);
  };
  const auto text_of = [&](std::size_t words, std::vector<std::size_t>& ids) {
    std::string text;
    ids.clear();
    for (std::size_t w = 0; w < words; ++w) {
      ids.push_back(next() % vocabulary.size());
      text += (w ? " " : "") + vocabulary[ids.back()];
    }
    return text;
  };
  const auto reference = [](const std::vector<std::size_t>& a, const std::vector<std::size_t>& b) {
    const std::size_t n = std::min<std::size_t>(a.size(), 96), m = std::min<std::size_t>(b.size(), 96);
    std::vector<std::vector<std::size_t>> t(n + 1, std::vector<std::size_t>(m + 1, 0));
    for (std::size_t i = 1; i <= n; ++i) {
      for (std::size_t j = 1; j <= m; ++j) {
        t[i][j] = a[i - 1] == b[j - 1] ? t[i - 1][j - 1] + 1 : std::max(t[i - 1][j], t[i][j - 1]);
      }
    }
    return t[n][m];
  };
  std::vector<std::size_t> question_ids, phrasing_ids;
  for (const std::size_t phrasing_words : {1, 7, 63, 64, 65, 96, 120}) {
    for (const std::size_t question_words : {1, 9, 64, 100}) {
      const std::string phrasing = text_of(phrasing_words, phrasing_ids);
      const std::string question = text_of(question_words, question_ids);
      index.add(1, phrasing);
      const auto analyzed = index.analyze(question);
      const auto e = index.evidence(analyzed, index.weigh(analyzed), 1);
      const auto expected = static_cast<float>(reference(question_ids, phrasing_ids));
      INFO(question_words << " question words, " << phrasing_words << " phrasing words");
      CHECK(e.subsequence_of_question == Approx(expected / static_cast<float>(question_words)));
    }
  }
}

TEST_CASE("Words other than CJK also match by their character trigrams", "[retrieval]") {
  LexicalIndex index(nullptr);
  index.add(1, "resetting my password");
  index.add(2, "tracking my parcel");
  const auto question = index.analyze("reset password");
  const auto top = index.top(question, 10);
  REQUIRE_FALSE(top.empty());
  CHECK(top.front().label == 1);
  const auto e = index.evidence(question, index.weigh(question), 1);
  CHECK(e.grams_of_question > 0.5f);  // "<re", "res", "ese", "set" and all of "password"
}

TEST_CASE("CJK text is read as characters and pairs, and as words with a dictionary", "[retrieval]") {
  auto words = std::make_shared<const WordDictionary>(WordDictionary::from_counts({{"密码", 100}, {"重置", 80}}));
  LexicalIndex plain(nullptr), segmented(words);
  const auto a = plain.analyze("怎么重置密码？");
  CHECK(a.units.size() == 6);     // punctuation is no unit
  CHECK(a.bigrams.size() == 5);
  CHECK(a.words.empty());
  const auto b = segmented.analyze("怎么重置密码？ abc 😀");
  CHECK(b.units.size() == 7);     // 6 characters and "abc"; the emoji holds no letter or digit
  CHECK(b.words.size() == 5);     // 怎, 么, 重置, 密码, abc
}

TEST_CASE("The fitted ranker learns from the base's own phrasings and follows updates", "[retrieval]") {
  // Each entry's phrasings share its topic word and nothing else with each
  // other; the wording around it is shared across entries. The fit must
  // lower its loss on them. (Asked in other words, such a small base can
  // rank by shapes only its phrasings bear out: see docs/answer-quality.md.)
  std::shared_ptr<rapidqa::HashingEncoder> encoder = rapidqa::HashingEncoder::create({}).value();
  rapidqa::engine::KnowledgeBaseOptions options;
  options.retrieval.fusion = rapidqa::RetrievalFusion::kFitted;
  rapidqa::engine::KnowledgeBase base(encoder, options);
  std::vector<rapidqa::KnowledgeEntry> entries;
  const std::vector<std::string> topics = {"refund", "invoice", "password", "delivery", "coupon", "warranty",
                                           "shipping", "account", "payment", "return", "exchange", "gift"};
  for (std::size_t i = 0; i < topics.size(); ++i) {
    rapidqa::KnowledgeEntry e;
    e.id = "e" + std::to_string(i);
    e.question = topics[i] + " help";
    e.alternates = {"need " + topics[i] + " support", topics[i] + " issue today", "question about " + topics[i]};
    e.answer = "answer " + topics[i];
    entries.push_back(e);
  }
  REQUIRE(base.replace_all(entries).is_ok());
  const auto fit = base.ranker_fit();
  CHECK(fit.questions > 0);
  CHECK(fit.loss_after < fit.loss_before);
  std::vector<float> v(encoder->dimension());
  // Updates reach the BM25 index without a refit (ranked by reciprocal
  // rank fusion here, which weighs BM25 and the cosine alike).
  options.retrieval.fusion = rapidqa::RetrievalFusion::kReciprocalRank;
  rapidqa::engine::KnowledgeBase fused(encoder, options);
  REQUIRE(fused.replace_all(entries).is_ok());
  rapidqa::KnowledgeEntry added;
  added.id = "new";
  added.question = "loyalty points balance";
  added.answer = "points";
  REQUIRE(fused.add(added).is_ok());
  REQUIRE(encoder->encode_one("loyalty points", v.data()).is_ok());
  CHECK(fused.search("loyalty points", v.data(), 1).front().entry->id == "new");
  REQUIRE(fused.remove("new").is_ok());
  const auto gone = fused.search("loyalty points", v.data(), 3);
  for (const auto& m : gone) CHECK(m.entry->id != "new");
}

TEST_CASE("The engine ranks with the hybrid ranker and keeps the cosine as the score", "[retrieval]") {
  for (const auto fusion : {rapidqa::RetrievalFusion::kFitted, rapidqa::RetrievalFusion::kReciprocalRank,
                            rapidqa::RetrievalFusion::kDense}) {
    rapidqa::EngineOptions options;
    options.retrieval.fusion = fusion;
    auto engine = rapidqa::QAEngine::create(options);
    REQUIRE(engine.is_ok());
    REQUIRE((*engine)->load_knowledge(rapidqa::testing::bundled_faq()).is_ok());
    auto answer = (*engine)->ask("I forgot my password, how can I reset it?");
    REQUIRE(answer.is_ok());
    CHECK(answer->tier == rapidqa::AnswerTier::kKnowledge);
    CHECK(answer->entry_id() == "shop-en-reset-password");
    CHECK(answer->score <= 1.0f);
    CHECK(answer->score == Approx(answer->matches.front().score));
  }
}

TEST_CASE("A word dictionary the engine cannot read fails its construction, naming the option", "[retrieval]") {
  rapidqa::EngineOptions options;
  options.retrieval.fusion = rapidqa::RetrievalFusion::kFitted;
  options.retrieval.word_dictionary = temp_path("missing-dictionary.txt");
  auto engine = rapidqa::QAEngine::create(options);
  REQUIRE_FALSE(engine.is_ok());
  CHECK(engine.status().code() == rapidqa::StatusCode::kNotFound);
  CHECK_THAT(engine.status().message(), Catch::Contains("retrieval.word_dictionary"));

  options.retrieval.word_dictionary.clear();
  options.retrieval.lexical_candidates = 0;
  options.retrieval.dense_candidates = 0;
  auto none = rapidqa::QAEngine::create(options);
  REQUIRE_FALSE(none.is_ok());
  CHECK_THAT(none.status().message(), Catch::Contains("retrieval.lexical_candidates"));
}

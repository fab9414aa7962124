#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <vector>
#include <numeric>
#include <thread>

#include "rapidqa/hashing_encoder.h"
#include "rapidqa/text_normalizer.h"
#include "common/squared_norm.h"
#include "text/feature_hash.h"

using rapidqa::HashingEncoder;

namespace {

std::unique_ptr<HashingEncoder> make_encoder(rapidqa::HashingEncoderOptions options = {}) {
  auto encoder = HashingEncoder::create(options);
  REQUIRE(encoder.is_ok());
  return std::move(encoder).value();
}

std::vector<float> encode(const HashingEncoder& enc, const std::string& text) {
  std::vector<float> v(enc.dimension());
  auto normalized = rapidqa::normalize_text(text);
  REQUIRE(normalized.is_ok());
  REQUIRE(enc.encode_one(normalized.value(), v.data()).is_ok());
  return v;
}

float cosine(const std::vector<float>& a, const std::vector<float>& b) {
  return std::inner_product(a.begin(), a.end(), b.begin(), 0.0f);
}

const std::vector<std::string> kCorpus = {
    "how do i reset my password",   "how do i change my email address", "where is my order",
    "how do i cancel my order",     "how do i open a bank account",     "how do i close my bank account",
    "what is the interest rate",    "how do i report a lost card",      "如何重置密码",
    "如何开户",                     "如何销户",                         "我的订单在哪里",
    "信用卡丢了怎么办",             "如何修改邮箱地址",
};

}  // namespace

TEST_CASE("Vectors have the configured dimension and unit length", "[encoder]") {
  rapidqa::HashingEncoderOptions options;
  options.dimension = 128;
  auto made = make_encoder(options);
  HashingEncoder& enc = *made;
  CHECK(enc.dimension() == 128);
  CHECK(enc.name() == "hashing-128");
  for (const char* text : {"how do i reset my password", "如何重置密码", "x"}) {
    const auto v = encode(enc, text);
    REQUIRE(v.size() == 128);
    CHECK(std::sqrt(cosine(v, v)) == Approx(1.0f).epsilon(1e-5));
  }
}

TEST_CASE("Encoding is deterministic and batch equals one by one", "[encoder]") {
  auto made = make_encoder();
  HashingEncoder& enc = *made;
  enc.adapt(kCorpus);
  std::vector<float> batch;
  REQUIRE(enc.encode({"where is my order", "我的订单在哪里"}, batch).is_ok());
  REQUIRE(batch.size() == 2 * enc.dimension());
  const auto one = encode(enc, "where is my order");
  const auto two = encode(enc, "我的订单在哪里");
  CHECK(std::equal(one.begin(), one.end(), batch.begin()));
  CHECK(std::equal(two.begin(), two.end(), batch.begin() + static_cast<long>(enc.dimension())));
}

TEST_CASE("A paraphrase scores closer than an unrelated question", "[encoder]") {
  auto made = make_encoder();
  HashingEncoder& enc = *made;
  enc.adapt(kCorpus);
  const auto reset = encode(enc, "how do i reset my password");
  CHECK(cosine(reset, encode(enc, "I forgot my password, how can I reset it?")) >
        cosine(reset, encode(enc, "how do i change my email address")));
  CHECK(cosine(reset, encode(enc, "resetting passwords")) > cosine(reset, encode(enc, "where is my order")));

  const auto zh_reset = encode(enc, "如何重置密码");
  CHECK(cosine(zh_reset, encode(enc, "忘记密码了怎么重置")) > cosine(zh_reset, encode(enc, "我的订单在哪里")));
  CHECK(cosine(zh_reset, encode(enc, "忘记密码了怎么重置")) > cosine(zh_reset, encode(enc, "如何修改邮箱地址")));
}

TEST_CASE("IDF learned from the corpus down-weights common words", "[encoder]") {
  auto made_plain = make_encoder();
  auto made_fitted = make_encoder();
  HashingEncoder& plain = *made_plain;
  HashingEncoder& fitted = *made_fitted;
  fitted.adapt(kCorpus);
  // "how do i" is in most of the corpus; with IDF the topic words dominate,
  // so two questions sharing only the filler drift apart.
  const float plain_sim = cosine(encode(plain, "how do i open a bank account"), encode(plain, "how do i reset my password"));
  const float fitted_sim =
      cosine(encode(fitted, "how do i open a bank account"), encode(fitted, "how do i reset my password"));
  CHECK(fitted_sim < plain_sim);
}

TEST_CASE("Invalid UTF-8 is refused by the encoder", "[encoder]") {
  auto made = make_encoder();
  HashingEncoder& enc = *made;
  std::vector<float> out;
  const auto s = enc.encode({"fine", std::string("bad\xff")}, out);
  CHECK(s.code() == rapidqa::StatusCode::kInvalidArgument);
  CHECK(s.message().find("text 1") != std::string::npos);
}

TEST_CASE("Bad hashing options are refused by name, not fixed", "[encoder]") {
  const auto refused = [](rapidqa::HashingEncoderOptions options, const std::string& field) {
    const auto encoder = HashingEncoder::create(options);
    REQUIRE_FALSE(encoder.is_ok());
    CHECK(encoder.status().code() == rapidqa::StatusCode::kInvalidArgument);
    INFO(encoder.status().message());
    CHECK(encoder.status().message().find(field) != std::string::npos);
  };
  rapidqa::HashingEncoderOptions o;
  o.dimension = 0;
  refused(o, "dimension");
  o.dimension = 65537;
  refused(o, "dimension");
  o = {};
  o.char_ngram_min = 0;
  refused(o, "char_ngram_min");
  o = {};
  o.char_ngram_min = 6;
  o.char_ngram_max = 5;
  refused(o, "char_ngram_max");
  o = {};
  o.char_ngram_weight = -1.0f;
  refused(o, "char_ngram_weight");
  o = {};
  o.cjk_bigram_weight = std::nanf("");
  refused(o, "cjk_bigram_weight");
  CHECK(HashingEncoder::create({}).is_ok());
}

TEST_CASE("The learned state restores the same vectors and the same fingerprint", "[encoder]") {
  const std::vector<std::string> corpus = {"how do i reset my password", "how do i close my account",
                                           "where is my order", "how do i change my email"};
  auto trained = HashingEncoder::create();
  REQUIRE(trained);
  auto fresh = HashingEncoder::create();
  REQUIRE(fresh);
  const std::string untrained = (*fresh)->fingerprint();
  CHECK((*trained)->learned_state().empty());
  CHECK((*trained)->fingerprint() == untrained);
  (*trained)->adapt(corpus);
  const std::string state = (*trained)->learned_state();
  REQUIRE_FALSE(state.empty());
  CHECK((*trained)->fingerprint() != untrained);

  REQUIRE((*fresh)->restore_learned_state(state).is_ok());
  CHECK((*fresh)->fingerprint() == (*trained)->fingerprint());
  CHECK((*fresh)->learned_state() == state);
  std::vector<float> a, b;
  REQUIRE((*trained)->encode({"how do i reset my email"}, a).is_ok());
  REQUIRE((*fresh)->encode({"how do i reset my email"}, b).is_ok());
  CHECK(a == b);

  // Options that change vectors change the fingerprint.
  rapidqa::HashingEncoderOptions other;
  other.seed = 7;
  CHECK((*HashingEncoder::create(other))->fingerprint() != untrained);

  // Bytes that are not a state are refused and change nothing.
  const std::string before = (*fresh)->fingerprint();
  CHECK((*fresh)->restore_learned_state("garbage").code() == rapidqa::StatusCode::kInvalidArgument);
  CHECK((*fresh)->restore_learned_state(state.substr(0, state.size() - 3)).code() ==
        rapidqa::StatusCode::kInvalidArgument);
  // The pairs are written ordered by hash; two swapped (or one repeated)
  // is not a state this encoder wrote.
  constexpr std::size_t kHeader = 6 + 8 + 4, kPair = 12;
  REQUIRE(state.size() >= kHeader + 2 * kPair);
  std::string swapped = state;
  swapped.replace(kHeader, kPair, state, kHeader + kPair, kPair);
  swapped.replace(kHeader + kPair, kPair, state, kHeader, kPair);
  CHECK((*fresh)->restore_learned_state(swapped).code() == rapidqa::StatusCode::kInvalidArgument);
  std::string repeated = state;
  repeated.replace(kHeader + kPair, kPair, state, kHeader, kPair);
  CHECK((*fresh)->restore_learned_state(repeated).code() == rapidqa::StatusCode::kInvalidArgument);
  CHECK((*fresh)->fingerprint() == before);
  REQUIRE((*fresh)->restore_learned_state("").is_ok());
  CHECK((*fresh)->fingerprint() == untrained);
}

TEST_CASE("A feature's bucket is its hash modulo the dimension, without a division", "[encoder]") {
  std::uint64_t state = 0x1234;
  auto next = [&] { return state = rapidqa::text::mix64(state + 0x9e3779b97f4a7c15ULL); };
  for (const std::uint64_t buckets : {std::uint64_t{1}, std::uint64_t{2}, std::uint64_t{3}, std::uint64_t{7},
                                      std::uint64_t{384}, std::uint64_t{768}, std::uint64_t{65536},
                                      std::uint64_t{65535}, (std::uint64_t{1} << 32) + 1, ~std::uint64_t{0} / 3,
                                      ~std::uint64_t{0}}) {
    CAPTURE(buckets);
    const rapidqa::text::BucketOf bucket(buckets);
    for (const std::uint64_t hash : {std::uint64_t{0}, std::uint64_t{1}, buckets - 1, buckets, ~std::uint64_t{0},
                                     ~std::uint64_t{0} - 1}) {
      CHECK(bucket.of(hash) == hash % buckets);
    }
    for (int i = 0; i < 20000; ++i) {
      const std::uint64_t hash = next();
      if (bucket.of(hash) != hash % buckets) FAIL_CHECK("hash " << hash);
    }
  }
}

TEST_CASE("Words met before give the same vectors as words met the first time", "[encoder]") {
  // The encoder keeps each word's terms; a repeat must add exactly what a
  // first encounter adds, and a new IDF must not reuse the old terms.
  const std::vector<std::string> questions = {"how do i reset my password", "reset my password please",
                                              "如何重置密码 password", "a b c supercalifragilisticexpialidocious",
                                              "how do i open a bank account"};
  auto warm = make_encoder();
  warm->adapt(kCorpus);
  std::vector<std::vector<float>> first;
  for (const auto& q : questions) first.push_back(encode(*warm, q));
  for (std::size_t i = 0; i < questions.size(); ++i) {
    CHECK(encode(*warm, questions[i]) == first[i]);  // every word cached now
    auto fresh = make_encoder();
    fresh->adapt(kCorpus);
    CHECK(encode(*fresh, questions[i]) == first[i]);  // nothing cached
  }
  // A new corpus: new IDF, so new vectors, the same as a fresh encoder's.
  const std::vector<std::string> other = {"password password password", "reset", "bank account"};
  warm->adapt(other);
  auto fresh = make_encoder();
  fresh->adapt(other);
  for (const auto& q : questions) CHECK(encode(*warm, q) == encode(*fresh, q));
  REQUIRE(warm->restore_learned_state("").is_ok());
  auto plain = make_encoder();
  for (const auto& q : questions) CHECK(encode(*warm, q) == encode(*plain, q));
}

TEST_CASE("Encoding from several threads at once fills the word cache safely", "[encoder]") {
  auto shared = make_encoder();
  shared->adapt(kCorpus);
  std::vector<std::vector<float>> expected;
  {
    auto reference = make_encoder();
    reference->adapt(kCorpus);
    for (const auto& q : kCorpus) expected.push_back(encode(*reference, q));
  }
  std::vector<std::thread> threads;
  std::vector<int> mismatches(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 50; ++round) {
        for (std::size_t i = 0; i < kCorpus.size(); ++i) {
          const std::size_t q = (i + static_cast<std::size_t>(t) * 3) % kCorpus.size();
          std::vector<float> v(shared->dimension());
          if (!shared->encode_one(kCorpus[q], v.data()).is_ok() || v != expected[q]) ++mismatches[t];
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  CHECK(mismatches == std::vector<int>(4, 0));
}

TEST_CASE("squared_norm sums in double over every length, and passes NaN and infinity on", "[encoder]") {
  for (std::size_t d = 0; d <= 40; ++d) {
    std::vector<float> v(d);
    double plain = 0;
    for (std::size_t i = 0; i < d; ++i) {
      v[i] = 0.1f * static_cast<float>(i) - 1.3f;
      plain += static_cast<double>(v[i]) * v[i];
    }
    REQUIRE(rapidqa::squared_norm(v.data(), d) == Approx(plain).epsilon(1e-12));
  }
  std::vector<float> v(384, 0.5f);
  REQUIRE(rapidqa::squared_norm(v.data(), v.size()) == 96.0);
  v[383] = std::numeric_limits<float>::quiet_NaN();
  REQUIRE(std::isnan(rapidqa::squared_norm(v.data(), v.size())));
  v[383] = std::numeric_limits<float>::infinity();
  REQUIRE(std::isinf(rapidqa::squared_norm(v.data(), v.size())));
}

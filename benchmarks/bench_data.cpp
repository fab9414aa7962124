#include "bench_data.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <iterator>
#include <unordered_set>
#include <utility>

namespace rapidqa::bench {
namespace {

constexpr std::uint64_t kEntrySeed = 0x6b6e6f776c656467ULL;
constexpr std::uint64_t kParaphraseSeed = 0x7061726170687261ULL;

std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

template <typename T>
void shuffle(std::vector<T>& items, Rng& rng) {  // Fisher-Yates; std::shuffle is not portable
  for (std::size_t i = items.size(); i > 1; --i) std::swap(items[i - 1], items[rng.below(i)]);
}

std::string join(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& w : words) {
    if (!out.empty()) out += ' ';
    out += w;
  }
  return out;
}

// The kWordsPerQuestion distinct vocabulary words of entry i, in question order.
std::vector<std::string> entry_words(std::size_t i) {
  Rng rng(mix(kEntrySeed ^ i));
  const auto& vocab = vocabulary();
  std::vector<std::size_t> picked;
  while (picked.size() < kWordsPerQuestion) {
    const std::size_t w = rng.below(vocab.size());
    if (std::find(picked.begin(), picked.end(), w) == picked.end()) picked.push_back(w);
  }
  std::vector<std::string> words;
  for (auto w : picked) words.push_back(vocab[w]);
  return words;
}

std::string question_from(const std::vector<std::string>& words, std::size_t topic) {
  return "How do I " + join(words) + " for topic " + std::to_string(topic) + "?";
}

}  // namespace

std::uint64_t Rng::next() {
  state_ += 0x9e3779b97f4a7c15ULL;
  std::uint64_t z = state_;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

const std::vector<std::string>& vocabulary() {
  static const std::vector<std::string> words = [] {
    static const char* const kOnsets[] = {"b", "d", "f", "g", "k", "l", "m", "n", "p", "r",
                                          "s", "t", "v", "z", "br", "st", "tr", "pl", "gr", "sh"};
    static const char* const kVowels[] = {"a", "e", "i", "o", "u", "ai", "ou"};
    static const char* const kCodas[] = {"", "", "", "n", "r", "s", "t", "l"};
    Rng rng(0x766f636162ULL);
    std::vector<std::string> out;
    std::unordered_set<std::string> seen;
    while (out.size() < kVocabularySize) {
      const std::size_t syllables = 2 + rng.below(3);
      std::string word;
      for (std::size_t s = 0; s < syllables; ++s) {
        word += kOnsets[rng.below(std::size(kOnsets))];
        word += kVowels[rng.below(std::size(kVowels))];
      }
      word += kCodas[rng.below(std::size(kCodas))];
      if (seen.insert(word).second) out.push_back(std::move(word));
    }
    return out;
  }();
  return words;
}

KnowledgeEntry generated_entry(std::size_t i, std::size_t alternates) {
  KnowledgeEntry e;
  e.id = "gen-" + std::to_string(i);
  const auto words = entry_words(i);
  e.question = question_from(words, i);
  Rng rng(mix(kEntrySeed ^ ~i));
  if (alternates >= 1) {
    auto shuffled = words;
    shuffle(shuffled, rng);
    e.alternates.push_back(question_from(shuffled, i));
  }
  if (alternates >= 2) {
    auto dropped = words;
    dropped.erase(dropped.begin() + static_cast<std::ptrdiff_t>(rng.below(dropped.size())));
    dropped.erase(dropped.begin() + static_cast<std::ptrdiff_t>(rng.below(dropped.size())));
    e.alternates.push_back("How can I " + join(dropped) + " in topic " + std::to_string(i) + "?");
  }
  e.answer = "For topic " + std::to_string(i) + ", open the " + words[0] + " settings, choose " + words[1] +
             " and confirm with " + words[2] + ". Generated answer " + e.id + ".";
  return e;
}

std::vector<KnowledgeEntry> generated_entries(std::size_t count, std::size_t alternates) {
  std::vector<KnowledgeEntry> entries;
  entries.reserve(count);
  for (std::size_t i = 0; i < count; ++i) entries.push_back(generated_entry(i, alternates));
  return entries;
}

Answer typical_answer(std::size_t i) {
  const auto entry = generated_entry(i, 0);
  Answer a;
  a.text = entry.answer;
  a.score = 0.9f;
  a.tier = AnswerTier::kKnowledge;
  a.matches = {{entry.id, 0.9f}, {"gen-" + std::to_string(i + 1), 0.6f}, {"gen-" + std::to_string(i + 2), 0.5f}};
  return a;
}

std::string paraphrase_of(std::size_t i, std::uint64_t variant) {
  Rng rng(mix(kParaphraseSeed ^ mix(i) ^ (variant * 0x2545f4914f6cdd1dULL)));
  auto words = entry_words(i);
  words.erase(words.begin() + static_cast<std::ptrdiff_t>(rng.below(words.size())));
  words.erase(words.begin() + static_cast<std::ptrdiff_t>(rng.below(words.size())));
  const auto& vocab = vocabulary();
  for (int extra = 0; extra < 2; ++extra) words.push_back(vocab[rng.below(vocab.size())]);
  shuffle(words, rng);
  return "What is the way to " + join(words) + " in topic " + std::to_string(i) + "?";
}

std::string reworded_question(std::size_t i, std::size_t rewording) {
  // Only the words of the canonical template (how, do, i, for, topic),
  // repeated or left out around the content words: in a base without
  // alternates even "can" would be an unseen word of maximal IDF. Lowest
  // measured cosine over the first 1000 entries: 0.968 (1k base), 0.960
  // (10k), 0.958 (100k without alternates), against the 0.92 threshold.
  static const std::pair<const char*, const char*> kTemplates[kRewordings] = {
      {"Do I", "for topic"},         {"I", "for topic"},           {"", "for topic"},
      {"How I", "for topic"},        {"How how do I", "for topic"}, {"How do do I", "for topic"},
      {"Do do I", "for topic"},      {"How do I I", "for topic"},   {"How do I", "for topic topic"},
      {"How do I", "for for topic"},
  };
  const auto& [prefix, suffix] = kTemplates[rewording % kRewordings];
  std::string question = *prefix ? std::string(prefix) + " " : std::string();
  return question + join(entry_words(i)) + " " + suffix + " " + std::to_string(i) + "?";
}

std::vector<float> random_unit_vectors(std::size_t count, std::size_t dimension, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<float> v(count * dimension);
  for (std::size_t i = 0; i < count; ++i) {
    float* row = v.data() + i * dimension;
    double norm = 0;
    for (std::size_t d = 0; d < dimension; ++d) {
      row[d] = rng.unit() * 2.0f - 1.0f;
      norm += static_cast<double>(row[d]) * row[d];
    }
    const auto inv = static_cast<float>(1.0 / std::sqrt(norm));
    for (std::size_t d = 0; d < dimension; ++d) row[d] *= inv;
  }
  return v;
}

bool large_sizes_enabled() {
  const char* value = std::getenv("RAPIDQA_BENCH_LARGE");
  return value != nullptr && *value != '\0' && std::string(value) != "0";
}

const std::vector<std::string>& english_questions() {
  static const std::vector<std::string> questions = {
      "How do I reset my password?",
      "Where can I download the invoice for my last order?",
      "Can I change the delivery address after the order has shipped?",
      "What payment methods do you accept for international customers?",
      "Why was my account locked after three failed sign-in attempts?",
      "HOW LONG does a refund take to reach my credit card?!",
      "Is there a student discount, and how do I apply for it?",
      "I can't find the   settings page on the mobile app — where is it?",
  };
  return questions;
}

const std::vector<std::string>& chinese_questions() {
  static const std::vector<std::string> questions = {
      "如何重置我的密码？",
      "我在哪里可以下载上一个订单的发票？",
      "订单发货后还能修改收货地址吗？",
      "你们接受哪些国际支付方式？",
      "为什么三次登录失败后我的账户被锁定了？",
      "退款需要多长时间才能到账？",
      "有没有学生折扣，怎么申请？",
      "手机ＡＰＰ里找不到设置页面，在哪里？",
  };
  return questions;
}

}  // namespace rapidqa::bench

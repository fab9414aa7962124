#include "cache/near_miss_guard.h"

#include <algorithm>
#include <set>
#include <stdexcept>

#include "text/feature_hash.h"
#include "text/lexical_tokenizer.h"

namespace rapidqa::cache {
namespace {

std::multiset<std::string> numbers_in(std::string_view text) {
  std::multiset<std::string> numbers;
  std::string current;
  for (char c : text) {
    if (c >= '0' && c <= '9') {
      current.push_back(c);
    } else if (!current.empty()) {
      numbers.insert(current);
      current.clear();
    }
  }
  if (!current.empty()) numbers.insert(current);
  return numbers;
}

}  // namespace

const NearMissGuard::WordSlot* NearMissGuard::find_word(std::string_view word) const {
  if (word.empty()) return nullptr;
  const std::size_t mask = word_flags_.size() - 1;
  for (std::size_t i = text::fnv1a(text::kFnvOffset, word) & mask;; i = (i + 1) & mask) {
    if (word_flags_[i].word.empty()) return nullptr;
    if (word_flags_[i].word == word) return &word_flags_[i];
  }
}

NearMissGuard::WordSlot& NearMissGuard::slot_for(std::string_view word) {
  const std::size_t mask = word_flags_.size() - 1;
  std::size_t i = text::fnv1a(text::kFnvOffset, word) & mask;
  while (!word_flags_[i].word.empty() && word_flags_[i].word != word) i = (i + 1) & mask;
  if (word_flags_[i].word.empty()) word_flags_[i].word = std::string(word);
  return word_flags_[i];
}

NearMissGuard::NearMissGuard() {
  const std::vector<std::string> negations{
      "not",    "no",     "never",    "cant",    "cannot",   "dont",    "doesnt", "didnt", "wont", "isnt", "arent",
      "wasnt",  "havent", "hasnt",    "couldnt", "shouldnt", "without", "unable", "不",    "没",   "别",   "未",
      "无法",   "非"};
  const std::vector<std::pair<std::vector<std::string>, std::vector<std::string>>> opposites{
          {{"open", "opening", "opened"}, {"close", "closing", "closed"}},
          {{"activate", "activation", "enable", "unlock", "unfreeze", "unblock"},
           {"deactivate", "deactivation", "disable", "lock", "freeze", "block", "cancel"}},
          {{"increase", "raise", "higher", "more", "up"}, {"decrease", "lower", "reduce", "less", "down"}},
          {{"add", "create"}, {"remove", "delete"}},
          {{"start", "begin"}, {"stop", "end"}},
          {{"buy", "purchase"}, {"sell", "return", "refund"}},
          {{"deposit"}, {"withdraw", "withdrawal"}},
          {{"login", "log", "sign"}, {"logout"}},
          {{"subscribe"}, {"unsubscribe"}},
          {{"place"}, {"cancel"}},
          {{"开户", "开通", "开卡", "激活", "启用"}, {"销户", "注销", "关闭", "停用", "挂失"}},
          {{"提高", "增加", "上调", "调高", "提升"}, {"降低", "减少", "下调", "调低"}},
          {{"冻结"}, {"解冻", "解除冻结"}},
          {{"存款", "存钱", "存入"}, {"取款", "取钱", "取出"}},
          {{"登录", "登陆"}, {"退出", "登出"}},
          {{"下单", "购买", "买"}, {"取消订单", "退货", "卖"}},
  };
  // One bit per side of each pair, after the negation bit.
  if (1 + 2 * opposites.size() > sizeof(TermFlags) * 8) throw std::logic_error("NearMissGuard: too many opposite pairs");
  std::size_t terms = negations.size();
  for (const auto& [left, right] : opposites) terms += left.size() + right.size();
  std::size_t slots = 16;
  while (slots < 2 * terms) slots *= 2;
  word_flags_.resize(slots);  // at most half full: every probe ends at a free slot
  for (const auto& term : negations) add_term(term, 1);
  for (std::size_t i = 0; i < opposites.size(); ++i) {
    const auto& [left, right] = opposites[i];
    for (const auto& term : left) add_term(term, TermFlags{1} << (1 + 2 * i));
    for (const auto& term : right) add_term(term, TermFlags{1} << (2 + 2 * i));
    opposite_names_.emplace_back(left.front(), right.front());
  }
}

void NearMissGuard::add_term(const std::string& term, TermFlags flag) {
  // A term matches a whole word (English) or a substring of CJK text
  // (Chinese has no spaces between words).
  const bool cjk = !term.empty() && static_cast<unsigned char>(term[0]) >= 0x80;
  if (!cjk) {
    slot_for(term).flags |= flag;
    return;
  }
  const auto same = std::find_if(cjk_flags_.begin(), cjk_flags_.end(), [&](const auto& t) { return t.first == term; });
  if (same == cjk_flags_.end()) cjk_flags_.emplace_back(term, flag);
  else same->second |= flag;
}

NearMissGuard::TermFlags NearMissGuard::flags_of(std::string_view question) const {
  TermFlags flags = 0;
  text::for_each_lexical_token(question, [&](const text::LexicalToken& token) {
    if (const WordSlot* slot = find_word(token.text)) flags |= slot->flags;
  });
  const bool has_cjk = std::any_of(question.begin(), question.end(), [](char c) { return static_cast<unsigned char>(c) >= 0x80; });
  if (has_cjk) {
    for (const auto& [term, flag] : cjk_flags_) {
      if (question.find(term) != std::string_view::npos) flags |= flag;
    }
  }
  return flags;
}


std::string NearMissGuard::conflict(std::string_view a, std::string_view b) const {
  const TermFlags fa = flags_of(a), fb = flags_of(b);
  if ((fa & 1) != (fb & 1)) return "negation";
  for (std::size_t i = 0; i < opposite_names_.size(); ++i) {
    const bool a_left = fa >> (1 + 2 * i) & 1, a_right = fa >> (2 + 2 * i) & 1;
    const bool b_left = fb >> (1 + 2 * i) & 1, b_right = fb >> (2 + 2 * i) & 1;
    // One question only on one side, the other only on the other side.
    if ((a_left && !a_right && b_right && !b_left) || (a_right && !a_left && b_left && !b_right)) {
      return opposite_names_[i].first + "/" + opposite_names_[i].second;
    }
  }
  if (numbers_in(a) != numbers_in(b)) return "number";
  return "";
}

}  // namespace rapidqa::cache

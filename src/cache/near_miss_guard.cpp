#include "cache/near_miss_guard.h"

#include <algorithm>
#include <set>

#include "text/lexical_tokenizer.h"

namespace rapidqa::cache {
namespace {

// A term matches a whole word (English) or a substring of CJK text (Chinese
// has no spaces between words).
bool contains_term(std::string_view text, const std::vector<text::LexicalToken>& tokens, const std::string& term) {
  const bool cjk_term = !term.empty() && static_cast<unsigned char>(term[0]) >= 0x80;
  if (cjk_term) return text.find(term) != std::string_view::npos;
  return std::any_of(tokens.begin(), tokens.end(), [&](const text::LexicalToken& t) { return t.text == term; });
}

bool contains_any(std::string_view text, const std::vector<text::LexicalToken>& tokens,
                  const std::vector<std::string>& terms) {
  return std::any_of(terms.begin(), terms.end(), [&](const std::string& t) { return contains_term(text, tokens, t); });
}

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

NearMissGuard::NearMissGuard()
    : negations_{"not", "no", "never", "cant", "cannot", "dont", "doesnt", "didnt", "wont", "isnt", "arent",
                 "wasnt", "havent", "hasnt", "couldnt", "shouldnt", "without", "unable",
                 "不", "没", "别", "未", "无法", "非"},
      opposites_{
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
      } {}

std::string NearMissGuard::conflict(std::string_view a, std::string_view b) const {
  const auto ta = text::lexical_tokens(a);
  const auto tb = text::lexical_tokens(b);
  if (contains_any(a, ta, negations_) != contains_any(b, tb, negations_)) return "negation";
  for (const auto& [left, right] : opposites_) {
    const bool a_left = contains_any(a, ta, left), a_right = contains_any(a, ta, right);
    const bool b_left = contains_any(b, tb, left), b_right = contains_any(b, tb, right);
    // One question only on one side, the other only on the other side.
    if ((a_left && !a_right && b_right && !b_left) || (a_right && !a_left && b_left && !b_right)) {
      return left.front() + "/" + right.front();
    }
  }
  if (numbers_in(a) != numbers_in(b)) return "number";
  return "";
}

}  // namespace rapidqa::cache

// NearMissGuard: refuses a semantic-cache hit between two questions that are
// close as vectors but ask opposite things: "how do I open an account" and
// "how do I close an account", "为什么不能登录" and "为什么能登录", "transfer
// 100" and "transfer 1000". Lexical and embedding encoders alike score such
// pairs high, because they share almost every word.
//
// Thread safety: immutable after construction; thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace rapidqa::cache {

class NearMissGuard {
 public:
  // The built-in English and Chinese negations and opposite key terms.
  NearMissGuard();

  // Both questions as normalize_text() returns them. Returns the reason
  // ("negation", "open/close", "number") when they must not share an
  // answer, or an empty string when they may.
  std::string conflict(std::string_view cached_question, std::string_view new_question) const;

 private:
  std::vector<std::string> negations_;
  std::vector<std::pair<std::vector<std::string>, std::vector<std::string>>> opposites_;
};

}  // namespace rapidqa::cache

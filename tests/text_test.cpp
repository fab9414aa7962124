#include <catch2/catch.hpp>

#include "rapidqa/text_normalizer.h"
#include "text/lexical_tokenizer.h"
#include "text/utf8.h"

#include <utf8proc.h>

using rapidqa::normalize_text;
using rapidqa::StatusCode;

namespace {
std::string norm(const std::string& s) {
  auto r = normalize_text(s);
  REQUIRE(r.is_ok());
  return r.value();
}
}  // namespace

TEST_CASE("English questions normalise case - spacing and punctuation", "[text]") {
  CHECK(norm("How do I reset my password?") == "how do i reset my password");
  CHECK(norm("  HOW   do I\treset\nmy password ?!  ") == "how do i reset my password");
  CHECK(norm("Can't log in...") == "cant log in");
  CHECK(norm("C++ & e-mail $5") == "c++ e mail $5");  // symbols (+, $) stay, punctuation (&, -) goes
}

TEST_CASE("Unicode case folding and composition", "[text]") {
  CHECK(norm("Straße") == "strasse");
  // Decomposed e + combining acute composes to the same string as precomposed é.
  CHECK(norm("Cafe\xCC\x81") == norm("Caf\xC3\xA9"));
  CHECK(norm("CAFÉ") == "café");
}

TEST_CASE("Full-width forms become half-width", "[text]") {
  CHECK(norm("ＨＥＬＬＯ　ｗｏｒｌｄ１２３") == "hello world123");
  CHECK(norm("如何重置密码？") == "如何重置密码");
  CHECK(norm("如何，重置。密码！") == "如何 重置 密码");
}

TEST_CASE("Chinese text keeps its characters", "[text]") {
  CHECK(norm("我忘记了密码") == "我忘记了密码");
  CHECK(norm("  为什么 不能  登录 ") == "为什么 不能 登录");
}

TEST_CASE("Control and zero-width characters are dropped", "[text]") {
  CHECK(norm(std::string("reset\x01my\x7fpassword")) == "reset my password");
  CHECK(norm("pass\xE2\x80\x8Bword") == "password");  // zero-width space
}

TEST_CASE("Invalid UTF-8 is an error naming the offset", "[text]") {
  auto r = normalize_text(std::string("abc\xff" "def"));
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.status().code() == StatusCode::kInvalidArgument);
  CHECK(r.status().message().find("offset 3") != std::string::npos);
  CHECK_FALSE(normalize_text(std::string("\xe4\xbd")).is_ok());      // truncated sequence
  CHECK_FALSE(normalize_text(std::string("\xc0\xaf")).is_ok());      // overlong encoding
  CHECK_FALSE(normalize_text(std::string("\xed\xa0\x80")).is_ok());  // surrogate
}

TEST_CASE("Empty and oversize questions are refused - never truncated", "[text]") {
  CHECK(normalize_text("").status().code() == StatusCode::kInvalidArgument);
  CHECK(normalize_text("  ?!  ").status().code() == StatusCode::kInvalidArgument);
  rapidqa::NormalizeOptions small;
  small.max_bytes = 8;
  auto r = normalize_text("123456789", small);
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.status().code() == StatusCode::kOutOfRange);
  CHECK(r.status().message().find("9 bytes") != std::string::npos);
}

TEST_CASE("Lexical tokens split words and single CJK characters", "[text]") {
  const auto tokens = rapidqa::text::lexical_tokens("reset 密码 now ok");
  REQUIRE(tokens.size() == 5);
  CHECK(tokens[0].text == "reset");
  CHECK_FALSE(tokens[0].cjk);
  CHECK(tokens[1].text == "密");
  CHECK(tokens[1].cjk);
  CHECK(tokens[2].text == "码");
  CHECK(tokens[3].text == "now");
  const auto mixed = rapidqa::text::lexical_tokens("iphone手机");
  REQUIRE(mixed.size() == 3);
  CHECK(mixed[0].text == "iphone");
  CHECK(mixed[1].text == "手");
}

TEST_CASE("The ASCII character table agrees with Unicode's categories", "[text]") {
  // The inline fast path must answer exactly as utf8proc does.
  for (std::int32_t cp = 0; cp < 0x80; ++cp) {
    const auto category = utf8proc_category(cp);
    const bool space = cp == ' ' || cp == '\t' || cp == '\n' || cp == '\r' || cp == '\v' || cp == '\f' ||
                       category == UTF8PROC_CATEGORY_ZS;
    const bool punctuation = category >= UTF8PROC_CATEGORY_PC && category <= UTF8PROC_CATEGORY_PO;
    const bool letter = category >= UTF8PROC_CATEGORY_LU && category <= UTF8PROC_CATEGORY_LO;
    const bool number = category >= UTF8PROC_CATEGORY_ND && category <= UTF8PROC_CATEGORY_NO;
    INFO("code point " << cp);
    CHECK(rapidqa::text::is_space(cp) == space);
    CHECK(rapidqa::text::is_punctuation(cp) == punctuation);
    CHECK(rapidqa::text::is_letter(cp) == letter);
    CHECK(rapidqa::text::is_number(cp) == number);
  }
  // Past ASCII the tables answer as before.
  CHECK(rapidqa::text::is_space(0x3000));        // ideographic space
  CHECK(rapidqa::text::is_punctuation(0x3002));  // ideographic full stop
  CHECK(rapidqa::text::is_letter(0x4E2D));
  CHECK(rapidqa::text::is_number(0x0663));       // Arabic-Indic three
  CHECK_FALSE(rapidqa::text::is_space(-1));
}

#!/usr/bin/env bash
# The smallest programs that embed rapidqa, in C++ (rapidqa-embed) and in C
# (rapidqa-c-client): each loads the FAQ and answers one question.
#
#   embed_examples.sh [CASE...]   (environment from tests/CMakeLists.txt)
source "$(dirname "$0")/cli_test_lib.sh"
faq=$(need RAPIDQA_FAQ)

case_embed_cpp_example() {
  run "$(need RAPIDQA_EMBED)" "$faq" "How do I reset my password?"
  expect_rc 0
  expect_stdout "entry shop-en-reset-password"
}

case_embed_c_example() {
  run "$(need RAPIDQA_C_CLIENT)" "$faq" "如何重置密码？"
  expect_rc 0
  expect_stdout "entry shop-zh-reset-password"
}

run_cases "$@"

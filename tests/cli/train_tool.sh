#!/usr/bin/env bash
# rapidqa-train's usage errors: each is exit code 2 with a message that
# names the flag and what it needs. (Training itself runs in the
# trained_model fixture and train_test.cpp.)
#
#   train_tool.sh [CASE...]   (environment from tests/CMakeLists.txt)
source "$(dirname "$0")/cli_test_lib.sh"
train=$(need RAPIDQA_TRAIN)
work=$(need RAPIDQA_TEST_WORK)

case_train_tool_names_a_bad_flag() {
  run "$train" --out "$work/unused" --epochs zero
  expect_rc 2
  expect_stderr "--epochs needs a positive integer, not 'zero'"
}

case_train_tool_needs_out() {
  run "$train" --quick
  expect_rc 2
  expect_stderr "--out DIR is required"
}

case_train_tool_checks_heads_divide_hidden() {
  run "$train" --out "$work/unused" --hidden 100 --heads 3
  expect_rc 2
  expect_stderr "--hidden 100 is not a multiple of --heads 3"
}

run_cases "$@"

#!/usr/bin/env bash
# rapidqa-kb and rapidqa-demo --store as a user runs them: import with
# progress, a refused file leaves the store as it was, history, rollback,
# export, stats, a second writer refused, and the demo answering from the
# store after a restart.
#
#   kb_tool.sh [CASE...]   (environment from tests/CMakeLists.txt)
source "$(dirname "$0")/cli_test_lib.sh"
kb=$(need RAPIDQA_KB)
demo=$(need RAPIDQA_DEMO)
faq=$(need RAPIDQA_FAQ)
work="$(need RAPIDQA_TEST_WORK)/kb-tool-$$"
rm -rf "$work"
mkdir -p "$work"
trap 'rm -rf "$work"' EXIT
store="sqlite:$work/faq.db"

case_kb_imports_exports_and_reports() {
  run "$kb" --store "$store" import "$faq"
  expect_rc 0
  expect_stdout "imported .*: [0-9]+ added, 0 updated, 0 unchanged, 0 removed"
  expect_stderr "importing: [0-9]+/[0-9]+ changes"
  run "$kb" --store "$store" export "$work/out.jsonl"
  expect_rc 0
  [[ $(wc -l < "$work/out.jsonl") -eq $(grep -c '"id"' "$faq") ]] || fail_expectation "export has another line count than $faq"
  run "$kb" --store "$store" import "$work/out.jsonl"
  expect_rc 0
  expect_stdout "0 added, 0 updated, [0-9]+ unchanged, 0 removed"
  run "$kb" --store "$store" stats
  expect_rc 0
  expect_stdout '"current_entries":[1-9][0-9]*.*"schema_version":2'
}

case_kb_refuses_a_bad_file_whole() {
  printf '%s\n' '{"id":"a","question":"Question a?","answer":"Answer a"}' > "$work/good.jsonl"
  run "$kb" --store "$store" import "$work/good.jsonl"
  expect_rc 0
  printf '%s\n%s\n' '{"id":"b","question":"Question b?","answer":"Answer b"}' '{"id":"c","question":"?"}' > "$work/bad.jsonl"
  run "$kb" --store "$store" import "$work/bad.jsonl"
  expect_rc 1
  expect_stderr "line 2"
  run "$kb" --store "$store" stats
  expect_stdout '"current_entries":1,'
}

case_kb_history_and_rollback() {
  printf '%s\n' '{"id":"hours","question":"When are you open?","answer":"9 to 5"}' > "$work/v1.jsonl"
  printf '%s\n' '{"id":"hours","question":"When are you open?","answer":"8 to 6"}' > "$work/v2.jsonl"
  run "$kb" --store "$store" import "$work/v1.jsonl"
  run "$kb" --store "$store" import "$work/v2.jsonl"
  expect_stdout "1 updated"
  run "$kb" --store "$store" rollback hours 1
  expect_rc 0
  expect_stdout "entry hours is now version 3 \(equal to version 1\)"
  run "$kb" --store "$store" history hours
  expect_rc 0
  expect_stdout '9 to 5.*"version":1.*8 to 6.*"version":2.*9 to 5.*"version":3'
  run "$kb" --store "$store" rollback hours 9
  expect_rc 1
  expect_stderr "has no version 9"
  run "$kb" --store "$store" rollback hours zero
  expect_rc 2
}

case_demo_answers_from_the_store_after_a_restart() {
  run "$demo" --store "$store" --kb "$faq" --question "How do I reset my password?"
  expect_rc 0
  expect_stderr "into the store"
  run "$demo" --store "$store" --question "How do I reset my password?"
  expect_rc 0
  expect_stdout "To reset your password.*shop-en-reset-password"
}

case_kb_second_writer_is_refused() {
  run "$kb" --store "$store" import "$faq"
  # Another process takes the writer lock and says so through a fifo; the
  # lock is the store's whole one-writer rule, whoever holds it.
  mkfifo "$work/locked"
  (
    exec 9>>"$work/faq.db.lock"
    flock -x 9
    echo locked >"$work/locked"
    exec sleep 60
  ) &
  local holder=$!
  read -r _ <"$work/locked"
  run "$kb" --store "$store" rollback shop-en-reset-password 1
  expect_rc 1
  expect_stderr "is open for writing by .*one process writes a store at a time"
  # Readers are not writers: they open alongside.
  run "$kb" --store "$store" stats
  expect_rc 0
  kill "$holder"
  wait "$holder" 2>/dev/null || true
}

run_cases "$@"

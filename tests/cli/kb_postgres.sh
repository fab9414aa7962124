#!/usr/bin/env bash
# rapidqa-kb and rapidqa-demo on a PostgreSQL store (a private server that
# rapidqa-test-postgres runs for the script): import with progress, export,
# history, rollback, stats, and the demo answering from the store.
#
#   kb_postgres.sh [CASE...]   (environment from tests/CMakeLists.txt)
source "$(dirname "$0")/cli_test_lib.sh"
kb=$(need RAPIDQA_KB)
demo=$(need RAPIDQA_DEMO)
faq=$(need RAPIDQA_FAQ)
postgres=$(need RAPIDQA_TEST_POSTGRES)
work="$(need RAPIDQA_TEST_WORK)/kb-postgres-$$"
rm -rf "$work"
mkdir -p "$work"

coproc PG { "$postgres"; }
pg_in=${PG[1]}
if ! read -r -t 60 store <&"${PG[0]}" || [[ $store != postgresql://* ]]; then
  echo "FAIL: no PostgreSQL server for the test (rapidqa-test-postgres printed '${store:-nothing}')" >&2
  exit 1
fi
stop_server() {
  exec {pg_in}>&-
  wait "$PG_PID" 2>/dev/null
  rm -rf "$work"
}
trap stop_server EXIT

case_kb_on_postgres() {
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

  printf '%s\n' '{"id":"hours","question":"When are you open?","answer":"9 to 5"}' > "$work/v1.jsonl"
  printf '%s\n' '{"id":"hours","question":"When are you open?","answer":"8 to 6"}' > "$work/v2.jsonl"
  run "$kb" --store "$store" import "$work/v1.jsonl"
  expect_stdout "1 added, 0 updated, 0 unchanged, [1-9][0-9]* removed"
  run "$kb" --store "$store" import "$work/v2.jsonl"
  expect_stdout "1 updated"
  run "$kb" --store "$store" rollback hours 1
  expect_rc 0
  expect_stdout "entry hours is now version 3 \(equal to version 1\)"
  run "$kb" --store "$store" history hours
  expect_rc 0
  expect_stdout '9 to 5.*"version":1.*8 to 6.*"version":2.*9 to 5.*"version":3'
  run "$kb" --store "$store" stats
  expect_rc 0
  expect_stdout '"current_entries":1,.*"schema_version":2'

  run "$demo" --store "$store" --kb "$faq" --question "How do I reset my password?"
  expect_rc 0
  expect_stdout "To reset your password.*shop-en-reset-password"
}

case_kb_postgres_unreachable() {
  run "$kb" --store "postgresql://rapidqa:hidden@127.0.0.1:1/none?connect_timeout=2" stats
  expect_rc 1
  expect_stderr "unavailable.*cannot connect"
  [[ $stderr != *hidden* ]] || fail_expectation "the password was printed"
}

run_cases "$@"

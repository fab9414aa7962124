#!/usr/bin/env bash
# rapidqa-eval as a user runs it: the quality bars of the model-free path on
# the LCQMC and BQ development sets (hybrid retrieval with Debian's jieba
# word list), and a broken queries file refused with its line.
#
#   eval_tool.sh [CASE...]   (environment from tests/CMakeLists.txt)
source "$(dirname "$0")/cli_test_lib.sh"
eval_tool=$(need RAPIDQA_EVAL)
data=$(need RAPIDQA_TEST_DATA)/eval
words=/usr/lib/python3/dist-packages/jieba/dict.txt

# top-1 of a set's JSON result, compared with a bar.
top1_at_least() {
  local set=$1 bar=$2
  run "$eval_tool" --kb "$data/$set-dev_kb.jsonl" --queries "$data/$set-dev_queries.tsv" \
    --negpairs "$data/$set-dev_negpairs.tsv" --fusion fitted --word-dictionary "$words" --json
  expect_rc 0
  local top1
  top1=$(printf '%s' "$stdout" | "${RAPIDQA_PYTHON:-python3}" -c 'import json,sys; print(json.load(sys.stdin)["retrieval"]["top1"])')
  if ! awk -v a="$top1" -v b="$bar" 'BEGIN { exit !(a >= b) }'; then
    fail_expectation "$set-dev top-1 $top1 is below $bar"
  fi
}

case_eval_lcqmc_dev_top1() { top1_at_least lcqmc 0.875; }
case_eval_bq_dev_top1() { top1_at_least bq 0.165; }

case_eval_refuses_a_broken_queries_file() {
  local bad="$RAPIDQA_TEST_WORK/eval-bad-queries.tsv"
  printf 'good question\tlcqmc-00001\nno tab on this line\n' >"$bad"
  run "$eval_tool" --kb "$data/lcqmc-dev_kb.jsonl" --queries "$bad"
  expect_rc 1
  expect_stderr "line 2: expected two fields separated by one tab"
}

run_cases "$@"

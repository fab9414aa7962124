#!/usr/bin/env bash
# rapidqa-eval as a user runs it: the quality bars of the model-free path on
# the LCQMC and BQ development sets (hybrid retrieval with Debian's jieba
# word list), the abstention curves over the confidence threshold (the
# other set's questions as the out-of-domain ones), the error-bound
# semantic-cache decision against fixed thresholds on each set's question
# stream, and a broken queries file refused with its line.
#
#   eval_tool.sh [CASE...]   (environment from tests/CMakeLists.txt)
source "$(dirname "$0")/cli_test_lib.sh"
eval_tool=$(need RAPIDQA_EVAL)
data=$(need RAPIDQA_TEST_DATA)/eval
words=/usr/lib/python3/dist-packages/jieba/dict.txt

# top-1 of a set's JSON result, compared with a bar; and its abstention
# curve: a higher confidence threshold answers fewer in-domain questions
# and falls back on more out-of-domain ones.
top1_at_least() {
  local set=$1 bar=$2 other=$3
  run "$eval_tool" --kb "$data/$set-dev_kb.jsonl" --queries "$data/$set-dev_queries.tsv" \
    --negpairs "$data/$set-dev_negpairs.tsv" --ood-queries "$data/$other-dev_queries.tsv" \
    --fusion fitted --word-dictionary "$words" --json
  expect_rc 0
  local verdict
  verdict=$(printf '%s' "$stdout" | "${RAPIDQA_PYTHON:-python3}" -c '
import json, sys
r = json.load(sys.stdin)
bar = float(sys.argv[1])
top1 = r["retrieval"]["top1"]
if top1 < bar:
    print(f"top-1 {top1} is below {bar}"); sys.exit()
curve = r["abstention"]["by_confidence"]
for a, b in zip(curve, curve[1:]):
    if b["in_domain_answered"] > a["in_domain_answered"] or b["out_of_domain_fallback"] < a["out_of_domain_fallback"]:
        print(f"abstention is not monotone between {a} and {b}"); sys.exit()
if curve[-1]["out_of_domain_fallback"] < 0.95:
    print(f"at the highest threshold only {curve[-1][\"out_of_domain_fallback\"]} of out-of-domain questions fall back")
' "$bar")
  [[ -z "$verdict" ]] || fail_expectation "$set-dev: $verdict"
}

case_eval_lcqmc_dev_top1() { top1_at_least lcqmc 0.875 bq; }
case_eval_bq_dev_top1() { top1_at_least bq 0.165 lcqmc; }

# The error-bound mode on a set's stream: wrong hits at or under each target
# (within the 95% interval) and more right hits than any fixed threshold
# with no more wrong ones.
error_bound_beats_fixed() {
  local set=$1
  run "$eval_tool" --kb "$data/$set-dev_kb.jsonl" --queries "$data/$set-dev_queries.tsv" \
    --negpairs "$data/$set-dev_negpairs.tsv" --word-dictionary "$words" --semantic-thresholds 0.92 \
    --semantic-targets 0.01,0.02 --stream-thresholds 0.7,0.75,0.8,0.84,0.88,0.9,0.92,0.94,0.96,0.98 --json
  expect_rc 0
  local verdict
  verdict=$(printf '%s' "$stdout" | "${RAPIDQA_PYTHON:-python3}" -c '
import json, sys
s = json.load(sys.stdin)["semantic_stream"]
if s["decisions"] < 2000:
    print(f"only {s[\"decisions\"]} decisions")
for row in s["rows"]:
    if row["mode"] != "error-bound":
        continue
    if row["false_hit_rate_95"][0] > row["target"]:
        print(f"target {row[\"target\"]}: false-hit rate {row[\"false_hit_rate\"]} is above it")
    if row["hit_rate"] <= row["best_fixed_hit_rate_at_or_under"]:
        print(f"target {row[\"target\"]}: hit rate {row[\"hit_rate\"]} is not above the best fixed threshold\x27s {row[\"best_fixed_hit_rate_at_or_under\"]}")
')
  [[ -z "$verdict" ]] || fail_expectation "$set-dev: $verdict"
}

case_eval_lcqmc_dev_error_bound() { error_bound_beats_fixed lcqmc; }
case_eval_bq_dev_error_bound() { error_bound_beats_fixed bq; }

case_eval_refuses_a_broken_queries_file() {
  local bad="$RAPIDQA_TEST_WORK/eval-bad-queries.tsv"
  printf 'good question\tlcqmc-00001\nno tab on this line\n' >"$bad"
  run "$eval_tool" --kb "$data/lcqmc-dev_kb.jsonl" --queries "$bad"
  expect_rc 1
  expect_stderr "line 2: expected two fields separated by one tab"
}

run_cases "$@"

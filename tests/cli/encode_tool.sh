#!/usr/bin/env bash
# rapidqa-encode on the tiny reference checkpoints: sentence vectors, token
# ids, a bad input line that keeps the output aligned, a missing model.
#
#   encode_tool.sh [CASE...]   (environment from tests/CMakeLists.txt)
source "$(dirname "$0")/cli_test_lib.sh"
encode=$(need RAPIDQA_ENCODE)
models=$(need RAPIDQA_TINY_MODELS)
python=$(need RAPIDQA_PYTHON)

# Two lines in, two unit-length 32-float vectors out (bert-tiny's width).
case_encode_tool_prints_vectors() {
  run_with_input 'how do i reset my password\n如何重置密码\n' \
    "$encode" --model "$models/bert-tiny" --normalize --pooling cls
  expect_rc 0
  "$python" -c '
import json, sys
rows = [json.loads(l) for l in sys.stdin]
assert len(rows) == 2 and all(len(r) == 32 for r in rows), rows
assert all(abs(sum(x * x for x in r) - 1) < 1e-4 for r in rows), "not unit length"' <<<"$stdout" ||
    fail_expectation "two unit-length vectors of 32 floats"
}

case_encode_tool_prints_token_ids() {
  run_with_input 'How do I reset my password?\n' "$encode" --model "$models/distilbert-tiny" --tokens
  expect_rc 0
  expect_stdout '^\[2,78,81,73,88,72,89,104,25,3\]'
}

# Line 2 is not UTF-8: it prints null in its place (stdout stays aligned
# with stdin) and is named on stderr; the run still ends in exit code 1.
case_encode_tool_keeps_line_alignment_on_bad_input() {
  run_with_input 'good line\nbad \377 line\nanother\n' \
    "$encode" --model "$models/bert-tiny-torchscript" --tokens
  expect_rc 1
  expect_stdout '^\[[^]]*\]
null
\[[^]]*\]$'
  expect_stderr "line 2: .*UTF-8"
}

# A sentence-transformers directory needs no flags: its modules and prompts
# make the vectors the reference made; the flags win over it.
case_encode_tool_reads_sentence_transformers_directories() {
  run_with_input 'How do I reset my password?\n' "$encode" --model "$models/st-mean-prompts" --tokens
  expect_rc 0
  "$python" -c '
import json, sys
ref = json.load(open(sys.argv[1] + "/reference.json"))
case = [c for m in ref["sentence_transformers"] if m["model"] == "st-mean-prompts" for c in m["cases"]]
assert json.loads(sys.stdin.read()) == case[0]["token_ids"][0], "not the query prompt and max_seq_length"' \
    "$models" <<<"$stdout" || fail_expectation "the query prompt's tokens, cut at 12"
  run_with_input 'How do I reset my password?\n' "$encode" --model "$models/st-mean-prompts" --prompt-name passage
  expect_rc 0
  "$python" -c '
import json, sys
ref = json.load(open(sys.argv[1] + "/reference.json"))
case = [c for m in ref["sentence_transformers"] if m["model"] == "st-mean-prompts" for c in m["cases"]][1]
got, want = json.loads(sys.stdin.read()), case["vectors"][0]
assert len(got) == len(want) and max(abs(a - b) for a, b in zip(got, want)) < 1e-4, (got, want)' \
    "$models" <<<"$stdout" || fail_expectation "the passage prompt's vector"
  run_with_input 'x\n' "$encode" --model "$models/st-dense-legacy-layout" --pooling mean
  expect_rc 1
  expect_stderr "the Dense module takes 64 values but pooling .mean. gives 32"
  run_with_input 'x\n' "$encode" --model "$models/st-mean-prompts" --prompt-name instruction
  expect_rc 1
  expect_stderr "no prompt named 'instruction'"
  run "$encode" --model "$models/st-mean-prompts" --pooling median
  expect_rc 2
  expect_stderr "pooling 'median' is not one of"
}

case_encode_tool_names_missing_model() {
  run "$encode" --model /no/such/model
  expect_rc 1
  expect_stderr "/no/such/model"
  expect_stdout_empty
}

run_cases "$@"

#!/usr/bin/env bash
# rapidqa-quantize as a user runs it: the per-layer report, then the output
# directory in rapidqa-encode and rapidqa-demo like any model directory,
# and a precision table that does not exist.
#
#   quantize_tool.sh [CASE...]   (environment from tests/CMakeLists.txt)
source "$(dirname "$0")/cli_test_lib.sh"
quantize=$(need RAPIDQA_QUANTIZE)
work=$(need RAPIDQA_TEST_WORK)
models=$(need RAPIDQA_TINY_MODELS)
# Written by the first case (the cli_quantized_model fixture), read by the
# next two.
quantized=$work/cli-quantized-model

case_quantize_tool_prints_the_report() {
  run "$quantize" --model "$models/bert-tiny" --out "$quantized" --mode static --precision int8 \
    --calib "$(need RAPIDQA_FAQ)" --calib-limit 64
  expect_rc 0
  expect_stdout "encoder.layer.1.intermediate +64x32 int8-static +moving-average\+bc.*weights: .*cosine to FP32"
  expect_stdout "wrote $quantized"
}

case_quantized_model_loads_in_encode_tool() {
  run_with_input 'how do i reset my password\n' "$(need RAPIDQA_ENCODE)" --model "$quantized" --normalize
  expect_rc 0
  "$(need RAPIDQA_PYTHON)" -c '
import json, sys
rows = [json.loads(l) for l in sys.stdin]
assert len(rows) == 1 and len(rows[0]) == 32, rows' <<<"$stdout" ||
    fail_expectation "one vector of 32 floats"
}

case_quantized_model_answers_in_demo() {
  run "$(need RAPIDQA_DEMO)" --kb "$(need RAPIDQA_TEST_DATA)/context_faq.jsonl" --model "$quantized" \
    --json --question "Where is my order?"
  expect_rc 0
  expect_stdout '"entry_id":"order-status"'
}

case_quantize_tool_names_a_bad_table() {
  run "$quantize" --model "$models/bert-tiny" --out "$work/never-written" --precision /no/such/table
  expect_rc 1
  expect_stderr "precision table '/no/such/table'"
  [[ ! -e $work/never-written ]] || fail_expectation "nothing written for a refused table"
}

run_cases "$@"

#!/usr/bin/env bash
# rapidqa-prune on the trained model: one structured step with
# distillation, the report, then the pruned directory in rapidqa-encode and
# through the quantizer (pruning then INT8), the dense export loading in
# PyTorch; unstructured global L1 pruning; a refused fraction.
#
#   prune_tool.sh [CASE...]   (environment from tests/CMakeLists.txt)
source "$(dirname "$0")/cli_test_lib.sh"
prune=$(need RAPIDQA_PRUNE)
work=$(need RAPIDQA_TEST_WORK)
trained=$(need RAPIDQA_TRAINED_MODEL)
# Written by the first case (the cli_pruned_model fixture), read by the
# next three.
pruned=$work/cli-pruned-model

case_prune_tool_prints_the_report() {
  run "$prune" --model "$trained" --out "$pruned" --heads 0.25 --ffn 0.4 --epochs 1 --export-dense "$pruned-dense"
  expect_rc 0
  expect_stdout "encoder.layer.1 +4 -> [0-3] .*parameters: [0-9]+ -> [0-9]+ .*latency: .*held-out top-1: "
  # Both times and their ratio, from the one side-by-side measurement.
  expect_stdout "latency: [0-9.]+ ms -> [0-9.]+ ms \([0-9.]+x as fast; both timed side by side in this process"
  expect_stdout "wrote $pruned"
}

case_pruned_model_loads_in_encode_tool() {
  run_with_input 'how do i reset my password\n' "$(need RAPIDQA_ENCODE)" --model "$pruned" --normalize
  expect_rc 0
  "$(need RAPIDQA_PYTHON)" -c '
import json, sys
rows = [json.loads(l) for l in sys.stdin]
assert len(rows) == 1 and len(rows[0]) > 0, rows' <<<"$stdout" ||
    fail_expectation "one non-empty vector"
}

case_pruned_model_quantizes() {
  run "$(need RAPIDQA_QUANTIZE)" --model "$pruned" --out "$pruned-int8" --precision int8 --calib-limit 64
  expect_rc 0
  expect_stdout "encoder.layer.1.intermediate .*int8-dynamic"
}

case_pruned_dense_export_loads_in_pytorch() {
  run "$(need RAPIDQA_PYTHON)" -c "
import sys, json
sys.path.insert(0, '$(need RAPIDQA_REFERENCE_DIR)')
import reference_bert as rb, torch
d = '$pruned-dense'
cfg = json.load(open(d + '/config.json'))
sd = rb.read_safetensors(d + '/model.safetensors')[0]
m = rb.build_module(cfg, {k: v for k, v in sd.items() if not k.startswith('pooler')}, pooler=False)
print('ok', sum(p.numel() for p in m.parameters()))"
  expect_rc 0
  expect_stdout "^ok [0-9]+"
}

# Zeros, not removed heads: every layer keeps its 4 heads, and about 40% of
# its weights are zero after fine-tuning (which holds the zeros).
case_prune_tool_global_l1_reports_sparsity() {
  run "$prune" --model "$trained" --out "$work/cli-pruned-l1" --method global-l1 --amount 0.4 --epochs 1
  expect_rc 0
  expect_stderr "fine-tuning epoch 1/1"
  expect_stdout "encoder.layer.0 +4 -> 4 .* [3-5][0-9]\.[0-9]%.*model.safetensors: "
}

case_prune_tool_refuses_a_bad_fraction() {
  run "$prune" --model "$trained" --out "$work/never-pruned" --heads 1.5
  expect_rc 1
  expect_stderr "head_fraction must be in"
  [[ ! -e $work/never-pruned ]] || fail_expectation "nothing written for a refused fraction"
}

run_cases "$@"

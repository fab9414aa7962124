#!/usr/bin/env bash
# rapidqa-demo as a user runs it: answers from the bundled FAQ (hashing
# encoder), JSON and statistics, Prometheus metrics, a refused option, and a
# user's model with an extractive reader.
#
#   demo_tool.sh [CASE...]   (environment from tests/CMakeLists.txt)
source "$(dirname "$0")/cli_test_lib.sh"
demo=$(need RAPIDQA_DEMO)
faq=$(need RAPIDQA_FAQ)

case_demo_answers_password_question() {
  run "$demo" --kb "$faq" --question "How do I reset my password?"
  expect_rc 0
  expect_stdout "To reset your password.*shop-en-reset-password"
}

case_demo_answers_paraphrase() {
  run "$demo" --kb "$faq" --question "I forgot my password, how can I reset it?"
  expect_rc 0
  expect_stdout "entry shop-en-reset-password"
}

case_demo_answers_chinese() {
  run "$demo" --kb "$faq" --question "我忘记密码了，怎么重置？"
  expect_rc 0
  expect_stdout "entry shop-zh-reset-password"
}

# The second phrasing normalises to the first, so the result cache answers
# it; with --json the statistics table goes to stderr.
case_demo_json_and_stats() {
  run_with_input 'How do I reset my password?\nhow do i reset my password\n' "$demo" --kb "$faq" --json --stats
  expect_rc 0
  expect_stdout '"tier":"result_cache"'
  expect_stderr "total"
}

case_demo_prints_prometheus_metrics() {
  run "$demo" --kb "$faq" --question "How do I reset my password?" --metrics
  expect_rc 0
  expect_stdout "# TYPE rapidqa_stage_latency_seconds histogram.*rapidqa_asks_total 1"
}

case_demo_rejects_unknown_option() {
  run "$demo" --no-such-option
  expect_rc 2
  expect_stderr "unknown option '--no-such-option'"
  expect_stdout_empty
}

case_demo_with_model_and_reader() {
  local models
  models=$(need RAPIDQA_TINY_MODELS)
  run "$demo" --kb "$(need RAPIDQA_TEST_DATA)/context_faq.jsonl" --model "$models/bert-tiny" \
    --reader "$models/bert-tiny-qa" --json --question "Where is my order?"
  expect_rc 0
  expect_stdout '"extracted_from":"order-status".*"tier":"knowledge"'
}

run_cases "$@"

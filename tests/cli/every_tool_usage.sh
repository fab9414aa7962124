#!/usr/bin/env bash
# Every command-line program in the build answers --help with exit code 0
# and its usage on stdout, and refuses an option it does not know with exit
# code 2 and a message on stderr (and no output on stdout, which a caller
# may be parsing).
#
#   every_tool_usage.sh BUILD_DIR
#
# The programs are found, not listed: every executable rapidqa-* file under
# BUILD_DIR except the test binaries, so a new tool is checked from the day
# it is built. The tools every build has must be among them, so a moved
# build folder cannot make this pass by finding nothing.
source "$(dirname "$0")/cli_test_lib.sh"
build=${1:?usage: every_tool_usage.sh BUILD_DIR}

always_built=(rapidqa-demo rapidqa-embed rapidqa-c-client)
# A build without the models component (RAPIDQA_CORE_ONLY=1) has no model tools.
if [[ ${RAPIDQA_CORE_ONLY:-0} != 1 ]]; then
  always_built+=(rapidqa-encode rapidqa-quantize rapidqa-prune rapidqa-train)
fi

mapfile -t tools < <(find "$build" -type f -perm -u+x -name 'rapidqa-*' \
  ! -name 'rapidqa-*tests' ! -name 'rapidqa-*-test' ! -path '*/CMakeFiles/*' ! -path '*/consumer-check/*' | sort)

case_every_usual_tool_is_found() {
  local name found
  for name in "${always_built[@]}"; do
    found=0
    for tool in "${tools[@]}"; do [[ $(basename "$tool") == "$name" ]] && found=1; done
    [[ $found -eq 1 ]] || fail_expectation "$name not found under $build"
  done
}

case_every_tool_answers_help() {
  local tool
  for tool in "${tools[@]}"; do
    run "$tool" --help
    expect_rc 0
    expect_stdout "usage"
  done
}

case_every_tool_refuses_an_unknown_option() {
  local tool
  for tool in "${tools[@]}"; do
    run "$tool" --no-such-option
    expect_rc 2
    expect_stderr "no-such-option"
    expect_stdout_empty
  done
}

# rapidqa-bench refuses what Google Benchmark does not know, but Google
# Benchmark's own flags still work.
case_bench_keeps_google_benchmark_flags() {
  local bench
  for bench in "${tools[@]}"; do
    [[ $(basename "$bench") == rapidqa-bench ]] || continue
    run "$bench" --benchmark_list_tests=true --benchmark_filter=BM_
    expect_rc 0
    expect_stdout "^BM_"
  done
}

echo "checking ${#tools[@]} programs: $(for t in "${tools[@]}"; do printf '%s ' "$(basename "$t")"; done)"
# Every case; the one argument is the build folder, not a case name.
# shellcheck disable=SC2119
run_cases

# shellcheck shell=bash
# Shared by the command-line test scripts (tests/cli/*_tool.sh). Sourced,
# not run. A script defines its cases as functions named case_NAME and ends
# with `run_cases "$@"`; ctest runs one case per test, by NAME, and running
# the script without arguments runs every case (handy by hand).
#
# Inside a case:
#   run CMD...               runs CMD; sets $stdout, $stderr and $rc
#   run_with_input TEXT CMD...  the same, with TEXT (printf format) on stdin
#   expect_rc N              exit code N (0 success, 1 runtime error, 2 usage error)
#   expect_stdout REGEX      stdout matches REGEX (POSIX ERE; '.' matches a
#   expect_stderr REGEX      newline, '^' is the start of the whole stream)
#   expect_stdout_empty      nothing on stdout (an error printed no result)
# A failed expectation prints what was wanted and the streams, and the case
# fails; every expectation of a case is still checked.
set -uo pipefail
# Byte-wise matching: outputs may hold invalid UTF-8 on purpose, and the
# patterns' Chinese text is matched as bytes.
export LC_ALL=C

stdout='' stderr='' rc=0 last_command=''
case_failures=0
cli_scratch=$(mktemp -d)
trap 'rm -rf "$cli_scratch"' EXIT

# The value of an environment variable that tests/CMakeLists.txt sets, or a
# clear failure naming it.
need() {
  local name=$1
  if [[ -z ${!name:-} ]]; then
    echo "FAIL: $name is not set (the tests' CMakeLists.txt passes it; run through ctest)" >&2
    exit 1
  fi
  printf '%s' "${!name}"
}

run() {
  last_command="$*"
  "$@" >"$cli_scratch/stdout" 2>"$cli_scratch/stderr"
  rc=$?
  stdout=$(cat "$cli_scratch/stdout")
  stderr=$(cat "$cli_scratch/stderr")
}

run_with_input() {
  local input=$1
  shift
  last_command="printf '$input' | $*"
  # shellcheck disable=SC2059  # the input is a printf format on purpose
  printf "$input" | "$@" >"$cli_scratch/stdout" 2>"$cli_scratch/stderr"
  rc=$?
  stdout=$(cat "$cli_scratch/stdout")
  stderr=$(cat "$cli_scratch/stderr")
}

fail_expectation() {
  echo "FAIL: $1"
  echo "  command: $last_command"
  echo "  exit code: $rc"
  echo "  stdout (first 1500 bytes):"
  head -c 1500 <<<"$stdout" | sed 's/^/    /'
  echo "  stderr (first 1500 bytes):"
  head -c 1500 <<<"$stderr" | sed 's/^/    /'
  case_failures=$((case_failures + 1))
}

expect_rc() {
  [[ $rc -eq $1 ]] || fail_expectation "exit code $1 wanted"
}

expect_stdout() {
  [[ $stdout =~ $1 ]] || fail_expectation "stdout should match: $1"
}

expect_stderr() {
  [[ $stderr =~ $1 ]] || fail_expectation "stderr should match: $1"
}

expect_stdout_empty() {
  [[ -z $stdout ]] || fail_expectation "stdout should be empty"
}

# run_cases [NAME...]: runs the named cases (all case_* functions without
# names); exit code 0 only if every expectation held.
run_cases() {
  local names=("$@") failed=0 name
  if [[ ${#names[@]} -eq 0 ]]; then
    mapfile -t names < <(declare -F | awk '$3 ~ /^case_/ { sub(/^case_/, "", $3); print $3 }')
  fi
  for name in "${names[@]}"; do
    if ! declare -F "case_$name" >/dev/null; then
      echo "FAIL: no case named '$name' in $0"
      failed=$((failed + 1))
      continue
    fi
    case_failures=0
    "case_$name"
    if [[ $case_failures -eq 0 ]]; then
      echo "ok: $name"
    else
      echo "FAIL: $name ($case_failures expectation(s) not met)"
      failed=$((failed + 1))
    fi
  done
  [[ $failed -eq 0 ]]
}

#!/usr/bin/env bash
# The command-line tools under hostile input: each case must end with a
# clean error (exit code 1 or 2 and a message), never an abort (134), a
# crash (139), a hang or memory growth. (--help and unknown options:
# every_tool_usage.sh.)
#
#   hostile_tools.sh BUILD_DIR TINY_MODEL_DIR
set -uo pipefail
build=${1:?usage: hostile_tools.sh BUILD_DIR TINY_MODEL_DIR}
model=${2:?usage: hostile_tools.sh BUILD_DIR TINY_MODEL_DIR}
demo=$build/examples/rapidqa-demo
encode=$build/examples/rapidqa-encode
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
failures=0
passed=0

# A sanitized build reserves terabytes of address space for its shadow
# memory: no address-space limit there.
memory_limit=2097152
if [[ -n ${ASAN_OPTIONS:-}${TSAN_OPTIONS:-} ]]; then memory_limit=unlimited; fi

# expect NAME WANTED_RC PATTERN -- COMMAND...: runs COMMAND (60 s at most,
# 2 GiB of address space: an endless read fails fast instead of swapping)
# and checks its exit code and that stdout+stderr match PATTERN.
expect() {
  local name=$1 wanted=$2 pattern=$3
  shift 4
  local out rc
  out=$( (ulimit -v "$memory_limit"; timeout 60 "$@") 2>&1)
  rc=$?
  if [[ $rc -ne $wanted ]] || ! grep -qE -- "$pattern" <<<"$out"; then
    echo "FAIL: $name: exit $rc (wanted $wanted), output:"
    head -c 600 <<<"$out"
    echo
    failures=$((failures + 1))
  else
    echo "ok: $name"
    passed=$((passed + 1))
  fi
}

expect "demo --json with invalid UTF-8 prints a JSON error" 1 '^\{"error":"invalid_argument: question is not valid UTF-8' \
  -- "$demo" --json --question $'\xff'
expect "demo --kb /dev/zero is refused" 1 'line 1 is longer than' -- "$demo" --kb /dev/zero --question hi
expect "demo --preload /dev/zero is refused" 1 'line 1 is longer than' -- "$demo" --preload /dev/zero --question hi
expect "demo reading an endless stdin line stops" 1 'longer than' -- bash -c "'$demo' < /dev/zero"
expect "encode reading an endless stdin line stops" 1 'longer than' -- bash -c "'$encode' --model '$model' < /dev/zero"
expect "encode --threads 100000 is refused" 2 'intra_op' -- bash -c "echo hi | '$encode' --model '$model' --threads 100000"
expect "encode --threads 4294967296 is refused, not wrapped to 0" 2 'intra_op' -- bash -c "echo hi | '$encode' --model '$model' --threads 4294967296"

# A 10 MB question (within the 16 MiB line limit): refused, and the JSON
# error line quotes little of it.
head -c 10000000 /dev/zero | tr '\0' 'q' >"$scratch/long.txt"
echo >>"$scratch/long.txt"
out=$("$demo" --json <"$scratch/long.txt" 2>/dev/null)
rc=$?
if [[ $rc -eq 1 && ${#out} -lt 1000 && $out == *'"error":"out_of_range'* ]]; then
  echo "ok: a 10 MB question is refused without echoing it"
  passed=$((passed + 1))
else
  echo "FAIL: a 10 MB question: exit $rc, ${#out} bytes of output"
  failures=$((failures + 1))
fi

echo "$passed passed, $failures failed"
[[ $failures -eq 0 ]]

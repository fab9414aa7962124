#!/usr/bin/env bash
# Runs one fuzz target once over every file of the given directories
# (libFuzzer -runs=0: the inputs are executed, nothing new is generated);
# directories that do not exist yet are skipped. Exits non-zero when any
# input crashes, leaks or trips a sanitizer. Used by the ctest tests
# fuzz_regressions.<target> (fuzz/CMakeLists.txt).
#
#   fuzz/run_regressions.sh build-asan/fuzz/fuzz_safetensors tests/fuzz_regressions/safetensors fuzz/corpus/safetensors
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../scripts/sanitizers/options.sh
source "$here/../scripts/sanitizers/options.sh" address

target=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
shift
name=${target##*/}
rapidqa_fuzz_target_options "${name#fuzz_}"
dirs=()
for d in "$@"; do
  if [ -d "$d" ]; then dirs+=("$(cd "$d" && pwd)"); else echo "(no $d yet: skipped)"; fi
done
if ((${#dirs[@]} == 0)); then
  echo "no input directories: nothing to run"
  exit 0
fi
# A scratch directory for libFuzzer's own output, so a failing input's
# crash-* file does not land in the source tree.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
exec "$target" -runs=0 -artifact_prefix="$work/" "${dirs[@]}"

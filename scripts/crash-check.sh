#!/usr/bin/env bash
# The crash check at full length: a writer process (rapidqa-store-writer)
# makes numbered changes to a knowledge store and is killed with SIGKILL at
# random moments, KILLS times (200 by default), once on a SQLite file and
# once on a private PostgreSQL server; after the last kill the test checks
# that every change the writer had seen acknowledged is in the store with
# its full content, that none is half-applied, and that an engine reopened
# on the store answers from the latest versions. The [crash] tag also runs
# the PostgreSQL server killed three times under a writing engine. The
# normal suite runs the same cases with 20 kills (docs/store.md).
#
#   scripts/crash-check.sh [KILLS]      (BUILD_DIR: the build folder, ./build)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${BUILD_DIR:-$root/build}
kills=${1:-200}
tests="$build_dir/tests/rapidqa-tests"
if [[ ! -x "$tests" ]]; then
  echo "crash-check: $tests is missing: build first (scripts/setup.sh or cmake --build $build_dir)" >&2
  exit 2
fi
echo "crash-check: $kills kills of a store writer, on SQLite and on PostgreSQL"
start=$(date +%s)
RAPIDQA_CRASH_KILLS=$kills "$tests" "[crash]"
echo "crash-check: passed in $(( $(date +%s) - start )) s"

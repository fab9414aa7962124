#!/usr/bin/env bash
# The restart table of docs/store.md in one run: QAEngine::create on SQLite
# stores of generated entries (two phrasings each), first start against
# restart, with the HashingEncoder at 10k, 100k and 1M entries and with a
# MiniLM-L6-shaped transformer encoder (random weights,
# benchmarks/python/make_load_model.py) at 10k and 100k.
#
# The stores and their warmed copies stay in FIXTURES (default
# build/restart-fixtures, several GB with 1M entries): the first starts,
# tens of minutes at 1M on two cores, are paid once; a later run measures
# the restarts again on the kept stores (delete FIXTURES to measure the
# first starts again).
# Usage: benchmarks/run_restart.sh [BUILD_DIR] [FIXTURES]   (SKIP_LARGE=1: no 1M rows)
set -euo pipefail
if [ "${1:-}" = "--help" ] || [ "${1:-}" = "-h" ]; then
  sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'
  exit 0
fi
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-$root/build}
fixtures=${2:-$build/restart-fixtures}
model=$fixtures/minilm-l6-random
mkdir -p "$fixtures"
[ -f "$model/model.safetensors" ] || /usr/bin/python3 "$root/benchmarks/python/make_load_model.py" "$model" \
  --kb "$root/examples/data/faq.jsonl"
large=1
[ "${SKIP_LARGE:-0}" = 1 ] && large=0
echo "run_restart: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores; fixtures in $fixtures"
RAPIDQA_BENCH_RESTART_DIR=$fixtures RAPIDQA_BENCH_RESTART_LARGE=$large RAPIDQA_BENCH_RESTART_MODEL=$model \
  "$build/benchmarks/rapidqa-bench" --benchmark_filter='BM_EngineStart' --benchmark_counters_tabular=true \
  --benchmark_out="$fixtures/restart.json" --benchmark_out_format=json

#!/usr/bin/env bash
# The tables of docs/search-performance.md in one run: vector search against
# FAISS's indexes (exact and HNSW at 10k, 100k and 1M random vectors, with
# recall), the semantic cache's index at 100k question-shaped vectors, and
# QAEngine::ask on each path (result hit, semantic hit, miss over 1k, 10k
# and 100k entries), each on the CPU's best kernels and again forced to AVX2
# (ONEDNN_MAX_CPU_ISA=AVX2). The comparisons of the two paths (index
# searches, semantic-cache lookups and hits) run in three interleaved rounds.
#
# Output: OUT_DIR/*.json (Google Benchmark) and *.log, then the tables on
# stdout (benchmarks/python/search_tables.py OUT_DIR prints them again).
# About an hour on two cores with 1M rows, most of it building the 1M graph.
# Usage: benchmarks/run_search_tables.sh [BUILD_DIR] [OUT_DIR]
#   SKIP_1M=1: no 1M indexes; SKIP_FAISS=1: not the FAISS side by side nor
#   the 100k question-shaped index (an earlier run's files in OUT_DIR are kept
#   and printed), only what rapidqa's own changes move
set -euo pipefail
if [ "${1:-}" = "--help" ] || [ "${1:-}" = "-h" ]; then
  sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'
  exit 0
fi
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-$root/build}
out=${2:-$build/search-tables}
bench=$build/benchmarks/rapidqa-bench
[ -x "$bench" ] || { echo "run_search_tables: no $bench (build first)" >&2; exit 1; }
mkdir -p "$out"
huge=1
[ "${SKIP_1M:-0}" = 1 ] && huge=0
skip_faiss=${SKIP_FAISS:-0}
{
  echo "run of $([ "$skip_faiss" = 1 ] && echo "rapidqa's own tables (no FAISS)" || echo 'every table'):"
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores"
  echo "flags: $(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx2|avx512f|avx512_vnni|avx512_bf16|amx_int8)$' | tr '\n' ' ')"
  echo "commit: $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "started: $(date -u '+%Y-%m-%d %H:%M UTC')"
} | tee -a "$out/machine.txt"

# run NAME ISA ARGS...: one benchmark process; ISA "native" leaves the kernels to the CPU.
run() {
  local name=$1 isa=$2
  shift 2
  local cap=
  [ "$isa" = native ] || cap=$isa
  echo "[$(date -u +%H:%M:%S)] $name ($isa)"
  ONEDNN_MAX_CPU_ISA=$cap "$bench" "$@" --benchmark_out="$out/$name.$isa.json" --benchmark_out_format=json \
    > /dev/null 2> "$out/$name.$isa.log"
}

for round in 1 2 3; do
  for isa in native AVX2; do
    run "small.$round" "$isa" \
      --benchmark_filter='^BM_(SemanticCacheLookup(Hit|Miss)/1000$|Ask(SemanticCacheHit|Miss)/(1000|10000)/)'
  done
done
for round in 1 2 3; do
  for isa in native AVX2; do
    RAPIDQA_BENCH_LARGE=1 run "kernels.$round" "$isa" \
      --benchmark_filter='^BM_IndexSearch/kind:(0|1)/vectors:(10000|100000)/efSearch:(0|64|256)$'
  done
done
run stages native --benchmark_filter='^BM_(Normalize|Encode|ResultCache|SemanticCacheLookup(Hit|Miss)/10000)'
RAPIDQA_BENCH_LARGE=1 run ask native --benchmark_filter='^BM_(AskResultCacheHit|AskSemanticCacheHit/100000|AskMiss/100000)'
if [ "$skip_faiss" != 1 ]; then
  run semantic-scale native --benchmark_filter='^BM_SemanticScaleIndexBreadth(Hit|Miss)/hnsw/100000'
  RAPIDQA_BENCH_LARGE=1 RAPIDQA_BENCH_1M=$huge run index native --benchmark_filter='^BM_IndexSearch(Batch)?/'
fi
echo "[$(date -u +%H:%M:%S)] done"
/usr/bin/python3 "$root/benchmarks/python/search_tables.py" "$out"

#!/usr/bin/env bash
# ONNX Runtime vs rapidqa, same BERT shapes, same weights, 2 threads each, interleaved rounds.
#
#   benchmarks/ort_side_by_side/run.sh [--rounds 3] [--points "minilm-l6:1:32 bert-base:8:128 ..."]
#        [--no-int8] [--int8-all-points] [--no-plain] [--spin 0|1] [--out FILE.jsonl]
#        [--busy-points "minilm-l6:1:32 bert-base:8:32" | --no-busy] [--no-ragged]
#
# Needs: node_modules (npm ci --ignore-scripts in this folder) and the models
# (/usr/bin/python3 benchmarks/ort_side_by_side/export.py). rapidqa is used as built, from
# $RAPIDQA_BUILD (default ./build: run from the project root): benchmarks/rapidqa-bench.
#
# Besides the grid (bert-base and minilm-l6 at batch 1, 8, 32 and sequence 32, 128):
#   competing load  at --busy-points, each side measured again with one busy-loop process
#                   (one thread spinning) started just before and killed just after it: the
#                   host's own threads taking a core. Rows ort-fused-busy / rapidqa-fp32-busy.
#   ragged batch    32 real question lengths (BM_RaggedForward, the bundled FAQ): rapidqa gets
#                   the padded batch with its mask and packs it; ORT gets the same padded
#                   batch and mask (bench.js --lengths). Rows ort-ragged / rapidqa-ragged.
#
# For each point, each round runs, each in a fresh process, alternating ORT / rapidqa:
#   ORT fused graph     node bench.js time --model <shape>.fused.onnx   (ORT at its best, FP32)
#   rapidqa FP32        rapidqa-bench BM_TransformerForward/shape:i/batch:B/seq:S/threads:2
#   rapidqa BF16        rapidqa-bench BM_Bf16Forward/shape:i/batch:B/seq:S (skipped where the CPU lacks BF16)
#   ORT plain graph     node bench.js time --model <shape>.onnx         (--no-plain skips)
#   rapidqa INT8 auto   rapidqa-bench BM_QuantizedForward/.../variant:2  } only at points where
#   ORT INT8            node bench.js time --model <shape>.int8.onnx     } rapidqa-bench registers
#   rapidqa INT8 all    rapidqa-bench BM_QuantizedForward/.../variant:4  } an INT8 forward (bert-base
#     8x128, minilm-l6 1x32 and 8x128; "all" not at minilm-l6 8x128); --int8-all-points runs
#     ORT INT8 everywhere, --no-int8 skips INT8.
# rapidqa-bench reads the same weights through RAPIDQA_BENCH_MODELS=<models dir> (set
# SAME_WEIGHTS=0 for its own in-process random weights; FP32 timing does not depend on values).
# Each figure is the mean latency over a >= 2 s timed window after warm-up (rapidqa: 2 warm-up
# forwards, MinTime(2.0) as registered; ORT: 3 warm-up runs, >= 3 runs and >= 2 s). Raw JSON
# lines go to --out (default /tmp/ort-anchor-<time>.jsonl); the markdown table to stdout.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
RAPIDQA_BUILD=${RAPIDQA_BUILD:-build}
BENCH=$RAPIDQA_BUILD/benchmarks/rapidqa-bench
MODELS=${MODELS:-$HERE/models}
SAME_WEIGHTS=${SAME_WEIGHTS:-1}
ROUNDS=3
POINTS=""
for s in bert-base minilm-l6; do for bs in 1:32 1:128 8:32 8:128 32:32 32:128; do POINTS+="$s:$bs "; done; done
BUSY_POINTS="minilm-l6:1:32 bert-base:8:32"; RAGGED=1
INT8=1; INT8_ALL_POINTS=0; PLAIN=1; SPIN=(); OUT=/tmp/ort-side-by-side-$(date +%Y%m%d-%H%M%S).jsonl
while [ $# -gt 0 ]; do
  case $1 in
    --rounds) ROUNDS=$2; shift 2 ;;
    --points) POINTS=$2; shift 2 ;;
    --no-int8) INT8=0; shift ;;
    --int8-all-points) INT8_ALL_POINTS=1; shift ;;
    --no-plain) PLAIN=0; shift ;;
    --spin) [[ $2 == 0 || $2 == 1 ]] || { echo "--spin takes 0 or 1" >&2; exit 2; }; SPIN=(--spin "$2"); shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --busy-points) BUSY_POINTS=$2; shift 2 ;;
    --no-busy) BUSY_POINTS=""; shift ;;
    --no-ragged) RAGGED=0; shift ;;
    -h|--help) awk 'NR > 1 && /^#/ { print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
  esac
done

[ -x "$BENCH" ] || { echo "no rapidqa-bench at $BENCH (set RAPIDQA_BUILD)" >&2; exit 1; }
[ -d "$HERE/node_modules/onnxruntime-node" ] || { echo "run: (cd $HERE && npm ci --ignore-scripts)" >&2; exit 1; }
for p in $POINTS; do
  s=${p%%:*}
  need=("$MODELS/$s.fused.onnx" "$MODELS/$s/config.json")
  [ "$PLAIN" = 1 ] && need+=("$MODELS/$s.onnx")
  [ "$INT8" = 1 ] && need+=("$MODELS/$s.int8.onnx")
  for f in "${need[@]}"; do
    [ -e "$f" ] || { echo "missing $f: run /usr/bin/python3 $HERE/export.py" >&2; exit 1; }
  done
done
RQ_ENV=()
[ "$SAME_WEIGHTS" = 1 ] && RQ_ENV=(RAPIDQA_BENCH_MODELS="$MODELS")
REGISTERED=$("$BENCH" --benchmark_list_tests 2>/dev/null)
TMP=$(mktemp -d)
: > "$OUT"

shape_index() { case $1 in bert-base) echo 0 ;; minilm-l6) echo 1 ;; *) echo "unknown shape $1" >&2; exit 1 ;; esac; }

BUSY_PID=""
start_busy() { ( while :; do :; done ) & BUSY_PID=$!; }
stop_busy() { [ -n "$BUSY_PID" ] && kill "$BUSY_PID" 2>/dev/null; wait "$BUSY_PID" 2>/dev/null || true; BUSY_PID=""; }
trap 'stop_busy; rm -rf "${TMP:-/nonexistent}"' EXIT

ort() {  # impl model shape batch seq round [extra bench.js arguments]
  local line
  line=$(node "$HERE/bench.js" time --model "$2" --shape "$3" --batch "$4" --seq "$5" --runs 3 --min-time 2 "${SPIN[@]}" "${@:7}")
  echo "$line" | jq -c --arg impl "$1" --argjson round "$6" '{impl: $impl, shape, batch, seq, round: $round, ms: .ms_mean, ms_median, ms_min, runs, spin, ort}' >> "$OUT"
}

rapidqa() {  # impl name-prefix shape batch seq round
  grep -q "^$2" <<< "$REGISTERED" || return 0
  env "${RQ_ENV[@]}" "$BENCH" "--benchmark_filter=^$2" --benchmark_out="$TMP/rq.json" --benchmark_out_format=json \
    > "$TMP/rq.out" 2> "$TMP/rq.err" || { cat "$TMP/rq.err" >&2; exit 1; }
  jq -c --arg impl "$1" --arg shape "$3" --argjson batch "$4" --argjson seq "$5" --argjson round "$6" '
    .benchmarks | if length != 1 then error("filter matched \(length) benchmarks") else .[0] end
    | {impl: $impl, shape: $shape, batch: $batch, seq: $seq, round: $round,
       ms: (.real_time * ({"ns": 1e-6, "us": 1e-3, "ms": 1, "s": 1e3}[.time_unit])),
       iterations, name, label: .label, min_cosine: .min_cosine, same_weights: ($same == "1")}' --arg same "$SAME_WEIGHTS" "$TMP/rq.json" >> "$OUT"
}

echo "# ORT vs rapidqa, $(date -u +%Y-%m-%dT%H:%MZ)" >&2
echo "# $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores; load average at start: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
echo "# onnxruntime-node $(node -p "require('$HERE/node_modules/onnxruntime-node/package.json').version"); rapidqa $(git -C "$RAPIDQA_BUILD/.." rev-parse --short HEAD 2>/dev/null || echo '?'); raw: $OUT" >&2
START=$SECONDS
for p in $POINTS; do
  IFS=: read -r shape batch seq <<< "$p"
  i=$(shape_index "$shape")
  for ((r = 1; r <= ROUNDS; r++)); do
    echo "# $shape batch $batch seq $seq, round $r/$ROUNDS ($((SECONDS - START)) s)" >&2
    ort ort-fused "$MODELS/$shape.fused.onnx" "$shape" "$batch" "$seq" "$r"
    rapidqa rapidqa-fp32 "BM_TransformerForward/shape:$i/batch:$batch/seq:$seq/threads:2/" "$shape" "$batch" "$seq" "$r"
    rapidqa rapidqa-bf16 "BM_Bf16Forward/shape:$i/batch:$batch/seq:$seq/" "$shape" "$batch" "$seq" "$r"
    if [ "$PLAIN" = 1 ]; then ort ort-plain "$MODELS/$shape.onnx" "$shape" "$batch" "$seq" "$r"; fi
    q="BM_QuantizedForward/shape:$i/batch:$batch/seq:$seq/variant:"
    if [ "$INT8" = 1 ] && { [ "$INT8_ALL_POINTS" = 1 ] || grep -q "^$q" <<< "$REGISTERED"; }; then
      rapidqa rapidqa-int8-auto "${q}2/" "$shape" "$batch" "$seq" "$r"
      ort ort-int8 "$MODELS/$shape.int8.onnx" "$shape" "$batch" "$seq" "$r"
      rapidqa rapidqa-int8-all "${q}4/" "$shape" "$batch" "$seq" "$r"
    fi
  done
done
for p in $BUSY_POINTS; do
  IFS=: read -r shape batch seq <<< "$p"
  i=$(shape_index "$shape")
  for ((r = 1; r <= ROUNDS; r++)); do
    echo "# competing load: $shape batch $batch seq $seq, round $r/$ROUNDS ($((SECONDS - START)) s)" >&2
    start_busy; ort ort-fused-busy "$MODELS/$shape.fused.onnx" "$shape" "$batch" "$seq" "$r"; stop_busy
    start_busy
    rapidqa rapidqa-fp32-busy "BM_TransformerForward/shape:$i/batch:$batch/seq:$seq/threads:2/" "$shape" "$batch" "$seq" "$r"
    stop_busy
  done
done
if [ "$RAGGED" = 1 ]; then
  for shape in bert-base minilm-l6; do
    i=$(shape_index "$shape")
    for ((r = 1; r <= ROUNDS; r++)); do
      echo "# ragged batch: $shape, round $r/$ROUNDS ($((SECONDS - START)) s)" >&2
      rapidqa rapidqa-ragged "BM_RaggedForward/shape:$i/batch:32/" "$shape" 32 0 "$r"
      lengths=$(tail -n 1 "$OUT" | jq -r '.label | sub(".*lengths="; "")')
      ort ort-ragged "$MODELS/$shape.fused.onnx" "$shape" 32 0 "$r" --lengths "$lengths"
    done
  done
fi
echo "# done in $((SECONDS - START)) s; load average at end: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
node "$HERE/table.js" "$OUT"

#!/usr/bin/env bash
# The load study behind the tables of docs/load-study.md, in one run:
#   1. a MiniLM-L6-shaped random model (benchmarks/python/make_load_model.py),
#   2. a sweep of offered rates for every batching mode,
#   3. capacity C = the highest rate at which no batching holds the p99 target,
#   4. a step from 50% to 200% of C with the AutoTuner,
#   5. 300% of C held for a while, with deadlines and degradation,
#   6. the plot (needs python3-matplotlib).
# Usage: benchmarks/run_load.sh [BUILD_DIR] [OUT_DIR]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-$root/build}
out=${2:-$root/build/load-results}
kb=$root/examples/data/faq.jsonl
model=$out/minilm-l6-random
load=$build/benchmarks/rapidqa-load
target_ms=${TARGET_MS:-100}
rates=${RATES:-50,100,150,200,250,300,400,500}
mkdir -p "$out"
[ -f "$model/model.safetensors" ] || /usr/bin/python3 "$root/benchmarks/python/make_load_model.py" "$model" --kb "$kb"

"$load" --model "$model" --kb "$kb" sweep --qps "$rates" --duration 10 --target "$target_ms" \
  --csv "$out/sweep.csv" | tee "$out/sweep.txt"
capacity=$(awk '/^none +sustains/ {print $3}' "$out/sweep.txt")
if [ -z "$capacity" ] || [ "$capacity" = 0 ]; then echo "run_load: no capacity found for mode none" >&2; exit 1; fi
half=$((capacity / 2)); double=$((capacity * 2)); triple=$((capacity * 3))
echo "run_load: capacity without batching C = $capacity qps; step $half -> $double, overload $triple"

"$load" --model "$model" --kb "$kb" step --from "$half" --to "$double" --before 10 --after 20 \
  --target "$target_ms" --csv "$out/step.csv" | tee "$out/step.txt"
"$load" --model "$model" --kb "$kb" overload --qps "$triple" --duration 20 --target "$target_ms" \
  --csv "$out/overload.csv" | tee "$out/overload.txt"
/usr/bin/python3 "$root/benchmarks/python/plot_load.py" --sweep "$out/sweep.csv" --step "$out/step.csv" \
  --target "$target_ms" --title "rapidqa-load, MiniLM-L6 shape, $(nproc) cores" --out "$out/load.png"

#!/usr/bin/env bash
# Abstention and semantic-cache hit decisions without a model, on the LCQMC
# and BQ development sets (tests/data/eval), each with the other set's
# questions as the out-of-domain ones: in-domain accuracy against the
# out-of-domain fallback rate over the calibrated-confidence threshold and
# the raw cosine, and the question stream (one namespace) measured with
# fixed thresholds and with the error-bound mode at each target. Prints
# markdown tables, keeps the JSON results and, with python3-matplotlib, the
# plot in OUT_DIR.
#
#   benchmarks/run_hit_decisions.sh [BUILD_DIR [OUT_DIR]]   (default: build, build/hit-decisions)
set -euo pipefail
case "${1:-}" in -h|--help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
build=${1:-build}
out=${2:-$build/hit-decisions}
here=$(cd "$(dirname "$0")/.." && pwd)
eval_tool=$build/examples/rapidqa-eval
data=$here/tests/data/eval
words=/usr/lib/python3/dist-packages/jieba/dict.txt
targets=0.005,0.01,0.02
fixed=0.7,0.75,0.8,0.84,0.88,0.9,0.92,0.94,0.96,0.98
[[ -x $eval_tool ]] || { echo "no $eval_tool: build first" >&2; exit 1; }
[[ -f $words ]] || { echo "no $words: apt-get install python3-jieba" >&2; exit 1; }
mkdir -p "$out"

machine="$(lscpu | sed -n 's/^Model name: *//p'), $(nproc) vCPUs; commit $(git -C "$here" rev-parse --short HEAD)"
for pair in "lcqmc bq" "bq lcqmc"; do
  read -r set other <<<"$pair"
  echo "$set: running (the stream is asked once per fixed threshold and once per target)" >&2
  "$eval_tool" --kb "$data/$set-dev_kb.jsonl" --queries "$data/$set-dev_queries.tsv" \
    --negpairs "$data/$set-dev_negpairs.tsv" --ood-queries "$data/$other-dev_queries.tsv" \
    --word-dictionary "$words" --semantic-thresholds 0.92 --semantic-targets "$targets" \
    --stream-thresholds "$fixed" --json >"$out/$set.json"
done

echo "Machine: $machine"
python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
for name in ("lcqmc", "bq"):
    r = json.load(open(f"{out}/{name}.json"))
    a = r["abstention"]
    print(f"\n{name}-dev, abstention ({a['out_of_domain_questions']} out-of-domain questions):\n")
    print("| threshold on | value | in-domain accuracy | in-domain answered | out-of-domain fallback |")
    print("|---|---:|---:|---:|---:|")
    for key, label in (("by_confidence", "confidence"), ("by_cosine", "cosine")):
        for p in a[key]:
            print(f"| {label} | {p['threshold']:.2f} | {p['in_domain_accuracy']:.3f} | {p['in_domain_answered']:.3f} | {p['out_of_domain_fallback']:.3f} |")
    s = r["semantic_stream"]
    print(f"\n{name}-dev, semantic cache on a stream of {s['decisions']} questions:\n")
    print("| decision | hit rate | false-hit rate [95%] | best fixed hit rate at or under that false-hit rate |")
    print("|---|---:|---:|---:|")
    for row in s["rows"]:
        low, high = row["false_hit_rate_95"]
        mode = f"fixed {row['threshold']:.2f}" if row["mode"] == "fixed" else f"error bound, target {row['target']:.3f}"
        best = f"{row['best_fixed_hit_rate_at_or_under']:.3f}" if row["mode"] != "fixed" else ""
        print(f"| {mode} | {row['hit_rate']:.3f} | {row['false_hit_rate']:.4f} [{low:.4f}, {high:.4f}] | {best} |")
PY
if /usr/bin/python3 -c "import matplotlib" 2>/dev/null; then
  /usr/bin/python3 "$here/benchmarks/python/plot_answer_quality.py" --result "LCQMC-dev=$out/lcqmc.json" \
    --result "BQ-dev=$out/bq.json" --title "rapidqa, no model (HashingEncoder + fitted ranker); $machine" \
    --out "$out/answer-quality.png"
  echo "plot: $out/answer-quality.png" >&2
else
  echo "no plot: apt-get install python3-matplotlib" >&2
fi

#!/usr/bin/env bash
# Answer quality without a model, side by side in one run: rapidqa-eval on
# the LCQMC and BQ development sets (tests/data/eval) and the bundled FAQ's
# held-out paraphrases, for each ranking (the cosine alone, reciprocal rank
# fusion, the fitted ranker without and with Debian's jieba word list), and
# the semantic cache's hit and false-hit rates over a threshold sweep.
# Prints markdown tables; the latencies are of asks that skip every cache.
#
#   benchmarks/run_answer_quality.sh [BUILD_DIR]     (default: build)
set -euo pipefail
build=${1:-build}
case "${1:-}" in -h|--help) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
here=$(cd "$(dirname "$0")/.." && pwd)
eval_tool=$build/examples/rapidqa-eval
data=$here/tests/data/eval
words=/usr/lib/python3/dist-packages/jieba/dict.txt
[[ -x $eval_tool ]] || { echo "no $eval_tool: build first" >&2; exit 1; }
[[ -f $words ]] || { echo "no $words: apt-get install python3-jieba" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 - "$here/examples/data/faq_paraphrases.jsonl" >"$work/faq_queries.tsv" <<'PY'
import json, sys
for line in open(sys.argv[1], encoding='utf-8'):
    j = json.loads(line)
    print(f"{j['question']}\t{j['expected_id']}")
PY

cat >"$work/tables.py" <<'PY'
import json, sys
result = json.load(sys.stdin)
if sys.argv[1] == "retrieval":
    r = result["retrieval"]
    l = r["latency_us"]
    print("%.3f | %.3f | %.3f | %.3f | %.0f | %.0f" % (r["top1"], r["top3"], r["mrr10"], r["fallback_rate"], l["p50"], l["p99"]))
else:
    for r in result["semantic_cache"]:
        low, high = r["false_hit_rate_95"]
        print("| %s | %.2f | %.3f | %.3f [%.3f, %.3f] |" % (sys.argv[2], r["threshold"], r["hit_rate"], r["false_hit_rate"], low, high))
PY

echo "Machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) vCPUs; commit $(git -C "$here" rev-parse --short HEAD)"
echo
echo "| set | ranking | top-1 | top-3 | MRR@10 | fallback | p50 µs | p99 µs |"
echo "|---|---|---:|---:|---:|---:|---:|---:|"
for set in lcqmc bq faq; do
  if [[ $set == faq ]]; then kb=$here/examples/data/faq.jsonl; queries=$work/faq_queries.tsv
  else kb=$data/$set-dev_kb.jsonl; queries=$data/$set-dev_queries.tsv; fi
  for ranking in "dense none" "rrf none" "fitted none" "fitted $words"; do
    read -r fusion dictionary <<<"$ranking"
    name=$fusion; [[ $fusion == fitted ]] && name="fitted, $([[ $dictionary == none ]] && echo characters || echo "jieba words")"
    line=$("$eval_tool" --kb "$kb" --queries "$queries" --fusion "$fusion" --word-dictionary "$dictionary" \
             --semantic-thresholds 0.99 --json 2>/dev/null | python3 "$work/tables.py" retrieval)
    echo "| $set | $name | $line |"
  done
done

echo
echo "Semantic cache (the HashingEncoder's cosine; every pair in a tenant of its own):"
echo
echo "| set | threshold | hit rate on paraphrases | false-hit rate on non-paraphrases [95%] |"
echo "|---|---:|---:|---:|"
for set in lcqmc bq; do
  "$eval_tool" --kb "$data/$set-dev_kb.jsonl" --queries "$data/$set-dev_queries.tsv" \
    --negpairs "$data/$set-dev_negpairs.tsv" --semantic-thresholds 0.5,0.6,0.7,0.8,0.9,0.95 --json 2>/dev/null |
    python3 "$work/tables.py" cache "$set"
done

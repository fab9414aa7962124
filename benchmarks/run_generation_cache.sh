#!/usr/bin/env bash
# A slow generator behind the semantic cache: starts the tests' stand-in
# chat completions engine (tests/support/chat_completions_server.py, whose
# model "total-2000" spreads two seconds over each answer) on loopback,
# runs rapidqa-generation-bench against it with the cache tiers on and off,
# interleaved, and writes OUT/results.csv with the machine in OUT/machine.txt.
# Usage: benchmarks/run_generation_cache.sh [BUILD_DIR] [OUT_DIR]
# Environment: ROUNDS (2), DURATION (30 s a run), CLIENTS (64), MODEL (total-2000), ZIPF (1.0).
set -euo pipefail
build=${1:-build}
out=${2:-/tmp/generation-cache}
case "$build" in --help|-h) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
here=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"
cpu=$(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')
echo "machine: $cpu, $(nproc) vCPUs; rapidqa $(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo '?')" | tee "$out/machine.txt"
coproc chat { exec python3 "$here/tests/support/chat_completions_server.py" --port 0; }
chat_pid=$chat_PID
trap 'kill $chat_pid 2>/dev/null; wait $chat_pid 2>/dev/null || true' EXIT
read -r -t 20 word port <&"${chat[0]}" || { echo "the chat engine did not start" >&2; exit 1; }
[ "$word" = listening ] || { echo "the chat engine said: $word $port" >&2; exit 1; }
"$build/benchmarks/rapidqa-generation-bench" --generator "http://127.0.0.1:$port" --model "${MODEL:-total-2000}" \
  --kb "$here/examples/data/faq.jsonl" --paraphrases "$here/examples/data/faq_paraphrases.jsonl" \
  --rounds "${ROUNDS:-2}" --seconds "${DURATION:-30}" --clients "${CLIENTS:-64}" --zipf "${ZIPF:-1.0}" \
  | tee "$out/results.csv"

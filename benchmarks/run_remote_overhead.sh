#!/usr/bin/env bash
# The remote encoder against the same encoder in process: starts
# rapidqa-server on the bundled FAQ as the model host on loopback, runs
# rapidqa-remote-bench against it, and writes OUT/results.csv with the
# machine named in OUT/machine.txt.
# Usage: benchmarks/run_remote_overhead.sh [BUILD_DIR] [OUT_DIR]
# Environment: ROUNDS (2), DURATION (5 s per load run), CLIENTS (4,8,16,32,64,128), CALLS (2000),
# SIZES (1,16,64: texts per single encode call), PROTOCOL (openai; kserve: KServe v2 over HTTP;
# kserve-grpc: KServe v2 over the host's gRPC port),
# BATCH_WORKERS (4) and BATCH_DELAY_US (0): the batcher settings docs/remote.md suggests for a
# remote encoder (the engine's defaults, 2 and 2000, suit an in-process model).
set -euo pipefail
build=${1:-build}
out=${2:-/tmp/remote-overhead}
case "$build" in --help|-h) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
protocol=${PROTOCOL:-openai}
case "$protocol" in
  openai|kserve) grpc=() ;;
  kserve-grpc) grpc=(--grpc-port 0) ;;
  *) echo "PROTOCOL must be openai, kserve or kserve-grpc, not '$protocol'" >&2; exit 2 ;;
esac
here=$(cd "$(dirname "$0")/.." && pwd)
kb=$here/examples/data/faq.jsonl
mkdir -p "$out"
cpu=$(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')
echo "machine: $cpu, $(nproc) vCPUs; rapidqa $(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo '?')" | tee "$out/machine.txt"
"$build/examples/rapidqa-server" --plain --port 0 "${grpc[@]}" --kb "$kb" --workers 2 2> "$out/host.log" &
host=$!
trap 'kill $host 2>/dev/null; wait $host 2>/dev/null || true' EXIT
for _ in $(seq 1 300); do
  grep -q 'ready:' "$out/host.log" && break
  sleep 0.1
done
port=$(sed -n 's/.*listening on http:\/\/127.0.0.1:\([0-9]*\) (HTTP\/1.1.*/\1/p' "$out/host.log" | head -1)
[ -n "$port" ] || { echo "the host did not start: $(cat "$out/host.log")" >&2; exit 1; }
if [ "$protocol" = kserve-grpc ]; then
  port=$(sed -n 's/.*listening on 127.0.0.1:\([0-9]*\) (gRPC).*/\1/p' "$out/host.log" | head -1)
  [ -n "$port" ] || { echo "the host's gRPC port did not open: $(cat "$out/host.log")" >&2; exit 1; }
fi
echo "protocol: $protocol" | tee -a "$out/machine.txt"
"$build/benchmarks/rapidqa-remote-bench" --endpoint "http://127.0.0.1:$port" --kb "$kb" --protocol "$protocol" \
  --sizes "${SIZES:-1,16,64}" \
  --rounds "${ROUNDS:-2}" --seconds "${DURATION:-5}" --clients "${CLIENTS:-4,8,16,32,64,128}" --calls "${CALLS:-2000}" \
  --batch-workers "${BATCH_WORKERS:-4}" --batch-delay-us "${BATCH_DELAY_US:-0}" \
  | tee "$out/results.csv"

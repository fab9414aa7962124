#!/usr/bin/env bash
# The protocol table of docs/server.md: rapidqa-server over HTTP/1.1,
# HTTP/2, gRPC and WebSocket on loopback, beside nginx answering a fixed
# JSON body of the same size (the cost of HTTP itself on this machine).
#
#   benchmarks/run_server_load.sh [BUILD_DIR] [OUT_DIR]
#
# For every protocol and kind of question (a result-cache hit; a miss with
# the HashingEncoder: "use_cache": false, so every ask encodes and
# retrieves), two runs: the most it answers at a fixed concurrency (closed
# loop), then half that rate open loop, for the latency a service sees
# when it is not saturated. h2load drives HTTP/1.1 and HTTP/2 (its
# per-request log gives the percentiles); rapidqa-load drives gRPC and
# WebSocket. Targets are interleaved within each of --rounds rounds
# (ROUNDS, default 2). Client and server share the machine's cores.
# Environment: DURATION (seconds per run, default 5), ROUNDS.
set -euo pipefail

build=${1:-build}
out=${2:-$(mktemp -d /tmp/rapidqa-server-load.XXXXXX)}
if [[ ${1:-} == --help || ${1:-} == -h ]]; then
  sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'
  exit 0
fi
duration=${DURATION:-5}
rounds=${ROUNDS:-2}
mkdir -p "$out"
server=$build/examples/rapidqa-server
load=$build/benchmarks/rapidqa-load
for tool in "$server" "$load"; do [[ -x $tool ]] || { echo "missing $tool (build first)" >&2; exit 2; }; done
for tool in h2load nginx python3; do command -v $tool >/dev/null || { echo "missing $tool (nghttp2-client, nginx-light)" >&2; exit 2; }; done

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
http1=$(free_port); http2=$(free_port); grpc=$(free_port); nginx1=$(free_port); nginx2=$(free_port)

"$server" --plain --port "$http1" --h2-port "$http2" --grpc-port "$grpc" 2>"$out/server.log" &
server_pid=$!
nginx_dir=$out/nginx
cleanup() {
  kill "$server_pid" 2>/dev/null || true
  [[ -f $nginx_dir/nginx.pid ]] && kill "$(cat "$nginx_dir/nginx.pid")" 2>/dev/null || true
}
trap cleanup EXIT
for _ in $(seq 100); do grep -q "ready:" "$out/server.log" 2>/dev/null && break; sleep 0.1; done
grep -q "ready:" "$out/server.log" || { cat "$out/server.log" >&2; exit 1; }

hit='{"question": "How do I reset my password?"}'
miss='{"question": "How do I reset my password?", "use_cache": false}'
printf '%s' "$hit" >"$out/hit.json"
printf '%s' "$miss" >"$out/miss.json"
# nginx answers the body rapidqa gives for the hit: the same bytes on the wire.
curl -s --data-binary @"$out/hit.json" "http://127.0.0.1:$http1/v1/ask" >"$out/answer.json"
mkdir -p "$nginx_dir"
python3 - "$out/answer.json" "$nginx_dir/nginx.conf" "$nginx1" "$nginx2" "$nginx_dir" <<'EOF'
import sys
answer, conf, port1, port2, folder = sys.argv[1:]
body = open(answer).read().replace("\\", "\\\\").replace("'", "\\'")
open(conf, "w").write(f"""worker_processes auto;
pid {folder}/nginx.pid;
error_log {folder}/error.log;
events {{ worker_connections 4096; }}
http {{
  access_log off;
  client_body_temp_path {folder}/body;
  keepalive_requests 1000000;
  server {{
    listen 127.0.0.1:{port1};
    listen 127.0.0.1:{port2} http2;
    location / {{ default_type application/json; return 200 '{body}'; }}
  }}
}}
""")
EOF
nginx -c "$nginx_dir/nginx.conf" -p "$nginx_dir"

echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) vCPUs; rapidqa $(git -C "$(dirname "$0")/.." rev-parse --short HEAD 2>/dev/null || echo '?')" | tee "$out/machine.txt"
results=$out/results.csv
echo "round,target,protocol,kind,mode,offered_qps,answered,errors,answers_per_s,mean_ms,p50_ms,p99_ms" >"$results"

# h2load: closed loop (rate 0) or --rps per client; percentiles from its log.
run_h2load() {  # round target protocol kind url body rate
  local round=$1 target=$2 protocol=$3 kind=$4 url=$5 body=$6 rate=$7
  local clients=4 streams=8 flags=()
  # HTTP/1.1 has one request in flight per connection: more connections.
  # (h2load's --rps fires every connection's timer together, so many
  # connections at a low rate measure its bursts more than the server.)
  if [[ $protocol == HTTP/1.1 ]]; then clients=16; streams=1; flags+=(--h1); fi
  local mode=max rps=()
  if [[ $rate != 0 ]]; then mode=half; rps=(--rps="$(python3 -c "print(max(1, int($rate / $clients)))")"); fi
  local log=$out/h2load-$round-$target-${protocol//\//}-$kind-$mode.log
  h2load "${flags[@]}" -c "$clients" -m "$streams" -D "$duration" --warm-up-time=1 "${rps[@]}" \
    -d "$body" -H 'content-type: application/json' --log-file="$log" "$url" >"$log.out" 2>&1 || true
  python3 - "$log" "$log.out" "$round,$target,$protocol,$kind,$mode,$rate" "$duration" >>"$results" <<'EOF'
import sys
log, summary, prefix, duration = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
# The log holds the measured window only (after --warm-up-time): start
# time, status (0: still in flight when the window closed), microseconds.
rows = [line.split() for line in open(log) if line.strip()]
ok = sorted(int(r[2]) / 1000.0 for r in rows if r[1].startswith("2"))
errors = sum(1 for r in rows if r[1] != "0" and not r[1].startswith("2"))
seconds = duration
def pct(p):
    return ok[min(len(ok) - 1, max(0, int(-(-p * len(ok) // 1)) - 1))] if ok else 0
mean = sum(ok) / len(ok) if ok else 0
print(f"{prefix},{len(ok)},{errors},{len(ok) / seconds:.1f},{mean:.3f},{pct(0.5):.3f},{pct(0.99):.3f}")
EOF
}

run_rapidqa_load() {  # round protocol kind port body rate
  local round=$1 protocol=$2 kind=$3 port=$4 body=$5 rate=$6 mode=max
  [[ $rate != 0 ]] && mode=half
  local command=grpc
  [[ $protocol == WebSocket ]] && command=websocket
  "$load" "$command" --target "127.0.0.1:$port" --connections 4 --in-flight 8 --duration "$duration" --warmup 1 \
    --rate "$rate" --body "$(cat "$body")" | tail -1 |
    awk -F, -v p="$round,rapidqa,$protocol,$kind,$mode,$rate" '{print p "," $5 "," $6 "," $8 "," $9 "," $10 "," $11}' \
    >>"$results"
}

max_of() {  # target protocol kind round: the closed-loop answers/s of that round
  awk -F, -v t="$1" -v p="$2" -v k="$3" -v r="$4" '$1==r && $2==t && $3==p && $4==k && $5=="max" {print int($9)}' "$results"
}

for round in $(seq "$rounds"); do
  for kind in hit miss; do
    body=$out/$kind.json
    targets=("rapidqa HTTP/1.1" "rapidqa HTTP/2" "rapidqa gRPC" "rapidqa WebSocket")
    [[ $kind == hit ]] && targets=("nginx HTTP/1.1" "nginx HTTP/2" "${targets[@]}")
    for mode in max half; do
      for entry in "${targets[@]}"; do
        target=${entry% *}; protocol=${entry#* }
        rate=0
        if [[ $mode == half ]]; then rate=$(( $(max_of "$target" "$protocol" "$kind" "$round") / 2 )); fi
        echo "round $round: $target $protocol $kind $mode${rate:+ (rate $rate)}" >&2
        case "$target $protocol" in
          "nginx HTTP/1.1") run_h2load "$round" nginx HTTP/1.1 "$kind" "http://127.0.0.1:$nginx1/v1/ask" "$body" "$rate" ;;
          "nginx HTTP/2") run_h2load "$round" nginx HTTP/2 "$kind" "http://127.0.0.1:$nginx2/v1/ask" "$body" "$rate" ;;
          "rapidqa HTTP/1.1") run_h2load "$round" rapidqa HTTP/1.1 "$kind" "http://127.0.0.1:$http1/v1/ask" "$body" "$rate" ;;
          "rapidqa HTTP/2") run_h2load "$round" rapidqa HTTP/2 "$kind" "http://127.0.0.1:$http2/v1/ask" "$body" "$rate" ;;
          "rapidqa gRPC") run_rapidqa_load "$round" gRPC "$kind" "$grpc" "$body" "$rate" ;;
          "rapidqa WebSocket") run_rapidqa_load "$round" WebSocket "$kind" "$http1" "$body" "$rate" ;;
        esac
      done
    done
  done
done

echo "results: $results" >&2
column -s, -t "$results"

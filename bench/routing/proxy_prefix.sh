#!/usr/bin/env bash
# Proxy cost of prefix-aware routing (issue 20): two tidegate processes in front of the same two
# tidegate-sim replicas, one with balancer least_outstanding, one with prefix_aware, under the
# same wrk load of 4k-token chat prompts (bench/routing/long_prompts.lua), in interleaved rounds
# (this machine is shared: a burst of another tenant's work is spread over both). Prints, per
# balancer, the median round's requests/s and the gateway's CPU per request (schedstat), and
# the ratios. Env: BUILD (default build), ROUNDS (default 5), SLICE (s per round, default 4),
# CONNECTIONS (default 16).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
BUILD=${BUILD:-build}
ROUNDS=${ROUNDS:-5}
SLICE=${SLICE:-4}
CONNECTIONS=${CONNECTIONS:-16}
HERE=bench/routing
BENCH_NAME=routing
source bench/lib.sh  # log, die, WORK, PIDS (stopped at exit), wait_http, cpu_ns
command -v wrk >/dev/null || die "wrk not installed (scripts/setup.sh installs it)"
for b in tidegate tidegate-sim; do [[ -x $BUILD/bin/$b ]] || die "$BUILD/bin/$b missing: build it first"; done


for port in 18201 18203; do
  $BUILD/bin/tidegate-sim --port $port --ttft-ms 0 --tpot-ms 0 --max-batch 100000 --threads 1 >"$WORK/sim$port.log" 2>&1 &
  PIDS+=($!)
  wait_http "http://127.0.0.1:$port/health" 10 || die "simulator on $port did not come up"
done
declare -A PORT=([least_outstanding]=18200 [prefix_aware]=18202) GW=()
for b in least_outstanding prefix_aware; do
  cat >"$WORK/$b.yaml" <<YAML
listen: "127.0.0.1:${PORT[$b]}"
threads: 1
access_log: {path: /dev/null, sample_rate: 0.0}
models:
  - name: sim
    balancer: $b
    max_concurrency_per_replica: 4096
    queue: {max_length: 10000, max_wait: 30s}
    health: {path: /health, interval: 5s, failures_to_eject: 3}
    replicas:
      - {id: sim-a, url: "http://127.0.0.1:18201"}
      - {id: sim-b, url: "http://127.0.0.1:18203"}
YAML
  $BUILD/bin/tidegate --config "$WORK/$b.yaml" >"$WORK/$b.log" 2>&1 &
  PIDS+=($!)
  GW[$b]=$!
  wait_http "http://127.0.0.1:${PORT[$b]}/readyz" 15 || die "tidegate ($b) not ready: $(tail -3 "$WORK/$b.log")"
  wrk -t1 -c"$CONNECTIONS" -d2s -s $HERE/long_prompts.lua "http://127.0.0.1:${PORT[$b]}/v1/chat/completions" >/dev/null 2>&1
done

for ((r = 1; r <= ROUNDS; r++)); do
  for b in least_outstanding prefix_aware; do
    c0=$(cpu_ns "${GW[$b]}")
    line=$(wrk -t1 -c"$CONNECTIONS" -d"${SLICE}s" --latency -s $HERE/long_prompts.lua \
           "http://127.0.0.1:${PORT[$b]}/v1/chat/completions" | grep WRKJSON | sed 's/^WRKJSON //')
    echo "{\"balancer\":\"$b\",\"round\":$r,\"cpu_ns\":$(( $(cpu_ns "${GW[$b]}") - c0 )),\"wrk\":$line}" >>"$WORK/rounds.jsonl"
  done
done

python3 - "$WORK/rounds.jsonl" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
out = {}
for b in ("least_outstanding", "prefix_aware"):
    rs = [r for r in rows if r["balancer"] == b]
    if any(r["wrk"]["errors"] for r in rs):
        sys.exit(f"{b}: wrk saw errors: {[r['wrk']['errors'] for r in rs]}")
    out[b] = {"rps": statistics.median(r["wrk"]["rps"] for r in rs),
              "cpu_us_per_request": statistics.median(r["cpu_ns"] / 1e3 / r["wrk"]["requests"] for r in rs),
              "p50_us": statistics.median(r["wrk"]["p50_us"] for r in rs)}
out["ratio_rps"] = round(out["prefix_aware"]["rps"] / out["least_outstanding"]["rps"], 4)
out["ratio_cpu_per_request"] = round(out["prefix_aware"]["cpu_us_per_request"] / out["least_outstanding"]["cpu_us_per_request"], 4)
print(json.dumps(out))
PY

#!/usr/bin/env bash
# Instructions per proxied request, counted by callgrind: exact and repeatable (to ~0.5%) where
# wall-clock CPU per request on a shared 2-core box moves by 5% from run to run. For a change
# to the data path: its cost per request against the binary before it, non-stream and stream.
#
# Each binary runs under callgrind twice, serving N1 and then N2 sequential keep-alive requests
# through tidegate (configs/bench-passthrough.yaml, one event loop) to tidegate-sim; the
# difference of the two totals over N2 - N1 is the per-request count, start-up and shutdown
# cancelling out. Prints one JSON object.
#
# Env: BUILD (default build), BASELINE_BIN (a second tidegate binary to compare, optional),
# N1 (default 200), N2 (default 1200).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
BUILD=${BUILD:-build}
BASELINE_BIN=${BASELINE_BIN:-}
N1=${N1:-200}
N2=${N2:-1200}
SIM_PORT=18001
GATEWAY_PORT=18000
BENCH_NAME=instructions
source bench/lib.sh

command -v valgrind >/dev/null || die "valgrind not installed (scripts/setup.sh installs it)"
[[ -x $BUILD/bin/tidegate && -x $BUILD/bin/tidegate-sim ]] || die "build tidegate and tidegate-sim into $BUILD first"
sed 's/^threads: .*/threads: 1/' configs/bench-passthrough.yaml >"$WORK/gateway.yaml"

"$BUILD/bin/tidegate-sim" --port $SIM_PORT --ttft-ms 0 --tpot-ms 0 --max-batch 100000 --threads 1 >"$WORK/sim.log" 2>&1 &
PIDS+=($!)
wait_http "http://127.0.0.1:$SIM_PORT/health" 10 || die "simulator did not come up: $(cat "$WORK/sim.log")"

# Sequential keep-alive requests, each checked: a proxy answering errors would count less.
cat >"$WORK/client.py" <<'PY'
import http.client, json, sys
n, stream, port = int(sys.argv[1]), sys.argv[2] == "stream", int(sys.argv[3])
body = json.dumps({"model": "sim", "messages": [{"role": "user", "content": "hello there"}],
                   "max_tokens": 8, "stream": stream})
c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
for _ in range(n):
    c.request("POST", "/v1/chat/completions", body, {"content-type": "application/json"})
    r = c.getresponse()
    data = r.read()
    assert r.status == 200 and (b"[DONE]" in data if stream else b'"completion_tokens":8' in data), data[:200]
PY

total_ir() {  # binary requests mode -> total instructions of the run
  local out="$WORK/callgrind.out"
  valgrind --tool=callgrind --callgrind-out-file="$out" "$1" --config "$WORK/gateway.yaml" >"$WORK/gateway.log" 2>&1 &
  local pid=$!
  wait_http "http://127.0.0.1:$GATEWAY_PORT/readyz" 60 || die "tidegate under valgrind not ready: $(tail -5 "$WORK/gateway.log")"
  python3 "$WORK/client.py" "$2" "$3" $GATEWAY_PORT || die "client failed against $1"
  kill -TERM $pid
  wait $pid 2>/dev/null || true
  awk '/^(summary|totals):/ {print $2; exit}' "$out"
  rm -f "$out"*
}

per_request() {  # binary mode
  local a b
  a=$(total_ir "$1" "$N1" "$2")
  b=$(total_ir "$1" "$N2" "$2")
  echo $(( (b - a) / (N2 - N1) ))
}

declare -A IR
bins=(tidegate)
[[ -n $BASELINE_BIN ]] && bins+=(baseline)
for mode in nonstream stream; do
  for name in "${bins[@]}"; do
    bin=$BUILD/bin/tidegate; [[ $name == baseline ]] && bin=$BASELINE_BIN
    log "$name $mode"
    IR[$name.$mode]=$(per_request "$bin" $mode)
  done
done

python3 - "$BASELINE_BIN" "${IR[tidegate.nonstream]}" "${IR[tidegate.stream]}" "${IR[baseline.nonstream]:-0}" "${IR[baseline.stream]:-0}" <<'PY'
import json, subprocess, sys
baseline, t_ns, t_s, b_ns, b_s = sys.argv[1], *map(int, sys.argv[2:])
report = {"bench": "instructions", "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
          text=True).stdout.strip(), "instructions_per_request": {"tidegate": {"nonstream": t_ns, "stream": t_s}}}
if baseline:
    report["baseline_bin"] = baseline
    report["instructions_per_request"]["baseline"] = {"nonstream": b_ns, "stream": b_s}
    report["tidegate_vs_baseline"] = {"nonstream": round(t_ns / b_ns, 4), "stream": round(t_s / b_s, 4)}
print(json.dumps(report, indent=2))
PY

#!/usr/bin/env bash
# Proxy overhead bench (issue 2): the same wrk load against the simulator directly, through
# tidegate (configs/bench-passthrough.yaml: 127.0.0.1:18000 -> sim at 127.0.0.1:18001) and
# through nginx as a plain keep-alive reverse proxy, in one run. Prints one JSON report.
#
# Env: BUILD (build dir with bin/, default build), DURATION (s per point, default 10),
# CONNECTIONS (default 64), WRK_THREADS (default 2), SIM_THREADS (default 2), ROUNDS (every
# point is split into this many slices, interleaved across targets; default 5),
# NGINX_PORT (default 18002), RESULT_JSON (also write the report there), BASELINE_BIN (another
# tidegate binary, say the build before a change, run as target `baseline` on BASELINE_PORT,
# default 18003, with the same config: the report then carries tidegate_vs_baseline_* ratios
# from interleaved rounds, the before/after of a change on one machine in one run).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
BUILD=${BUILD:-build}
DURATION=${DURATION:-10}
CONNECTIONS=${CONNECTIONS:-64}
WRK_THREADS=${WRK_THREADS:-2}
SIM_THREADS=${SIM_THREADS:-2}
ROUNDS=${ROUNDS:-5}
SIM_PORT=18001        # fixed by configs/bench-passthrough.yaml
GATEWAY_PORT=18000
NGINX_PORT=${NGINX_PORT:-18002}
BASELINE_BIN=${BASELINE_BIN:-}
BASELINE_PORT=${BASELINE_PORT:-18003}
SIM_BIN=$BUILD/bin/tidegate-sim
GATEWAY_BIN=$BUILD/bin/tidegate
GATEWAY_CONFIG=configs/bench-passthrough.yaml
HERE=bench/proxy
PY=python3
[[ -x .venv/bin/python ]] && PY=.venv/bin/python

BENCH_NAME=proxy
source bench/lib.sh  # log, die, WORK, PIDS (stopped at exit), wait_http, cpu_ns

command -v wrk >/dev/null || die "wrk not installed (scripts/setup.sh installs it)"
[[ -x $SIM_BIN ]] || die "$SIM_BIN missing: build it first (make, or cmake --build $BUILD --target tidegate-sim)"

port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

for p in $SIM_PORT $GATEWAY_PORT $NGINX_PORT $BASELINE_PORT; do
  port_busy "$p" && die "port $p is already in use on 127.0.0.1; stop whatever holds it"
done

# The simulator answers at once with 8 tokens: what is measured is the proxies, not the model.
"$SIM_BIN" --port $SIM_PORT --ttft-ms 0 --tpot-ms 0 --max-batch 100000 --threads "$SIM_THREADS" \
  >"$WORK/sim.log" 2>&1 &
SIM_PID=$!
PIDS+=($SIM_PID)
wait_http "http://127.0.0.1:$SIM_PORT/health" 10 || die "simulator did not come up: $(cat "$WORK/sim.log")"

targets=(direct)
declare -A URL=([direct]="http://127.0.0.1:$SIM_PORT")
declare -A PROXY_PIDS=()

if command -v nginx >/dev/null; then
  mkdir -p "$WORK/nginx"
  sed -e "s|@DIR@|$WORK/nginx|g" -e "s|@PORT@|127.0.0.1:$NGINX_PORT|g" \
      -e "s|@UPSTREAM@|127.0.0.1:$SIM_PORT|g" -e "s|@WORKERS@|$(nproc)|g" \
      $HERE/nginx.conf.template >"$WORK/nginx/nginx.conf"
  nginx -p "$WORK/nginx" -e "$WORK/nginx/error.log" -c "$WORK/nginx/nginx.conf" >"$WORK/nginx.log" 2>&1 &
  PIDS+=($!)
  if wait_http "http://127.0.0.1:$NGINX_PORT/health" 10; then
    targets+=(nginx); URL[nginx]="http://127.0.0.1:$NGINX_PORT"
    PROXY_PIDS[nginx]="${PIDS[-1]} $(pgrep -d' ' -P "${PIDS[-1]}")"  # the master and its workers
  else
    log "SKIP nginx: it did not come up: $(cat "$WORK/nginx.log" "$WORK/nginx/error.log" 2>/dev/null)"
  fi
else
  log "SKIP nginx: not installed (nginx-light)"
fi

if [[ ! -x $GATEWAY_BIN ]]; then
  log "SKIP tidegate: $GATEWAY_BIN missing (build the 'tidegate' target into $BUILD)"
elif [[ ! -f $GATEWAY_CONFIG ]]; then
  log "SKIP tidegate: $GATEWAY_CONFIG missing"
else
  "$GATEWAY_BIN" --config $GATEWAY_CONFIG >"$WORK/tidegate.log" 2>&1 &
  PIDS+=($!)
  if wait_http "http://127.0.0.1:$GATEWAY_PORT/readyz" 15; then
    targets+=(tidegate); URL[tidegate]="http://127.0.0.1:$GATEWAY_PORT"
    PROXY_PIDS[tidegate]=${PIDS[-1]}
  else
    log "SKIP tidegate: not ready within 15 s: $(tail -5 "$WORK/tidegate.log")"
  fi
fi

if [[ -n $BASELINE_BIN ]]; then
  [[ -x $BASELINE_BIN ]] || die "BASELINE_BIN=$BASELINE_BIN is not an executable"
  sed "s|127.0.0.1:$GATEWAY_PORT|127.0.0.1:$BASELINE_PORT|" $GATEWAY_CONFIG >"$WORK/baseline.yaml"
  "$BASELINE_BIN" --config "$WORK/baseline.yaml" >"$WORK/baseline.log" 2>&1 &
  PIDS+=($!)
  wait_http "http://127.0.0.1:$BASELINE_PORT/readyz" 15 || die "baseline not ready within 15 s: $(tail -5 "$WORK/baseline.log")"
  targets+=(baseline); URL[baseline]="http://127.0.0.1:$BASELINE_PORT"
  PROXY_PIDS[baseline]=${PIDS[-1]}
fi

busy_ticks() { awk '/^cpu /{print $2 + $3 + $4 + $7 + $8; exit}' /proc/stat; }

# Besides wrk's figures, each slice records the CPU the proxy, the simulator and the whole
# machine spent on it: throughput on a saturated box is the cores over the machine's CPU per
# request, and the simulator does the same work behind every target, so its CPU per request
# tells how fast the shared host ran during the slice.
run_wrk() {  # target threads connections seconds outfile [lua script]
  local procs=${PROXY_PIDS[$1]:-} p0 s0 b0
  p0=$(cpu_ns $procs); s0=$(cpu_ns "$SIM_PID"); b0=$(busy_ticks)
  wrk -t"$2" -c"$3" -d"$4s" --timeout 5s --latency -s "${6:-$HERE/chat.lua}" "${URL[$1]}/v1/chat/completions" >"$5" 2>&1 ||
    log "wrk failed against $1: $(tail -3 "$5")"
  printf '{"proxy_ns": %s, "sim_ns": %s, "busy_ticks": %s, "ticks_per_s": %s}\n' \
    "$(( $(cpu_ns $procs) - p0 ))" "$(( $(cpu_ns "$SIM_PID") - s0 ))" "$(( $(busy_ticks) - b0 ))" "$(getconf CLK_TCK)" >"$5.cpu"
}

for t in "${targets[@]}"; do
  # A correctness probe first: a proxy that answers errors fast would otherwise win.
  body=$(curl -fsS -H 'content-type: application/json' \
    -d '{"model":"sim","messages":[{"role":"user","content":"hi"}],"max_tokens":8}' \
    "${URL[$t]}/v1/chat/completions") || die "$t: probe request failed"
  grep -q '"completion_tokens":8' <<<"$body" || die "$t: unexpected probe reply: $body"
  sse=$(curl -fsS -H 'content-type: application/json' \
    -d '{"model":"sim","messages":[{"role":"user","content":"hi"}],"max_tokens":8,"stream":true}' \
    "${URL[$t]}/v1/chat/completions") || die "$t: streaming probe failed"
  [[ $sse == *"data: [DONE]"* && $sse != *'"usage"'* ]] || die "$t: unexpected streaming probe reply: $sse"
  log "$t: warm-up"
  run_wrk "$t" "$WRK_THREADS" "$CONNECTIONS" 2 "$WORK/warmup.txt"
done
# The other tenants of a shared machine take CPU in bursts, which would land on whichever
# target was being measured: every point is run as interleaved slices of all targets, so a
# burst is spread over them, and the summary takes the median slice.
slice=$(( (DURATION + ROUNDS - 1) / ROUNDS ))
((slice >= 2)) || slice=2
log "$ROUNDS interleaved rounds of ${slice}s per target and point: $CONNECTIONS connections non-stream and stream, then 1 connection"
for ((r = 1; r <= ROUNDS; r++)); do
  for t in "${targets[@]}"; do
    run_wrk "$t" "$WRK_THREADS" "$CONNECTIONS" "$slice" "$WORK/$t.c$CONNECTIONS.r$r.txt"
    run_wrk "$t" "$WRK_THREADS" "$CONNECTIONS" "$slice" "$WORK/$t.s$CONNECTIONS.r$r.txt" $HERE/chat_stream.lua
  done
done
for ((r = 1; r <= ROUNDS; r++)); do
  for t in "${targets[@]}"; do run_wrk "$t" 1 1 "$slice" "$WORK/$t.c1.r$r.txt"; done
done

cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
cat >"$WORK/meta.json" <<JSON
{"bench": "proxy", "date": "$(date -u +%Y-%m-%dT%H:%M:%SZ)", "commit": "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)",
 "machine": {"nproc": $(nproc), "cpu": "$cpu", "load_avg_at_end": "$(cut -d' ' -f1-3 /proc/loadavg)"},
 "duration_s": $DURATION, "connections": $CONNECTIONS, "wrk_threads": $WRK_THREADS,
 "rounds": "every point is $ROUNDS interleaved rounds of ${slice}s per target; the median of the rounds",
 "load": "wrk, keep-alive, POST /v1/chat/completions with 8 output tokens: cN non-stream, sN streaming (SSE)",
 "simulator": "tidegate-sim --ttft-ms 0 --tpot-ms 0 --threads $SIM_THREADS",
 "baseline_bin": "$BASELINE_BIN",
 "skipped": [$(for n in nginx tidegate; do [[ " ${targets[*]} " == *" $n "* ]] || printf '"%s",' "$n"; done | sed 's/,$//')]}
JSON
$PY $HERE/summarise.py "$WORK" | tee "${RESULT_JSON:-/dev/null}"
log "raw wrk outputs in $WORK"

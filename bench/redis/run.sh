#!/usr/bin/env bash
# What sharing state through Redis costs the gateway (issue 22): two tidegate processes on one
# tidegate-sim, the same config (cost accounting with a hard budget, a rate limit) except that
# one also has a `redis:` section (budget spend and rate-limit windows published to a local
# redis-server). Both are driven by the same wrk load in interleaved slices; each slice records
# the CPU the gateway (and redis-server) spent, so the figure is CPU per request, with and
# without Redis. Prints one JSON report. Ports are free ones on 127.0.0.1.
#
# Env: BUILD (default build), DURATION (s per target, default 10), ROUNDS (default 5),
# CONNECTIONS (default 16), WRK_THREADS (default 1), RESULT_JSON (also write the report there).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
BUILD=${BUILD:-build}
DURATION=${DURATION:-10}
ROUNDS=${ROUNDS:-5}
CONNECTIONS=${CONNECTIONS:-16}
WRK_THREADS=${WRK_THREADS:-1}
LUA=bench/proxy/chat.lua
BENCH_NAME=redis
source bench/lib.sh  # log, die, WORK, PIDS (stopped at exit), wait_http, free_port, cpu_ns
command -v wrk >/dev/null || die "wrk not installed (scripts/setup.sh installs it)"
command -v redis-server >/dev/null || die "redis-server not installed (scripts/setup.sh installs it)"
for b in tidegate tidegate-sim; do [[ -x $BUILD/bin/$b ]] || die "$BUILD/bin/$b missing: build it first"; done


REDIS_PORT=$(free_port)
redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save "" --appendonly yes --appendfsync everysec \
  --dir "$WORK" --daemonize no >"$WORK/redis.log" 2>&1 &
REDIS_PID=$!
PIDS+=($REDIS_PID)
"$BUILD/bin/tidegate-sim" --port 0 --ttft-ms 0 --tpot-ms 0 --max-batch 100000 --threads 1 >"$WORK/sim.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 100); do grep -q "listening on" "$WORK/sim.log" && break; sleep 0.05; done
SIM_PORT=$(grep -m1 -o '[0-9]*$' "$WORK/sim.log") || die "sim did not start"

declare -A URL PID
for t in local redis; do
  port=$(free_port)
  extra=""
  [[ $t == redis ]] && extra="redis: {address: \"127.0.0.1:$REDIS_PORT\", expected_gateways: 1}"
  cat >"$WORK/$t.yaml" <<YAML
listen: "127.0.0.1:$port"
threads: 1
access_log: {path: /dev/null, sample_rate: 0.0}
models:
  - name: sim
    max_concurrency_per_replica: 4096
    queue: {max_length: 10000, max_wait: 30s}
    replicas:
      - {id: sim-0, url: "http://127.0.0.1:$SIM_PORT", class: gpu}
cost:
  replica_classes: {gpu: {usd_per_hour: 1}}
  budgets:
    - {scope: 'tenant:*', period: day, hard_usd: 1000000}
rate_limits:
  - {scope: 'model:sim', requests_per_minute: 1000000000, tokens_per_minute: 1000000000000}
$extra
YAML
  "$BUILD/bin/tidegate" --config "$WORK/$t.yaml" >"$WORK/$t.log" 2>&1 &
  PIDS+=($!)
  PID[$t]=$!
  URL[$t]="http://127.0.0.1:$port"
  wait_http "${URL[$t]}/readyz" 15 || die "$t gateway not ready: $(tail -3 "$WORK/$t.log")"
done
# Redis must really be in use: the shared gateway's budget key appears after a request.
curl -fsS -H 'content-type: application/json' -d '{"model":"sim","messages":[{"role":"user","content":"hi"}]}' \
  "${URL[redis]}/v1/chat/completions" >/dev/null
sleep 0.3
[[ -n $(redis-cli -p "$REDIS_PORT" --scan --pattern 'tidegate:budgets:*' | head -1) ]] || die "no budget key in redis"

slice=$(( (DURATION + ROUNDS - 1) / ROUNDS )); ((slice >= 1)) || slice=1
for t in local redis; do wrk -t1 -c"$CONNECTIONS" -d2s -s $LUA "${URL[$t]}/v1/chat/completions" >/dev/null; done
for ((r = 1; r <= ROUNDS; r++)); do
  for t in local redis; do
    g0=$(cpu_ns "${PID[$t]}"); r0=$(cpu_ns "$REDIS_PID")
    wrk -t"$WRK_THREADS" -c"$CONNECTIONS" -d"${slice}s" --latency -s $LUA "${URL[$t]}/v1/chat/completions" >"$WORK/$t.r$r.txt"
    printf '{"gateway_ns": %s, "redis_ns": %s}\n' "$(( $(cpu_ns "${PID[$t]}") - g0 ))" "$(( $(cpu_ns "$REDIS_PID") - r0 ))" \
      >"$WORK/$t.r$r.cpu"
  done
done
python3 - "$WORK" "$ROUNDS" <<'PY' | tee "${RESULT_JSON:-/dev/null}"
import json, statistics, subprocess, sys, os, datetime
work, rounds = sys.argv[1], int(sys.argv[2])
out = {"bench": "redis", "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
       "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip(),
       "machine": {"nproc": os.cpu_count(), "cpu": next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?"),
                   "load_avg_at_end": open("/proc/loadavg").read().split()[:3]},
       "targets": {}}
for t in ("local", "redis"):
    rows = []
    for r in range(1, rounds + 1):
        w = next(json.loads(l[8:]) for l in open(f"{work}/{t}.r{r}.txt") if l.startswith("WRKJSON "))
        c = json.load(open(f"{work}/{t}.r{r}.cpu"))
        n = max(1, w["requests"])
        rows.append({"rps": w["rps"], "p50_us": w["p50_us"], "p99_us": w["p99_us"],
                     "gateway_cpu_us_per_request": c["gateway_ns"] / n / 1000, "redis_cpu_us_per_request": c["redis_ns"] / n / 1000,
                     "errors": sum(w["errors"].values())})
    out["targets"][t] = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
l, s = out["targets"]["local"], out["targets"]["redis"]
out["gateway_cpu_us_per_request_added"] = round(s["gateway_cpu_us_per_request"] - l["gateway_cpu_us_per_request"], 2)
print(json.dumps(out, indent=1))
PY

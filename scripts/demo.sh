#!/usr/bin/env bash
# Starts Tidegate with configs/demo.yaml (simulated replicas started by the scaler), prints the
# URLs to try, and optionally drives a burst of traffic so scaling and the cache show:
#   scripts/demo.sh                  # run until Ctrl-C
#   DEMO_LOAD=1 scripts/demo.sh      # also send a bounded burst, then watch the scale-down
#   BUILD=build-foo scripts/demo.sh  # binaries from another build dir (default: build)
#   DEMO_PORT=8090 scripts/demo.sh   # listen elsewhere than 8080
#   ENGINE=llama.cpp scripts/demo.sh # real llama-server replicas with SmolLM2-135M instead
#                                    # (configs/llamacpp.yaml; scripts/setup_engines.sh builds them)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
PORT=${DEMO_PORT:-8080}
SECONDS_LOAD=${DEMO_SECONDS:-40}
BASE="http://127.0.0.1:$PORT"
for bin in tidegate tidegate-sim; do
  if [[ ! -x $BUILD/bin/$bin ]]; then
    echo "demo: $BUILD/bin/$bin is missing; build it first (make build, or BUILD=<dir> for another build dir)" >&2
    exit 1
  fi
done
if [[ ! -x .venv/bin/python ]]; then
  echo "demo: .venv is missing; run scripts/setup.sh" >&2
  exit 1
fi
if (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; then
  echo "demo: port $PORT on 127.0.0.1 is already in use (another demo still running?)." >&2
  echo "      Stop it, or pick another port: DEMO_PORT=8090 scripts/demo.sh" >&2
  exit 1
fi
export PATH="$(cd "$BUILD/bin" && pwd):$PATH"
SOURCE_CONFIG=configs/demo.yaml
MODEL=llama-sim
CONCURRENCY=48
if [[ ${ENGINE:-sim} == llama.cpp ]]; then
  if [[ ! -x third_party/engines/llama.cpp/bin/llama-server ]]; then
    echo "demo: llama-server is not built; run scripts/setup_engines.sh (make demo ENGINE=llama.cpp does)" >&2
    exit 1
  fi
  SOURCE_CONFIG=configs/llamacpp.yaml
  MODEL=smollm2
  CONCURRENCY=8   # 3 replicas x 2 slots on a CPU: enough to queue and scale, not to time out
fi
mkdir -p .cache/demo
config=.cache/demo/demo.yaml
sed "s/127\.0\.0\.1:8080/127.0.0.1:$PORT/" "$SOURCE_CONFIG" > "$config"
"$BUILD/bin/tidegate" --check-config "$config"
"$BUILD/bin/tidegate" --config "$config" 2> >(tee .cache/demo/tidegate.log >&2) &
pid=$!
trap 'kill -TERM $pid 2>/dev/null; wait $pid 2>/dev/null' EXIT INT TERM
ready=0
for _ in $(seq 1 120); do
  if ! kill -0 "$pid" 2>/dev/null; then
    echo "demo: tidegate exited during startup; see .cache/demo/tidegate.log" >&2
    exit 1
  fi
  if curl -fs "$BASE/readyz" >/dev/null 2>&1; then ready=1; break; fi
  sleep 0.5
done
if [[ $ready != 1 ]]; then
  echo "demo: tidegate did not become ready in 60 s (first replica still loading?); see .cache/demo/tidegate.log" >&2
  exit 1
fi
cat <<MSG

Tidegate is up on $BASE ($SOURCE_CONFIG: model $MODEL).

  Dashboard      $BASE/dashboard/
  Metrics        $BASE/metrics
  Scaler         curl -H 'Authorization: Bearer admin-demo' $BASE/admin/scaler
  Costs          curl -H 'Authorization: Bearer admin-demo' '$BASE/admin/costs?by=tenant'
  Cache stats    curl -H 'Authorization: Bearer admin-demo' $BASE/admin/cache/stats
  A request      curl $BASE/v1/chat/completions -H 'Authorization: Bearer sk-demo-search' \\
                   -H 'Content-Type: application/json' \\
                   -d '{"model":"$MODEL","messages":[{"role":"user","content":"What is a tidegate?"}]}'
  Send it twice: the second answer comes from the cache (x-tidegate-cache: hit, x-tidegate-cost-usd).
  Load burst     .venv/bin/python scripts/demo_load.py --base $BASE --seconds 40 --concurrency $CONCURRENCY --model $MODEL

Ctrl-C stops the gateway and its replicas.
MSG
if [[ ${DEMO_LOAD:-0} == 1 ]]; then
  echo "demo: ${SECONDS_LOAD} s burst of $CONCURRENCY concurrent streams; the scaler's view follows"
  .venv/bin/python scripts/demo_watch.py --base "$BASE" --seconds "$SECONDS_LOAD" &
  watch=$!
  .venv/bin/python scripts/demo_load.py --base "$BASE" --seconds "$SECONDS_LOAD" --concurrency "$CONCURRENCY" --model "$MODEL" || true
  wait $watch 2>/dev/null || true
  echo "demo: burst over; watching the scale-down (stabilisation window, then drains)"
  .venv/bin/python scripts/demo_watch.py --base "$BASE" --seconds 90 --until-min || true
  curl -fs -H 'Authorization: Bearer admin-demo' "$BASE/admin/costs?by=tenant" && echo
fi
wait $pid

#!/usr/bin/env bash
# Starts Tidegate with configs/demo.yaml (simulated replicas started by the scaler), prints the
# URLs to try, and optionally drives a burst of traffic so scaling and the cache show:
#   scripts/demo.sh            # run until Ctrl-C
#   DEMO_LOAD=1 scripts/demo.sh  # also send a 60 s burst (bounded) from the load script
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/build/bin:$PATH"
mkdir -p .cache/demo
build/bin/tidegate --check-config configs/demo.yaml
build/bin/tidegate --config configs/demo.yaml 2> >(tee .cache/demo/tidegate.log >&2) &
pid=$!
trap 'kill -TERM $pid 2>/dev/null; wait $pid 2>/dev/null' EXIT INT TERM
for _ in $(seq 1 120); do
  curl -fs http://127.0.0.1:8080/readyz >/dev/null 2>&1 && break
  sleep 0.5
done
cat <<MSG

Tidegate is up on http://127.0.0.1:8080 (simulated llama-sim replicas, warm pool of 1).

  Dashboard      http://127.0.0.1:8080/dashboard/
  Metrics        http://127.0.0.1:8080/metrics
  Scaler         curl -H 'Authorization: Bearer admin-demo' http://127.0.0.1:8080/admin/scaler
  Costs          curl -H 'Authorization: Bearer admin-demo' 'http://127.0.0.1:8080/admin/costs?by=tenant'
  Cache stats    curl -H 'Authorization: Bearer admin-demo' http://127.0.0.1:8080/admin/cache/stats
  A request      curl http://127.0.0.1:8080/v1/chat/completions -H 'Authorization: Bearer sk-demo-search' \\
                   -H 'Content-Type: application/json' \\
                   -d '{"model":"llama-sim","messages":[{"role":"user","content":"What is a tidegate?"}]}'
  Send it twice: the second answer comes from the cache (x-tidegate-cache: hit, x-tidegate-cost-usd).
  Load burst     .venv/bin/python scripts/demo_load.py --seconds 60 --concurrency 48

Ctrl-C stops the gateway and its replicas.
MSG
if [[ ${DEMO_LOAD:-0} == 1 ]]; then .venv/bin/python scripts/demo_load.py --seconds 60 --concurrency 48 || true; fi
wait $pid

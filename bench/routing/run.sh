#!/usr/bin/env bash
# Per-request CPU of prefix-aware routing (hash + match + choose + record for a 4k-token prompt
# over 8 replicas) beside least-loaded-of-two, and the index's memory per replica.
# Env: BUILD (build dir with bin/, default build).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BIN=$ROOT/${BUILD:-build}/bin/tidegate_routing_bench
[[ -x $BIN ]] || { echo "bench/routing: $BIN missing: build it first (make)" >&2; exit 1; }
exec "$BIN" --benchmark_repetitions=3 --benchmark_report_aggregates_only=true

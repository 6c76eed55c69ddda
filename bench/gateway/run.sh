#!/usr/bin/env bash
# The gateway's JSON scans (request validation, answer summary) beside boost::json::parse, the
# parser they stand in for. Google Benchmark; prints its JSON report.
# Env: BUILD (build dir with bin/, default build).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BIN=$ROOT/${BUILD:-build}/bin/tidegate_json_scan_bench
[[ -x $BIN ]] || { echo "bench/gateway: $BIN missing: build it first (make)" >&2; exit 1; }
exec "$BIN" --benchmark_repetitions=3 --benchmark_report_aggregates_only=true --benchmark_format=json

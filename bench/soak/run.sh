#!/usr/bin/env bash
# Soak bench (issue 18): SOAK_MINUTES (default 10) of mixed traffic through tidegate in front of
# faulty tidegate-sim replicas, sampling the gateway's RSS and descriptors (bench/soak/README.md).
# The text report goes to stderr, summary.json to stdout; exit 1 on growth or a gateway death.
# Env: BUILD (build dir with bin/, default build), SOAK_MINUTES, SOAK_OUT (default
# bench/soak/results/<date>), SOAK_ARGS (more soak.py flags).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${BUILD:-build}
[[ $BUILD = /* ]] || BUILD=$ROOT/$BUILD
OUT=${SOAK_OUT:-$ROOT/bench/soak/results/$(date -u +%Y-%m-%d-%H%M)}
rc=0
# shellcheck disable=SC2086
python3 "$ROOT/bench/soak/soak.py" --minutes "${SOAK_MINUTES:-10}" --bin-dir "$BUILD/bin" --out "$OUT" \
  ${SOAK_ARGS:-} >&2 || rc=$?
[[ -f $OUT/summary.json ]] && cat "$OUT/summary.json"
exit "$rc"

#!/usr/bin/env bash
# MiniLM CPU encoder bench: latency of embed() for short prompts at batch 1, 8 and 32, the
# tokenizer alone, and the hash embedder, with one OpenBLAS thread per call (as in production).
# Prints Google Benchmark's JSON. Env: BUILD (build dir with bin/, default build),
# REPETITIONS (default 3), MIN_TIME (s per benchmark, default 1), TIDEGATE_MINILM_DIR.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
BUILD=${BUILD:-build}
BIN=$BUILD/bin/tidegate-bench-encoder
[[ -x $BIN ]] || { echo "bench/encoder: $BIN not built (cmake --build $BUILD --target tidegate-bench-encoder)" >&2; exit 1; }
[[ -f ${TIDEGATE_MINILM_DIR:-third_party/models/all-MiniLM-L6-v2}/model.safetensors ]] ||
  { echo "bench/encoder: MiniLM weights missing; run scripts/setup.sh" >&2; exit 1; }
exec "$BIN" --benchmark_min_time="${MIN_TIME:-1}" --benchmark_repetitions="${REPETITIONS:-3}" \
  --benchmark_report_aggregates_only=true --benchmark_format=json

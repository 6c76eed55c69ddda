#!/usr/bin/env bash
# One-call device check for the GPU path (issue 4). Run from the repository root on a host with
# a GPU:   bash bench/kernels/gpu_check.sh            (writes into $OUT, default /tmp/kernels_gpu_check)
# Steps, each under its own timeout inside a global budget (default 570 s), later steps skipped
# when the budget runs out:
#   1. configure + build (Release, CUDA on) the kernels tests and the benchmark driver
#   2. ctest -R '^kernels\.' and the GPU test binary with a gtest JSON report
#   3. compute-sanitizer memcheck (all GPU tests) and racecheck (search + ops kernels)
#   4. benchmarks -> JSON: encoder and pair verifier (GPU vs CPU), search at 100k + 1M (GPU, FAISS flat; HNSW at
#      100k), search at 10M (GPU, FAISS flat; no HNSW: construction would take too long)
#   5. with the budget left: FAISS HNSW at 1M (CPU only)
# --skip-gpu runs the same flow without a device: CPU-only quick bench, no sanitizers.
# --prebuilt DIR uses binaries built elsewhere (pack_for_device.sh): no configure, build or ctest.
# --no-cpu-peers stops before step 5 (FAISS flat at 10M, HNSW at 1M: minutes of CPU time).
# Options: --skip-gpu --no-encoder --no-cpu-peers --prebuilt DIR --build-dir DIR --build-type TYPE --jobs N --budget SECONDS --batches LIST
set -uo pipefail
cd "$(dirname "$0")/../.."

OUT="${OUT:-/tmp/kernels_gpu_check}"
BUILD=build-gpucheck
BUILD_TYPE=Release
JOBS="$(nproc)"
BUDGET=570
SKIP_GPU=0
ENCODER=1
CPU_PEERS=1
PREBUILT=""
BATCHES=1,16,64
while (($#)); do
  case "$1" in
    --skip-gpu) SKIP_GPU=1 ;;
    --no-encoder) ENCODER=0 ;;
    --no-cpu-peers) CPU_PEERS=0 ;;
    --prebuilt) PREBUILT="$2"; shift ;;
    --batches) BATCHES="$2"; shift ;;
    --build-dir) BUILD="$2"; shift ;;
    --build-type) BUILD_TYPE="$2"; shift ;;
    --jobs) JOBS="$2"; shift ;;
    --budget) BUDGET="$2"; shift ;;
    *) echo "gpu_check: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
mkdir -p "$OUT"
SANITIZER=""
for c in /usr/local/cuda/bin/compute-sanitizer /usr/local/cuda/compute-sanitizer/compute-sanitizer \
  "$(command -v compute-sanitizer 2>/dev/null)"; do
  [[ -n "$c" && -x "$c" ]] && { SANITIZER="$c"; break; }
done
STEPS=()

left() { echo $((BUDGET - SECONDS)); }
# step NAME CAP_SECONDS command... : runs with timeout min(CAP, budget left - 10), logs to $OUT/NAME.log.
step() {
  local name="$1" cap="$2"; shift 2
  local t=$(( $(left) - 10 ))
  ((t > cap)) && t=$cap
  if ((t < 20)); then
    echo "gpu_check: $name skipped (budget spent)"
    STEPS+=("{\"step\":\"$name\",\"status\":\"skipped: budget\"}")
    return 0
  fi
  local start=$SECONDS rc
  echo "gpu_check: $name (timeout ${t}s)"
  timeout --kill-after=10 "$t" "$@" >"$OUT/$name.log" 2>&1
  rc=$?
  local status=ok
  ((rc == 124 || rc == 137)) && status="timeout after ${t}s"
  ((rc != 0 && rc != 124 && rc != 137)) && status="failed rc=$rc"
  echo "gpu_check: $name -> $status in $((SECONDS - start))s"
  tail -n 5 "$OUT/$name.log" | sed 's/^/    /'
  STEPS+=("{\"step\":\"$name\",\"status\":\"$status\",\"seconds\":$((SECONDS - start))}")
  return $rc
}

finish() {
  {
    echo "{\"date\":\"$(date -u +%FT%TZ)\",\"host\":\"$(hostname)\",\"skip_gpu\":$SKIP_GPU,"
    echo "\"gpu\":\"$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null | head -1)\","
    echo "\"elapsed_s\":$SECONDS,\"steps\":[$(IFS=,; echo "${STEPS[*]}")]}"
  } >"$OUT/summary.json"
  if command -v python3 >/dev/null; then
    python3 bench/kernels/results_md.py "$OUT" >"$OUT/kernels_results.md" 2>"$OUT/results_md.log" || true
  fi
  echo "gpu_check: done in ${SECONDS}s; results in $OUT"
  cat "$OUT/summary.json"
}
trap finish EXIT

if [[ -n "$PREBUILT" ]]; then
  BIN="$PREBUILT"
  step cpu_tests 90 "$BIN/tidegate_kernels_cpu_tests"
else
  step configure 120 cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE="$BUILD_TYPE" -DTIDEGATE_CUDA=ON || exit 1
  if ! grep -q "tidegate: CUDA kernels ON" "$OUT/configure.log" && ((SKIP_GPU == 0)); then
    echo "gpu_check: configure did not enable CUDA (nvcc missing?); see configure.log"
    STEPS+=("{\"step\":\"cuda\",\"status\":\"not enabled by configure\"}")
  fi
  step build 330 cmake --build "$BUILD" -j "$JOBS" --target tidegate_kernels_cpu_tests tidegate_kernels_gpu_tests \
    tidegate_kernels_bench || exit 1
  BIN="$BUILD/bin"
  step ctest 90 ctest --test-dir "$BUILD" -R '^kernels\.' --output-on-failure
fi
# Both search plans are tested (the default first); the A/B knob is TIDEGATE_GPU_SEARCH_PLAN.
PLANS=(occupancy buffered)
if [[ -x "$BIN/tidegate_kernels_gpu_tests" ]]; then
  for plan in "${PLANS[@]}"; do
    step "gpu_tests_$plan" 90 env TIDEGATE_GPU_SEARCH_PLAN="$plan" "$BIN/tidegate_kernels_gpu_tests" \
      --gtest_output="json:$OUT/gpu_tests_$plan.json"
    # All-skipped on a GPU host means the device was not usable: say so in the summary.
    passed=$(grep -oP '^\[  PASSED  \] \K[0-9]+' "$OUT/gpu_tests_$plan.log" | tail -1)
    skipped=$(grep -oP '^\[  SKIPPED \] \K[0-9]+(?= test)' "$OUT/gpu_tests_$plan.log" | tail -1)
    STEPS+=("{\"step\":\"gpu_tests_${plan}_counts\",\"status\":\"passed ${passed:-0}, skipped ${skipped:-0}\"}")
  done
fi

# Sanitizers right after the tests: they take seconds and are what a short lease must not miss.
if ((SKIP_GPU == 0)); then
  if [[ -n "$SANITIZER" ]]; then
    step memcheck 120 "$SANITIZER" --tool memcheck --leak-check full --error-exitcode 7 \
      "$BIN/tidegate_kernels_gpu_tests"
    for plan in "${PLANS[@]}"; do
      step "racecheck_$plan" 90 env TIDEGATE_GPU_SEARCH_PLAN="$plan" "$SANITIZER" --tool racecheck --error-exitcode 7 \
        "$BIN/tidegate_kernels_gpu_tests" --gtest_filter='GpuFlatIndex.*:GpuOps.*'
    done
  else
    STEPS+=("{\"step\":\"compute-sanitizer\",\"status\":\"not installed (looked in /usr/local/cuda and PATH)\"}")
  fi
fi

if ((SKIP_GPU)); then
  step bench_cpu_only 120 "$BIN/tidegate_kernels_bench" --cpu-only --quick --out "$OUT/bench_cpu_only.json"
  exit 0
fi

# After an OpenMP region (FAISS), libgomp's threads spin for a while and starve OpenBLAS's own
# threads: FAISS flat at batch 64 ran 10x slower. Passive waiting gives the CPU peers a fair run.
export OMP_WAIT_POLICY=PASSIVE
# Encoder first (the smallest), then search small, then the 10M scan (largest host data). The
# CPU peers (FAISS flat, HNSW) run beside the default plan; the other plan runs GPU-only, with
# FAISS flat kept at 100k/1M for the recall check.
((ENCODER)) && step bench_encoder 120 "$BIN/tidegate_kernels_bench" --no-search --min-time 1.5 \
  --out "$OUT/bench_encoder.json"
step bench_search_small 150 "$BIN/tidegate_kernels_bench" --no-encoder --no-verifier --sizes 100000,1000000 --hnsw-max 100000 \
  --batches "$BATCHES" --out "$OUT/bench_search_small.json"
step bench_search_small_buffered 90 env TIDEGATE_GPU_SEARCH_PLAN=buffered "$BIN/tidegate_kernels_bench" \
  --no-encoder --no-verifier --sizes 100000,1000000 --hnsw-max 0 --batches "$BATCHES" --out "$OUT/bench_search_small_buffered.json"
step bench_search_10m 90 "$BIN/tidegate_kernels_bench" --no-encoder --no-verifier --sizes 10000000 --hnsw-max 0 --faiss-flat-max 0 \
  --batches "$BATCHES" --out "$OUT/bench_search_10m.json"
step bench_search_10m_buffered 90 env TIDEGATE_GPU_SEARCH_PLAN=buffered "$BIN/tidegate_kernels_bench" --no-encoder --no-verifier \
  --sizes 10000000 --hnsw-max 0 --faiss-flat-max 0 --batches "$BATCHES" --out "$OUT/bench_search_10m_buffered.json"

((CPU_PEERS)) || exit 0
# With the budget left, the slow CPU peers: FAISS flat at 10M, then HNSW at 1M (construction alone
# takes minutes).
step bench_search_10m_faiss 120 "$BIN/tidegate_kernels_bench" --cpu-only --no-encoder --no-verifier --sizes 10000000 --hnsw-max 0 \
  --batches 1,64 --out "$OUT/bench_search_10m_faiss.json"
step bench_search_hnsw_1m 150 "$BIN/tidegate_kernels_bench" --cpu-only --no-encoder --no-verifier --sizes 1000000 \
  --hnsw-max 1000000 --out "$OUT/bench_search_hnsw_1m.json"
exit 0

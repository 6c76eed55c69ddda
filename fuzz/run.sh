#!/usr/bin/env bash
# Builds the fuzz targets (clang, ASan + UBSan + libFuzzer) into build-fuzz/ and runs each for
# FUZZ_SECONDS on a copy of its seed corpus; fails if any target crashes, leaks, runs out of
# memory or times out on an input. One summary line per target.
#
#   fuzz/run.sh                      # every target, FUZZ_SECONDS (default 60) each
#   FUZZ_SECONDS=600 FUZZ_PARALLEL=2 fuzz/run.sh sse config
#
# Environment: FUZZ_SECONDS (per target), FUZZ_PARALLEL (targets at a time, default 1),
# FUZZ_BUILD (default build-fuzz), FUZZ_JOBS (build parallelism, default nproc), FUZZ_NICE
# (niceness of the fuzzers, default 0), FUZZ_TIMEOUT (seconds an input may take, default 10),
# FUZZ_SKIP_BUILD=1 (run the targets already in $FUZZ_BUILD/bin). fuzz/corpus/ is never written: new inputs go to
# $FUZZ_BUILD/run/<target>/corpus, crashes to $FUZZ_BUILD/run/<target>/artifacts.
set -euo pipefail
cd "$(dirname "$0")/.."

SECS=${FUZZ_SECONDS:-60}
BUILD=${FUZZ_BUILD:-build-fuzz}
JOBS=${FUZZ_JOBS:-$(nproc)}
PAR=${FUZZ_PARALLEL:-1}
NICE=${FUZZ_NICE:-0}
TIMEOUT=${FUZZ_TIMEOUT:-10}

# target  max_len  malloc_limit_mb  dictionary
TABLE="
client_request    16384 512  http.dict
upstream_response 16384 512  http.dict
chunk_scan        8192  512  json.dict
request_scan      8192  512  json.dict
sse               32768 1024 sse.dict
config            16384 1024 yaml.dict
prometheus        16384 512  prom.dict
trace             8192  512  trace.dict
persistence       4096  512  -
safetensors       4096  512  json.dict
wordpiece         4096  512  -
placements        8192  512  -
"

all_targets=$(awk 'NF {print $1}' <<<"$TABLE")
targets=${*:-$all_targets}
for t in $targets; do
  grep -qw "^$t" <<<"$(awk 'NF {print $1}' <<<"$TABLE")" || { echo "fuzz: unknown target $t (one of: $(echo $all_targets))" >&2; exit 2; }
done

if [[ ${FUZZ_SKIP_BUILD:-0} != 1 ]]; then
  if [[ ! -f $BUILD/CMakeCache.txt ]]; then
    cmake -S fuzz -B "$BUILD" -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang >/dev/null
  fi
  start=$(date +%s)
  cmake --build "$BUILD" -j "$JOBS" --target $(for t in $targets; do echo "fuzz_$t"; done) >/dev/null
  echo "fuzz: built $(wc -w <<<"$targets") targets in $(( $(date +%s) - start ))s; ${SECS}s each"
fi
# FUZZ_BUILD_ONLY=1: build and stop (CI builds the targets in the background, runs them later).
[[ ${FUZZ_BUILD_ONLY:-0} == 1 ]] && exit 0

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=0:detect_stack_use_after_return=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

run_one() {
  local t=$1 max_len=$2 malloc=$3 dict=$4
  local work=$BUILD/run/$t
  rm -rf "$work"
  mkdir -p "$work/corpus" "$work/artifacts"
  cp fuzz/corpus/"$t"/* "$work/corpus/"
  local args=(-max_total_time="$SECS" -rss_limit_mb=2048 -malloc_limit_mb="$malloc" -max_len="$max_len"
              -timeout="$TIMEOUT" -report_slow_units="$TIMEOUT" -print_final_stats=1 -artifact_prefix="$work/artifacts/")
  [[ $dict != - ]] && args+=(-dict=fuzz/dict/"$dict")
  local rc=0
  nice -n "$NICE" "$BUILD/bin/fuzz_$t" "${args[@]}" "$work/corpus" >"$work/log" 2>&1 || rc=$?
  local execs rate cov ft crashes files
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$work/log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$work/log" | tail -1 | awk '{print $2}')
  ft=$(grep -o 'ft: [0-9]*' "$work/log" | tail -1 | awk '{print $2}')
  files=$(find "$work/corpus" -type f | wc -l)
  crashes=$(find "$work/artifacts" -type f | wc -l)
  local status=ok
  # A unit over the timeout (or reported slow at the same bound) on a shared, loaded machine is
  # often a stall of the machine, not of the target: each such input is replayed once on its
  # own, and only one that errors or is slow again fails.
  local slow_units
  slow_units=$(find "$work/artifacts" -type f \( -name 'timeout-*' -o -name 'slow-unit-*' \) | wc -l)
  if ((crashes != 0 && slow_units == crashes)); then
    local again=0 f
    for f in "$work"/artifacts/timeout-* "$work"/artifacts/slow-unit-*; do
      [[ -f $f ]] || continue
      local t0=$SECONDS
      nice -n "$NICE" "$BUILD/bin/fuzz_$t" -timeout="$TIMEOUT" -runs=1 -rss_limit_mb=2048 -malloc_limit_mb="$malloc" \
        "$f" >>"$work/retime.log" 2>&1 || again=$((again + 1))
      ((SECONDS - t0 < TIMEOUT)) || again=$((again + 1))
    done
    if ((again == 0)); then
      status="ok ($slow_units slow unit(s) over ${TIMEOUT}s replayed within it: $work/retime.log)"
      rc=0 crashes=0
    fi
  fi
  if ((rc != 0 || crashes != 0)); then status="FAILED (rc $rc; log $work/log; artifacts $work/artifacts/)"; fi
  printf 'fuzz %-18s %4ss  execs %9s  exec/s %6s  cov %5s  ft %6s  corpus %5s  crashes %s  %s\n' \
    "$t" "$SECS" "${execs:-?}" "${rate:-?}" "${cov:-?}" "${ft:-?}" "$files" "$crashes" "$status" | tee "$work/summary"
  [[ $status == ok* ]]
}

failed=0
running=0
for t in $targets; do
  read -r _ max_len malloc dict <<<"$(grep -w "^$t" <<<"$TABLE")"
  if ((PAR > 1)); then
    run_one "$t" "$max_len" "$malloc" "$dict" &
    running=$((running + 1))
    if ((running >= PAR)); then
      wait -n || failed=1
      running=$((running - 1))
    fi
  else
    run_one "$t" "$max_len" "$malloc" "$dict" || failed=1
  fi
done
while ((running > 0)); do
  wait -n || failed=1
  running=$((running - 1))
done
if ((failed)); then
  echo "fuzz: FAILED; reproduce with $BUILD/bin/fuzz_<target> <artifact> (fuzz/README.md)" >&2
  for t in $targets; do
    if [[ -f $BUILD/run/$t/log ]] && ! grep -qE ' ok( \(|$)' "$BUILD/run/$t/summary" 2>/dev/null; then
      echo "---- $t: last lines of $BUILD/run/$t/log" >&2
      grep -v '^#[0-9]' "$BUILD/run/$t/log" | tail -40 >&2
    fi
  done
  exit 1
fi
echo "fuzz: all $(wc -w <<<"$targets") targets ok"

#!/usr/bin/env bash
# fuzz/run.sh against a stand-in `fuzz_config`: it leaves the artifact a case asks for (as
# libFuzzer would) and, asked to replay one input (-runs=1), takes and returns what the case says.
# Each case checks run.sh's exit status and its summary line.
set -uo pipefail
RUN_SH=${1:?usage: run_sh_test.sh path/to/fuzz/run.sh}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/bin"
cat >"$work/bin/fuzz_config" <<'STANDIN'
#!/usr/bin/env bash
prefix="" replay=0
for a in "$@"; do
  case $a in -artifact_prefix=*) prefix=${a#*=} ;; -runs=1) replay=1 ;; esac
done
if ((replay)); then sleep "$REPLAY_S"; exit "$REPLAY_RC"; fi
[[ $ARTIFACT == none ]] || echo input >"${prefix}${ARTIFACT}-0123abcd"
echo "stat::number_of_executed_units: 42"
exit "$FUZZ_RC"
STANDIN
chmod +x "$work/bin/fuzz_config"

failures=0
# check NAME ARTIFACT FUZZ_RC REPLAY_S REPLAY_RC WANT_EXIT WANT_IN_SUMMARY
check() {
  local out rc summary
  out=$(ARTIFACT=$2 FUZZ_RC=$3 REPLAY_S=$4 REPLAY_RC=$5 FUZZ_SKIP_BUILD=1 FUZZ_BUILD="$work" FUZZ_SECONDS=1 \
        FUZZ_TIMEOUT=2 bash "$RUN_SH" config 2>&1)
  rc=$?
  summary=$(cat "$work/run/config/summary" 2>/dev/null)
  if [[ $rc != "$6" || $summary != *"$7"* ]]; then
    echo "FAIL $1: exit $rc (want $6), summary: $summary (want: $7)"
    echo "$out" | tail -5
    failures=$((failures + 1))
  else
    echo "ok   $1: $summary"
  fi
}
check "clean run"                          none      0 0 0 0 "crashes 0  ok"
check "slow unit, fast on replay"          slow-unit 0 0 0 0 "ok (1 slow unit(s) over 2s replayed within it"
check "timeout, fast on replay"            timeout   1 0 0 0 "ok (1 slow unit(s) over 2s replayed within it"
check "slow unit, slow again"              slow-unit 0 3 0 1 "FAILED"
check "slow unit, replay errors"           slow-unit 0 0 1 1 "FAILED"
check "crash"                              crash     1 0 0 1 "FAILED"
check "leak"                               leak      1 0 0 1 "FAILED"
((failures == 0))

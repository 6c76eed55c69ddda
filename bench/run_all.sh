#!/usr/bin/env bash
# Runs every bench/*/run.sh present, one after the other (they share ports and CPUs), and
# reports which failed. Each prints its own JSON.
set -uo pipefail
cd "$(dirname "$0")"
failed=()
for script in */run.sh; do
  [[ -x $script ]] || continue
  echo "=== bench/$script" >&2
  ./"$script" || failed+=("$script")
done
if ((${#failed[@]})); then
  echo "bench/run_all.sh: failed: ${failed[*]}" >&2
  exit 1
fi

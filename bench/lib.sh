# Shared by the bench scripts that start processes on 127.0.0.1 and drive them with wrk
# (bench/proxy/run.sh, bench/routing/proxy_prefix.sh, bench/redis/run.sh). Source it after
# setting BENCH_NAME (the prefix of log lines and of the scratch folder):
#   log/die        messages on stderr, prefixed "bench/$BENCH_NAME: "
#   WORK, PIDS     a scratch folder; processes to stop: every PID appended to PIDS is killed
#                  and reaped when the script exits, however it exits
#   wait_http URL SECONDS   polls until the URL answers 2xx, or fails after SECONDS
#   free_port               a free TCP port on 127.0.0.1
#   cpu_ns PID...           CPU nanoseconds of processes and all their threads, from
#                           schedstat: exact, where /proc/PID/stat counts 10 ms ticks
log() { echo "bench/$BENCH_NAME: $*" >&2; }
die() { log "$*"; exit 1; }

WORK=$(mktemp -d "/tmp/tidegate-bench-$BENCH_NAME.XXXXXX")
PIDS=()
bench_cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
}
trap bench_cleanup EXIT

wait_http() {
  local deadline=$((SECONDS + $2))
  until curl -fsS -o /dev/null "$1" 2>/dev/null; do
    ((SECONDS < deadline)) || return 1
    sleep 0.1
  done
}
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
cpu_ns() {
  local total=0 p f v
  for p in "$@"; do
    for f in /proc/"$p"/task/*/schedstat; do read -r v _ 2>/dev/null <"$f" && total=$((total + v)); done
  done
  echo "$total"
}

#!/usr/bin/env bash
# Browser test of the built-in dashboard: a real server (embedded assets + live data.json from the
# real CostAccounting), Debian's headless chromium, then checks on the DOM and the console. Two
# pages: ten minutes of demo traffic, and no data at all (a gateway that has just started, whose
# time axes once read NaN:NaN:NaN).
#   dashboard_browser_test.sh <server-binary-or-URL> <output-dir>
# With a URL (http://host:port/dashboard/) it tests that page instead (e.g. the gateway's).
set -euo pipefail
target=$1
out=$2
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
command -v chromium >/dev/null || { echo "SKIP: chromium not installed"; exit 77; }
tmp=$(mktemp -d)
pid=""
stop_server() {
  if [[ -n $pid ]]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  pid=""
}
cleanup() {
  stop_server
  rm -rf "$tmp"
}
trap cleanup EXIT

# start_server <name> [server flags...]: sets $url.
start_server() {
  local name=$1
  shift
  : >"$tmp/$name.server.out"  # exists before the server opens it, so polling never races the redirect
  "$target" --seconds 55 "$@" >"$tmp/$name.server.out" 2>"$tmp/$name.server.err" &
  pid=$!
  local port=""
  for _ in $(seq 1 200); do
    port=$(sed -n 's/^PORT //p' "$tmp/$name.server.out" 2>/dev/null || true)
    [[ -n $port ]] && break
    sleep 0.1
  done
  [[ -n $port ]] || { echo "server did not start"; cat "$tmp/$name.server.err"; exit 1; }
  url="http://127.0.0.1:$port/dashboard/"
}

flags=(--headless --no-sandbox --disable-gpu --disable-background-networking --disable-component-update
       --disable-default-apps --disable-sync --no-first-run --window-size=1280,900
       --virtual-time-budget=6000)

# check_page <name> <png-name> [check flags...]: renders $url, screenshots it, checks the DOM.
check_page() {
  local name=$1 png=$2
  shift 2
  curl -fsS --max-time 10 "$url" | grep -q 'app.js'
  curl -fsS --max-time 10 "${url}data.json" >"$tmp/$name.data.json"
  timeout 50 chromium "${flags[@]}" --user-data-dir="$tmp/$name.p1" --enable-logging=stderr --v=0 \
    --dump-dom "$url" >"$tmp/$name.dom.html" 2>"$tmp/$name.console.log" ||
    { echo "chromium --dump-dom failed"; tail -20 "$tmp/$name.console.log"; exit 1; }
  timeout 50 chromium "${flags[@]}" --user-data-dir="$tmp/$name.p2" --hide-scrollbars \
    --screenshot="$out/$png" "$url" >/dev/null 2>"$tmp/$name.shot.log" ||
    { echo "screenshot failed"; tail -20 "$tmp/$name.shot.log"; exit 1; }
  cp "$tmp/$name.dom.html" "$out/${png%.png}-dom.html"
  python3 "$here/check_dashboard_dom.py" "$tmp/$name.dom.html" "$tmp/$name.console.log" "$tmp/$name.data.json" \
    "$out/$png" "$@"
}

if [[ $target == http://* ]]; then
  url=$target
  check_page live cost-dashboard.png
  exit 0
fi
start_server live
check_page live cost-dashboard.png
stop_server
start_server empty --empty 1
check_page empty cost-dashboard-empty.png --empty

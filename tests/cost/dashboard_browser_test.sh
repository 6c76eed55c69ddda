#!/usr/bin/env bash
# Browser test of the built-in dashboard: a real server (embedded assets + live data.json from the
# real CostAccounting), Debian's headless chromium, then checks on the DOM and the console.
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
cleanup() {
  if [[ -n $pid ]]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT

if [[ $target == http://* ]]; then
  url=$target
else
  : >"$tmp/server.out"  # exists before the server opens it, so polling never races the redirect
  "$target" --seconds 55 >"$tmp/server.out" 2>"$tmp/server.err" &
  pid=$!
  port=""
  for _ in $(seq 1 200); do
    port=$(sed -n 's/^PORT //p' "$tmp/server.out" 2>/dev/null || true)
    [[ -n $port ]] && break
    sleep 0.1
  done
  [[ -n $port ]] || { echo "server did not start"; cat "$tmp/server.err"; exit 1; }
  url="http://127.0.0.1:$port/dashboard/"
fi

curl -fsS --max-time 10 "$url" | grep -q 'app.js'
curl -fsS --max-time 10 "${url}data.json" >"$tmp/data.json"

flags=(--headless --no-sandbox --disable-gpu --disable-background-networking --disable-component-update
       --disable-default-apps --disable-sync --no-first-run --window-size=1280,900
       --virtual-time-budget=6000)
timeout 50 chromium "${flags[@]}" --user-data-dir="$tmp/p1" --enable-logging=stderr --v=0 \
  --dump-dom "$url" >"$tmp/dom.html" 2>"$tmp/console.log" || { echo "chromium --dump-dom failed"; tail -20 "$tmp/console.log"; exit 1; }
timeout 50 chromium "${flags[@]}" --user-data-dir="$tmp/p2" --hide-scrollbars \
  --screenshot="$out/cost-dashboard.png" "$url" >/dev/null 2>"$tmp/shot.log" || { echo "screenshot failed"; tail -20 "$tmp/shot.log"; exit 1; }
cp "$tmp/dom.html" "$out/cost-dashboard-dom.html"
python3 "$here/check_dashboard_dom.py" "$tmp/dom.html" "$tmp/console.log" "$tmp/data.json" "$out/cost-dashboard.png"

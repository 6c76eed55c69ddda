#!/usr/bin/env python3
"""Checks the DOM chromium dumped after running the dashboard, its console log and screenshot.

The page's JS writes what it drew into DOM attributes (body data-status / data-updates, each
panel's data-points / data-lines / data-x-axis / data-y-axis), so this checks what was
rendered, not just what was served.

  check_dashboard_dom.py DOM CONSOLE DATA PNG [--empty]

--empty: the server had no data at all; every panel must still draw a real time axis (the
window ending now, not NaN:NaN:NaN) and say "no data yet".
"""
import json
import re
import sys
from html.parser import HTMLParser

dom_path, console_path, data_path, png_path = sys.argv[1:5]
empty = "--empty" in sys.argv[5:]
CLOCK = r"\d\d:\d\d:\d\d"

# Panels the cost library always feeds; each must have drawn points.
REQUIRED = ["requests_per_s", "cost_by_tenant", "cost_by_model", "cache_savings", "cache_hit_ratio",
            "replicas_by_state", "tokens_per_s"]


class Dom(HTMLParser):
    def __init__(self):
        super().__init__()
        self.body = {}
        self.panels = {}
        self.tiles = []
        self.text = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "body":
            self.body = a
        if "data-series" in a:
            self.panels[a["data-series"]] = a
        if a.get("class") == "tile":
            self.tiles.append(a.get("data-key"))

    def handle_data(self, data):
        self.text.append(data)


failures = []
dom = Dom()
dom_text = open(dom_path, encoding="utf-8").read()
dom.feed(dom_text)
if dom.body.get("data-status") != "ok":
    failures.append("page status is %r, not ok" % dom.body.get("data-status"))
if int(dom.body.get("data-updates", "0")) < 2:
    failures.append("fewer than two data.json updates were rendered: %s" % dom.body.get("data-updates"))
data = json.load(open(data_path))
for name in data.get("series", {}):
    if name not in dom.panels:
        failures.append("series %s from data.json has no panel" % name)
for name in REQUIRED:
    p = dom.panels.get(name)
    if p is None:
        failures.append("panel %s missing" % name)
    elif empty and int(p.get("data-points", "0")) != 0:
        failures.append("panel %s drew %s points from no data" % (name, p.get("data-points")))
    elif not empty and int(p.get("data-points", "0")) <= 0:
        failures.append("panel %s drew no points" % name)
for name, p in dom.panels.items():
    x_axis, y_axis = p.get("data-x-axis", ""), p.get("data-y-axis", "")
    m = re.fullmatch("(%s) – (%s)" % (CLOCK, CLOCK), x_axis)
    if not m:
        failures.append("panel %s time axis reads %r" % (name, x_axis))
    elif m.group(1) == m.group(2):
        failures.append("panel %s time axis spans nothing: %r" % (name, x_axis))
    if not y_axis or re.search(r"NaN|undefined|Infinity", y_axis):
        failures.append("panel %s value axis reads %r" % (name, y_axis))
# NaN anywhere the page rendered (text, attributes, the status line) is a bug.
if "NaN" in dom_text:
    where = dom_text.find("NaN")
    failures.append("NaN in the DOM: ...%s..." % dom_text[max(0, where - 80):where + 40])
if empty and "no data yet" not in "".join(dom.text):
    failures.append('no panel says "no data yet"')
if "bill_usd" not in dom.tiles:
    failures.append("bill tile missing")

console = open(console_path, encoding="utf-8", errors="replace").read()
# Chromium logs page console messages and uncaught exceptions as CONSOLE lines; the page writes
# none when healthy, so any such line is a failure (as is a failed resource load).
bad = [l for l in console.splitlines() if re.search(r"CONSOLE|Uncaught|Failed to load resource", l)]
if bad:
    failures.append("console messages:\n  " + "\n  ".join(bad[:10]))

png = open(png_path, "rb").read()
if not png.startswith(b"\x89PNG") or len(png) < 10000:
    failures.append("screenshot missing or blank (%d bytes)" % len(png))

if failures:
    print("FAIL\n" + "\n".join(failures))
    sys.exit(1)
print("ok: %d panels, %s updates, points %s" % (
    len(dom.panels), dom.body.get("data-updates"),
    {k: v.get("data-points") for k, v in dom.panels.items()}))

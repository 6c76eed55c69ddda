#!/usr/bin/env python3
"""Checks the DOM chromium dumped after running the dashboard, its console log and screenshot.

The page's JS writes what it drew into DOM attributes (body data-status / data-updates, each
panel's data-points / data-lines), so this checks what was rendered, not just what was served.
"""
import json
import re
import sys
from html.parser import HTMLParser

dom_path, console_path, data_path, png_path = sys.argv[1:5]

# Panels the cost library always feeds; each must have drawn points.
REQUIRED = ["requests_per_s", "cost_by_tenant", "cost_by_model", "cache_savings", "cache_hit_ratio",
            "replicas_by_state", "tokens_per_s"]


class Dom(HTMLParser):
    def __init__(self):
        super().__init__()
        self.body = {}
        self.panels = {}
        self.tiles = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "body":
            self.body = a
        if "data-series" in a:
            self.panels[a["data-series"]] = a
        if a.get("class") == "tile":
            self.tiles.append(a.get("data-key"))


failures = []
dom = Dom()
dom.feed(open(dom_path, encoding="utf-8").read())
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
    elif int(p.get("data-points", "0")) <= 0:
        failures.append("panel %s drew no points" % name)
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

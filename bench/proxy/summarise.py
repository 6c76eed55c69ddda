#!/usr/bin/env python3
"""Turns the WRKJSON lines of one proxy bench run into the JSON report.

usage: summarise.py RESULT_DIR   (files named TARGET.cN.txt, plus meta.json)
"""
import json
import pathlib
import sys


def load(path):
    for line in path.read_text().splitlines():
        if line.startswith("WRKJSON "):
            return json.loads(line[len("WRKJSON "):])
    return None


def main():
    d = pathlib.Path(sys.argv[1])
    meta = json.loads((d / "meta.json").read_text())
    targets = {}
    for f in sorted(d.glob("*.c*.txt")):
        name, conc = f.name[:-4].split(".c")
        r = load(f)
        if r is not None:
            targets.setdefault(name, {})[f"c{conc}"] = r
    report = {**meta, "targets": targets}
    direct = targets.get("direct", {})
    high = f"c{meta['connections']}"
    added, ratio = {}, {}
    for name, t in targets.items():
        if name == "direct":
            continue
        if "c1" in t and "c1" in direct:
            added[name] = {"p50_us": t["c1"]["p50_us"] - direct["c1"]["p50_us"],
                           "p99_us": t["c1"]["p99_us"] - direct["c1"]["p99_us"]}
        if high in t and high in direct and direct[high]["rps"] > 0:
            ratio[name] = round(t[high]["rps"] / direct[high]["rps"], 3)
    report["added_latency_at_concurrency_1"] = added
    report["throughput_vs_direct"] = ratio
    if "tidegate" in targets and "nginx" in targets and high in targets["nginx"] and high in targets["tidegate"]:
        report["tidegate_vs_nginx_throughput"] = round(
            targets["tidegate"][high]["rps"] / max(targets["nginx"][high]["rps"], 1e-9), 3)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()

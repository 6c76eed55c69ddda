#!/usr/bin/env python3
"""Turns the WRKJSON lines of one proxy bench run into the JSON report.

usage: summarise.py RESULT_DIR   (files TARGET.cN.txt or TARGET.cN.rK.txt, plus meta.json)
Several rounds of one point (rK) are combined by taking the median of each statistic.
"""
import json
import pathlib
import statistics
import sys


def load(path):
    for line in path.read_text().splitlines():
        if line.startswith("WRKJSON "):
            return json.loads(line[len("WRKJSON "):])
    return None


def main():
    d = pathlib.Path(sys.argv[1])
    meta = json.loads((d / "meta.json").read_text())
    rounds = {}
    for f in sorted(d.glob("*.*.txt")):
        name, conc = f.name[:-4].split(".")[:2]
        r = load(f)
        if r is not None:
            rounds.setdefault(name, {}).setdefault(conc, []).append(r)
    targets = {}
    for name, points in rounds.items():
        for conc, rs in points.items():
            if len(rs) == 1:
                targets.setdefault(name, {})[conc] = rs[0]
                continue
            merged = {k: statistics.median(r[k] for r in rs) for k in ("rps", "p50_us", "p90_us", "p99_us", "mean_us")}
            merged["requests"] = sum(r["requests"] for r in rs)
            merged["max_us"] = max(r["max_us"] for r in rs)
            merged["errors"] = {k: sum(r["errors"][k] for r in rs) for k in rs[0]["errors"]}
            merged["rounds"] = [{k: r[k] for k in ("rps", "p50_us", "p99_us")} for r in rs]
            targets.setdefault(name, {})[conc] = merged
    report = {**meta, "targets": targets}
    direct = targets.get("direct", {})
    high = f"c{meta['connections']}"
    stream = f"s{meta['connections']}"
    added, ratio, stream_ratio = {}, {}, {}
    for name, t in targets.items():
        if name == "direct":
            continue
        if "c1" in t and "c1" in direct:
            added[name] = {"p50_us": t["c1"]["p50_us"] - direct["c1"]["p50_us"],
                           "p99_us": t["c1"]["p99_us"] - direct["c1"]["p99_us"]}
        if high in t and high in direct and direct[high]["rps"] > 0:
            ratio[name] = round(t[high]["rps"] / direct[high]["rps"], 3)
        if stream in t and stream in direct and direct[stream]["rps"] > 0:
            stream_ratio[name] = round(t[stream]["rps"] / direct[stream]["rps"], 3)
    report["added_latency_at_concurrency_1"] = added
    report["throughput_vs_direct"] = ratio
    report["stream_throughput_vs_direct"] = stream_ratio
    tg, ng = targets.get("tidegate", {}), targets.get("nginx", {})
    for key, point in (("tidegate_vs_nginx_throughput", high), ("tidegate_vs_nginx_stream_throughput", stream)):
        if point in tg and point in ng:
            report[key] = round(tg[point]["rps"] / max(ng[point]["rps"], 1e-9), 3)
            # The same ratio round by round: slices run back to back, so this is the spread.
            if "rounds" in tg[point] and "rounds" in ng[point]:
                report[key + "_by_round"] = [round(a["rps"] / max(b["rps"], 1e-9), 3)
                                             for a, b in zip(tg[point]["rounds"], ng[point]["rounds"])]
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()

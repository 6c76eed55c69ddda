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
            r = json.loads(line[len("WRKJSON "):])
            cpu = path.with_name(path.name + ".cpu")
            if cpu.exists() and r["requests"] > 0:
                r["cpu_us_per_request"] = cpu_per_request(json.loads(cpu.read_text()), r["requests"])
            return r
    return None


def cpu_per_request(c, requests):
    """CPU microseconds per request in one slice: the proxy's own processes, the simulator's, and
    the whole machine's (every process, interrupts included)."""
    out = {"sim": round(c["sim_ns"] / 1e3 / requests, 3),
           "machine": round(c["busy_ticks"] / c["ticks_per_s"] * 1e6 / requests, 3)}
    if c["proxy_ns"] > 0:
        out["proxy"] = round(c["proxy_ns"] / 1e3 / requests, 3)
    return out


def median_cpu(rs):
    have = [r["cpu_us_per_request"] for r in rs if "cpu_us_per_request" in r]
    if not have:
        return None
    return {k: round(statistics.median(c[k] for c in have), 3) for k in have[0]}


def cpu_ratios(tg_rounds, ng_rounds):
    """One proxy over another (tidegate over nginx), round by round, for CPU per request: the proxy alone, the proxy in
    units of the simulator's CPU in the same slice (which cancels the host's speed, the largest
    noise on a shared machine), and the whole machine (whose inverse is the throughput ratio)."""
    pairs = [(a["cpu_us_per_request"], b["cpu_us_per_request"]) for a, b in zip(tg_rounds, ng_rounds)
             if "proxy" in a.get("cpu_us_per_request", {}) and "proxy" in b.get("cpu_us_per_request", {})]
    if not pairs:
        return None
    by_round = {
        "proxy": [a["proxy"] / b["proxy"] for a, b in pairs],
        "proxy_over_sim": [(a["proxy"] / a["sim"]) / (b["proxy"] / b["sim"]) for a, b in pairs],
        "machine": [a["machine"] / b["machine"] for a, b in pairs],
    }
    return {k: {"median": round(statistics.median(v), 3), "by_round": [round(x, 3) for x in v]}
            for k, v in by_round.items()}


def summarise(d):
    """The report of the run whose files are in directory d."""
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
            merged["rounds"] = [{k: r[k] for k in ("rps", "p50_us", "p99_us", "cpu_us_per_request") if k in r}
                                for r in rs]
            if (cpu := median_cpu(rs)) is not None:
                merged["cpu_us_per_request"] = cpu
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
    for other in ("nginx", "baseline"):
        compare(report, targets, "tidegate", other, high, stream)
    return report


def compare(report, targets, name, other, high, stream):
    """`name` over `other`: throughput at the high and the streaming point (median and round by
    round) and CPU per request."""
    tg, ng = targets.get(name, {}), targets.get(other, {})
    prefix = f"{name}_vs_{other}"
    for key, point in ((f"{prefix}_throughput", high), (f"{prefix}_stream_throughput", stream)):
        if point in tg and point in ng:
            report[key] = round(tg[point]["rps"] / max(ng[point]["rps"], 1e-9), 3)
            # The same ratio round by round: slices run back to back, so this is the spread.
            if "rounds" in tg[point] and "rounds" in ng[point]:
                report[key + "_by_round"] = [round(a["rps"] / max(b["rps"], 1e-9), 3)
                                             for a, b in zip(tg[point]["rounds"], ng[point]["rounds"])]
    for key, point in ((f"{prefix}_cpu_per_request", high), (f"{prefix}_stream_cpu_per_request", stream)):
        if "rounds" in tg.get(point, {}) and "rounds" in ng.get(point, {}):
            if (ratios := cpu_ratios(tg[point]["rounds"], ng[point]["rounds"])) is not None:
                report[key] = ratios


def main():
    print(json.dumps(summarise(pathlib.Path(sys.argv[1])), indent=2))


if __name__ == "__main__":
    main()

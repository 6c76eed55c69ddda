#!/usr/bin/env python3
"""compare_rows.py BEFORE/rows.jsonl AFTER/rows.jsonl: the default policy, row by row.

Either file may be gzipped (rows.jsonl.gz, as the stored rows under bench/replay/slots/ are).

Prints, for the rows both runs hold (the same trace, variant, shape, load, cold start and
seed), how many meet the SLO and sit at or below the cheapest static fleet's GPU-hours, the mean,
median and worst ratio to static, and every row whose ratio or attainment moved (LOST: it met
the SLO before and does not after). Used to judge a policy change against its criterion.
"""
import gzip
import json
import signal
import statistics
import sys


def load(path):
    out = {}
    with (gzip.open(path, "rt") if path.endswith(".gz") else open(path)) as f:
        for line in f:
            r = json.loads(line)
            key = (r["trace"], r["variant"], r.get("params", ""), r.get("repeat", 1), r["load"], r["cold"], r["seed"])
            out[key] = r["summary"]
    return out


def main():
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # piped into head: stop quietly
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    a, b = load(sys.argv[1]), load(sys.argv[2])
    keys = [k for k in a if k in b and a[k].get("gpu_hours_vs_static") is not None]

    def stats(d):
        v = [d[k]["gpu_hours_vs_static"] for k in keys]
        met = sum(1 for k in keys if d[k]["meets_slo"])
        le = sum(1 for k in keys if d[k]["gpu_hours_vs_static"] <= 1.0 + 1e-9)
        return (f"SLO met {met}/{len(keys)}, at or below static {le}, vs static mean {statistics.mean(v):.4f} "
                f"median {statistics.median(v):.4f} max {max(v):.3f}")

    print("before:", stats(a))
    print("after: ", stats(b))
    for k in keys:
        x, y = a[k], b[k]
        if (abs(x["gpu_hours_vs_static"] - y["gpu_hours_vs_static"]) > 1e-4 or
                abs(x["ttft_slo_attainment"] - y["ttft_slo_attainment"]) > 1e-6):
            lost = " LOST" if x["meets_slo"] and not y["meets_slo"] else ""
            print(f"  {' '.join(str(p) for p in k if p != '')}: {x['gpu_hours_vs_static']:.3f} -> "
                  f"{y['gpu_hours_vs_static']:.3f}, attainment {x['ttft_slo_attainment']*100:.2f} -> "
                  f"{y['ttft_slo_attainment']*100:.2f}{lost}")


if __name__ == "__main__":
    main()

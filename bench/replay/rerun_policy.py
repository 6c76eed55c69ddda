#!/usr/bin/env python3
"""rerun_policy.py BEFORE/rows.jsonl[.gz] OUT/rows.jsonl [--bin BIN] [--jobs 2]: a policy change on
stored rows, the default policy alone.

Each row of an earlier `robustness.py` run is replayed again with the default policy only, started
at that row's cheapest static fleet (what `--initial-replicas auto` finds first), and its ratio is
taken against the static fleet's GPU-hours stored in the row. The static search, the optimum, HPA
and KPA do not depend on the policy, so they are not run again: about three times faster, and the
same policy run as the full row's (checked: identical GPU-hours and attainment on long7's rows).
Compare the output with `compare_rows.py BEFORE OUT`.

`--oversize F` starts the policy at ceil(F x N) instead: an operator's guess too large, which a
policy that holds what served the bursts may never release. The ratio stays against the static N.
"""
import argparse
import gzip
import json
import math
import re
from concurrent.futures import ThreadPoolExecutor

import robustness


def rerun(binary, stored, oversize=1.0):
    s = stored["summary"]
    static = next(b for b in s["baselines"] if b["policy"].startswith("static"))
    n = int(re.search(r"N=(\d+)", static["policy"]).group(1))
    row = {k: v for k, v in stored.items() if k != "summary"}
    out = robustness.run_row(binary, row, tune=False, initial=math.ceil(oversize * n - 1e-9))
    m = out["summary"]
    m["gpu_hours_vs_static"] = round(m["gpu_hours"] / static["gpu_hours"], 4)
    m["meets_slo"] = m["ttft_slo_attainment"] >= 0.99  # the replay's own test (replay.h)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("before")
    ap.add_argument("out")
    ap.add_argument("--bin", default="build/bin/tidegate-replay")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--oversize", type=float, default=1.0, help="start at ceil(F x the cheapest static N)")
    a = ap.parse_args()
    with (gzip.open(a.before, "rt") if a.before.endswith(".gz") else open(a.before)) as f:
        stored = [json.loads(line) for line in f]
    with ThreadPoolExecutor(a.jobs) as ex:
        results = list(ex.map(lambda r: rerun(a.bin, r, a.oversize), stored))
    with open(a.out, "w") as f:
        for r in results:
            f.write(json.dumps(r) + "\n")
    print(f"{len(results)} rows -> {a.out}")


if __name__ == "__main__":
    main()

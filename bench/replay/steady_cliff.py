#!/usr/bin/env python3
"""TTFT attainment of fixed fleets under steady Poisson traffic drawn from the Azure trace.

    steady_cliff.py [--rates 12,16,20,24] [--fleets 2,3,4,5,6] [--seconds 1800] [--seed 7]

Prints the markdown table of bench/RESULTS.md, "Slots fill faster than the load climbs": one row
per rate, one column per fleet size, each cell one replay with configs/replay-azure.yaml.
"""
import argparse
import json
import os
import subprocess
import tempfile

from robustness import ROOT
from steady_trace import write_trace


def attainment(binary, trace, fleet):
    cmd = [binary, "--trace", trace, "--config", os.path.join(ROOT, "configs", "replay-azure.yaml"), "--json",
           "--no-progress", "--threads", "1", "--replicas-min", str(fleet), "--replicas-max", str(fleet),
           "--initial-replicas", str(fleet)]
    p = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(p.stdout.strip().splitlines()[-1])["ttft_slo_attainment"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bin", "tidegate-replay"))
    ap.add_argument("--rates", default="12,16,20,24")
    ap.add_argument("--fleets", default="2,3,4,5,6")
    ap.add_argument("--seconds", type=float, default=1800)
    ap.add_argument("--seed", type=int, default=7)
    a = ap.parse_args()
    fleets = [int(n) for n in a.fleets.split(",")]
    print("| req/s \\ static fleet | " + " | ".join(map(str, fleets)) + " |")
    print("| --- |" + " --- |" * len(fleets))
    with tempfile.TemporaryDirectory() as tmp:
        for rate in (float(r) for r in a.rates.split(",")):
            trace = os.path.join(tmp, f"steady-{rate:g}.csv")
            write_trace(rate, a.seconds, a.seed, trace)
            cells = [f"{attainment(a.bin, trace, n) * 100:.1f}%" for n in fleets]
            print(f"| {rate:g} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()

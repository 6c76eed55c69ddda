#!/usr/bin/env python3
"""A steady Poisson trace in the Azure CSV format, its requests drawn from a real trace's rows.

    steady_trace.py RATE SECONDS SEED OUT.csv [--from TRACE.csv]

Replayed against static fleets (tidegate-replay --replicas-min N --replicas-max N
--initial-replicas N), it shows where one replica stops meeting the TTFT objective at a steady
rate: bench/RESULTS.md, "Slots fill faster than the load climbs".
"""
import argparse
import csv
import datetime
import os
import random

DEFAULT = os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "data", "traces", "azure_conv_2023.csv")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("rate", type=float, help="requests a second")
    ap.add_argument("seconds", type=float)
    ap.add_argument("seed", type=int)
    ap.add_argument("out")
    ap.add_argument("--from", dest="source", default=DEFAULT, help="Azure-format CSV whose rows are drawn")
    a = ap.parse_args()
    rows = list(csv.DictReader(open(a.source)))
    rng = random.Random(a.seed)
    base = datetime.datetime(2023, 11, 16, 18, 0, 0)
    t = 0.0
    with open(a.out, "w") as f:
        f.write("TIMESTAMP,ContextTokens,GeneratedTokens\n")
        while True:
            t += rng.expovariate(a.rate)
            if t > a.seconds:
                break
            r = rng.choice(rows)
            f.write(f"{(base + datetime.timedelta(seconds=t)).strftime('%Y-%m-%d %H:%M:%S.%f')},"
                    f"{r['ContextTokens']},{r['GeneratedTokens']}\n")


if __name__ == "__main__":
    main()

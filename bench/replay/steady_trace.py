#!/usr/bin/env python3
"""A steady Poisson trace in the Azure CSV format, its requests drawn from a real trace's rows.

    steady_trace.py RATE SECONDS SEED OUT.csv [--from TRACE.csv]

Replayed against fixed fleets (steady_cliff.py), it shows where one replica stops meeting the
TTFT objective at a steady rate: bench/RESULTS.md, "Slots fill faster than the load climbs".
"""
import argparse
import csv
import datetime
import os
import random

from robustness import DATA

DEFAULT = os.path.join(DATA, "azure_conv_2023.csv")


def write_trace(rate, seconds, seed, out, source=DEFAULT):
    with open(source) as f:
        rows = list(csv.DictReader(f))
    rng = random.Random(seed)
    base = datetime.datetime(2023, 11, 16, 18, 0, 0)
    t = 0.0
    with open(out, "w") as f:
        f.write("TIMESTAMP,ContextTokens,GeneratedTokens\n")
        while True:
            t += rng.expovariate(rate)
            if t > seconds:
                break
            r = rng.choice(rows)
            f.write(f"{(base + datetime.timedelta(seconds=t)).strftime('%Y-%m-%d %H:%M:%S.%f')},"
                    f"{r['ContextTokens']},{r['GeneratedTokens']}\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("rate", type=float, help="requests a second")
    ap.add_argument("seconds", type=float)
    ap.add_argument("seed", type=int)
    ap.add_argument("out")
    ap.add_argument("--from", dest="source", default=DEFAULT, help="Azure-format CSV whose rows are drawn")
    a = ap.parse_args()
    write_trace(a.rate, a.seconds, a.seed, a.out, a.source)


if __name__ == "__main__":
    main()

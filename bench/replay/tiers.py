#!/usr/bin/env python3
"""When does a standby tier pay off? (issue 16)

The same rows with and without a standby tier (an engine asleep: a price fraction of an active
replica, awake after a promotion time), for a short and a long TTFT SLO, smooth and bursty
traffic. A tier at full price, or slower than a cold start, is never used (the policy says so).

  bench/replay/tiers.py [--bin build/bin/tidegate-replay] [--rows dev|heldout|fresh|fresh2] [--out FILE]
  (default --out: bench/replay/tiers.md for dev, bench/replay/tiers-<rows>.md otherwise)

--rows dev (default): the two traces as recorded and their on/off variant (seed 1, load 1).
--rows heldout: every variant at seeds 5 and 6, loads 0.7 and 2.5 (72 rows with a tier), values
the tier work never tuned on; the summary counts the rows where the SLO is met without a tier
and missed with one. --rows fresh: the same at seeds 7 and 8, loads 1.5 and 4 (run once, after
the held-out rows had judged five variants). --rows fresh2: the same at seeds 9 and 10, loads 1 and
3, defined before any run, to judge the wake of a held starting fleet's standby (work_model.cc,
"in_burst" while the prior binds). Its criterion, written before the first run: against da20b01,
the no-tier rows are identical, and fewer rows meet the SLO without a tier and miss it with one;
the rows where the tier pays are reported whatever they show.
"""
import argparse
import concurrent.futures as cf
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
DATA = os.path.normpath(os.path.join(ROOT, "..", "shared", "data", "traces"))
TRACES = {
    "azure (TTFT 1 s)": (os.path.join(DATA, "azure_conv_2023.csv"), "configs/replay-azure.yaml"),
    "mooncake (TTFT 10 s)": (os.path.join(DATA, "mooncake_synthetic.jsonl"), "configs/replay-mooncake-h100.yaml"),
}
TIERS = [None, (0.1, 2), (0.3, 2), (0.1, 5), (0.3, 5), (1.0, 2)]
VARIANTS = ("none", "onoff", "spikes", "mmpp", "wave")
# Row set -> (seeds, load factors, tiers); "dev" is the traces' on/off variant only.
ROW_SETS = {
    "dev": ((1,), (1,), TIERS),
    "heldout": ((5, 6), (0.7, 2.5), [None, (0.1, 2), (0.3, 5)]),
    "fresh": ((7, 8), (1.5, 4), [None, (0.1, 2), (0.3, 5)]),
    "fresh2": ((9, 10), (1, 3), [None, (0.1, 2), (0.3, 5)]),
}


def row_set(name):
    """(trace, variant spec, load factor) rows; a variant's first seed stands for `none`."""
    seeds, loads, _ = ROW_SETS[name]
    variants = VARIANTS[:2] if name == "dev" else VARIANTS
    return [(n, v if v == "none" else f"{v}:seed={seed}", load) for n in TRACES for v in variants
            for seed in (seeds[:1] if v == "none" else seeds) for load in loads]


def run(binary, trace, config, variant, load, tier, tmp):
    cfg = os.path.join(ROOT, config)
    if tier:
        with open(cfg) as f:
            text = f.read()
        text = text.replace("    kv_capacity_tokens:", f"    tiers: [{{name: sleeping, price_fraction: {tier[0]}, "
                                                        f"promotion: {tier[1]}s}}]\n    kv_capacity_tokens:", 1)
        if "tiers:" not in text:
            text = text.replace("  profile:\n", f"  profile:\n    tiers: [{{name: sleeping, price_fraction: {tier[0]}, "
                                                f"promotion: {tier[1]}s}}]\n", 1)
        cfg = os.path.join(tmp, f"{abs(hash((config, tier)))}.yaml")
        with open(cfg, "w") as f:
            f.write(text)
    cmd = [binary, "--trace", trace, "--config", cfg, "--variant", variant, "--load-factor", str(load),
           "--replicas-max", "128", "--json", "--no-progress", "--threads", "1"]
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    if p.returncode != 0:
        raise RuntimeError(p.stderr[-1500:])
    return json.loads(p.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bin", "tidegate-replay"))
    ap.add_argument("--out", default=None, help="default: tiers.md, or tiers-<rows>.md")
    ap.add_argument("--rows", choices=tuple(ROW_SETS), default="dev")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    args = ap.parse_args()
    if not all(os.path.exists(p) for p, _ in TRACES.values()):
        print("tiers: shared traces not found, skipped")
        return 0
    out = args.out or os.path.join(HERE, "tiers.md" if args.rows == "dev" else f"tiers-{args.rows}.md")
    tiers = ROW_SETS[args.rows][2]
    jobs = [(n, v, load, tier) for n, v, load in row_set(args.rows) for tier in tiers]
    with tempfile.TemporaryDirectory() as tmp, cf.ThreadPoolExecutor(args.jobs) as pool:
        futs = {pool.submit(run, args.bin, TRACES[n][0], TRACES[n][1], v, load, t, tmp): (n, v, load, t)
                for n, v, load, t in jobs}
        res = {futs[f]: f.result() for f in cf.as_completed(futs)}
    lines = ["| trace | variant | load | standby tier (price, wake) | TTFT att % | GPU-h equiv. | vs no tier | "
             "standby GPU-h equiv. | SLO |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    lost, cheaper, tiered = 0, 0, 0
    for n, v, load, t in jobs:
        s, base = res[(n, v, load, t)], res[(n, v, load, None)]
        tier = "none" if t is None else f"{t[0]:.1f}, {t[1]} s"
        lines.append(f"| {n} | {v} | {load} | {tier} | {s['ttft_slo_attainment']*100:.2f} | {s['gpu_hours']:.3f} | "
                     f"{s['gpu_hours']/base['gpu_hours']:.3f} | {s['gpu_hours_by_state']['standby']:.3f} | "
                     f"{'yes' if s['meets_slo'] else 'no'} |")
        if t is not None:
            tiered += 1
            lost += base["meets_slo"] and not s["meets_slo"]
            cheaper += s["meets_slo"] and s["gpu_hours"] < base["gpu_hours"] - 1e-9
    lines += ["", f"Rows with a tier: {tiered}; SLO met without the tier and missed with it: {lost}; "
                  f"SLO met and cheaper than without the tier: {cheaper}."]
    text = "\n".join(lines) + "\n"
    with open(out, "w") as f:
        f.write(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

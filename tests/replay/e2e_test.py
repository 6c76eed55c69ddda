#!/usr/bin/env python3
"""tidegate-replay end to end: synthetic Azure CSV and Mooncake JSONL traces, --json summary
on the last stdout line, output files, baselines and tuner tables, and bad-input exit codes."""
import json
import os
import random
import subprocess
import sys
import tempfile

BIN = sys.argv[1]
KEYS = ["gpu_hours", "cost_usd", "ttft_slo_attainment", "e2e_slo_attainment", "ttft_p99_ms", "max_replicas",
        "requests", "gpu_hours_by_state", "cost_usd_by_state", "ttft_p50_ms", "queue_wait_p99_ms",
        "mean_replicas", "scale_events"]
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def run(args, timeout=90):
    return subprocess.run([BIN] + args, capture_output=True, text=True, timeout=timeout)


def write_traces(d, n=300):
    rnd = random.Random(7)
    t = 0.0
    rows = []
    for _ in range(n):
        t += rnd.expovariate(3.0)
        rows.append((t, rnd.randint(50, 2000), rnd.randint(5, 200)))
    azure = os.path.join(d, "small.csv")
    with open(azure, "w") as f:
        f.write("TIMESTAMP,ContextTokens,GeneratedTokens\n")
        for ts, p, o in rows:
            whole = int(ts)
            frac = int(round((ts - whole) * 1e7))
            if frac >= 10**7:
                whole, frac = whole + 1, 0
            f.write("2023-11-16 18:%02d:%02d.%07d,%d,%d\n" % (whole // 60, whole % 60, frac, p, o))
    moon = os.path.join(d, "small.jsonl")
    with open(moon, "w") as f:
        for ts, p, o in rows:
            f.write(json.dumps({"timestamp": int(ts * 1000), "input_length": p, "output_length": o,
                                "hash_ids": [1, 2]}) + "\n")
    return azure, moon


with tempfile.TemporaryDirectory() as d:
    azure, moon = write_traces(d)
    summaries = {}
    for name, path in (("azure", azure), ("mooncake", moon)):
        out = os.path.join(d, "out-" + name)
        r = run(["--trace", path, "--json", "--out-dir", out, "--replicas-max", "8", "--no-progress"])
        check(r.returncode == 0, f"{name}: exit {r.returncode}: {r.stderr}")
        last = r.stdout.strip().splitlines()[-1] if r.stdout.strip() else ""
        try:
            s = json.loads(last)
        except ValueError:
            check(False, f"{name}: last stdout line is not JSON: {last!r}")
            continue
        summaries[name] = s
        for k in KEYS:
            check(k in s, f"{name}: key {k} missing")
        check(s.get("requests") == 300, f"{name}: requests {s.get('requests')}")
        check(s.get("completed") == 300, f"{name}: completed {s.get('completed')}")
        check(0 <= s.get("ttft_slo_attainment", -1) <= 1, f"{name}: attainment out of range")
        check(s.get("gpu_hours", 0) > 0 and s.get("max_replicas", 0) >= 1, f"{name}: no GPU time")
        for f in ("timeline.csv", "timeline.svg"):
            check(os.path.getsize(os.path.join(out, f)) > 100, f"{name}: {f} missing or empty")
        with open(os.path.join(out, "timeline.svg")) as f:
            check("<svg" in f.read(), f"{name}: SVG has no <svg>")
        check("mooncake" in r.stderr if name == "mooncake" else "azure" in r.stderr, f"{name}: format not detected")
    if len(summaries) == 2:
        # Same requests, same timestamps (to the ms): the two formats replay alike.
        a, m = summaries["azure"], summaries["mooncake"]
        check(abs(a["gpu_hours"] - m["gpu_hours"]) < 0.05 * a["gpu_hours"], f"formats differ: {a} vs {m}")

    r = run(["--trace", azure, "--baselines", "--tune", "--tune-concurrency", "8,16", "--tune-stable-window", "60",
             "--tune-scale-down", "60", "--tune-warm-pool", "0", "--replicas-max", "6", "--json", "--threads", "2"])
    check(r.returncode == 0, f"baselines: exit {r.returncode}: {r.stderr}")
    for word in ("static (cheapest", "hpa", "kpa", "tidegate (warm pool)", "tidegate (no warm pool)", "Pareto"):
        check(word in r.stdout, f"baselines/tune output lacks {word!r}")
    try:
        s = json.loads(r.stdout.strip().splitlines()[-1])
        check(len(s.get("baselines", [])) == 5, "baselines array should have 5 rows")
    except (ValueError, IndexError):
        check(False, "baselines: last line not JSON")

    # Bad input: clear messages and a non-zero exit.
    bad = os.path.join(d, "bad.csv")
    with open(bad, "w") as f:
        f.write("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:00:00.0,10,5\n2023-11-16 18:00:01.0,x,5\n")
    r = run(["--trace", bad, "--on-bad-row", "fail"])
    check(r.returncode == 2 and "bad.csv:3" in r.stderr, f"bad row: {r.returncode} {r.stderr}")
    r = run(["--trace", bad])
    check(r.returncode == 0 and ":3:" in r.stderr, f"bad row skipped with a warning: {r.stderr}")
    empty = os.path.join(d, "empty.jsonl")
    open(empty, "w").close()
    r = run(["--trace", empty])
    check(r.returncode == 2 and "empty" in r.stderr, f"empty trace: {r.stderr}")
    r = run(["--trace", azure, "--replicas-min", "9", "--replicas-max", "3"])
    check(r.returncode == 2 and "--replicas-min" in r.stderr, f"absurd replicas: {r.stderr}")
    r = run(["--trace", azure, "--load-factor", "0"])
    check(r.returncode == 2 and "--load-factor" in r.stderr, f"absurd load factor: {r.stderr}")

print("OK" if not failures else f"{len(failures)} failures")
sys.exit(1 if failures else 0)

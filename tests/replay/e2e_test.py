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
        "mean_replicas", "scale_events", "gpu_hours_vs_static", "gpu_hours_vs_optimum", "prefix_cache_hit_ratio"]
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
        for i, (ts, p, o) in enumerate(rows):  # block ids of their own: nothing to reuse
            ids = [i * 100 + b for b in range((p + 511) // 512)]
            f.write(json.dumps({"timestamp": int(ts * 1000), "input_length": p, "output_length": o,
                                "hash_ids": ids}) + "\n")
    shared = os.path.join(d, "shared.jsonl")
    with open(shared, "w") as f:
        for i, (ts, p, o) in enumerate(rows):  # a 2048-token document every request starts with
            ids = [1, 2, 3, 4] + [i * 100 + b for b in range((p + 511) // 512)]
            f.write(json.dumps({"timestamp": int(ts * 1000), "input_length": p + 2048, "output_length": o,
                                "hash_ids": ids}) + "\n")
    # BurstGPT: the same requests in seconds from the start, with another model's rows between
    # them that --trace-model leaves out.
    burst = os.path.join(d, "small_burstgpt.csv")
    with open(burst, "w") as f:
        f.write("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n")
        for ts, p, o in rows:
            f.write("%.7f,ChatGPT,%d,%d,%d,Conversation log\n" % (ts, p, o, p + o))
            f.write("%.7f,GPT-4,%d,0,%d,API log\n" % (ts + 0.01, 4 * p, 4 * p))
    return azure, moon, shared, burst


with tempfile.TemporaryDirectory() as d:
    azure, moon, shared, burst = write_traces(d)
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
        for f in ("timeline.csv", "timeline.svg", "decisions.csv"):
            check(os.path.getsize(os.path.join(out, f)) > 100, f"{name}: {f} missing or empty")
        with open(os.path.join(out, "timeline.svg")) as f:
            check("<svg" in f.read(), f"{name}: SVG has no <svg>")
        check("mooncake" in r.stderr if name == "mooncake" else "azure" in r.stderr, f"{name}: format not detected")
    if len(summaries) == 2:
        # Same requests, same timestamps (to the ms): the two formats replay alike.
        a, m = summaries["azure"], summaries["mooncake"]
        check(abs(a["gpu_hours"] - m["gpu_hours"]) < 0.05 * a["gpu_hours"], f"formats differ: {a} vs {m}")

        check("prefix caching is off" in r.stderr if name == "azure" else "block ids" in r.stderr,
              f"{name}: prefix-block note missing: {r.stderr}")
    # BurstGPT, one model of two: the same requests as the Azure CSV, so the same replay.
    r = run(["--trace", burst, "--trace-model", "ChatGPT", "--json", "--replicas-max", "8", "--no-progress"])
    check(r.returncode == 0, f"burstgpt: exit {r.returncode}: {r.stderr}")
    if r.returncode == 0 and "azure" in summaries:
        s = json.loads(r.stdout.strip().splitlines()[-1])
        a = summaries["azure"]
        check(s["requests"] == 300 and "burstgpt" in r.stderr and "300 rows of other models" in r.stderr,
              f"burstgpt: {s['requests']} requests; {r.stderr}")
        check(abs(s["gpu_hours"] - a["gpu_hours"]) < 0.02 * a["gpu_hours"] and
              abs(s["ttft_slo_attainment"] - a["ttft_slo_attainment"]) < 0.01, f"burstgpt differs: {s} vs {a}")
    # A window of the trace's own time: only its requests, rebased; an empty one is an error.
    with open(burst) as f:
        stamps = [float(line.split(",")[0]) for line in f.readlines()[1:] if ",ChatGPT," in line]
    want = sum(1 for t in stamps if 20 <= t - stamps[0] < 50)
    r = run(["--trace", burst, "--trace-model", "ChatGPT", "--window-s", "20:50", "--json", "--replicas-max", "8",
             "--no-progress"])
    check(r.returncode == 0 and json.loads(r.stdout.strip().splitlines()[-1])["requests"] == want and
          "outside [20, 50) s" in r.stderr, f"window: {r.returncode} {r.stdout[-300:]} {r.stderr}")
    r = run(["--trace", burst, "--window-s", "5000:6000"])
    check(r.returncode == 2 and "no requests in the window" in r.stderr, f"empty window: {r.returncode} {r.stderr}")
    r = run(["--trace", azure, "--trace-model", "GPT-4"])
    check(r.returncode == 2 and "no model column" in r.stderr, f"model on azure: {r.returncode} {r.stderr}")

    # A shared document at the head of every prompt: the engines reuse its KV blocks.
    r = run(["--trace", shared, "--json", "--replicas-max", "8", "--no-progress"])
    check(r.returncode == 0, f"shared: exit {r.returncode}: {r.stderr}")
    if r.returncode == 0:
        s = json.loads(r.stdout.strip().splitlines()[-1])
        check(s["prefix_cache_hit_ratio"] > 0.3, f"shared prefix not reused: {s['prefix_cache_hit_ratio']}")

    r = run(["--trace", azure, "--baselines", "--tune", "--tune-headroom", "0.8,1.2", "--tune-burst-memory", "600",
             "--tune-noise-z", "3", "--tune-scale-down", "0", "--tune-warm-pool", "0", "--replicas-max", "6", "--json",
             "--threads", "2"])
    check(r.returncode == 0, f"baselines: exit {r.returncode}: {r.stderr}")
    for word in ("static (cheapest", "optimum", "/static", "/optimum", "hpa", "kpa", "tidegate (warm pool)",
                 "tidegate (no warm pool)", "Pareto", "Held-back part"):
        check(word in r.stdout, f"baselines/tune output lacks {word!r}")
    try:
        s = json.loads(r.stdout.strip().splitlines()[-1])
        rows = s.get("baselines", [])
        check(len(rows) == 6, "baselines array should have 6 rows")
        opt = [b for b in rows if b["policy"] == "optimum"]
        check(len(opt) == 1 and opt[0]["gpu_hours_vs_optimum"] == 1.0, f"optimum row: {opt}")
        stat = [b for b in rows if b["policy"].startswith("static")]
        check(len(stat) == 1 and stat[0]["gpu_hours_vs_static"] == 1.0, f"static row: {stat}")
        check(all(b["gpu_hours_vs_static"] and b["gpu_hours_vs_optimum"] for b in rows), "ratios missing")
        check(opt and all(b["gpu_hours"] >= opt[0]["gpu_hours"] * 0.98 for b in rows if b["meets_slo"]),
              "a policy meeting the SLO beat the offline optimum by more than 2%")
        check("tuned_held_back" in s and "default_held_back" in s, "held-back figures missing")
    except (ValueError, IndexError):
        check(False, "baselines: last line not JSON")

    # Faults: a cold start longer than the trace, an SLO no fleet can meet.
    r = run(["--trace", azure, "--cold-start-s", "3600", "--replicas-max", "4"])
    check(r.returncode == 0 and "longer than the trace" in r.stderr, f"long cold start: {r.returncode} {r.stderr}")
    r = run(["--trace", azure, "--slo-ttft-ms", "5", "--replicas-max", "3", "--baselines", "--no-optimum"])
    check(r.returncode == 0 and "No static fleet up to 3 replicas meets the SLO" in r.stdout,
          f"infeasible SLO not reported: {r.stdout[-500:]}")

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

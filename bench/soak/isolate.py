#!/usr/bin/env python3
"""Which traffic class makes the gateway's RSS grow? The soak's setup (same configs, sims and
clients, no SIGHUP or SIGKILL), then one class at a time for --phase-s seconds, twice over;
prints RSS growth per 1,000 requests of each class in the second pass (the first pays for
allocator pools and first-use growth). Standard library only; bounded by its phases.

    python3 bench/soak/isolate.py --bin-dir /tmp/soak-bin [--phase-s 15] [--classes miss,hit]
"""
import argparse
import json
import os
import shutil
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import soak  # noqa: E402

DEFAULT = ("miss,hit,miss_stream,hit_stream,new_scope,completions,disconnect_mid_stream,disconnect_waiting,"
           "disconnect_mid_request,unknown_model,invalid_json,bad_key,budget_capped,slow_model")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bin-dir", default=os.path.join(soak.ROOT, "build", "bin"))
    p.add_argument("--phase-s", type=float, default=15.0)
    p.add_argument("--warmup-s", type=float, default=45.0, help="mixed traffic first (fills the cache)")
    p.add_argument("--classes", default=DEFAULT)
    p.add_argument("--clients", type=int, default=16)
    p.add_argument("--passes", type=int, default=2)
    p.add_argument("--cache-index", default=soak.DEFAULT_INDEX)
    a = p.parse_args()
    classes = a.classes.split(",")
    for c in classes:
        if not hasattr(soak.Client, "do_" + c):
            p.error(f"unknown class {c}")
    args = argparse.Namespace(seed=1, bin_dir=a.bin_dir, clients=a.clients, cache_index=a.cache_index)
    run = soak.Run(args)
    try:
        run.setup()
        run.t0 = time.monotonic()
        run.deadline = time.monotonic() + a.warmup_s + a.passes * len(classes) * a.phase_s + 120
        run.clients = [soak.Client(i, run) for i in range(a.clients)]
        for c in run.clients:
            c.start()
        rss = lambda: soak.read_status(run.gw.pid)["VmRSS"]
        count = lambda c: sum(run.stats.by_class.get(c, {}).values())
        time.sleep(a.warmup_s)
        print(f"after {a.warmup_s:.0f} s of the mix: RSS {rss() / 1024:.1f} MB", flush=True)
        rows = []
        for pas in range(1, a.passes + 1):
            for c in classes:
                run.force_class = c
                time.sleep(1.0)  # requests of the previous class drain
                r0, n0 = rss(), count(c)
                time.sleep(a.phase_s)
                r1, n1 = rss(), count(c)
                try:
                    _, body = soak.scrape(run.gw.port, "/admin/cache/stats",
                                          {"Authorization": f"Bearer {soak.ADMIN_KEY}"})
                    cs = json.loads(body)
                    extra = f"  cache {cs.get('entries')} entries in {cs.get('scopes')} scopes"
                except (OSError, ValueError):
                    extra = ""
                n = n1 - n0
                per = (r1 - r0) / n * 1000 if n else float("nan")
                rows.append((pas, c, n, r1 - r0, per))
                print(f"pass {pas} {c:24s} {n:6d} requests  RSS {r0 / 1024:7.1f} -> {r1 / 1024:7.1f} MB  "
                      f"{r1 - r0:+6d} KB  ({per:+.1f} KB per 1000){extra}", flush=True)
            if not run.gw.alive():
                print("gateway died")
                return 1
        run.stop.set()
        run.resume.set()
        for c in run.clients:
            c.join(timeout=60)
        return 0
    finally:
        run.stop.set()
        if getattr(run, "gw", None) is not None:
            run.gw.stop()
        for s in getattr(run, "sims", {}).values():
            s.kill()
        if getattr(run, "work", None):
            shutil.rmtree(run.work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

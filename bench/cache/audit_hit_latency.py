#!/usr/bin/env python3
"""Does an audit delay the hit it audits? The real `tidegate` (hash embedder) in front of one
`tidegate-sim` that takes 1 s to its first token; 200 sequential hits of one question, with audits
off (fraction 0) and on every hit (fraction 1.0, max_in_flight 4 and 64). Prints the hit latency
p50/p99 as the client sees it. Usage (from the source root, after a build):
  .venv/bin/python bench/cache/audit_hit_latency.py build/bin/tidegate build/bin/tidegate-sim"""
import os
import sys
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "tests", "app"))
sys.path.insert(0, os.path.join(ROOT, "tests", "gateway"))
from app_harness import App, Sim, chat, post, wait_stored  # noqa: E402
from test_audit import QUESTION, audit_cache  # noqa: E402


class Env:
    def __init__(self, tidegate, sim):
        self.tidegate, self.sim = tidegate, sim


def hit_latencies(env, fraction, max_in_flight, hits=200):
    sims = {"m": [Sim(env.sim, "--model", "m", "--ttft-ms", "1000", "--tpot-ms", "1")]}
    with App(env, sims=sims, cache=audit_cache(fraction=fraction, max_in_flight=max_in_flight)) as app, \
            app.client() as c:
        post(c, chat(QUESTION))
        wait_stored(app, 1)
        out = []
        for _ in range(hits):
            t0 = time.perf_counter()
            r = post(c, chat(QUESTION))
            out.append(time.perf_counter() - t0)
            assert r.headers["x-tidegate-cache"] == "hit", r.headers
        return sorted(out)


def main():
    env = Env(sys.argv[1], sys.argv[2])
    for fraction, max_in_flight in ((0, 4), (1.0, 4), (1.0, 64)):
        lat = hit_latencies(env, fraction, max_in_flight)
        p50, p99 = lat[len(lat) // 2] * 1e3, lat[int(len(lat) * 0.99) - 1] * 1e3
        print(f"fraction {fraction} max_in_flight {max_in_flight}: hit p50 {p50:.2f} ms, p99 {p99:.2f} ms "
              f"({len(lat)} hits)")


if __name__ == "__main__":
    main()

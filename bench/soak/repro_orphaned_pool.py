#!/usr/bin/env python3
"""Reproduction of the descriptor growth the soak found (bench/RESULTS.md, "Soak (issue 18)"):
idle upstream connections of a replica that a reload removed stay open in the gateway for good.

Two sims (keep, gone); config X lists both for model m, config Y only `keep`. Each cycle:
SIGHUP to X, 16 concurrent requests x 4 rounds (each event loop pools a few connections to
`gone`), SIGHUP to Y, 2 s for the drain, then count the gateway's sockets whose peer is `gone`'s
port. At the end `gone` is SIGKILLed: its sockets turn CLOSE_WAIT and are still held.
Standard library only, loopback, ~30 s. Exit 1 when the count grew (the bug), 0 otherwise.

    python3 bench/soak/repro_orphaned_pool.py --bin-dir /tmp/soak-bin [--cycles 5]
"""
import argparse
import http.client
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from soak import GatewayProc, Sim, fd_breakdown  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def config(sims, with_gone):
    reps = [f'      - {{id: keep, url: "http://127.0.0.1:{sims["keep"].port}"}}']
    if with_gone:
        reps.append(f'      - {{id: gone, url: "http://127.0.0.1:{sims["gone"].port}"}}')
    return ("listen: \"127.0.0.1:0\"\nthreads: 2\naccess_log: {path: /dev/null, sample_rate: 0.0}\n"
            "models:\n  - name: m\n    max_concurrency_per_replica: 64\n"
            "    health: {path: /health, interval: 1s, timeout: 500ms, failures_to_eject: 2}\n"
            "    replicas:\n" + "\n".join(reps) + "\n")


def burst(port, n=16, rounds=4):
    def one():
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        try:
            for _ in range(rounds):
                c.request("POST", "/v1/chat/completions", headers={"Content-Type": "application/json"},
                          body=json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}],
                                           "max_tokens": 4}))
                c.getresponse().read()
        finally:
            c.close()
    ts = [threading.Thread(target=one) for _ in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout=30)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bin-dir", default=os.path.join(ROOT, "build", "bin"))
    p.add_argument("--cycles", type=int, default=5)
    a = p.parse_args()
    work = tempfile.mkdtemp(prefix="tidegate-repro-")
    gw = None
    sims = {}
    try:
        for b in ("tidegate", "tidegate-sim"):
            shutil.copy2(os.path.join(a.bin_dir, b), work)
        sim_args = ["--model", "m", "--ttft-ms", "20", "--tpot-ms", "2", "--threads", "1"]
        sims = {n: Sim(os.path.join(work, "tidegate-sim"), work, n, sim_args) for n in ("keep", "gone")}
        for s in sims.values():
            s.start()
        paths = {}
        for name, with_gone in (("X", True), ("Y", False)):
            paths[name] = os.path.join(work, f"{name}.yaml")
            with open(paths[name], "w") as f:
                f.write(config(sims, with_gone))
        live = os.path.join(work, "gw.yaml")
        shutil.copy(paths["Y"], live)
        gw = GatewayProc(os.path.join(work, "tidegate"), work, live)
        names = {s.port: n for n, s in sims.items()}

        def reload(name):
            before = gw.count("gateway.reloaded")
            shutil.copy(paths[name], live)
            os.kill(gw.pid, signal.SIGHUP)
            end = time.monotonic() + 10
            while gw.count("gateway.reloaded") <= before and time.monotonic() < end:
                time.sleep(0.05)

        def held():
            _, per = fd_breakdown(gw.pid, gw.port, names)
            return per.get("gone", 0), per.get("keep", 0)

        counts = []
        print(f"gateway pid {gw.pid}; sims keep:{sims['keep'].port} gone:{sims['gone'].port}")
        for i in range(a.cycles):
            reload("X")
            time.sleep(1.5)  # health probe marks `gone` healthy
            burst(gw.port)
            g_in, k_in = held()
            reload("Y")
            time.sleep(2)
            g, k = held()
            counts.append(g)
            print(f"cycle {i + 1}: with `gone` configured {g_in} sockets to it; after the reload that removed it "
                  f"and 2 s: {g} sockets to it still open in the gateway ({k} to `keep`)")
        sims["gone"].kill()
        time.sleep(2)
        kinds, per = fd_breakdown(gw.pid, gw.port, names)
        print(f"`gone` SIGKILLed 2 s ago: gateway still holds {per.get('gone', 0)} sockets to it "
              f"({kinds['upstream_close_wait']} in CLOSE_WAIT), {kinds['total']} descriptors in all")
        grew = len(counts) > 1 and counts[-1] > counts[0]
        print("REPRODUCED: orphaned pooled connections accumulate" if grew else "not reproduced")
        return 1 if grew else 0
    finally:
        if gw is not None:
            gw.stop()
        for s in sims.values():
            s.kill()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

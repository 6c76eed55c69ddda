#!/usr/bin/env python3
"""Tidegate in front of a real engine (llama.cpp's llama-server, SmolLM2-135M): TTFT of streams
sent straight to the engine and through the gateway, paired and interleaved in one run (the
machine is shared: compare the two columns, not the numbers across runs); cache-hit latency;
and the gateway's stream token counts against the engine's own usage.
  .venv/bin/python bench/engines/ttft.py [--n 64]   (after scripts/setup_engines.sh and make)"""
import argparse
import json
import os
import statistics
import sys
import time

import httpx

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "engines"))
from engine_harness import Engine, cache_yaml, missing, model_yaml  # noqa: E402
from harness import Gateway  # noqa: E402

def ttft(client, url, body):
    """Seconds to the first content chunk, and the usage the stream reported."""
    t0 = time.perf_counter()
    first, usage = None, None
    with client.stream("POST", url, json=body) as r:
        assert r.status_code == 200, r.read()
        for line in r.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            ev = json.loads(line[6:])
            if first is None and any((c.get("delta") or {}).get("content") for c in ev.get("choices", [])):
                first = time.perf_counter() - t0
            usage = ev.get("usage") or usage
    return first, usage


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=64)
    args = ap.parse_args()
    why = missing(ROOT)
    if why:
        sys.exit(why)
    tidegate = os.path.join(ROOT, "build", "bin", "tidegate")
    eng = Engine(ROOT)
    gw = Gateway(tidegate, model_yaml("m", [eng.port], health_interval="0"))
    gwc = Gateway(tidegate, model_yaml("m", [eng.port], health_interval="0"), top=cache_yaml())
    try:
        direct, via = [], []
        counted = exact = 0
        # llama.cpp closes the connection after each stream (its head says keep-alive), which a
        # client reusing it meets as a disconnect: direct calls open a connection each time, as
        # the gateway's do to this engine.
        with httpx.Client(timeout=60) as c, \
                httpx.Client(timeout=60, limits=httpx.Limits(max_keepalive_connections=0)) as d:
            for i in range(args.n):  # paired, alternating which goes first
                # Each side its own prompt of the same shape: a repeated prompt would find its
                # prefix in llama.cpp's slot cache and favour whichever went second.
                def body_for(topic, stream_usage):
                    b = {"model": "m", "stream": True, "max_tokens": 16, "temperature": 0,
                         "messages": [{"role": "user", "content": f"Give me fact number {i} about {topic}."}]}
                    return dict(b, stream_options={"include_usage": True}) if stream_usage else b
                order = [("d", eng.url), ("g", gw.url)] if i % 2 == 0 else [("g", gw.url), ("d", eng.url)]
                for who, base in order:
                    t, u = ttft(d if who == "d" else c, base + "/v1/chat/completions", body_for("rivers" if who == "d" else "lakes", True))
                    (direct if who == "d" else via).append(t)
                body = body_for("lakes", False)
                _, u = ttft(d, eng.url + "/v1/chat/completions", dict(body, stream_options={"include_usage": True}))
                # The gateway's count for a stream that did not ask for usage vs the engine's.
                ttft(c, gw.url + "/v1/chat/completions", body)
                entry = gw.access_entries()[-1]
                counted += 1
                exact += entry["completion_tokens"] == u["completion_tokens"]
            # Cache: a miss fills, the same question again is a hit.
            miss, hit = [], []
            for i in range(args.n // 2):
                body = {"model": "m", "max_tokens": 16, "temperature": 0,
                        "messages": [{"role": "user", "content": f"What is the name of city {i}?"}]}
                for bucket in (miss, hit):
                    t0 = time.perf_counter()
                    r = c.post(gwc.url + "/v1/chat/completions", json=body)
                    bucket.append(time.perf_counter() - t0)
                    assert r.headers["x-tidegate-cache"] == ("miss" if bucket is miss else "hit"), r.headers
        ms = lambda v: f"{v * 1000:.1f}"  # noqa: E731
        print(f"| path | n | TTFT p50 ms | TTFT p99 ms |")
        print(f"| --- | --- | --- | --- |")
        print(f"| llama-server direct | {len(direct)} | {ms(statistics.median(direct))} | {ms(pct(direct, 0.99))} |")
        print(f"| through Tidegate | {len(via)} | {ms(statistics.median(via))} | {ms(pct(via, 0.99))} |")
        diffs = [b - a for a, b in zip(direct, via)]
        print(f"\npaired difference (Tidegate - direct): p50 {ms(statistics.median(diffs))} ms, "
              f"p90 {ms(pct(diffs, 0.9))} ms")
        print(f"cache: miss (engine) p50 {ms(statistics.median(miss))} ms, hit p50 {ms(statistics.median(hit))} ms, "
              f"p99 {ms(pct(hit, 0.99))} ms (n={len(hit)}, hash embedder)")
        print(f"stream token counts equal to the engine's usage: {exact} of {counted}")
    finally:
        gw.close()
        gwc.close()
        eng.close()


if __name__ == "__main__":
    main()

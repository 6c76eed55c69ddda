#!/usr/bin/env python3
"""Prefix-aware routing in front of real engines (issue 20): three llama.cpp servers
(SmolLM2-135M, two slots each), multi-turn conversations sent through Tidegate with
`least_outstanding` and with `prefix_aware`, TTFT of every turn and the engines' own count of
prompt tokens they found cached. Each conversation has its own long system prompt (a customer
record), so only its own earlier turns are there to reuse. The two balancers run one after the
other on fresh engines, twice, in alternating order (the machine is shared: compare the columns
of one run).
  .venv/bin/python bench/engines/prefix_routing.py [--conversations 6] [--turns 4] [--rounds 2]"""
import argparse
import json
import os
import statistics
import sys
import time

import httpx

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "engines"))
from engine_harness import engines, missing, model_yaml  # noqa: E402
from harness import Gateway  # noqa: E402

RECORD = ("The customer has shipped parcels with us since 2019. Their account notes list delivery "
          "preferences, a history of claims, addresses in three cities and the contact hours of "
          "their warehouse staff. ")


def first_token_s(client, url, body):
    t0 = time.perf_counter()
    first, text = None, []
    with client.stream("POST", url, json=body) as r:
        assert r.status_code == 200, r.read()
        raw = []
        for line in r.iter_lines():
            raw.append(line)
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            for c in json.loads(line[6:]).get("choices", []):
                piece = (c.get("delta") or {}).get("content")
                # The first token: content, or the end when the model answered nothing at all.
                if piece or c.get("finish_reason"):
                    first = first if first is not None else time.perf_counter() - t0
                if piece:
                    text.append(piece)
    if first is None:
        raise AssertionError(f"no token in the stream: {raw[-3:]}")
    return first, "".join(text)


def cached_tokens(engs):
    """llama.cpp's prompt tokens served from its slot caches (where its build exports them)."""
    total = 0.0
    for e in engs:
        v = e.metric("llamacpp:prompt_tokens_cached_total")
        total += v or 0
    return total


def run(balancer, conversations, turns):
    engs = engines(ROOT, 3)
    gw = Gateway(os.path.join(ROOT, "build", "bin", "tidegate"),
                 model_yaml("m", [e.port for e in engs], health_interval="0", balancer=balancer),
                 timeouts=", first_byte: 120s, between_chunks: 120s, total: 300s")
    ttfts = {t: [] for t in range(turns)}
    try:
        history = {c: [{"role": "system", "content": f"Customer {c}. " + RECORD * 12}] for c in range(conversations)}
        with httpx.Client(timeout=120) as client:
            for t in range(turns):
                for c in range(conversations):
                    history[c].append({"role": "user", "content": f"Question {t}: where is parcel {c}-{t}?"})
                    s, text = first_token_s(client, gw.url + "/v1/chat/completions",
                                            {"model": "m", "stream": True, "max_tokens": 12, "temperature": 0,
                                             "messages": history[c]})
                    ttfts[t].append(s)
                    history[c].append({"role": "assistant", "content": text})
        routes = [e.get("route") for e in gw.access_entries() if e["path"] == "/v1/chat/completions"]
        return ttfts, cached_tokens(engs), routes
    finally:
        gw.close()
        for e in engs:
            e.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--conversations", type=int, default=6)
    ap.add_argument("--turns", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    why = missing(ROOT)
    if why:
        sys.exit(why)
    results = {"least_outstanding": [], "prefix_aware": []}
    for r in range(args.rounds):
        order = ["least_outstanding", "prefix_aware"] if r % 2 == 0 else ["prefix_aware", "least_outstanding"]
        for b in order:
            results[b].append(run(b, args.conversations, args.turns))
    out = {}
    for b, runs in results.items():
        first = [s for ttfts, _, _ in runs for s in ttfts[0]]
        later = sorted(s for ttfts, _, _ in runs for t in range(1, args.turns) for s in ttfts[t])
        out[b] = {"first_turn_ttft_p50_ms": round(statistics.median(first) * 1000, 1),
                  "later_turns_ttft_p50_ms": round(statistics.median(later) * 1000, 1),
                  "later_turns_ttft_p90_ms": round(later[int(0.9 * (len(later) - 1))] * 1000, 1),
                  "engine_cached_prompt_tokens": [c for _, c, _ in runs],
                  "routes": {k: sum(r.count(k) for _, _, r in runs) for k in ("prefix", "least_loaded", "bounded", None)}}
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()

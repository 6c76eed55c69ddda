#!/usr/bin/env python3
"""Prefix-cache hit rate of ONE LRU cache the size of N replicas' KV caches together, on a
Mooncake-format trace (hash_ids of 512-token blocks): the most any router can reach with N
replicas of that KV size (no placement does better than pooling them, up to LRU's own
non-optimality), against the infinite cache the replay's `ideal` assumes.

usage: bench/routing/pooled_lru.py TRACE [--kv-tokens 400000] [--replicas 1,4,7,8,16]
"""
import argparse
import collections
import json

ap = argparse.ArgumentParser()
ap.add_argument("trace")
ap.add_argument("--kv-tokens", type=int, default=400000)
ap.add_argument("--block-tokens", type=int, default=512)
ap.add_argument("--replicas", default="1,4,7,8,16")
args = ap.parse_args()
reqs = [json.loads(line) for line in open(args.trace) if line.strip()]
B = args.block_tokens


def hit_rate(capacity_blocks):
    lru, queried, hits = collections.OrderedDict(), 0, 0
    for r in reqs:
        n = r["input_length"]
        queried += n
        matched = 0
        for i, b in enumerate(r["hash_ids"]):
            if b not in lru:
                break
            matched += min(B, n - i * B)
        hits += max(0, min(matched, n - 1))  # the last token is always computed, as the replay counts
        for b in r["hash_ids"]:
            lru[b] = True
            lru.move_to_end(b)
        while capacity_blocks is not None and len(lru) > capacity_blocks:
            lru.popitem(last=False)
    return hits / queried


print(json.dumps({"infinite": round(hit_rate(None), 4),
                  **{f"pooled_{n}": round(hit_rate(n * args.kv_tokens // B), 4) for n in map(int, args.replicas.split(","))}}))

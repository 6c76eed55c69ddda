#!/usr/bin/env python3
"""Ceilings on the prefix-cache hit rate of N replicas, on a Mooncake-format trace (hash_ids of
512-token blocks), against the infinite cache the replay's `ideal` assumes.

* `pooled_N`: ONE LRU cache the size of N replicas' KV caches together: what routing would reach
  if the fleet's caches were pooled and evicted as the engines do (LRU).
* `belady_N`: the same pooled cache evicting the block used furthest in the future (Belady's
  MIN, which may also drop a block as soon as it is computed), counting every cached block of a
  prompt as a hit, not only its leading run. No placement over N replicas of that KV size and
  no eviction rule can hit more: the replicas together hold at most N caches' worth of blocks,
  and MIN maximises the blocks found for a given capacity. An upper bound, not a policy.

usage: bench/routing/pooled_lru.py TRACE [--kv-tokens 400000] [--replicas 1,4,7,8,16] [--belady]
"""
import argparse
import collections
import heapq
import json

ap = argparse.ArgumentParser()
ap.add_argument("trace")
ap.add_argument("--kv-tokens", type=int, default=400000)
ap.add_argument("--block-tokens", type=int, default=512)
ap.add_argument("--replicas", default="1,4,7,8,16")
ap.add_argument("--belady", action="store_true", help="also the clairvoyant bound (slower)")
args = ap.parse_args()
reqs = [json.loads(line) for line in open(args.trace) if line.strip()]
B = args.block_tokens


def block_tokens(n, i):
    return min(B, n - i * B)


def hit_rate(capacity_blocks):
    lru, queried, hits = collections.OrderedDict(), 0, 0
    for r in reqs:
        n = r["input_length"]
        queried += n
        matched = 0
        for i, b in enumerate(r["hash_ids"]):
            if b not in lru:
                break
            matched += block_tokens(n, i)
        hits += max(0, min(matched, n - 1))  # the last token is always computed, as the replay counts
        for b in r["hash_ids"]:
            lru[b] = True
            lru.move_to_end(b)
        while capacity_blocks is not None and len(lru) > capacity_blocks:
            lru.popitem(last=False)
    return hits / queried


def belady_rate(capacity_blocks):
    never = len(reqs)
    next_use, last = [], {}
    for k in range(len(reqs) - 1, -1, -1):  # for each reference, the request that uses the block next
        row = []
        for b in reversed(reqs[k]["hash_ids"]):
            row.append(last.get(b, never))
            last[b] = k
        next_use.append(row[::-1])
    next_use.reverse()
    cache, heap, queried, hits = {}, [], 0, 0
    for k, r in enumerate(reqs):
        n = r["input_length"]
        queried += n
        found = sum(block_tokens(n, i) for i, b in enumerate(r["hash_ids"]) if b in cache)
        hits += max(0, min(found, n - 1))
        for b, nu in zip(r["hash_ids"], next_use[k]):
            cache[b] = nu
            heapq.heappush(heap, (-nu, b))
        while len(cache) > capacity_blocks:
            nu, b = heapq.heappop(heap)
            if cache.get(b) == -nu:
                del cache[b]
    return hits / queried


sizes = [int(n) for n in args.replicas.split(",")]
out = {"infinite": round(hit_rate(None), 4), **{f"pooled_{n}": round(hit_rate(n * args.kv_tokens // B), 4) for n in sizes}}
if args.belady:
    out.update({f"belady_{n}": round(belady_rate(n * args.kv_tokens // B), 4) for n in sizes})
print(json.dumps(out))

#!/usr/bin/env python3
"""Bounded load for the demo: N concurrent streaming clients for S seconds, a mix of repeated
and fresh questions from three keys, so the dashboard shows scaling, cache hits and costs."""
import argparse
import asyncio
import random
import time

import httpx

KEYS = ["sk-demo-search", "sk-demo-ml", "sk-demo-globex"]
QUESTIONS = [
    "What is a tidegate?", "How do I rotate an API key?", "Summarise the quarterly report.",
    "Explain continuous batching.", "What is a KV cache?", "Why is the sky blue?",
]


async def client(base: str, model: str, until: float, stats: dict, rng: random.Random) -> None:
    async with httpx.AsyncClient(base_url=base, timeout=120) as http:
        while time.monotonic() < until:
            fresh = rng.random() < 0.5
            q = f"Question {rng.randrange(10**9)}: explain item {rng.randrange(1000)}." if fresh else rng.choice(QUESTIONS)
            body = {"model": model, "stream": True, "max_tokens": rng.randint(20, 120),
                    "messages": [{"role": "user", "content": q}]}
            headers = {"Authorization": f"Bearer {rng.choice(KEYS)}"}
            try:
                async with http.stream("POST", "/v1/chat/completions", json=body, headers=headers) as r:
                    async for _ in r.aiter_lines():
                        pass
                    key = f"{r.status_code} {r.headers.get('x-tidegate-cache', '-')}"
            except httpx.HTTPError as e:
                key = type(e).__name__
            stats[key] = stats.get(key, 0) + 1


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", default="http://127.0.0.1:8080")
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--concurrency", type=int, default=48)
    ap.add_argument("--model", default="llama-sim")
    args = ap.parse_args()
    stats: dict = {}
    until = time.monotonic() + min(args.seconds, 600)
    rng = random.Random(7)
    await asyncio.gather(*(client(args.base, args.model, until, stats, random.Random(rng.random())) for _ in range(args.concurrency)))
    print({k: stats[k] for k in sorted(stats)})


if __name__ == "__main__":
    asyncio.run(main())

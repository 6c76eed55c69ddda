#!/usr/bin/env python3
"""Where should the audit judge cut? (cache/README.md "Online audits".) A real model (llama.cpp's
llama-server with SmolLM2-135M-Instruct, as scripts/setup_engines.sh builds it) answers question
pairs from quora_dev.csv; the cache's own embedder (MiniLM, through tidegate-cache-eval --vectors)
embeds the answers; the judge's verdict at each threshold is printed for three kinds of answer pair:
  resample   the same question answered twice (a right exact hit, the model sampling again)
  duplicate  the answers to two questions labelled duplicates (a right paraphrase hit)
  different  the answers to two questions labelled not duplicates (a false hit: Quora's
             non-duplicates are mostly near misses, the kind a cache serves wrongly)
Usage (from the source root): [JUDGE_TEMPERATURE=0.7] .venv/bin/python bench/cache/judge_answers.py \
    build/bin/tidegate-cache-eval ../shared/data/paraphrase/quora_dev.csv [PAIRS_PER_LABEL]
About 5.5 minutes for 50 pairs per label on 2 cores (llama-server on one thread)."""
import csv
import os
import random
import subprocess
import sys
import tempfile

import httpx
import numpy as np

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "tests", "engines"))
from engine_harness import Engine, missing  # noqa: E402

SEED = 19
MAX_TOKENS = 48
# The audit asks again with the client's settings; sampled answers vary. JUDGE_TEMPERATURE=0 for greedy.
TEMPERATURE = float(os.environ.get("JUDGE_TEMPERATURE", "0.7"))


def sample_pairs(path, per_label):
    rows = list(csv.DictReader(open(path, newline="")))
    rows = [r for r in rows if len(r["question1"]) < 120 and len(r["question2"]) < 120]
    random.Random(SEED).shuffle(rows)
    dup = [r for r in rows if r["is_duplicate"] == "1"][:per_label]
    non = [r for r in rows if r["is_duplicate"] == "0"][:per_label]
    return dup, non


def answer(client, url, question, seed):
    r = client.post(url + "/v1/chat/completions", json={
        "model": "m", "messages": [{"role": "user", "content": question}],
        "max_tokens": MAX_TOKENS, "temperature": TEMPERATURE, "seed": seed}, timeout=120)
    r.raise_for_status()
    return " ".join(r.json()["choices"][0]["message"]["content"].split())


def cosines(eval_bin, pairs, workdir):
    """MiniLM cosine of each (a, b), embedded by tidegate-cache-eval (the cache's own encoder)."""
    csv_path, vec_path = os.path.join(workdir, "answers.csv"), os.path.join(workdir, "answers.f32")
    with open(csv_path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["question1", "question2", "is_duplicate"])
        for a, b in pairs:
            w.writerow([a, b, 1])
    subprocess.run([eval_bin, "--pairs", csv_path, "--embedder", "minilm", "--vectors", vec_path,
                    "--threshold", "0.99"], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    v = np.fromfile(vec_path, dtype=np.float32).reshape(2, len(pairs), -1)
    return (v[0] * v[1]).sum(axis=1)


def main():
    eval_bin, pairs_csv = sys.argv[1], sys.argv[2]
    per_label = int(sys.argv[3]) if len(sys.argv) > 3 else 60
    why = missing(ROOT)
    if why:
        sys.exit(why)
    dup, non = sample_pairs(pairs_csv, per_label)
    engine = Engine(ROOT, slots=2)
    kinds, texts = [], []
    try:
        with httpx.Client() as c:
            for i, r in enumerate(dup + non):
                a1 = answer(c, engine.url, r["question1"], 2 * i)
                a1b = answer(c, engine.url, r["question1"], 2 * i + 1)
                a2 = answer(c, engine.url, r["question2"], 2 * i)
                kinds += ["resample", "duplicate" if r["is_duplicate"] == "1" else "different"]
                texts += [(a1, a1b), (a1, a2)]
    finally:
        engine.close()
    with tempfile.TemporaryDirectory() as d:
        cos = cosines(eval_bin, texts, d)
    kinds = np.array(kinds)
    print(f"{per_label} duplicate and {per_label} non-duplicate pairs (seed {SEED}), SmolLM2-135M-Instruct, "
          f"temperature {TEMPERATURE}, max_tokens {MAX_TOKENS}; MiniLM cosine of the two answers")
    for k in ("resample", "duplicate", "different"):
        c = cos[kinds == k]
        print(f"  {k:9s} n={len(c):3d}  p10 {np.percentile(c, 10):.3f}  median {np.median(c):.3f}  "
              f"p90 {np.percentile(c, 90):.3f}")
    print("threshold | resample judged right | duplicate judged right | different judged right (a missed false hit)")
    for th in (0.5, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9):
        row = [float((cos[kinds == k] >= th).mean()) for k in ("resample", "duplicate", "different")]
        print(f"  {th:.2f} | {row[0]:.3f} | {row[1]:.3f} | {row[2]:.3f}")


if __name__ == "__main__":
    main()

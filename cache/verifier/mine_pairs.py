#!/usr/bin/env python3
"""Mines unlabelled near-duplicate pairs from quora_train.csv's questions: the pairs the cache
itself would ask the verifier about. For each training question, its nearest other training
questions by MiniLM cosine (the top K at or above the cache's candidate floor, as a lookup takes
them), excluding pairs that are already labelled, questions equal after normalising, and every
question in train_verifier.py's held-out bucket.

Why: distilling the 6-layer verifier into the 3-layer one, the student learns the teacher's
judgement only on the pairs it is shown. quora_train.csv has about 22,000 pairs above cosine 0.7;
the questions themselves make many more near-duplicate pairs that the cache will meet in use.
The teacher labels them (train_verifier.py --extra-pairs); no label of quora_dev.csv is read.

The vectors are those `tidegate-cache-eval --pairs quora_train.csv --vectors FILE` saves (every
row's question1 vector, then every row's question2 vector; float32, unit length).

  build/train-venv/bin/python cache/verifier/mine_pairs.py ../shared/data/paraphrase/quora_train.csv \\
      build/train.f32 --out build/mined.csv
"""
import argparse
import csv
import random

import numpy as np

from verifier_data import held_out, normalised, questions, read_pair_vectors, read_question_pairs


def mine(rows, v, floor, top, block=1024):
    """rows: (question1, question2) per labelled pair; v: their vectors, every question1's then
    every question2's, unit length. Returns the mined pairs as index pairs (i < j) into that
    order, sorted."""
    texts = questions(rows)
    keys = [normalised(q) for q in texts]
    # One entry per distinct normalised question outside the held-out bucket.
    first = {}
    for i, (q, key) in enumerate(zip(texts, keys)):
        if key and key not in first and not held_out(q):
            first[key] = i
    keep = np.array(sorted(first.values()), dtype=np.int64)
    if len(keep) < 2:
        return []
    vecs = v[keep]
    labelled = {frozenset((normalised(a), normalised(b))) for a, b in rows}
    k = min(top, len(keep) - 1)
    found = set()
    for s in range(0, len(keep), block):
        sims = vecs[s:s + block] @ vecs.T
        for r in range(sims.shape[0]):
            sims[r, s + r] = -np.inf  # not itself
        nearest = np.argpartition(-sims, k - 1, axis=1)[:, :k]
        for r in range(sims.shape[0]):
            for c in nearest[r]:
                if sims[r, c] < floor:
                    continue
                i, j = int(keep[s + r]), int(keep[c])
                if frozenset((keys[i], keys[j])) not in labelled:
                    found.add((min(i, j), max(i, j)))
    return sorted(found)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("pairs_csv")
    ap.add_argument("vectors")
    ap.add_argument("--out", required=True)
    ap.add_argument("--floor", type=float, default=0.8, help="the cache's candidate floor (cache.verifier.floor)")
    ap.add_argument("--top", type=int, default=4, help="candidates per lookup (cache.verifier.candidates)")
    ap.add_argument("--max-pairs", type=int, default=0, help="keep a random sample of this many (0: all)")
    ap.add_argument("--seed", type=int, default=17)
    args = ap.parse_args()
    if args.top < 1:
        ap.error(f"--top {args.top}: must be at least 1")

    rows = read_question_pairs(args.pairs_csv)
    v = read_pair_vectors(args.vectors, len(rows))
    texts = questions(rows)
    found = mine(rows, v, args.floor, args.top)
    print(f"{len(found)} unlabelled pairs at cosine >= {args.floor} among each question's top {args.top}", flush=True)
    if args.max_pairs and len(found) > args.max_pairs:
        found = sorted(random.Random(args.seed).sample(found, args.max_pairs))
    with open(args.out, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["question1", "question2", "cosine"])
        for i, j in found:
            w.writerow([texts[i], texts[j], f"{float(v[i] @ v[j]):.6f}"])
    print(f"wrote {len(found)} pairs to {args.out}")


if __name__ == "__main__":
    main()

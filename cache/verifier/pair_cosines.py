#!/usr/bin/env python3
"""Writes the MiniLM cosine of each labelled pair, one per line in the CSV's row order: what
train_verifier.py --pair-cosines reads to train only on the pairs the cache would ask the verifier
about (those above its candidate floor).

The vectors are the file `tidegate-cache-eval --pairs CSV --vectors FILE` saves: every row's
question1 vector, then every row's question2 vector, float32, unit length (the C++ encoder the
cache runs, so the cosines are the cache's own).

  build/bin/tidegate-cache-eval --pairs ../shared/data/paraphrase/quora_train.csv --vectors build/train.f32
  python3 cache/verifier/pair_cosines.py ../shared/data/paraphrase/quora_train.csv build/train.f32 > build/train.cos
"""
import csv
import sys

import numpy as np


def main():
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    pairs_csv, vectors = sys.argv[1], sys.argv[2]
    csv.field_size_limit(10**9)
    with open(pairs_csv, newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    h = rows[0]
    c1, c2, cd = h.index("question1"), h.index("question2"), h.index("is_duplicate")
    n = sum(1 for r in rows[1:] if len(r) > max(c1, c2, cd))
    if n != len(rows) - 1:
        raise SystemExit(f"{pairs_csv}: {len(rows) - 1 - n} short rows; the evaluator skips them, so rows would not line up")
    v = np.fromfile(vectors, dtype=np.float32)
    if v.size % (2 * n):
        raise SystemExit(f"{vectors}: {v.size} floats is not two vectors for each of {n} rows")
    v = v.reshape(2 * n, -1)
    cos = np.einsum("ij,ij->i", v[:n], v[n:])
    sys.stdout.write("".join(f"{c:.6f}\n" for c in cos))


if __name__ == "__main__":
    main()

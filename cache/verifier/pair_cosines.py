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
import sys

import numpy as np

from verifier_data import read_columns, read_pair_vectors


def main():
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    pairs_csv, vectors = sys.argv[1], sys.argv[2]
    n = len(read_columns(pairs_csv, ("question1", "question2", "is_duplicate")))
    v = read_pair_vectors(vectors, n)
    cos = np.einsum("ij,ij->i", v[:n], v[n:])
    sys.stdout.write("".join(f"{c:.6f}\n" for c in cos))


if __name__ == "__main__":
    main()

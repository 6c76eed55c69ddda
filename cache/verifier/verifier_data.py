"""What the verifier's training data rules share, without torch: which questions are held out
(train_verifier.py reports on them and never trains on them; mine_pairs.py never pairs them),
when two questions count as the same text, and reading the pairs CSVs and their vectors."""
import csv
import hashlib
import re

import numpy as np


def held_out(q):
    """A 5% bucket of questions by hash: about 10% of pairs have a question in it."""
    return int(hashlib.sha256(q.strip().lower().encode()).hexdigest()[:8], 16) % 20 == 0


def normalised(q):
    """Lower case, punctuation and spacing folded: "How can I?" and "how can i" are one question
    (letters and digits of any script are kept)."""
    return re.sub(r"[\W_]+", " ", q.lower()).strip()


def read_columns(path, names):
    """The named columns of every row of a CSV, as tuples; a clear error naming the file (and the
    line) for a missing column or a short row, which would otherwise misalign rows and vectors."""
    csv.field_size_limit(10**9)
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        missing = set(names) - set(reader.fieldnames or [])
        if missing:
            raise SystemExit(f"{path}: no column {', '.join(sorted(missing))} in its header line "
                             f"({','.join(reader.fieldnames or []) or 'empty file'})")
        rows = []
        for r in reader:
            row = tuple(r[c] for c in names)
            if None in row:
                raise SystemExit(f"{path}: line {reader.line_num} has fewer fields than the header")
            rows.append(row)
        return rows


def read_question_pairs(path):
    """(question1, question2) of every row."""
    return read_columns(path, ("question1", "question2"))


def questions(rows):
    """Every row's question1, then every row's question2: the order of the saved vectors."""
    return [a for a, _ in rows] + [b for _, b in rows]


def read_pair_vectors(path, rows):
    """The vectors `tidegate-cache-eval --pairs CSV --vectors FILE` saves for a CSV of `rows` rows,
    in the order of questions() (float32, unit length)."""
    if rows == 0:
        raise SystemExit(f"{path}: no rows to read vectors for")
    v = np.fromfile(path, dtype=np.float32)
    if v.size % (2 * rows):
        raise SystemExit(f"{path}: {v.size} floats is not two vectors for each of {rows} rows")
    return v.reshape(2 * rows, -1)

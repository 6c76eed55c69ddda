"""What the verifier's training data rules share, without torch: which questions are held out
(train_verifier.py reports on them and never trains on them; mine_pairs.py never pairs them),
when two questions count as the same text, and reading question pairs."""
import csv
import hashlib
import re


def held_out(q):
    """A 5% bucket of questions by hash: about 10% of pairs have a question in it."""
    return int(hashlib.sha256(q.strip().lower().encode()).hexdigest()[:8], 16) % 20 == 0


def normalised(q):
    """Lower case, punctuation and spacing folded: "How can I?" and "how can i" are one question
    (letters and digits of any script are kept)."""
    return re.sub(r"[\W_]+", " ", q.lower()).strip()


def read_question_pairs(path):
    """(question1, question2) of each row of a CSV with those columns; a clear error otherwise."""
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        missing = {"question1", "question2"} - set(reader.fieldnames or [])
        if missing:
            raise SystemExit(f"{path}: no column {', '.join(sorted(missing))} in its header line "
                             f"({','.join(reader.fieldnames or []) or 'empty file'})")
        rows = []
        for r in reader:
            if r["question1"] is None or r["question2"] is None:
                raise SystemExit(f"{path}: line {reader.line_num} has fewer fields than the header")
            rows.append((r["question1"], r["question2"]))
        return rows

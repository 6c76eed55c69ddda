"""What the verifier's training data rules share, without torch: which questions are held out
(train_verifier.py reports on them and never trains on them; mine_pairs.py never pairs them),
and when two questions count as the same text."""
import hashlib
import re


def held_out(q):
    """A 5% bucket of questions by hash: about 10% of pairs have a question in it."""
    return int(hashlib.sha256(q.strip().lower().encode()).hexdigest()[:8], 16) % 20 == 0


def normalised(q):
    """Lower case, punctuation and spacing folded: "How can I?" and "how can i" are one question."""
    return re.sub(r"[^0-9a-z]+", " ", q.lower()).strip()

"""verifier_metrics against counting by brute force on random scores, and on cases built by hand."""
import os
import sys
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from verifier_metrics import auc, recall_at_false_positive_rate  # noqa: E402


def brute_auc(s, y):
    pos, neg = s[y == 1], s[y == 0]
    return float((pos[:, None] > neg[None, :]).mean() + 0.5 * (pos[:, None] == neg[None, :]).mean())


def brute_recall(s, y, fpr):
    """The best recall over every threshold whose false-positive rate is within fpr."""
    pos, neg = s[y == 1], s[y == 0]
    best = 0.0
    for t in np.concatenate([s, [np.inf, -np.inf]]):
        if (neg > t).mean() <= fpr:
            best = max(best, float((pos > t).mean()))
    return best


class Metrics(unittest.TestCase):
    def test_match_brute_force_on_random_scores(self):
        rng = np.random.default_rng(3)
        for trial in range(40):
            n = int(rng.integers(5, 300))
            y = (rng.random(n) < rng.uniform(0.1, 0.9)).astype(int)
            if y.min() == y.max():
                continue
            s = rng.normal(size=n) + y * rng.uniform(0, 2)
            if trial % 4 == 0:
                s = np.round(s, 1)  # ties, within and across the classes
            self.assertAlmostEqual(auc(s, y), brute_auc(s, y), places=9)
            for fpr in (0.0, 0.01, 0.05, 0.2, 0.5, 1.0):
                self.assertAlmostEqual(recall_at_false_positive_rate(s, y, fpr), brute_recall(s, y, fpr), places=9,
                                       msg=f"trial {trial} fpr {fpr}")

    def test_by_hand(self):
        s = np.array([0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1, 0.05, 0.95])
        y = np.array([1, 0, 1, 1, 0, 0, 0, 0, 0, 0, 1])
        self.assertAlmostEqual(auc(s, y), 26 / 28)
        # Seven negatives: 0.05 lets none of them through (cut at 0.8): 0.95 and 0.9 of four.
        self.assertEqual(recall_at_false_positive_rate(s, y, 0.05), 0.5)
        # One of seven (0.143 <= 0.15) may pass: the cut moves to 0.5.
        self.assertEqual(recall_at_false_positive_rate(s, y, 0.15), 1.0)
        self.assertTrue(np.isnan(recall_at_false_positive_rate(s, np.ones_like(y), 0.05)))
        self.assertTrue(np.isnan(auc(s, np.ones_like(y))))
        # A saturated verifier: three duplicates and two non-duplicates all at 1.0 rank as a coin.
        self.assertEqual(auc(np.array([1.0, 1.0, 1.0, 1.0, 1.0, 0.2]), np.array([1, 1, 1, 0, 0, 0])),
                         (3 * 0.5 * 2 + 3 * 1) / 9)


if __name__ == "__main__":
    unittest.main()

"""How a verifier ranks held-out pairs, without torch: the AUC over all pairs, and the recall at
a fixed false-positive rate (the strict end of the ROC curve, where a cache set for few false hits
decides)."""
import math

import numpy as np


def auc(scores, labels):
    """Probability that a duplicate scores above a non-duplicate, a tie counting one half (a
    saturated sigmoid gives many scores of exactly 1.0). NaN without both classes."""
    pos = labels == 1
    n1, n0 = int(pos.sum()), int((~pos).sum())
    if n1 == 0 or n0 == 0:
        return float("nan")
    # Mid-ranks: every score of a tie gets the mean of the ranks the tie spans.
    values, inverse, counts = np.unique(scores, return_inverse=True, return_counts=True)
    mid = np.cumsum(counts) - (counts - 1) / 2
    return float((mid[inverse][pos].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))


def recall_at_false_positive_rate(scores, labels, fpr):
    """Share of the duplicates scored above the lowest threshold that lets through at most `fpr`
    of the non-duplicates (a pair passes when its score is above the threshold). NaN without
    both classes."""
    negatives = np.sort(scores[labels == 0])[::-1]
    if len(negatives) == 0 or not (labels == 1).any():
        return float("nan")
    # Thresholds at the negatives' own scores: passing strictly above the k-th highest lets
    # through the k above it (fewer where it ties with them).
    k = int(math.floor(fpr * len(negatives)))
    if k >= len(negatives):
        return 1.0  # every negative may pass: so may every duplicate
    cut = negatives[k]
    return float((scores[labels == 1] > cut).mean())

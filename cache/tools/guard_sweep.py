#!/usr/bin/env python3
"""Guard sweep for issue 3: do stronger lexical guards lift precision on held-out pairs?

Reuses the MiniLM vectors that `tidegate-cache-eval --vectors FILE` saved (question1 rows, then
question2 rows, float32), finds each question2's best question1 exactly as the tool does, and
sweeps threshold x guard variants. Parameters are chosen on the even rows and reported on the
odd rows (and on all rows). Guard variants beyond the cache's own (numbers + names):
content-word coverage (after a small stopword list and plural folding; min or max of the two
directions), negation mismatch, question-word mismatch.

usage: .venv/bin/python cache/tools/guard_sweep.py PAIRS_CSV VECTORS_F32 [OUT_JSON]
"""
import csv
import json
import re
import sys

import numpy as np

STOP = set("""a an the is are was were be been being am do does did doing have has had having i me my
we our you your he she it its they them their this that these those of in on at to for from by with
about as into and or but if so than then there here can could should would will shall may might must
what which who whom whose when where why how get got one ones some any much many more most very just
also s t""".split())
NEG = set("not no never nothing nobody none cannot without nor".split())
QWORDS = {"who", "what", "when", "where", "why", "how", "which"}


def words_and_negation(s):
    """Lowercased words; n't and negation words set the negation flag."""
    out, neg = [], False
    for w in re.findall(r"[a-z0-9]+(?:'[a-z]+)?", s.lower().replace("\u2019", "'")):
        if w.endswith("n't"):
            neg, w = True, w[:-3]
        elif "'" in w:
            w = w.split("'")[0]
        neg = neg or w in NEG
        out.append(w)
    return out, neg


def fold_plural(w):
    return w[:-1] if len(w) > 3 and w.endswith('s') and not w.endswith('ss') else w


def feats(a, b):
    """Content-word coverage a->b and b->a, negation mismatch, question-word mismatch."""
    ta, na = words_and_negation(a)
    tb, nb = words_and_negation(b)
    ca_set = {fold_plural(w) for w in ta if w not in STOP and w not in NEG}
    cb_set = {fold_plural(w) for w in tb if w not in STOP and w not in NEG}
    shared = len(ca_set & cb_set)
    ca = shared / len(ca_set) if ca_set else 1.0
    cb = shared / len(cb_set) if cb_set else 1.0
    return ca, cb, na != nb, {w for w in ta if w in QWORDS} != {w for w in tb if w in QWORDS}


def tokens_old(s):
    """Numbers (sorted), names (capitalised words but the first and "I"), all words; lowercased."""
    nums = sorted(re.findall(r"\d+(?:[.,]\d+)*", s))
    names, words, index = set(), set(), 0
    for m in re.finditer(r"\d+(?:[.,]\d+)*|[^\W\d_][\w'\-]*", s):
        w = m.group(0)
        index += 1
        if w[0].isdigit():
            continue
        w = re.match(r"[^\d]*", w).group(0)
        if index > 1 and w[0].isupper() and w != "I":
            names.add(w.lower())
        words.add(w.lower())
    return nums, names, words


def old_guard(a, b):
    """The cache's lexical_guard (cache/src/lexical_guard.cc), re-expressed."""
    na, ma, wa = tokens_old(a)
    nb, mb, wb = tokens_old(b)
    return na == nb and ma <= wb and mb <= wa


def main():
    pairs_csv, vec_path = sys.argv[1], sys.argv[2]
    out_path = sys.argv[3] if len(sys.argv) > 3 else None
    csv.field_size_limit(10**9)
    rows = list(csv.reader(open(pairs_csv, newline='')))
    h = rows[0]
    c1, c2, cd = h.index('question1'), h.index('question2'), h.index('is_duplicate')
    pairs = [(r[c1], r[c2], r[cd] == '1') for r in rows[1:] if len(r) > max(c1, c2, cd)]
    n = len(pairs)
    v = np.fromfile(vec_path, dtype=np.float32).reshape(2 * n, -1)
    v1, v2 = v[:n], v[n:]
    best = np.empty(n, dtype=np.int64)
    sim = np.empty(n, dtype=np.float32)
    for i in range(0, n, 2000):
        s = v2[i:i + 2000] @ v1.T
        best[i:i + 2000] = s.argmax(1)
        sim[i:i + 2000] = s.max(1)
    own = np.array([pairs[best[i]][0] == pairs[i][0] for i in range(n)])
    dup = np.array([p[2] for p in pairs])
    F = np.array([feats(pairs[best[i]][0], pairs[i][1]) for i in range(n)], dtype=float)
    OG = np.array([old_guard(pairs[best[i]][0], pairs[i][1]) for i in range(n)])
    ca, cb, negx, qx = F[:, 0], F[:, 1], F[:, 2].astype(bool), F[:, 3].astype(bool)

    def ev(mask, sel):
        pred = mask & own & sel
        tp = int((pred & dup).sum())
        fp = int((pred & ~dup).sum())
        pos = int((dup & sel).sum())
        p = tp / (tp + fp) if tp + fp else 1.0
        r = tp / pos
        return p, r, (2 * p * r / (p + r) if p + r else 0.0), tp, fp

    idx = np.arange(n)
    tune, test, every = idx % 2 == 0, idx % 2 == 1, np.ones(n, bool)
    res = []
    for th in [x / 100 for x in range(80, 100)] + [0.995]:
        for cov in [0, 0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 1.0]:
            for mode in ['min', 'max']:
                c = np.minimum(ca, cb) if mode == 'min' else np.maximum(ca, cb)
                for useneg in [0, 1]:
                    for useq in [0, 1]:
                        for useold in [0, 1]:
                            m = (sim >= th) & (c >= cov - 1e-9)
                            if useneg:
                                m &= ~negx
                            if useq:
                                m &= ~qx
                            if useold:
                                m &= OG
                            key = dict(threshold=th, coverage=cov, mode=mode, negation=useneg, qword=useq,
                                       numbers_names=useold)
                            res.append((key, ev(m, tune), ev(m, test), ev(m, every)))
    if out_path:
        json.dump([dict(setting=k, tune=a, heldout=b, all=c) for k, a, b, c in res], open(out_path, 'w'))
    ok = sorted((r for r in res if r[1][0] >= 0.95), key=lambda r: -r[1][2])
    print("settings with precision >= 0.95 on the even rows, best F1 first; held-out = odd rows")
    for k, a, b, c in ok[:15]:
        print(k, "tune p=%.3f r=%.3f f1=%.3f tp=%d fp=%d" % a, "| held-out p=%.3f r=%.3f f1=%.3f tp=%d fp=%d" % b,
              "| all p=%.3f r=%.3f f1=%.3f" % c[:3])
    best_heldout = max(res, key=lambda r: (r[2][0] if r[2][3] >= 100 else 0))
    print("highest held-out precision with >= 100 true positives:", best_heldout)


if __name__ == '__main__':
    main()

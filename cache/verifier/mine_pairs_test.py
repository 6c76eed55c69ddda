#!/usr/bin/env python3
"""mine_pairs.mine on a handful of questions whose vectors are built by hand: each exclusion
rule has a question that only it keeps out. And the readers' errors."""
import os
import sys
import tempfile
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mine_pairs import mine  # noqa: E402
from verifier_data import held_out, read_pair_vectors, read_question_pairs  # noqa: E402


def unit(*xs):
    v = np.array(xs, dtype=np.float32)
    return v / np.linalg.norm(v)


def first_held_out(prefix):
    for i in range(1000):
        if held_out(f"{prefix} {i}?"):
            return f"{prefix} {i}?"
    raise AssertionError("no held-out question in 1000 tries")


class Mine(unittest.TestCase):
    def setUp(self):
        self.hidden = first_held_out("How do I learn to swim, question")
        # Two labelled rows; their four questions are q1s then q2s in the vector order.
        self.rows = [
            ("How do I learn Python?", "What is the capital of France?"),
            ("How should I start learning Python?", self.hidden),
        ]
        for q in ("How do I learn Python?", "How should I start learning Python?", "What is the capital of France?"):
            self.assertFalse(held_out(q), q)
        self.v = np.stack([
            unit(1, 0.10, 0, 0),   # 0: learn Python (row 0's question1)
            unit(1, 0.15, 0, 0),   # 1: start learning Python (row 1's question1), near 0
            unit(0, 0, 1, 0),      # 2: France (row 0's question2), far from all
            unit(1, 0.12, 0, 0),   # 3: held out (row 1's question2), nearest to 0 and 1
        ])

    def test_near_unlabelled_pairs_are_mined_and_held_out_questions_never(self):
        self.assertEqual(mine(self.rows, self.v, floor=0.8, top=4), [(0, 1)])

    def test_a_labelled_pair_is_not_mined_again(self):
        rows = [("How do I learn Python?", "How should I start learning Python?"), ("What is the capital of France?", "Paris?")]
        v = np.stack([unit(1, 0.1, 0, 0), unit(0, 0, 1, 0), unit(1, 0.15, 0, 0), unit(0, 0, 1, 0.2)])
        self.assertEqual(mine(rows, v, floor=0.8, top=4), [])

    def test_the_floor_and_the_top_k_bound_what_a_lookup_would_ask(self):
        self.assertEqual(mine(self.rows, self.v, floor=0.99999, top=4), [])
        a, b, c, d = unit(1, 0, 0, 0), unit(1, 0.05, 0, 0), unit(1, 0.3, 0, 0), unit(1, 0.9, 0, 0)
        rows = [("a one", "d one"), ("b one", "c one")]  # labelled: a-d, b-c
        v = np.stack([a, b, d, c])  # the rows' question1s, then their question2s
        # Each question's nearest: a-b, b-a, c-b (labelled), d-c. a-c is within the floor but is
        # nobody's nearest, so a top-1 lookup never asks about it; a top-2 one does (c's second;
        # d's second is b).
        self.assertEqual(mine(rows, v, floor=0.5, top=1), [(0, 1), (2, 3)])
        self.assertEqual(mine(rows, v, floor=0.5, top=2), [(0, 1), (0, 3), (1, 2), (2, 3)])

    def test_questions_equal_after_normalising_are_one_question(self):
        # The two spellings are in different rows and never labelled as a pair.
        rows = [("How do I learn Python?", "Where is Paris"), ("how do i learn python", "x y z")]
        v = np.stack([unit(1, 0, 0, 0), unit(1, 0.01, 0, 0), unit(0, 1, 0, 0), unit(0, 0, 0, 1)])
        self.assertEqual(mine(rows, v, floor=0.8, top=4), [])


class ReadQuestionPairs(unittest.TestCase):
    def read(self, text):
        with tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False) as f:
            f.write(text)
        self.addCleanup(os.unlink, f.name)
        return read_question_pairs(f.name)

    def test_rows_are_read_by_column_name(self):
        self.assertEqual(self.read("is_duplicate,question2,question1\n1,b?,a?\n"), [("a?", "b?")])

    def test_a_missing_column_or_a_short_line_is_named(self):
        with self.assertRaisesRegex(SystemExit, "no column question2 in its header line"):
            self.read("question1,q2\na,b\n")
        with self.assertRaisesRegex(SystemExit, "empty file"):
            self.read("")
        with self.assertRaisesRegex(SystemExit, "line 3 has fewer fields"):
            self.read("question1,question2\na,b\nc\n")


class ReadPairVectors(unittest.TestCase):
    def test_vectors_that_are_not_two_per_row_are_refused(self):
        with tempfile.NamedTemporaryFile(suffix=".f32", delete=False) as f:
            np.zeros(3 * 4, dtype=np.float32).tofile(f)
        self.addCleanup(os.unlink, f.name)
        self.assertEqual(read_pair_vectors(f.name, 3).shape, (6, 2))
        with self.assertRaisesRegex(SystemExit, "12 floats is not two vectors for each of 5 rows"):
            read_pair_vectors(f.name, 5)
        with self.assertRaisesRegex(SystemExit, "no rows"):
            read_pair_vectors(f.name, 0)


if __name__ == "__main__":
    unittest.main()

#!/usr/bin/env python3
"""Generates tests/data/minilm_reference.json. Run ONCE by hand; the test suite only reads it.

It needs sentence-transformers (which pulls torch), deliberately not part of the project's venv:
    python3 -m venv /tmp/stvenv && /tmp/stvenv/bin/pip install sentence-transformers
    /tmp/stvenv/bin/python encoder/tests/make_reference.py third_party/models/all-MiniLM-L6-v2

The fixture holds, per sentence, the token ids of the model's own tokenizer (truncated to
max_seq_length like the model sees them) and the normalised sentence embedding ("cases"), plus
token ids alone for 400 seeded random multi-script strings ("token_cases").
"""
import json
import random
import sys
from importlib.metadata import version
from pathlib import Path

from sentence_transformers import SentenceTransformer

LONG = " ".join(
    f"Paragraph {i}: the harbour master logged {i * 7} vessels, noting fog, tides and cargo manifests."
    for i in range(40)
)

SENTENCES = [
    "",
    "Hello",
    "What is the capital of France?",
    "Which city is France's capital?",
    "How do I reset my password?",
    "  leading and trailing   whitespace\t\nwith tabs  ",
    "Punctuation!!! Does it... split? (yes) [maybe] {sure} -- \"quoted\" 'single' a/b@c#d$e%f^g&h*i",
    "Café naïve résumé Ångström façade São Paulo Zürich Dvořák Łódź",
    "ÉCOLE NORMALE SUPÉRIEURE À PARIS",
    "Numbers: 3.14159, 2,718, 1e-9, 42nd, 007 and 1234567890",
    "我喜欢自然语言处理。这是一个测试句子。",
    "日本語のテキストと漢字の混在",
    "한국어 문장도 있습니다",
    "Emoji are rare in prompts 🙂 but do happen 🚀🚀",
    "supercalifragilisticexpialidocious antidisestablishmentarianism pneumonoultramicroscopicsilicovolcanoconiosis",
    "x" * 120,
    "Привет, как дела? Ελληνικά κείμενα.",
    "def fibonacci(n):\n    return n if n < 2 else fibonacci(n - 1) + fibonacci(n - 2)",
    "The quick brown fox jumps over the lazy dog.",
    "Soft\u00adhyphen, zero\u200bwidth space, and a control\u0007char",
    LONG,
]


# Random strings over many scripts, controls, private use, unassigned and astral code points,
# for token ids only. The Arabic block is left out: U+061D is punctuation since Unicode 14, and
# HF tokenizers' category tables are older (the C++ side follows ICU's current data).
FUZZ_RANGES = [(0x20, 0x7E)] * 6 + [
    (0x00, 0x1F), (0xA0, 0x24F), (0x300, 0x36F), (0x370, 0x3FF), (0x400, 0x4FF), (0x590, 0x5FF),
    (0x900, 0x97F), (0xE00, 0xE7F), (0x1E00, 0x1EFF), (0x2000, 0x206F), (0x2100, 0x22FF),
    (0x3000, 0x30FF), (0x4E00, 0x4FFF), (0xAC00, 0xAD00), (0xFB00, 0xFB4F), (0xFF00, 0xFFEF),
    (0x1F300, 0x1F64F), (0xE000, 0xE010), (0x10000, 0x1007F), (0x20000, 0x20100), (0x1D400, 0x1D4FF),
]


def fuzz_texts(count: int) -> list:
    rng = random.Random(20261130)
    texts = []
    for _ in range(count):
        chars = []
        for _ in range(rng.randint(0, 40)):
            lo, hi = rng.choice(FUZZ_RANGES)
            chars.append(chr(rng.randint(lo, hi)))
            if rng.random() < 0.2:
                chars.append(" ")
        texts.append("".join(chars))
    return texts


def main() -> None:
    model_dir = Path(sys.argv[1] if len(sys.argv) > 1 else "third_party/models/all-MiniLM-L6-v2")
    model = SentenceTransformer(str(model_dir), device="cpu")
    vectors = model.encode(SENTENCES, batch_size=8, normalize_embeddings=False, convert_to_numpy=True)
    tokenizer = model.tokenizer
    max_len = model.max_seq_length
    cases = []
    for sentence, vector in zip(SENTENCES, vectors):
        ids = tokenizer(sentence, truncation=True, max_length=max_len)["input_ids"]
        cases.append({"text": sentence, "token_ids": ids, "embedding": [float(v) for v in vector]})
    token_cases = [
        {"text": t, "token_ids": tokenizer(t, truncation=True, max_length=max_len)["input_ids"]}
        for t in fuzz_texts(400)
    ]
    doc = {
        "model": model_dir.name,
        "max_seq_length": max_len,
        "generator": "encoder/tests/make_reference.py",
        "versions": {
            name: version(name)
            for name in ("sentence-transformers", "transformers", "tokenizers", "torch", "numpy")
        },
        "tokenizer_class": type(tokenizer).__name__,
    }
    out = Path(__file__).with_name("data") / "minilm_reference.json"
    # One case per line keeps the file reviewable.
    head = json.dumps(doc, ensure_ascii=False, indent=1)
    lines = ",\n".join(json.dumps(c, ensure_ascii=False) for c in cases)
    token_lines = ",\n".join(json.dumps(c, ensure_ascii=False) for c in token_cases)
    text = (head[:-2] + ',\n "cases": [\n' + lines + '\n ],\n "token_cases": [\n' + token_lines + "\n ]\n}\n")
    json.loads(text)
    out.write_text(text, encoding="utf-8")
    print(f"wrote {out} with {len(cases)} cases")


if __name__ == "__main__":
    main()

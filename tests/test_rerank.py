"""Reranking a retrieve call's best rows: the callable hook, MaxSimReranker (an example of it), the rules."""

from __future__ import annotations

import pytest

from pyhybrid import Chunk, InvalidParameterError, RetrievalError
from pyhybrid.rerank import MaxSimReranker
from tests.conftest import Api, Db
from tests.helpers import chunks, unit


def test_a_callable_reorders_the_best_rows_and_skip_and_top_k_apply_after_it(db: Db, api: Api) -> None:
    api.ingest("acme", chunks("r", 30), corpus_id="qms")
    seen: list[int] = []

    def by_number(query: str, texts: list[str]) -> list[float]:
        seen.append(len(texts))
        return [float(t.split("item")[1]) for t in texts]  # the chunk's number: highest first

    kw = dict(query_embedding=unit(3), query_text="pumps valves alarms", top_k=5)
    fused = api.retrieve("acme", **kw)
    out = api.retrieve("acme", rerank=by_number, rerank_depth=20, **kw)
    assert seen == [20]
    best20 = api.retrieve("acme", **{**kw, "top_k": 20})
    want = sorted(best20, key=lambda r: -int(r.chunk_id.split("-")[1]))[:5]
    assert [r.chunk_id for r in out] == [r.chunk_id for r in want]
    assert [r.rerank_score for r in out] == [float(r.chunk_id.split("-")[1]) for r in want]
    # each row keeps its fused score; without rerank nothing changes
    assert {r.chunk_id: r.score for r in out} == {r.chunk_id: r.score for r in best20 if r.chunk_id in {x.chunk_id for x in out}}
    assert all(r.rerank_score is None for r in fused)
    page2 = api.retrieve("acme", rerank=by_number, rerank_depth=20, skip=5, **kw)
    assert [r.chunk_id for r in page2] == [r.chunk_id for r in sorted(best20, key=lambda r: -int(r.chunk_id.split("-")[1]))[5:10]]


def test_rerank_rules(db: Db, api: Api) -> None:
    api.ingest("acme", chunks("r", 5), corpus_id="qms")
    with pytest.raises(InvalidParameterError, match="rerank needs query_text"):
        api.retrieve("acme", query_embedding=unit(1), rerank=lambda q, t: [0.0] * len(t))
    with pytest.raises(InvalidParameterError, match="rerank_depth must be between 1 and 1000"):
        api.retrieve("acme", query_text="pumps", rerank=lambda q, t: [0.0] * len(t), rerank_depth=0)
    for name in ("cohere", "maxsim"):  # the built-in is no ranking option by name: pass MaxSimReranker() if wanted
        with pytest.raises(InvalidParameterError, match=r"rerank must be a callable \(query_text, \[texts\]\) -> \[scores\], got"):
            api.retrieve("acme", query_text="pumps", rerank=name)
    with pytest.raises(RetrievalError, match="returned 1 scores for 5 texts"):
        api.retrieve("acme", query_text="pumps", rerank=lambda q, t: [1.0])
    with pytest.raises(RetrievalError, match="not a finite number"):
        api.retrieve("acme", query_text="pumps", rerank=lambda q, t: [float("nan")] * len(t))


def test_maxsim_reads_past_the_tokens_the_embedding_saw(db: Db, api: Api) -> None:
    filler = " ".join(f"paragraph {i} describes the mechanical housing and its screws." for i in range(60))
    api.ingest("acme", [
        Chunk(chunk_id="long", document_id="D1", content=filler + " The occlusion alarm sounds when line pressure "
              "exceeds the threshold.", embedding=unit(11)),
        Chunk(chunk_id="clean", document_id="D2", content="Wipe the housing with alcohol after each use.",
              embedding=unit(12)),
        Chunk(chunk_id="battery", document_id="D3", content="Charge the battery for eight hours.", embedding=unit(13)),
    ], corpus_id="qms")
    q = "When does the blockage warning go off?"
    assert len(MaxSimReranker().passages(filler)) > 5
    out = api.retrieve("acme", query_embedding=unit(14), query_text=q, top_k=3, rerank=MaxSimReranker())
    assert out[0].chunk_id == "long" and out[0].rerank_score is not None and out[0].rerank_score > out[1].rerank_score

"""Graph expansion scored from the seed (issue 26): a chunk reached only through the graph scores below its seed."""

from __future__ import annotations

import psycopg
import pytest

from pyhybrid import Chunk, InvalidParameterError, RetrieveQuery
from pyhybrid.fusion import GRAPH_DECAY, graph_score
from tests.conftest import Api, Db
from tests.helpers import unit

QUERY = "pumps"


def _linked_corpus(api: Api) -> None:
    """c-0 .. c-9 hold the query's word, c-0 ten times, c-9 once (the same length: BM25 ranks them in order); no
    branch finds 'far-0' .. 'far-3' (no word of the query), each linked to one of the three best hits but far-3,
    linked to far-0 only (two hops from c-0); c-5 is both a hit and c-0's neighbour."""
    docs = [Chunk(chunk_id=f"c-{i}", document_id=f"c-{i}", embedding=unit(10 + i),
                  content=" ".join(["pumps"] * (10 - i) + ["housing"] * i)) for i in range(10)]
    docs += [Chunk(chunk_id=f"far-{i}", document_id=f"far-{i}", content=f"Appendix {i}: torque table.",
                   embedding=unit(50 + i)) for i in range(4)]
    api.ingest("acme", docs, corpus_id="qms")
    api.add_edges("acme", [{"src": "c-0", "dst": "far-0", "rel": "CITES"}, {"src": "c-1", "dst": "far-1", "rel": "CITES"},
                           {"src": "far-2", "dst": "c-2", "rel": "CITES"}, {"src": "far-0", "dst": "far-3", "rel": "CITES"},
                           {"src": "c-0", "dst": "c-5", "rel": "CITES"}])


def _rows(api: Api, **kw: object) -> dict[str, object]:
    rows = api.retrieve("acme", query_text=QUERY, top_k=30, per_source_k=30, **kw)
    return {r.chunk_id: r for r in rows}


@pytest.mark.usefixtures("require_age")
@pytest.mark.parametrize("fusion", ["rrf", "convex", "dbsf", "blend"])
@pytest.mark.parametrize("graph_weight", [0.5, 2.0])
def test_a_chunk_reached_only_through_the_graph_scores_its_seeds_score_times_weight_and_decay_per_hop(
        api: Api, fusion: str, graph_weight: float) -> None:
    _linked_corpus(api)
    plain = _rows(api, fusion=fusion, graph_weight=0.0)
    rows = _rows(api, fusion=fusion, graph_weight=graph_weight, graph_expand=3, graph_hops=2)
    seeds = sorted(plain, key=lambda i: (-plain[i].score, i))[:3]  # type: ignore[attr-defined]
    assert set(seeds) == {"c-0", "c-1", "c-2"}
    seed_of = {"far-0": ("c-0", 1), "far-1": ("c-1", 1), "far-2": ("c-2", 1), "far-3": ("c-0", 2)}
    for far, (seed, hops) in seed_of.items():
        r = rows[far]
        assert (r.vector_rank, r.keyword_rank, r.graph_distance) == (None, None, hops)  # type: ignore[attr-defined]
        assert r.score == graph_score(0.0, graph_weight, plain[seed].score, GRAPH_DECAY, hops)  # type: ignore[attr-defined]
        assert r.score < rows[seed].score  # type: ignore[attr-defined]
    # a hit of the other branches that the graph also reaches keeps the greater of its score and that term
    c5 = rows["c-5"]
    assert c5.score == graph_score(plain["c-5"].score, graph_weight, plain["c-0"].score, GRAPH_DECAY, 1)  # type: ignore[attr-defined]
    # and a row the graph does not reach keeps its score bit for bit
    assert rows["c-9"].score == plain["c-9"].score  # type: ignore[attr-defined]


@pytest.mark.usefixtures("require_age")
def test_graph_decay_0_leaves_the_ranking_of_the_other_branches_alone(api: Api) -> None:
    _linked_corpus(api)
    plain = _rows(api, graph_weight=0.0)
    rows = _rows(api, graph_expand=3, graph_decay=0.0)
    assert [i for i in rows if not i.startswith("far-")] == list(plain)
    assert {i: rows[i].score for i in plain} == {i: plain[i].score for i in plain}  # type: ignore[attr-defined]


@pytest.mark.usefixtures("require_age")
def test_explain_shows_each_graph_hits_seed_and_its_term(api: Api) -> None:
    _linked_corpus(api)
    kw = dict(query_text=QUERY, top_k=30, per_source_k=30, graph_expand=3)
    rows = api.retrieve("acme", **kw)
    rep = api.call("acme", "explain_retrieve", **kw)
    graph = next(b for b in rep["branches"] if b["branch"] == "graph")
    assert graph["hits"]["far-1"]["seed"] == "c-1"
    assert graph["bound"] == {"graph_decay": GRAPH_DECAY, "rule": "seed score * graph_decay ^ hops"}
    for r, ref in zip(rep["rows"], rows):
        assert sum(r["contributions"].values()) == pytest.approx(ref.score, rel=1e-12)
    far1 = next(r for r in rep["rows"] if r["chunk_id"] == "far-1")
    assert list(far1["branch_scores"]) == ["graph"] and far1["branch_scores"]["graph"]["raw"] == 1
    assert far1["branch_scores"]["graph"]["normalized"] == pytest.approx(graph["hits"]["far-1"]["seed_score"] * GRAPH_DECAY)


@pytest.mark.parametrize(("kw", "message"), [
    ({"graph_decay": 1.0}, "graph_decay must be a number from 0 up to (not including) 1, got 1.0"),
    ({"graph_decay": -0.5}, "graph_decay must be a number from 0 up to (not including) 1, got -0.5"),
    ({"graph_weight": 5.0}, "graph_weight * graph_decay must be below 1, got 2.0"),
])
def test_graph_decay_rules_are_the_same_in_python_and_in_sql(db: Db, kw: dict[str, float], message: str) -> None:
    with pytest.raises(InvalidParameterError, match=message.replace("(", r"\(").replace(")", r"\)").replace("*", r"\*")):
        RetrieveQuery(query_text="pump", **kw)  # type: ignore[arg-type]
    args = ", ".join(f"{k} => {v}" for k, v in kw.items())
    with psycopg.connect(db.dsn("pyh_acme")) as c, pytest.raises(psycopg.errors.InvalidParameterValue) as err:
        c.execute(f"SELECT * FROM hybrid_retrieve(query_text => 'pump', {args})")
    assert str(err.value).splitlines()[0] == message.replace("got 1.0", "got 1").replace("got 2.0", "got 2")


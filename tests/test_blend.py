"""Blend fusion (issue 26): branch scores keep their absolute scale, so a weak list does not tie a strong one."""

from __future__ import annotations

import pytest

from pyhybrid import Chunk
from pyhybrid.demo import DEMO_EXPAND, load_demo, queries
from pyhybrid.fusion import BLEND_K, blend_score
from tests.conftest import Api, Db
from tests.helpers import near, unit

QUERY = "replace the infusion pump battery"


def _disagreement_corpus(api: Api) -> None:
    """A dense-only hit close to the query's embedding that shares no word with it; a lexical-only hit that
    matches one of its words ("replace", also in three other chunks), its embedding opposite the query's;
    nine fillers with none of its words and embeddings unrelated to it, so that the dense list (10 deep)
    holds the dense hit and the fillers, and no lexical hit."""
    q = unit(1)
    docs = [Chunk(chunk_id="dense-hit", document_id="D", content="Swapping the power cell: open the rear cover, "
                  "take the old cell out and insert a charged one.", embedding=near(q, 2, 0.3)),
            Chunk(chunk_id="lexical-hit", document_id="L", content="Replacement part numbers.",
                  embedding=near(-q, 3, 0.3))]
    for i in range(3):
        docs.append(Chunk(chunk_id=f"lex-{i}", document_id=f"X{i}", embedding=near(-q, 10 + i, 0.3),
                          content=f"The supplier replaced housing lot {i} after the audit of the moulding line."))
    for i in range(9):
        docs.append(Chunk(chunk_id=f"filler-{i}", document_id=f"F{i}", embedding=unit(100 + i),
                          content=f"Training record {i}: the operator read the cleaning procedure."))
    api.ingest("acme", docs, corpus_id="qms")


def _retrieve(api: Api, fusion: str) -> list:
    return api.retrieve("acme", query_embedding=unit(1), query_text=QUERY, top_k=10, per_source_k=10, fusion=fusion)


def test_blend_ranks_a_strong_dense_only_hit_clearly_above_a_one_word_lexical_only_hit(api: Api) -> None:
    _disagreement_corpus(api)
    rows = _retrieve(api, "blend")
    by_id = {r.chunk_id: r for r in rows}
    dense, lexical = by_id["dense-hit"], by_id["lexical-hit"]
    assert (dense.vector_rank, dense.keyword_rank) == (1, None)
    assert (lexical.vector_rank, lexical.keyword_rank) == (None, 1)
    assert rows[0].chunk_id == "dense-hit"
    assert lexical.score <= 0.9 * dense.score, (lexical.score, dense.score)
    # each is its branch's absolute score, mapped as hybrid._blend_score maps it
    assert dense.score == blend_score("dense", dense.vector_distance)
    assert lexical.score == lexical.keyword_score / (lexical.keyword_score + BLEND_K)


def test_convex_ties_the_same_two_hits_at_the_top(api: Api) -> None:
    # the finding blend answers: min-max scales each list's best hit to 1, however weak the list
    _disagreement_corpus(api)
    top = {r.chunk_id: r.score for r in _retrieve(api, "convex")[:2]}
    assert top == {"dense-hit": 1.0, "lexical-hit": 1.0}


@pytest.fixture()
def demo(db: Db) -> str:
    load_demo(db.dsn(), db.dsn("pyh_app"), quiet=True)
    return db.dsn("pyh_app")


@pytest.mark.usefixtures("require_age", "require_bm25")
@pytest.mark.parametrize("fusion", ["convex", "blend"])
def test_demo_query_3_does_not_tie_the_battery_requirement_with_a_lexical_only_hit_under_blend(
        demo: str, fusion: str) -> None:
    from pyhybrid import HybridClient
    from pyhybrid.embed import default_embedder

    q = queries()[2]
    assert q["text"] == "How long does it last unplugged?"
    with HybridClient(demo) as client, client.tenant("acme") as t:
        rows = t.retrieve(query_embedding=default_embedder().embed_query(q["text"]), query_text=q["text"], top_k=10,
                          graph_expand=DEMO_EXPAND, fusion=fusion)
    by_id = {r.chunk_id: r for r in rows}
    req = by_id["acme:REQ-020#0"]
    top_lexical_only = next(r for r in rows if r.keyword_rank == 1)
    assert req.keyword_rank is None and top_lexical_only.vector_rank is None
    if fusion == "convex":
        assert req.score == top_lexical_only.score == 1.0  # the tie the issue reports
    else:
        assert top_lexical_only.score <= 0.9 * req.score, (top_lexical_only.chunk_id, top_lexical_only.score, req.score)


# ---------------------------------------------------------------- abstention: per-branch floors

def test_a_branch_floor_keeps_only_that_branchs_hits_at_or_above_it(api: Api) -> None:
    _disagreement_corpus(api)
    everything = {r.chunk_id: r for r in _retrieve(api, "blend")}
    floor = everything["lexical-hit"].keyword_score  # the lexical branch's best score: only its top hit stays
    rows = api.retrieve("acme", query_embedding=unit(1), query_text=QUERY, top_k=10, per_source_k=10, fusion="blend",
                        min_vector_score=0.9, min_keyword_score=floor)
    assert [(r.chunk_id, r.vector_rank, r.keyword_rank) for r in rows] == [("dense-hit", 1, None),
                                                                         ("lexical-hit", None, 1)]


@pytest.mark.parametrize("fusion", ["convex", "blend"])
def test_a_query_no_branch_hit_clears_returns_no_rows(api: Api, fusion: str) -> None:
    _disagreement_corpus(api)
    assert api.retrieve("acme", query_embedding=unit(1), query_text=QUERY, fusion=fusion,
                        min_vector_score=0.99, min_keyword_score=1000.0) == []


@pytest.mark.parametrize("name", ["min_vector_score", "min_keyword_score", "min_graph_score"])
def test_a_negative_floor_is_refused_in_python_and_in_sql(db: Db, name: str) -> None:
    import psycopg

    from pyhybrid import InvalidParameterError, RetrieveQuery

    message = f"{name} must be a finite number between 0 and 1000000, got -0.5"
    with pytest.raises(InvalidParameterError, match=message):
        RetrieveQuery(query_text="pump", **{name: -0.5})
    with psycopg.connect(db.dsn("pyh_acme")) as c, pytest.raises(psycopg.errors.InvalidParameterValue, match=message):
        c.execute(f"SELECT * FROM hybrid_retrieve(query_text => 'pump', {name} => -0.5)")

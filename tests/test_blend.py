"""A weak list does not tie a strong one (issue 26): blend keeps branch scores on their absolute scale, and under
every fusion method a lexical list whose every hit matched one word of a longer query weighs less (term_coverage)."""

from __future__ import annotations

import pytest

from pyhybrid import Chunk
from pyhybrid.demo import DEMO_EXPAND, queries
from pyhybrid.fusion import BLEND_K, blend_score, lexical_strength
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


def _retrieve(api: Api, fusion: str, **kw: object) -> list:
    return api.retrieve("acme", query_embedding=unit(1), query_text=QUERY, top_k=10, per_source_k=10, fusion=fusion,
                        **kw)


def test_blend_ranks_a_strong_dense_only_hit_clearly_above_a_one_word_lexical_only_hit(api: Api) -> None:
    _disagreement_corpus(api)
    rows = _retrieve(api, "blend", term_coverage=1)
    by_id = {r.chunk_id: r for r in rows}
    dense, lexical = by_id["dense-hit"], by_id["lexical-hit"]
    assert (dense.vector_rank, dense.keyword_rank) == (1, None)
    assert (lexical.vector_rank, lexical.keyword_rank) == (None, 1)
    assert rows[0].chunk_id == "dense-hit"
    assert lexical.score <= 0.9 * dense.score, (lexical.score, dense.score)
    # each is its branch's absolute score, mapped as hybrid._blend_score maps it
    assert dense.score == blend_score("dense", dense.vector_distance)
    assert lexical.score == lexical.keyword_score / (lexical.keyword_score + BLEND_K)


def test_convex_ties_the_same_two_hits_at_the_top_without_term_coverage(api: Api) -> None:
    # the finding: min-max scales each list's best hit to 1, however weak the list
    _disagreement_corpus(api)
    top = {r.chunk_id: r.score for r in _retrieve(api, "convex", term_coverage=1)[:2]}
    assert top == {"dense-hit": 1.0, "lexical-hit": 1.0}


@pytest.mark.parametrize("fusion", ["convex", "rrf", "dbsf", "blend"])
def test_by_default_the_one_word_lexical_list_weighs_half_and_the_dense_hit_ranks_first(api: Api, fusion: str) -> None:
    # the query has four terms (replac, infus, pump, batteri); every lexical hit holds one ("replac")
    _disagreement_corpus(api)
    rows = _retrieve(api, fusion)
    by_id = {r.chunk_id: r for r in rows}
    plain = {r.chunk_id: r.score for r in _retrieve(api, fusion, term_coverage=1)}
    assert rows[0].chunk_id == "dense-hit" and by_id["dense-hit"].score == plain["dense-hit"]
    if fusion == "rrf":  # both rank 1 of their list: a tie without term_coverage
        assert plain["lexical-hit"] == plain["dense-hit"] == 1 / 61
    # the lexical list fused at exactly half its weight, whatever the method
    report = api.call("acme", "explain_retrieve", query_embedding=unit(1), query_text=QUERY, top_k=10, per_source_k=10,
                      fusion=fusion)
    lexical_branch = next(b for b in report["branches"] if b["branch"] == "lexical")
    assert (lexical_branch["given_weight"], lexical_branch["weight"]) == (1.0, 0.5)
    assert lexical_branch["term_coverage"]["strength"] == lexical_strength(4, 1) == 0.5
    half = plain["lexical-hit"] * 0.5  # a lexical-only hit's score is its lexical term: halved exactly
    if fusion in ("convex", "blend"):  # its half stays on the page of ten, below the dense hit
        lexical = by_id["lexical-hit"]
        assert (lexical.vector_rank, lexical.keyword_rank) == (None, 1)
        assert lexical.score == half
        assert lexical.score <= 0.9 * by_id["dense-hit"].score, (lexical.score, by_id["dense-hit"].score)
    else:  # rrf, dbsf: its half falls below the page of ten dense hits
        assert "lexical-hit" not in by_id and len(rows) == 10 and rows[-1].score > half


@pytest.mark.parametrize("lexical", ["bm25", "ts_rank"])  # the branch counts the terms in each method's statement
def test_a_lexical_hit_holding_two_query_terms_keeps_the_list_at_full_weight(api: Api, lexical: str) -> None:
    _disagreement_corpus(api)
    api.ingest("acme", [Chunk(chunk_id="two-terms", document_id="T", embedding=near(-unit(1), 40, 0.3),
                              content="Pump housings are replaced yearly.")], corpus_id="qms")
    plain = {r.chunk_id: r.score for r in _retrieve(api, "convex", term_coverage=1, lexical=lexical)}
    assert {r.chunk_id: r.score for r in _retrieve(api, "convex", lexical=lexical)} == plain
    # asking for three of the four terms: the best hit holds two, so the list weighs two thirds
    three = {r.chunk_id: r.score for r in _retrieve(api, "convex", term_coverage=3, lexical=lexical)}
    assert three["two-terms"] == plain["two-terms"] * (2 / 3)


def test_lexical_strength_in_sql_counts_only_the_callers_visible_chunks(db: Db, api: Api) -> None:
    import psycopg

    _disagreement_corpus(api)
    # a chunk holding three of the query's terms, under a label the reader pyh_acme lacks
    api.ingest("acme", [Chunk(chunk_id="hidden", document_id="H", embedding=unit(7), acl_labels=["secret"],
                              content="Replace the pump battery.")], corpus_id="qms")
    ids = ["lexical-hit", "lex-0", "hidden"]

    def strength(role: str, tenant: str, *args: object, labels: str = "") -> float:
        with psycopg.connect(db.dsn(role)) as c:
            c.execute("SELECT set_config('hybrid.tenant_id', %s, false), set_config('hybrid.acl_labels', %s, false)",
                      (tenant, labels))
            return c.execute("SELECT hybrid.lexical_strength(%s, %s" + ", %s" * len(args) + ")",
                             (QUERY, ids, *args)).fetchone()[0]

    # the app role acting with the label sees "hidden": three of four terms, at least the two asked for
    assert strength("pyh_app", "acme", labels="secret") == 1.0
    assert strength("pyh_app", "acme", 4, labels="secret") == 0.75
    assert strength("pyh_app", "acme") == 0.5
    assert strength("pyh_acme", "acme") == 0.5  # the hidden chunk counts as absent, as an unknown id would
    assert strength("pyh_acme", "acme", 1) == 1.0
    assert strength("pyh_globex", "globex") == 0.5  # another tenant's ids: absent
    with psycopg.connect(db.dsn("pyh_acme")) as c, \
            pytest.raises(psycopg.errors.InvalidParameterValue, match="term_coverage must be"):
        c.execute("SELECT hybrid.lexical_strength('pump', ARRAY['x'], 0)")


@pytest.mark.usefixtures("require_age", "require_bm25")
@pytest.mark.parametrize("fusion", ["convex", "blend"])
def test_demo_query_3_does_not_tie_the_battery_requirement_with_a_lexical_only_hit(demo_db: Db, fusion: str) -> None:
    from pyhybrid import HybridClient
    from pyhybrid.embed import default_embedder

    q = queries()[2]
    assert q["text"] == "How long does it last unplugged?"
    kw = {"query_embedding": default_embedder().embed_query(q["text"]), "query_text": q["text"], "top_k": 30, "per_source_k": 30,
          "graph_expand": DEMO_EXPAND, "fusion": fusion}
    with HybridClient(demo_db.dsn("pyh_app")) as client, client.tenant("acme") as t:
        rows = t.retrieve(**kw)
        plain = t.retrieve(**kw, term_coverage=1)
    by_id = {r.chunk_id: r for r in rows}
    req = by_id["acme:REQ-020#0"]
    top_lexical_only = next(r for r in rows if r.keyword_rank == 1)
    assert req.keyword_rank is None and top_lexical_only.vector_rank is None
    # "last", "long" and "unplug": no lexical hit holds two of them, so the list weighs half
    assert top_lexical_only.score <= 0.9 * req.score, (top_lexical_only.chunk_id, top_lexical_only.score, req.score)
    if fusion == "convex":
        assert rows[0].chunk_id == "acme:REQ-020#0"
        # the tie the issue reports, without term_coverage
        plain_by_id = {r.chunk_id: r.score for r in plain}
        assert plain_by_id["acme:REQ-020#0"] == plain_by_id[top_lexical_only.chunk_id] == 1.0


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


def test_lexical_strength_is_the_same_number_in_python_and_sql(db: Db) -> None:
    import psycopg

    cases = [(n, m, c) for n in range(0, 7) for m in range(0, n + 1) for c in (1, 2, 3, 5, 32)]
    with psycopg.connect(db.dsn()) as conn:
        got = conn.execute("SELECT array_agg(hybrid._lexical_strength(x.n, x.m, x.c) ORDER BY x.i) "
                           "FROM unnest(%s::int[], %s::int[], %s::int[]) WITH ORDINALITY x(n, m, c, i)",
                           ([n for n, _, _ in cases], [m for _, m, _ in cases], [c for _, _, c in cases])).fetchone()[0]
    assert got == [lexical_strength(n, m, c) for n, m, c in cases]

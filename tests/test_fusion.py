"""Fusion methods (rrf, convex, dbsf, blend), pagination (skip), sibling chunks and edge-type filters."""

from __future__ import annotations

import json
import math

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from psycopg.rows import dict_row

from pyhybrid import Chunk, ChunkRef, InvalidParameterError, RetrieveQuery, fuse
from pyhybrid.fusion import FUSIONS, RANK_ONLY, blend_score, fuse_scores, shown
from pyhybrid.query import PARAMETERS
from pyhybrid.types import BRANCHES
from tests.conftest import Api, Db
from tests.helpers import chunks, near, unit


def sql(db: Db, query: str, params: object = None, *, tenant: str = "acme", acl: str = "") -> list[dict]:
    with psycopg.connect(db.dsn("pyh_acme" if tenant == "acme" else "pyh_globex"), row_factory=dict_row) as c:
        c.execute("SELECT set_config('hybrid.tenant_id', %s, false), set_config('hybrid.acl_labels', %s, false)",
                  (tenant, acl))
        return c.execute(query, params).fetchall()  # type: ignore[arg-type]


# ---------------------------------------------------------------- the arithmetic, by hand

RANKINGS = [["a", "b", "c", "a"], ["c", "d"]]
SCORES = [[3.0, 2.0, 0.5, 1.0], [10.0, 4.0]]
WEIGHTS = [1.0, 0.5]


def _dbsf(x: float, xs: list[float]) -> float:
    mean = sum(xs) / len(xs)
    sd = math.sqrt(sum((v - mean) ** 2 for v in xs) / len(xs))
    return min(1.0, max(0.0, (x - (mean - 3 * sd)) / (6 * sd)))


# hand computations: list 1 holds a, b, c once each (a's repeat keeps rank 1 and score 3; it is not counted twice)
HAND = {
    "rrf": {"a": 1 / 61, "b": 1 / 62, "c": 1 / 63 + 0.5 / 61, "d": 0.5 / 62},
    # min-max: list 1 (3, 2, 0.5) -> 1, 0.6, 0; list 2 (10, 4) -> 1, 0
    "convex": {"a": 1.0, "b": 0.6, "c": 0.0 + 0.5 * 1.0, "d": 0.0},
    # mean +- 3 population sd of (3, 2, 0.5) and of (10, 4): list 2 is mean 7, sd 3 -> (x + 2) / 18
    "dbsf": {"a": _dbsf(3, [3, 2, 0.5]), "b": _dbsf(2, [3, 2, 0.5]),
             "c": _dbsf(0.5, [3, 2, 0.5]) + 0.5 * 12 / 18, "d": 0.5 * 6 / 18},
    # the scores as given, weighted
    "blend": {"a": 3.0, "b": 2.0, "c": 0.5 + 0.5 * 10.0, "d": 0.5 * 4.0},
}


def test_one_list_of_fusion_methods_and_of_branches_in_sql_and_python(template_dsn_conn: psycopg.Connection) -> None:
    rows = template_dsn_conn.execute("SELECT name, needs_scores FROM hybrid.fusion_methods()").fetchall()
    assert [r[0] for r in rows] == list(FUSIONS) and {r[0] for r in rows if not r[1]} == RANK_ONLY
    assert set(HAND) == set(FUSIONS)  # every declared method has its hand computation below
    branches = template_dsn_conn.execute(
        "SELECT name, position, stage, scale, blend_k, query_param, weight_param, floor_param, "
        "split_part(search::regproc::text, '(', 1), rank_column, value_column FROM hybrid.branches()").fetchall()
    assert branches == [(b.name, b.position, b.stage, b.scale, b.blend_k, b.query_param, b.weight_param, b.floor_param,
                         b.search, b.rank_column, b.value_column) for b in BRANCHES]
    assert all(b.query_param in PARAMETERS and b.weight_param in PARAMETERS and b.floor_param in PARAMETERS
               and set(b.extra) <= set(PARAMETERS) for b in BRANCHES)


@pytest.mark.parametrize("fusion", ["nope", "", "RRF", None])
def test_an_unknown_fusion_method_is_named_with_the_declared_ones_everywhere(template_dsn_conn: psycopg.Connection,
                                                                           fusion: str | None) -> None:
    from pyhybrid.fusion import fusion_term

    message = f"fusion must be one of 'convex', 'rrf', 'dbsf', 'blend', got {shown(fusion)}"
    for sql in ("SELECT hybrid._fusion_term(%s, 1, 60, 1, 0.5, 0, 1, 0.5, 0.1)", "SELECT hybrid._check_fusion(%s)",
                "SELECT * FROM hybrid.fuse('[[\"a\"]]', fusion => %s, scores => '[[1]]')"):
        with pytest.raises(psycopg.errors.InvalidParameterValue) as info:
            template_dsn_conn.execute(sql, (fusion,))
        assert info.value.diag.message_primary == message, sql
    for call in (lambda: fusion_term(fusion, 1, 60, 1, 0.5, (0, 1, 0.5, 0.1)),  # type: ignore[arg-type]
                 lambda: fuse_scores([["a"]], fusion=fusion, scores=[[1.0]]),  # type: ignore[arg-type]
                 lambda: RetrieveQuery(query_text="x", fusion=fusion)):  # type: ignore[arg-type]
        with pytest.raises(InvalidParameterError) as py:
            call()
        assert str(py.value) == message
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="^branch must be one of " + ", ".join(f"'{b.name}'" for b in BRANCHES)):
        template_dsn_conn.execute("SELECT hybrid._branch_score('nope', 1)")


@pytest.mark.parametrize("fusion", FUSIONS)
def test_fuse_matches_a_hand_computation_in_sql_and_python(template_dsn_conn: psycopg.Connection,
                                                          fusion: str) -> None:
    rows = template_dsn_conn.execute(
        "SELECT id, score, ranks FROM hybrid.fuse(%s::jsonb, %s::float8[], %s, 60, NULL, %s::jsonb)",
        (json.dumps(RANKINGS), WEIGHTS, fusion, json.dumps(SCORES))).fetchall()
    hand = sorted(HAND[fusion].items(), key=lambda kv: (-kv[1], kv[0]))
    assert [r[0] for r in rows] == [k for k, _ in hand]
    for (rid, score, _), (hid, hscore) in zip(rows, hand):
        assert score == pytest.approx(hscore, rel=1e-12), (fusion, rid)
    assert dict((r[0], r[2]) for r in rows) == {"a": [1, None], "b": [2, None], "c": [3, 1], "d": [None, 2]}
    py = fuse_scores(RANKINGS, WEIGHTS, fusion, 60, None, SCORES)
    assert [(i, s, rs) for i, s, rs in py] == [tuple(r) for r in rows]


def test_convex_keeps_the_lowest_item_of_a_list_and_drops_ids_of_weight_0_lists_only(
        template_dsn_conn: psycopg.Connection) -> None:
    rows = template_dsn_conn.execute(
        "SELECT id, score FROM hybrid.fuse('[[\"x\", \"y\"], [\"z\"]]', ARRAY[1, 0]::float8[], 'convex', "
        "scores => '[[2, 1], [5]]')").fetchall()
    assert rows == [("x", 1.0), ("y", 0.0)]  # y scores 0 but stays; z is only in a list of weight 0


@st.composite
def _scored(draw: st.DrawFn) -> tuple[list[list[str]], list[list[float]], list[float], str, int | None]:
    ids = st.sampled_from([f"d{i}" for i in range(12)])
    n = draw(st.integers(1, 4))
    lists = [draw(st.lists(ids, max_size=10)) for _ in range(n)]
    num = st.floats(min_value=-50, max_value=50, allow_nan=False, allow_infinity=False, width=32)
    scores = [sorted((draw(num) for _ in lst), reverse=True) for lst in lists]
    weights = [draw(st.sampled_from([0.0, 0.5, 1.0, 2.0, 0.3])) for _ in range(n)]
    return lists, scores, weights, draw(st.sampled_from(FUSIONS)), draw(
        st.one_of(st.none(), st.integers(1, 20)))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=_scored())
def test_python_fuse_equals_sql_fuse_on_random_inputs(template_dsn_conn: psycopg.Connection,
                                                     case: tuple) -> None:
    lists, scores, weights, fusion, top_k = case
    rows = template_dsn_conn.execute(
        "SELECT id, score, ranks FROM hybrid.fuse(%s::jsonb, %s::float8[], %s, 60, %s, %s::jsonb)",
        (json.dumps(lists), weights, fusion, top_k, json.dumps(scores))).fetchall()
    assert [tuple(r) for r in rows] == [(i, s, rs) for i, s, rs in fuse_scores(lists, weights, fusion, 60, top_k, scores)]


FUSE_ERRORS = [
    ("'[[\"a\"]]', fusion => 'borda'", ([["a"]], "borda", None), "fusion must be one of 'convex', 'rrf', 'dbsf', 'blend', got 'borda'"),
    ("'[[\"a\"]]', fusion => NULL", ([["a"]], None, None), "fusion must be one of 'convex', 'rrf', 'dbsf', 'blend', got NULL"),
    ("'[[\"a\"]]', fusion => 'convex'", ([["a"]], "convex", None), "scores must be given for fusion 'convex'"),
    ("'[[\"a\", \"b\"]]', fusion => 'dbsf', scores => '[[1]]'", ([["a", "b"]], "dbsf", [[1]]),
     "one number for each id of rankings"),
    ("'[[\"a\"]]', fusion => 'dbsf', scores => '[[\"1\"]]'", ([["a"]], "dbsf", [["1"]]),
     "scores must be a JSON array of arrays of numbers"),
    ("'[[\"a\"]]', fusion => 'convex', scores => '[[1], [2]]'", ([["a"]], "convex", [[1], [2]]),
     "one number for each id of rankings"),
]


@pytest.mark.parametrize("args, py, message", FUSE_ERRORS)
def test_fuse_rejects_bad_arguments_in_sql_and_python(template_dsn_conn: psycopg.Connection,
                                                     args: str, py: tuple, message: str) -> None:
    with pytest.raises(psycopg.errors.InvalidParameterValue, match=message):
        template_dsn_conn.execute(f"SELECT * FROM hybrid.fuse({args})")
    rankings, fusion, sc = py
    with pytest.raises(InvalidParameterError, match=message):
        fuse_scores(rankings, None, fusion, 60, None, sc)


def test_python_fuse_on_chunk_refs_uses_each_refs_score() -> None:
    a, b, c = (ChunkRef(x, "t", score=s) for x, s in (("a", 0.9), ("b", 0.5), ("c", 0.1)))
    out = fuse([[a, b, c], [ChunkRef("c", "t", score=7.0)]], weights=[1, 1], fusion="convex")
    # c: 0 in list 1 (its lowest) + 1 in list 2 (its only item); a tie with a is broken by chunk_id
    assert [(r.chunk_id, r.score) for r in out] == [("a", 1.0), ("c", 1.0), ("b", 0.5)]


# ---------------------------------------------------------------- hybrid_retrieve

def _corpus(api: Api) -> None:
    base = unit(1)
    docs = []
    for i in range(40):
        docs.append(Chunk(chunk_id=f"c{i}", document_id=f"D{i // 4}", position=i % 4,
                          content=f"pump alarm {'occlusion ' * (i % 5)}valve item{i} " + ("battery " if i % 3 else ""),
                          embedding=near(base, 100 + i, 0.2 + 0.03 * i)))
    api.ingest("acme", docs, corpus_id="qms")


@pytest.mark.parametrize("fusion", FUSIONS)
def test_retrieve_fuses_the_branch_lists_as_hybrid_fuse_does(db: Db, api: Api, fusion: str) -> None:
    _corpus(api)
    q = near(unit(1), 7, 0.3)
    text = "occlusion alarm battery"
    dense = sql(db, "SELECT chunk_id, value FROM hybrid.search_dense(%s::vector, 30) ORDER BY rank", (list(map(float, q)),))
    lex = sql(db, "SELECT chunk_id, value FROM hybrid.search_lexical(%s, 30) ORDER BY rank", (text,))
    if fusion == "blend":
        d_scores = [blend_score("dense", r["value"]) for r in dense]
        l_scores = [blend_score("lexical", r["value"]) for r in lex]
    else:
        d_scores, l_scores = [1 - r["value"] for r in dense], [r["value"] for r in lex]
    expected = fuse_scores([[r["chunk_id"] for r in dense], [r["chunk_id"] for r in lex]], [1.0, 0.7], fusion, 60, 10,
                           [d_scores, l_scores])
    got = api.retrieve("acme", query_embedding=q, query_text=text, top_k=10, per_source_k=30, keyword_weight=0.7,
                       fusion=fusion)
    assert [(r.chunk_id, r.score) for r in got] == [(i, s) for i, s, _ in expected]
    assert [(r.vector_rank, r.keyword_rank) for r in got] == [tuple(rs) for _, _, rs in expected]


def test_pages_are_disjoint_and_together_equal_one_call_of_twice_the_size(db: Db, api: Api) -> None:
    _corpus(api)
    q = near(unit(1), 8, 0.3)
    for fusion in FUSIONS:
        kw = dict(query_embedding=q, query_text="pump occlusion alarm", per_source_k=30, fusion=fusion)
        one = [r.chunk_id for r in api.retrieve("acme", top_k=10, skip=0, **kw)]
        two = [r.chunk_id for r in api.retrieve("acme", top_k=10, skip=10, **kw)]
        both = [r.chunk_id for r in api.retrieve("acme", top_k=20, **kw)]
        assert len(one) == 10 and len(two) == 10 and not set(one) & set(two)
        assert one + two == both, fusion
        # per_document pages too
        p1 = [r.document_id for r in api.retrieve("acme", top_k=3, per_document=True, **kw)]
        p2 = [r.document_id for r in api.retrieve("acme", top_k=3, skip=3, per_document=True, **kw)]
        assert p1 + p2 == [r.document_id for r in api.retrieve("acme", top_k=6, per_document=True, **kw)]


PAGE_ERRORS = [
    ("skip => -1", {"skip": -1}, "skip must be between 0 and 9990"),
    ("skip => 9991", {"skip": 9991}, "skip must be between 0 and 9990"),
    ("skip => 10, per_source_k => 15", {"skip": 10, "per_source_k": 15},
     r"per_source_k must be between skip \+ top_k \(20\) and 10000"),
    ("fusion => 'borda'", {"fusion": "borda"}, "fusion must be one of 'convex', 'rrf', 'dbsf', 'blend', got 'borda'"),
    ("siblings => 21", {"siblings": 21}, "siblings must be between 0 and 20"),
    ("siblings => -1", {"siblings": -1}, "siblings must be between 0 and 20"),
    ("graph_edge_types => array_fill('X'::text, ARRAY[101])", {"graph_edge_types": ["X"] * 101},
     "graph_edge_types must hold at most 100 names"),
]


@pytest.mark.parametrize("args, kwargs, message", PAGE_ERRORS)
def test_new_parameters_are_checked_in_sql_and_python_with_the_same_message(db: Db, args: str, kwargs: dict,
                                                                            message: str) -> None:
    with pytest.raises(psycopg.errors.InvalidParameterValue, match=message):
        sql(db, f"SELECT * FROM hybrid_retrieve(query_text => 'pump', {args})")
    with pytest.raises(InvalidParameterError, match=message):
        RetrieveQuery.build(query_text="pump", **kwargs)


def test_siblings_are_the_nearest_visible_chunks_of_the_same_document(db: Db, api: Api) -> None:
    base = unit(3)
    doc = [Chunk(chunk_id=f"m{p}", document_id="MANUAL", position=p * 10, content=f"section {p} of the manual",
                 embedding=near(base, 200 + p, 0.9), acl_labels=("quality",) if p == 4 else ())
           for p in range(8)]
    doc[3] = Chunk(chunk_id="m3", document_id="MANUAL", position=30, content="the occlusion alarm threshold",
                   embedding=base)
    other = Chunk(chunk_id="o1", document_id="OTHER", position=31, content="unrelated text", embedding=unit(9))
    api.ingest("acme", doc + [other], corpus_id="qms")
    hit = api.retrieve("acme", query_text="occlusion alarm threshold", top_k=1, siblings=2)
    assert hit[0].chunk_id == "m3"
    # m4 carries a label the caller lacks: the nearest visible chunks after m3 are m5 and m6
    assert [(s["chunk_id"], s["position"]) for s in hit[0].siblings] == [("m1", 10), ("m2", 20), ("m5", 50), ("m6", 60)]
    assert hit[0].siblings[0]["content"] == "section 1 of the manual"
    with_label = api.retrieve("acme", query_text="occlusion alarm threshold", top_k=1, siblings=1,
                              acl_labels=["quality"])
    assert [s["chunk_id"] for s in with_label[0].siblings] == ["m2", "m4"]
    assert api.retrieve("acme", query_text="occlusion alarm threshold", top_k=1)[0].siblings is None
    # the first chunk of a document has neighbours on one side only; globex sees none of acme's
    first = sql(db, "SELECT siblings FROM hybrid_retrieve(query_text => 'section 0', top_k => 1, siblings => 1)")
    assert [s["chunk_id"] for s in first[0]["siblings"]] == ["m1"]
    assert sql(db, "SELECT * FROM hybrid_retrieve(query_text => 'section manual', siblings => 3)", tenant="globex") == []


def test_graph_edge_types_traverse_only_the_named_relations(db: Db, api: Api, require_age: None) -> None:
    api.ingest("acme", chunks("g", 4), corpus_id="qms")
    api.add_edges("acme", [{"src": "g-0", "dst": "g-1", "rel": "CITES"}, {"src": "g-0", "dst": "g-2", "rel": "MENTIONS"},
                           {"src": "g-2", "dst": "g-3", "rel": "CITES"}])
    def ids(**kw: object) -> list[str]:
        return [r.chunk_id for r in api.retrieve("acme", graph_seeds=["g-0"], **kw)]
    assert sorted(ids()) == ["g-1", "g-2"]
    assert ids(graph_edge_types=["CITES"]) == ["g-1"]
    assert sorted(ids(graph_edge_types=["CITES"], graph_hops=2)) == ["g-1"]  # g-3 is behind a MENTIONS edge
    assert sorted(ids(graph_edge_types=["CITES", "MENTIONS"], graph_hops=2)) == ["g-1", "g-2", "g-3"]
    assert ids(graph_edge_types=[]) == []
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="graph_edge_types: 'CITED_BY' is not an edge type of this tenant"):
        sql(db, "SELECT * FROM hybrid_retrieve(graph_seeds => '{g-0}', graph_edge_types => '{CITES,CITED_BY}')")


# ---------------------------------------------------------------- explain

@pytest.mark.parametrize("fusion", FUSIONS)
def test_explain_reports_each_branch_and_contributions_that_add_up_to_the_score(db: Db, api: Api, fusion: str) -> None:
    _corpus(api)
    q = near(unit(1), 9, 0.3)
    kw = dict(query_embedding=q, query_text="occlusion alarm battery", top_k=5, fusion=fusion, graph_weight=0.0)
    rows = api.retrieve("acme", **kw)
    rep = api.call("acme", "explain_retrieve", **kw)
    assert rep["fusion"] == fusion and rep["top_k"] == 5
    plans = {b["branch"]: b for b in rep["branches"]}
    assert set(plans) == {"dense", "lexical"}
    assert plans["dense"]["plan"] == "exact scan"  # 40 chunks: below the exact threshold
    assert plans["lexical"]["plan"].startswith(("BM25 index", "ts_rank"))
    assert plans["dense"]["rows"] == 30 and plans["dense"]["depth"] == 30 and plans["dense"]["ms"] >= 0
    assert [r["chunk_id"] for r in rep["rows"]] == [r.chunk_id for r in rows]
    for r, ref in zip(rep["rows"], rows):
        assert sum(r["contributions"].values()) == pytest.approx(ref.score, rel=1e-12)
        # every branch of the registry, None where it did not find the row (or did not run)
        assert r["ranks"] == {b.name: None for b in BRANCHES} | {"dense": ref.vector_rank, "lexical": ref.keyword_rank}
        # a branch that did not find the row contributes 0
        assert (r["contributions"]["lexical"] == 0) == (ref.keyword_rank is None)


def test_explain_as_a_tenant_login_role_in_sql_leaves_the_session_as_it_was(db: Db, api: Api) -> None:
    _corpus(api)
    with psycopg.connect(db.dsn("pyh_acme"), row_factory=dict_row) as c:
        c.execute("SELECT set_config('hybrid.tenant_id', 'acme', false)")
        rep = c.execute("SELECT hybrid.explain_retrieve(query_text => 'occlusion alarm', graph_seeds => '{c1}', "
                        "top_k => 3)").fetchone()["explain_retrieve"]
        assert [b["branch"] for b in rep["branches"]] == ["lexical", "graph"]
        assert rep["branches"][1]["plan"] == "1 hop(s) from 1 seed(s)" and rep["branches"][1]["rows"] == 0
        assert c.execute("SELECT current_setting('hybrid.explain', true)").fetchone()["current_setting"] == "off"
        # globex's explain shows nothing of acme
        c.execute("SELECT set_config('hybrid.tenant_id', 'globex', false)")
    rep = sql(db, "SELECT hybrid.explain_retrieve(query_text => 'occlusion alarm') AS r", tenant="globex")[0]["r"]
    assert rep["rows"] == [] and [(b["branch"], b["rows"]) for b in rep["branches"]] == [("lexical", 0)]


def test_the_cli_explain_prints_a_call_that_runs_in_psql_as_is(db: Db) -> None:
    q = RetrieveQuery(query_embedding=unit(1), query_text="it's the pump", fusion="dbsf", skip=2, per_source_k=40,
                      filter={"lang": "en"}, corpus_ids=["qms"], graph_edge_types=["CITES"], graph_weight=0)
    text = q.to_sql()
    assert text.startswith("SELECT * FROM hybrid_retrieve(\n    query_embedding => '[")
    assert "query_text => 'it''s the pump'" in text and "fusion => 'dbsf'" in text and "skip => 2" in text
    assert "top_k" not in text and "rrf_k" not in text  # defaults are left out
    assert sql(db, text) == sql(db, "SELECT * FROM hybrid_retrieve(query_embedding => %s::vector, "
                                    "query_text => 'it''s the pump', fusion => 'dbsf', skip => 2, per_source_k => 40, "
                                    "filter => '{\"lang\": \"en\"}', corpus_ids => '{qms}', graph_edge_types => '{CITES}', "
                                    "graph_weight => 0)", ([float(x) for x in unit(1)],))


# ---------------------------------------------------------------- several formulations

@pytest.mark.parametrize("fusion", ["rrf", "convex", "blend"])
def test_retrieve_many_fuses_each_formulations_fused_list(db: Db, api: Api, fusion: str) -> None:
    _corpus(api)
    forms = [("occlusion alarm", near(unit(1), 21, 0.3)), ("battery valve", near(unit(1), 22, 0.5))]
    lists = [api.retrieve("acme", query_text=t, query_embedding=v, top_k=30, fusion=fusion) for t, v in forms]
    want = fuse_scores([[r.chunk_id for r in lst] for lst in lists], None, fusion, 60, None,
                       [[r.score for r in lst] for lst in lists])
    got = api.call("acme", "retrieve_many", query_texts=[t for t, _ in forms], query_embeddings=[v for _, v in forms],
                   top_k=8, fusion=fusion)
    assert [(r.chunk_id, r.score) for r in got] == [(i, s) for i, s, _ in want[:8]]
    first = {r.chunk_id: r for r in lists[0]}
    for r in got:  # ranks are those of the first formulation that found the row
        src = first.get(r.chunk_id) or {x.chunk_id: x for x in lists[1]}[r.chunk_id]
        assert (r.vector_rank, r.keyword_rank) == (src.vector_rank, src.keyword_rank)
    page = api.call("acme", "retrieve_many", query_texts=[t for t, _ in forms], query_embeddings=[v for _, v in forms],
                    top_k=4, skip=4, fusion=fusion)
    assert [r.chunk_id for r in page] == [r.chunk_id for r in got[4:8]]
    # one formulation: the retrieve call's own order
    one = api.call("acme", "retrieve_many", query_texts=["occlusion alarm"], top_k=10)
    assert [r.chunk_id for r in one] == [r.chunk_id for r in api.retrieve("acme", query_text="occlusion alarm")]
    assert sql(db, "SELECT * FROM hybrid.retrieve_many(query_texts => '{occlusion alarm, battery}')", tenant="globex") == []


MANY_ERRORS = [
    ("query_texts => '{}'::text[]", {"query_texts": []}, "query_embeddings and query_texts are both NULL or empty"),
    ("query_texts => '{a,b}', query_embeddings => ARRAY[NULL]::vector[]", {"query_texts": ["a", "b"],
     "query_embeddings": [None]}, "query_embeddings has 1 entries but query_texts has 2"),
    ("query_texts => array_fill('a'::text, ARRAY[11])", {"query_texts": ["a"] * 11}, "at most 10 formulations, got 11"),
    ("query_texts => '{a}', fusion => 'borda'", {"query_texts": ["a"], "fusion": "borda"}, "fusion must be"),
    ("query_texts => '{a}', top_k => 10, skip => 991", {"query_texts": ["a"], "skip": 991},
     "skip must be between 0 and 990"),
]


@pytest.mark.parametrize("args, kwargs, message", MANY_ERRORS)
def test_retrieve_many_rules_in_sql_and_python(db: Db, api: Api, args: str, kwargs: dict, message: str) -> None:
    with pytest.raises(psycopg.errors.InvalidParameterValue, match=message):
        sql(db, f"SELECT * FROM hybrid.retrieve_many({args})")
    with pytest.raises(InvalidParameterError, match=message):
        api.call("acme", "retrieve_many", **kwargs)

"""hybrid_retrieve: validation, RRF arithmetic, branches, partial failure, RLS inside every branch."""

from __future__ import annotations

import psycopg
import pytest
from psycopg.rows import dict_row

from pyhybrid import Chunk, HybridWeights, InvalidParameterError, RetrieveQuery
from tests.conftest import Api, Db
from tests.helpers import chunks, near, unit


def sql(db: Db, query: str, params: object = None, *, role: str | None = "pyh_acme", tenant: str = "acme",
        acl: str = "") -> list[dict]:
    with psycopg.connect(db.dsn(role), row_factory=dict_row) as c:
        c.execute("SELECT set_config('hybrid.tenant_id', %s, false), set_config('hybrid.acl_labels', %s, false)",
                  (tenant, acl))
        return c.execute(query, params).fetchall()  # type: ignore[arg-type]


def _corpus(api: Api) -> None:
    base = unit(1)
    api.ingest("acme", [
        Chunk(chunk_id="req", document_id="REQ-1", content="The pump shall raise an occlusion alarm within 30 seconds",
              embedding=near(base, 2, 0.1), metadata={"lang": "en", "kind": "req"}),
        Chunk(chunk_id="tp", document_id="TP-1", content="Clamp the downstream line and time the buzzer latency",
              embedding=unit(50), metadata={"lang": "en", "kind": "test"}),
        Chunk(chunk_id="sop", document_id="SOP-1", content="Cleaning procedure for the pump housing",
              embedding=near(base, 3, 0.6), metadata={"lang": "en"}),
        Chunk(chunk_id="de", document_id="REQ-1-de", content="Die Pumpe muss einen Okklusionsalarm ausloesen",
              embedding=near(base, 4, 0.05), metadata={"lang": "de"}),
        Chunk(chunk_id="secret", document_id="DEV-9", content="occlusion alarm deviation under investigation",
              embedding=near(base, 5, 0.05), acl_labels=("quality",), metadata={"lang": "en"}),
    ], corpus_id="qms")
    api.ingest("globex", [
        Chunk(chunk_id="g-occl", document_id="G-1", content="occlusion alarm of the globex meter",
              embedding=near(base, 6, 0.01), metadata={"lang": "en"}),
    ], corpus_id="qms")


# (SQL arguments, the same in Python, the message both give)
VALIDATION = [
    ("rrf_k => 0", {"rrf_k": 0}, "rrf_k must be a finite number > 0 and <= 1000000"),
    ("rrf_k => 'NaN'", {"rrf_k": float("nan")}, "rrf_k must be a finite number > 0 and <= 1000000"),
    ("rrf_k => 'Infinity'", {"rrf_k": float("inf")}, "rrf_k must be a finite number > 0 and <= 1000000"),
    ("vector_weight => -1", {"vector_weight": -1}, "vector_weight must be a finite number between 0 and 1000000"),
    ("keyword_weight => 'NaN'", {"keyword_weight": float("nan")}, "keyword_weight must be a finite number between 0 and 1000000"),
    ("graph_weight => -0.5", {"graph_weight": -0.5}, "graph_weight must be a finite number between 0 and 1000000"),
    # once a bare 22003 overflow deep in the fusion SQL
    ("vector_weight => 1e308, rrf_k => 1e-300", {"vector_weight": 1e308, "rrf_k": 1e-300},
     r"vector_weight must be a finite number between 0 and 1000000, got 1e\+?308"),
    ("rrf_k => 1e7", {"rrf_k": 1e7}, "rrf_k must be a finite number > 0 and <= 1000000"),
    ("top_k => 0", {"top_k": 0}, "top_k must be between 1 and 1000"),
    ("top_k => 1001", {"top_k": 1001}, "top_k must be between 1 and 1000"),
    ("top_k => NULL", {"top_k": None}, "top_k must be between 1 and 1000"),
    ("top_k => 10, per_source_k => 5", {"top_k": 10, "per_source_k": 5},
     r"per_source_k must be between top_k \(10\) and 10000"),
    ("graph_hops => 4", {"graph_hops": 4}, "graph_hops must be between 1 and 3"),
    ("graph_hops => 0", {"graph_hops": 0}, "graph_hops must be between 1 and 3"),
    ("graph_expand => 101", {"graph_expand": 101}, "graph_expand must be between 0 and 100"),
    ("lexical => 'tfidf'", {"lexical": "tfidf"}, "lexical must be 'bm25', 'ts_rank' or NULL"),
    ("filter => '[1]'", {"filter": [1]}, "filter must be a JSON object"),
    ("per_document => NULL", {"per_document": None}, "per_document must be true or false"),
    ("with_graph_context => NULL", {"with_graph_context": None}, "with_graph_context must be true or false"),
    ("keyword_weight => 0", {"keyword_weight": 0}, "every source given has weight 0"),
    ("query_text => repeat('pump ', 4001)", {"query_text": "pump " * 4001},
     "query_text must be at most 20000 characters, got 20005"),
    ("graph_seeds => array_fill('x'::text, ARRAY[1001])", {"graph_seeds": ["x"] * 1001},
     "graph_seeds must hold at most 1000 ids, got 1001"),
]


@pytest.mark.parametrize("args, kwargs, message", VALIDATION)
def test_sql_validation_names_the_parameter_with_sqlstate_22023(db: Db, args: str, kwargs: dict, message: str) -> None:
    with pytest.raises(psycopg.errors.InvalidParameterValue, match=message):
        sql(db, f"SELECT * FROM hybrid_retrieve(query_text => 'pump', {args})"
                if not args.startswith("query_text") else f"SELECT * FROM hybrid_retrieve({args})")


@pytest.mark.parametrize("args, kwargs, message", VALIDATION)
def test_python_rejects_bad_arguments_before_any_round_trip_with_the_sql_message(
        args: str, kwargs: dict, message: str) -> None:
    with pytest.raises(InvalidParameterError, match=message):
        RetrieveQuery(**{"query_text": "pump", **kwargs})


def test_wrong_embedding_dimension_names_the_expected_one(db: Db) -> None:
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="query_embedding has 3 dimensions, expected 384"):
        sql(db, "SELECT * FROM hybrid_retrieve(query_embedding => '[1,2,3]')")


def test_all_inputs_null_is_an_error(db: Db) -> None:
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="nothing to search"):
        sql(db, "SELECT * FROM hybrid_retrieve(query_text => '  ', graph_seeds => '{}')")


def test_hybrid_weights_name_the_weight() -> None:
    with pytest.raises(InvalidParameterError, match=r"vector_weight must be a finite number between 0 and 1000000"):
        HybridWeights(vector=-1)


def test_python_rejects_text_postgresql_cannot_store_naming_the_parameter() -> None:
    with pytest.raises(InvalidParameterError, match="query_text is not valid Unicode text: a lone surrogate"):
        RetrieveQuery(query_text="pump \ud800")
    with pytest.raises(InvalidParameterError, match="query_text contains a NUL character"):
        RetrieveQuery(query_text="pump\x00")
    with pytest.raises(InvalidParameterError, match="graph_seeds contains a NUL character"):
        RetrieveQuery(graph_seeds=["a\x00"])
    with pytest.raises(InvalidParameterError, match="filter must be JSON-serializable"):
        RetrieveQuery(query_text="pump", filter={"when": object()})


def test_the_0_1_keyword_names_still_work_with_a_deprecation_warning() -> None:
    with pytest.warns(DeprecationWarning) as caught:  # every one is recorded here, none leaks into the summary
        q = RetrieveQuery.build(query_text="pump", k=30, filters={"a": 1}, per_backend_top_k=40,
                                weights=HybridWeights(0.5, 1, 0), vector=[1.0, 0.0])
    assert sorted(str(w.message).split(" is deprecated")[0] for w in caught) == [
        "retrieve(filters=...)", "retrieve(k=...)", "retrieve(per_backend_top_k=...)", "retrieve(vector=...)",
        "retrieve(weights=...)"]
    assert any(str(w.message).startswith("retrieve(k=...) is deprecated: use rrf_k=") for w in caught)
    assert (q.rrf_k, q.filter, q.per_source_k) == (30.0, {"a": 1}, 40)
    assert (q.vector_weight, q.keyword_weight, q.graph_weight) == (0.5, 1.0, 0.0)
    assert q.query_embedding is not None and list(q.query_embedding) == [1.0, 0.0]
    with pytest.raises(InvalidParameterError, match="give rrf_k or its deprecated name k, not both"), \
            pytest.warns(DeprecationWarning, match=r"retrieve\(k=\.\.\.\)"):
        RetrieveQuery.build(query_text="pump", k=30, rrf_k=20)
    with pytest.raises(InvalidParameterError, match=r"unknown parameter\(s\) \['kk'\]"):
        RetrieveQuery.build(query_text="pump", kk=3)


def test_rrf_fuse_matches_a_hand_computed_example(db: Db) -> None:
    rows = sql(db, """SELECT id, score, ranks FROM hybrid.rrf_fuse('[["a","b","c"],["c","a"],["d"]]',
                      ARRAY[1.0, 0.5, 2.0], 10)""")
    expected = {
        "a": 1.0 / 11 + 0.5 / 12,
        "c": 1.0 / 13 + 0.5 / 11,
        "b": 1.0 / 12,
        "d": 2.0 / 11,
    }
    assert [r["id"] for r in rows] == ["d", "a", "c", "b"]
    for r in rows:
        assert r["score"] == pytest.approx(expected[r["id"]], abs=1e-15)
    assert rows[0]["ranks"] == [None, None, 1] and rows[1]["ranks"] == [1, 2, None]


def test_hybrid_retrieve_fused_scores_follow_the_rrf_formula(api: Api, db: Db) -> None:
    _corpus(api)
    rows = sql(db, "SELECT * FROM hybrid_retrieve(query_embedding => %s::vector, query_text => 'occlusion alarm', "
                   "graph_weight => 0, rrf_k => 60, vector_weight => 1.0, keyword_weight => 2.0, fusion => 'rrf')",
               (str(unit(1).tolist()),))
    assert rows, "expected hits"
    for r in rows:
        expected = sum(w / (60 + rank) for w, rank in ((1.0, r["vector_rank"]), (2.0, r["keyword_rank"])) if rank)
        assert r["score"] == pytest.approx(expected, abs=1e-15)
    assert [r["score"] for r in rows] == sorted((r["score"] for r in rows), reverse=True)
    fused = sql(db, "SELECT id, score FROM hybrid.rrf_fuse(%s::jsonb, ARRAY[1.0, 2.0], 60)", (
        __import__("json").dumps([
            [r["chunk_id"] for r in sorted((r for r in rows if r["vector_rank"]), key=lambda r: r["vector_rank"])],
            [r["chunk_id"] for r in sorted((r for r in rows if r["keyword_rank"]), key=lambda r: r["keyword_rank"])],
        ]),))
    assert [(f["id"], f["score"]) for f in fused] == [(r["chunk_id"], r["score"]) for r in rows]


def test_tenant_cannot_see_other_tenant_chunks_in_any_branch(api: Api) -> None:
    _corpus(api)
    hits = api.retrieve("acme", query_embedding=unit(1), query_text="occlusion alarm globex meter", top_k=50)
    assert hits and all(h.tenant_id == "acme" for h in hits)
    assert "g-occl" not in {h.chunk_id for h in hits}
    other = api.retrieve("globex", query_embedding=unit(1), query_text="occlusion alarm", top_k=50)
    assert [h.chunk_id for h in other] == ["g-occl"]


def test_acl_labels_are_applied_inside_each_branch(api: Api) -> None:
    _corpus(api)
    without = api.retrieve("acme", query_embedding=unit(1), query_text="occlusion deviation", top_k=50)
    with_label = api.retrieve("acme", query_embedding=unit(1), query_text="occlusion deviation", top_k=50, acl_labels=["quality"])
    assert "secret" not in {h.chunk_id for h in without}
    secret = next(h for h in with_label if h.chunk_id == "secret")
    assert secret.vector_rank == 1 and secret.keyword_rank == 1


def test_metadata_filter_applies_inside_every_branch_before_the_cut(api: Api) -> None:
    _corpus(api)
    hits = api.retrieve("acme", query_embedding=unit(1), query_text="occlusion Okklusionsalarm", filter={"lang": "en"},
                        top_k=1, per_source_k=1)
    # "de" is the nearest vector; filtered inside the branch, the cut keeps the best English chunk instead
    assert [h.chunk_id for h in hits] == ["req"]
    assert hits[0].vector_rank == 1


def test_corpus_restriction(api: Api) -> None:
    _corpus(api)
    assert api.retrieve("acme", query_text="occlusion", corpus_ids=["nope"]) == []
    assert api.retrieve("acme", query_text="occlusion", corpus_ids=["qms"])


@pytest.mark.parametrize("lexical", [None, "bm25", "ts_rank"])
@pytest.mark.parametrize("text", [
    "pump & | ! ( :* <-> 'quoted' \"double\"", "occlusion:*", "!!!", "🚀 pump 🔥", "' OR 1=1 --", "a" * 10_000,
    " ".join(["occlusion alarm"] * 700),
])
def test_user_query_text_never_raises_a_syntax_error(api: Api, db: Db, text: str, lexical: str | None) -> None:
    _corpus(api)
    api.retrieve("acme", query_text=text, lexical=lexical)


@pytest.mark.usefixtures("require_bm25")
def test_bm25_is_the_default_lexical_method(api: Api, db: Db) -> None:
    _corpus(api)
    auto = api.retrieve("acme", query_text="occlusion alarm")
    bm25 = api.retrieve("acme", query_text="occlusion alarm", lexical="bm25")
    assert [(h.chunk_id, h.keyword_score) for h in auto] == [(h.chunk_id, h.keyword_score) for h in bm25]
    assert sql(db, "SELECT hybrid.bm25_available() AS ok") == [{"ok": True}]


def _graph_corpus(api: Api) -> None:
    _corpus(api)
    api.add_edges("acme", [
        {"src": "tp", "dst": "req", "rel": "VERIFIES"},
        {"src": "sop", "dst": "secret", "rel": "REFERENCES"},
        {"src": "secret", "dst": "de", "rel": "REFERENCES"},
        {"src": "req", "dst": "acme:entity:sensor", "rel": "MENTIONS"},
        {"src": "sop", "dst": "acme:entity:sensor", "rel": "MENTIONS"},
    ])
    api.add_edges("globex", [{"src": "g-occl", "dst": "acme:entity:sensor", "rel": "MENTIONS"}])


@pytest.mark.usefixtures("require_age")
def test_graph_branch_finds_neighbours_ranked_by_hop_distance(api: Api) -> None:
    _graph_corpus(api)
    hits = api.retrieve("acme", graph_seeds=["req"], graph_hops=2, top_k=10)
    assert [(h.chunk_id, h.graph_distance) for h in hits] == [("tp", 1), ("sop", 2)]
    assert all(h.graph_rank is not None and h.vector_rank is None for h in hits)


@pytest.mark.usefixtures("require_age")
def test_graph_traversal_never_passes_through_a_chunk_the_caller_cannot_see(api: Api) -> None:
    _graph_corpus(api)
    hidden = api.retrieve("acme", graph_seeds=["sop"], graph_hops=3, top_k=10)
    assert "secret" not in {h.chunk_id for h in hidden} and "de" not in {h.chunk_id for h in hidden}
    seen = api.retrieve("acme", graph_seeds=["sop"], graph_hops=2, top_k=10, acl_labels=["quality"])
    assert {"secret", "de"} <= {h.chunk_id for h in seen}


@pytest.mark.usefixtures("require_age")
def test_tenant_cannot_see_other_tenant_chunks_via_graph_seeds(api: Api) -> None:
    _graph_corpus(api)
    # the entity id exists in both tenants' graphs; each tenant reaches its own chunks only
    assert {h.chunk_id for h in api.retrieve("globex", graph_seeds=["acme:entity:sensor"])} == {"g-occl"}
    assert {h.chunk_id for h in api.retrieve("acme", graph_seeds=["acme:entity:sensor"])} == {"req", "sop"}
    assert api.retrieve("globex", graph_seeds=["req", "tp"]) == []


@pytest.mark.usefixtures("require_age")
def test_graph_expand_seeds_from_the_best_dense_and_lexical_hits(api: Api) -> None:
    _graph_corpus(api)
    hits = api.retrieve("acme", query_embedding=unit(1), query_text="pump occlusion alarm within 30 seconds",
                        graph_expand=1, top_k=10, with_graph_context=True)
    by_id = {h.chunk_id: h for h in hits}
    assert "tp" in by_id and by_id["tp"].graph_rank == 1
    top = hits[0]
    assert top.graph_context is not None


@pytest.mark.usefixtures("require_age")
def test_graph_context_lists_visible_neighbours(api: Api) -> None:
    _graph_corpus(api)
    hits = api.retrieve("acme", graph_seeds=["tp"], with_graph_context=True)
    req = next(h for h in hits if h.chunk_id == "req")
    assert req.graph_context is not None
    rels = {(c["rel"], c["direction"], c["node_id"]) for c in req.graph_context}
    assert ("VERIFIES", "in", "tp") in rels and ("MENTIONS", "out", "acme:entity:sensor") in rels


def test_a_failing_branch_warns_and_the_rest_are_fused(db: Db, api: Api) -> None:
    _corpus(api)
    with psycopg.connect(db.dsn()) as c:  # the graph disappears (as if AGE were missing)
        c.execute("DROP TABLE IF EXISTS hybrid.graph_node CASCADE")
    notices: list[str] = []
    with psycopg.connect(db.dsn("pyh_acme")) as c:
        c.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
        c.execute("SELECT set_config('hybrid.tenant_id', 'acme', false)")
        rows = c.execute("SELECT chunk_id, graph_rank FROM hybrid_retrieve(query_text => 'occlusion', "
                         "graph_seeds => ARRAY['req'])").fetchall()
    assert rows and all(r[1] is None for r in rows)
    assert any(n.startswith("hybrid_retrieve.source_failed: source=graph") for n in notices), notices


def test_when_every_active_branch_fails_the_call_fails(db: Db) -> None:
    with psycopg.connect(db.dsn()) as c:
        c.execute("DROP TABLE IF EXISTS hybrid.graph_node CASCADE")
    with pytest.raises(psycopg.errors.FeatureNotSupported, match="every active source failed"):
        sql(db, "SELECT * FROM hybrid_retrieve(graph_seeds => ARRAY['req'])")


@pytest.mark.usefixtures("require_age")
def test_statement_timeout_inside_a_branch_cancels_the_whole_call(db: Db, api: Api) -> None:
    _graph_corpus(api)
    with psycopg.connect(db.dsn()) as blocker:
        # the graph branch will wait on this lock until the statement times out inside it
        blocker.execute("LOCK TABLE hybrid.graph_node IN ACCESS EXCLUSIVE MODE")
        with psycopg.connect(db.dsn("pyh_acme")) as c:
            c.execute("SELECT set_config('hybrid.tenant_id', 'acme', false)")
            c.execute("SET statement_timeout = '300ms'")
            with pytest.raises(psycopg.errors.QueryCanceled):
                c.execute("SELECT * FROM hybrid_retrieve(query_text => 'occlusion', graph_seeds => ARRAY['req'])")
        blocker.rollback()


@pytest.mark.usefixtures("require_age")
def test_lock_timeout_inside_a_branch_ends_the_call_with_its_own_sqlstate(db: Db, api: Api) -> None:
    _graph_corpus(api)
    with psycopg.connect(db.dsn()) as blocker:
        blocker.execute("LOCK TABLE hybrid.graph_node IN ACCESS EXCLUSIVE MODE")
        with psycopg.connect(db.dsn("pyh_acme")) as c:
            c.execute("SELECT set_config('hybrid.tenant_id', 'acme', false)")
            c.execute("SET lock_timeout = '200ms'")
            # only the graph branch waits: the lexical one would succeed, but no half result comes back
            with pytest.raises(psycopg.errors.LockNotAvailable):
                c.execute("SELECT * FROM hybrid_retrieve(query_text => 'occlusion', graph_seeds => ARRAY['req'])")
        blocker.rollback()


def test_superseded_chunks_are_never_returned(api: Api) -> None:
    api.ingest("acme", chunks("c", 4, doc_size=4))
    api.ingest("acme", [Chunk(chunk_id="c-0", document_id="c-doc-0", content="pumps only", embedding=unit(0))])
    hits = api.retrieve("acme", query_embedding=unit(1), query_text="chunk pumps", top_k=10)
    assert [h.chunk_id for h in hits] == ["c-0"]


def test_per_document_keeps_the_best_chunk_of_each_document(api: Api) -> None:
    api.ingest("acme", chunks("c", 12, doc_size=3))
    hits = api.retrieve("acme", query_text="chunk pumps valves", top_k=10, per_document=True)
    docs = [h.document_id for h in hits]
    assert len(docs) == len(set(docs)) == 4


def test_weight_zero_disables_a_source(api: Api) -> None:
    _corpus(api)
    hits = api.retrieve("acme", query_embedding=unit(1), query_text="occlusion", vector_weight=0, keyword_weight=1)
    assert hits and all(h.vector_rank is None for h in hits)


def test_no_tenant_context_returns_zero_rows(db: Db, api: Api) -> None:
    _corpus(api)
    assert sql(db, "SELECT * FROM hybrid_retrieve(query_text => 'occlusion')", tenant="", role="pyh_app") == []
    assert sql(db, "SELECT * FROM hybrid_retrieve(query_text => 'occlusion')", tenant="", role="pyh_nobody") == []
    assert sql(db, "SELECT * FROM hybrid_retrieve(query_text => 'occlusion')", tenant="globex", role="pyh_acme") == []


def test_a_tenant_login_role_granted_one_tenant_acts_for_it_without_setting_anything(db: Db, api: Api) -> None:
    _corpus(api)
    rows = sql(db, "SELECT tenant_id FROM hybrid_retrieve(query_text => 'occlusion')", tenant="", role="pyh_acme")
    assert rows and {r["tenant_id"] for r in rows} == {"acme"}


def test_ties_are_broken_by_chunk_id(api: Api) -> None:
    api.ingest("acme", [Chunk(chunk_id=f"t{i}", document_id=f"d{i}", content="same words here") for i in (3, 1, 2)])
    hits = api.retrieve("acme", query_text="same words", top_k=3, lexical="ts_rank")
    assert [h.chunk_id for h in hits] == ["t1", "t2", "t3"]


def test_dense_branch_plan_uses_hnsw_for_large_scopes_and_exact_scan_for_small(db: Db, api: Api) -> None:
    api.ingest("acme", chunks("c", 2000))
    q = str(unit(1).tolist())
    with psycopg.connect(db.dsn(), autocommit=True) as c:
        c.execute("ANALYZE hybrid.chunk")
        key = c.execute("SELECT hybrid._tenant_key('acme')").fetchone()[0]  # type: ignore[index]
        hnsw = c.execute("SELECT i.inhrelid::regclass::text FROM pg_inherits i JOIN pg_index x ON x.indexrelid = i.inhrelid "
                         "WHERE i.inhparent = 'hybrid.chunk_embedding_hnsw'::regclass "
                         "AND x.indrelid = hybrid._chunk_partition(%s)", (key,)).fetchone()[0]  # type: ignore[index]
    with psycopg.connect(db.dsn("pyh_app")) as c:
        c.execute("SELECT set_config('hybrid.tenant_id', 'acme', false)")
        big = c.execute(f"EXPLAIN SELECT c.chunk_id FROM hybrid.chunk c WHERE c.tenant_key = {key} AND NOT c.superseded "
                        "ORDER BY c.embedding <=> %s::vector LIMIT 30", (q,)).fetchall()
        small = c.execute(f"EXPLAIN SELECT c.chunk_id FROM hybrid.chunk c WHERE c.tenant_key = {key} AND NOT c.superseded "
                          "AND c.embedding IS NOT NULL ORDER BY (c.embedding <=> %s::vector) + 0 LIMIT 30",
                          (q,)).fetchall()
    # the tenant's partition alone, through its own HNSW index
    assert f"Index Scan using {hnsw.split('.')[-1]}" in "\n".join(r[0] for r in big)
    assert "chunk_p" in "\n".join(r[0] for r in big) and len({r[0] for r in big if " on chunk_p" in r[0]}) == 1
    # the exact path never goes through HNSW (whose RLS post-filter loses recall on small tenants)
    assert "hnsw" not in "\n".join(r[0] for r in small)


def test_a_role_that_bypasses_rls_still_gets_one_tenants_rows_from_hybrid_retrieve(api: Api, db: Db) -> None:
    _corpus(api)
    rows = sql(db, "SELECT tenant_id, chunk_id FROM hybrid_retrieve(query_embedding => %s::vector, "
                   "query_text => 'occlusion alarm', top_k => 50)", (str(unit(1).tolist()),), role=None)  # superuser
    assert rows and {r["tenant_id"] for r in rows} == {"acme"} and "secret" not in {r["chunk_id"] for r in rows}


@pytest.mark.usefixtures("require_bm25")
def test_bm25_for_a_small_tenant_keeps_the_index_order_past_other_tenants_rows(api: Api, db: Db) -> None:
    api.ingest("globex", [Chunk(chunk_id=f"g{i}", document_id=f"g{i}", content=f"valve valve seal number {i}")
                          for i in range(400)])
    api.ingest("acme", [Chunk(chunk_id=f"a{i}", document_id=f"a{i}",
                              content="valve " * (i + 1) + "housing " * (10 - i)) for i in range(5)])
    hits = sql(db, "SELECT chunk_id, value AS score FROM hybrid.search_lexical('valve', 30, lexical => 'bm25')")
    # the BM25 index ranks every acme chunk although 400 globex chunks score higher
    assert [h["chunk_id"] for h in hits] == ["a4", "a3", "a2", "a1", "a0"]
    assert all(h["score"] > 0 for h in hits)
    with psycopg.connect(db.dsn(), row_factory=dict_row) as c:  # the index's own order, all tenants
        c.execute("SET enable_sort = off")
        ranked = c.execute("SELECT chunk_id, -(content <@> to_bm25query('valve', 'hybrid.chunk_content_bm25')) AS s "
                           "FROM hybrid.chunk ORDER BY content <@> to_bm25query('valve', 'hybrid.chunk_content_bm25') "
                           "LIMIT 1000").fetchall()
    expected = [(r["chunk_id"], pytest.approx(r["s"], rel=1e-5)) for r in ranked if r["chunk_id"].startswith("a")]
    assert [(h["chunk_id"], h["score"]) for h in hits] == expected

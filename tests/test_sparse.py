"""The learned-sparse branch (issue 49): hybrid.chunk.sparse_embedding searched by inner product under the same
tenancy, ACL labels, filters, explain and partial-failure rules as the dense branch, fused like any branch (ranks and
scores by name), ingested from {token_id: weight} or pgvector's text form, refused past 1,000 non-zeros."""

from __future__ import annotations

import json
from pathlib import Path

import psycopg
import pytest

from pyhybrid import Chunk
from pyhybrid.errors import InvalidParameterError
from pyhybrid.fusion import blend_score
from pyhybrid.query import RetrieveQuery
from pyhybrid.transfer import export_tenant, import_tenant
from pyhybrid.types import sparse_text
from tests.conftest import Api, Db
from tests.helpers import unit

# token id -> weight, as a SPLADE model writes them (ids from 0)
DOCS = {
    "pump": {101: 2.0, 205: 1.5, 7: 0.3},
    "valve": {101: 0.5, 300: 2.5},
    "alarm": {400: 1.0, 7: 0.2},
    "none": {900: 3.0},
}
QUERY = {101: 1.0, 205: 2.0, 7: 1.0}


def _dot(a: dict[int, float], b: dict[int, float]) -> float:
    return sum(w * b.get(k, 0.0) for k, w in a.items())


def _ingest(api: Api, tenant: str = "acme", **extra: dict) -> None:
    chunks = [Chunk(chunk_id=k, document_id=k, content=f"the {k} chapter", embedding=unit(i),
                    sparse_embedding=v, metadata={"kind": k}, **extra.get(k, {}))  # type: ignore[arg-type]
              for i, (k, v) in enumerate(DOCS.items())]
    api.ingest(tenant, chunks)


def _sparse_rows(api: Api, tenant: str = "acme", **kw: object) -> list:
    return api.retrieve(tenant, query_sparse=QUERY, **kw)


def test_the_branch_ranks_by_inner_product_and_reports_ranks_and_scores_by_name(api: Api) -> None:
    _ingest(api)
    rows = _sparse_rows(api)
    expected = sorted((k for k in DOCS if _dot(QUERY, DOCS[k]) > 0), key=lambda k: -_dot(QUERY, DOCS[k]))
    assert [r.chunk_id for r in rows] == expected == ["pump", "valve", "alarm"]
    for rank, r in enumerate(rows, 1):
        assert r.ranks == {"sparse": rank}
        assert r.scores["sparse"] == pytest.approx(_dot(QUERY, DOCS[r.chunk_id]), rel=1e-6)
        assert (r.vector_rank, r.keyword_rank, r.graph_rank) == (None, None, None)


def test_it_fuses_with_the_dense_branch_under_every_method(api: Api) -> None:
    _ingest(api)
    for fusion in ("convex", "rrf", "dbsf", "blend"):
        rows = api.retrieve("acme", query_sparse=QUERY, query_embedding=unit(2), fusion=fusion, top_k=4)
        by_id = {r.chunk_id: r for r in rows}
        assert by_id["alarm"].ranks == {"dense": 1, "sparse": 3}, fusion  # unit(2) is alarm's own embedding
        if fusion == "blend":  # a sparse score s counts s / (s + blend_k), added to the dense one
            alarm = by_id["alarm"]
            assert alarm.score == pytest.approx(blend_score("dense", alarm.vector_distance)
                                                + blend_score("sparse", alarm.scores["sparse"]))


def test_text_form_and_token_dict_are_the_same_vector() -> None:
    assert sparse_text("q", {0: 1.5, "7": 0.25, 3: 0}) == "{1:1.5,8:0.25}/1000000000"
    assert sparse_text("q", "{1:1.5, 8:0.25}/30522") == "{1:1.5,8:0.25}/1000000000"


def test_another_tenants_sparse_vectors_are_never_seen(api: Api) -> None:
    _ingest(api, "globex")
    assert _sparse_rows(api, "acme") == []
    _ingest(api, "acme")
    assert {r.tenant_id for r in _sparse_rows(api, "acme")} == {"acme"}


def test_acl_labels_filters_and_corpora_hold_for_the_branch(api: Api) -> None:
    _ingest(api, pump={"acl_labels": ("secret",)})
    assert "pump" not in [r.chunk_id for r in _sparse_rows(api)]
    assert "pump" in [r.chunk_id for r in api.retrieve("acme", query_sparse=QUERY, acl_labels=["secret"])]
    assert [r.chunk_id for r in _sparse_rows(api, filter={"kind": "valve"})] == ["valve"]
    assert _sparse_rows(api, corpus_ids=["elsewhere"]) == []


def test_a_floor_cuts_the_list_on_the_inner_product(api: Api) -> None:
    _ingest(api)
    floor = _dot(QUERY, DOCS["valve"])
    assert [r.chunk_id for r in _sparse_rows(api, min_sparse_score=floor)] == ["pump", "valve"]


def test_explain_names_the_branch_its_plan_and_weight(api: Api) -> None:
    _ingest(api)
    report = api.call("acme", "explain_retrieve", query_sparse=QUERY, query_text="pump", sparse_weight=0.5)
    sparse = next(b for b in report["branches"] if b["branch"] == "sparse")
    assert sparse["weight"] == 0.5 and sparse["rows"] == 3
    assert "inner product" in sparse["plan"]


def test_a_failing_sparse_branch_warns_and_the_rest_are_fused(db: Db, api: Api) -> None:
    _ingest(api)
    with psycopg.connect(db.dsn()) as c:  # the branch's search breaks (as a missing column would)
        c.execute("ALTER TABLE hybrid.chunk RENAME COLUMN sparse_embedding TO gone")
    notices: list[str] = []
    with psycopg.connect(db.dsn("pyh_acme")) as c:
        c.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
        c.execute("SELECT set_config('hybrid.tenant_id', 'acme', false)")
        rows = c.execute("SELECT chunk_id, ranks FROM hybrid_retrieve(query_text => 'pump', "
                         "query_sparse => '{102:1}/1000000000')").fetchall()
        assert rows and all("sparse" not in r[1] for r in rows)
        with pytest.raises(psycopg.errors.UndefinedColumn):  # the only branch: the call fails with its error
            c.execute("SELECT * FROM hybrid_retrieve(query_sparse => '{102:1}/1000000000')")
    assert any(n.startswith("hybrid_retrieve.source_failed: source=sparse") for n in notices), notices


def test_a_vector_over_1000_non_zeros_is_refused_naming_the_chunk(db: Db, api: Api) -> None:
    wide = {i: 1.0 for i in range(1001)}
    with pytest.raises(InvalidParameterError, match=r"chunk row 1 \(chunk_id 'wide'\): sparse_embedding has 1001"):
        api.ingest("acme", [Chunk(chunk_id="wide", document_id="w", content="x", sparse_embedding=wide)])
    # the same through SQL alone: 22023 naming the row, nothing written
    text = "{" + ",".join(f"{i + 1}:1" for i in range(1001)) + "}/30522"
    with psycopg.connect(db.dsn("pyh_app")) as c:
        c.execute("SELECT set_config('hybrid.tenant_id', 'acme', false)")
        c.execute("SELECT hybrid.begin_ingest()")
        c.execute("INSERT INTO pg_temp.hybrid_chunk_stage (chunk_id, document_id, content, sparse_embedding) "
                  "VALUES ('ok', 'd', 'x', '{1:1}/5'), ('wide', 'd', 'x', %s)", (text,))
        with pytest.raises(psycopg.errors.InvalidParameterValue,
                           match=r"chunk row 2 \(chunk_id 'wide'\): sparse_embedding has 1001 non-zero values"):
            c.execute("SELECT * FROM hybrid.finish_ingest('default')")
        c.rollback()
        c.execute("SELECT set_config('hybrid.tenant_id', 'acme', false)")
        c.execute("SELECT hybrid.begin_ingest()")
        c.execute("INSERT INTO pg_temp.hybrid_chunk_stage (chunk_id, document_id, content, sparse_embedding) "
                  "VALUES ('bad', 'd', 'x', 'not a vector')")
        with pytest.raises(psycopg.errors.InvalidParameterValue, match=r"chunk_id 'bad'\): sparse_embedding must be"):
            c.execute("SELECT * FROM hybrid.finish_ingest('default')")
    assert api.retrieve("acme", query_text="x") == []


@pytest.mark.parametrize("bad", [{"a": 1.0}, {1: float("nan")}, "{1:1}", 3])
def test_a_bad_query_sparse_is_refused_by_name(bad: object) -> None:
    with pytest.raises(InvalidParameterError, match="query_sparse"):
        RetrieveQuery(query_sparse=bad)


def test_re_ingesting_a_new_sparse_vector_replaces_it(api: Api) -> None:
    _ingest(api)
    api.ingest("acme", [Chunk(chunk_id="none", document_id="none", content="the none chapter", embedding=unit(3),
                              sparse_embedding={205: 10.0}, metadata={"kind": "none"})])
    assert _sparse_rows(api)[0].chunk_id == "none"


def test_jsonl_ingest_export_and_import_carry_the_vector(db: Db, api: Api, tmp_path: Path) -> None:
    rec = {"chunk_id": "j", "document_id": "j", "content": "jsonl", "sparse_embedding": {"101": 1.0}}
    api.ingest("acme", [Chunk.from_mapping(json.loads(json.dumps(rec)))])
    from pyhybrid import HybridClient
    with HybridClient(db.dsn()) as client:
        export_tenant(client, "acme", tmp_path / "acme.jsonl")
        with psycopg.connect(db.dsn(), autocommit=True) as c:
            c.execute("SELECT hybrid.create_tenant('acme2')")
        import_tenant(client, tmp_path / "acme.jsonl", tenant_id="acme2")
        with client.tenant("acme2", ["*"]) as t:
            rows = t.retrieve(query_sparse={101: 1.0})
    assert [(r.chunk_id, r.scores["sparse"]) for r in rows] == [("j", 1.0)]


def test_the_parallel_path_runs_the_branch_and_returns_the_one_calls_rows(db: Db, monkeypatch: pytest.MonkeyPatch) -> None:
    import asyncio

    from pyhybrid import AsyncHybridClient, HybridClient, _parallel

    with HybridClient(db.dsn("pyh_app")) as client, client.tenant("acme") as t:
        t.ingest([Chunk(chunk_id=k, document_id=k, content=f"the {k} chapter", embedding=unit(i), sparse_embedding=v)
                  for i, (k, v) in enumerate(DOCS.items())])
    ran: list[str] = []
    real = _parallel.retrieve

    async def spy(*a: object, **kw: object) -> object:
        rows = await real(*a, **kw)
        ran.append("parallel")
        return rows

    monkeypatch.setattr(_parallel, "retrieve", spy)
    q = dict(query_sparse=QUERY, query_text="chapter", query_embedding=unit(2), fusion="convex")

    async def both() -> tuple[list, list]:
        async with AsyncHybridClient(db.dsn("pyh_app"), pool=True, max_size=4) as client:
            async with client.tenant("acme", read_only=True) as t:
                return await t.retrieve(parallel=False, **q), await t.retrieve(parallel=True, **q)

    one, par = asyncio.run(both())
    assert ran == ["parallel"]
    assert [(r.chunk_id, r.score, r.ranks, r.scores) for r in par] == [(r.chunk_id, r.score, r.ranks, r.scores) for r in one]
    assert any("sparse" in r.ranks for r in one)


def test_the_cli_flag_gives_the_query_vector_and_names_itself_on_bad_json() -> None:
    from pyhybrid.cli import _extra, build_parser

    args = build_parser().parse_args(["search", "pump", "--tenant", "acme", "--sparse-json", '{"101": 1.0, "7": 0.5}'])
    extra = _extra(args)
    assert RetrieveQuery(query_text="pump", **extra).query_sparse == "{8:0.5,102:1.0}/1000000000"
    with pytest.raises(SystemExit):
        build_parser().parse_args(["search", "pump", "--sparse-json", "{101: 1}"])


def test_a_small_scope_is_searched_exactly_and_a_larger_one_through_the_index(db: Db, api: Api) -> None:
    import numpy as np

    rng = np.random.default_rng(7)
    docs = {f"s{i:02d}": {int(t): float(w) for t, w in zip(rng.choice(50, 8, replace=False), rng.random(8))}
            for i in range(60)}
    api.ingest("acme", [Chunk(chunk_id=k, document_id=k, content="x", sparse_embedding=v) for k, v in docs.items()])
    query = {int(t): 1.0 for t in range(0, 50, 3)}
    exact = sorted(docs, key=lambda k: (-_dot(query, docs[k]), k))[:10]

    def plan() -> str:
        report = api.call("acme", "explain_retrieve", query_sparse=query)
        return next(b for b in report["branches"] if b["branch"] == "sparse")["plan"]

    assert plan() == "inner product, exact scan"  # 60 chunks: the dense branch's rule says exact
    assert [r.chunk_id for r in api.retrieve("acme", query_sparse=query)] == exact
    with psycopg.connect(db.dsn(), autocommit=True) as c:  # every scope above the threshold now
        c.execute("INSERT INTO hybrid.setting (key, value) VALUES ('exact_threshold', '0'), ('dense_audit_rows', '0') "
                  "ON CONFLICT (key) DO UPDATE SET value = excluded.value")
        c.execute("ANALYZE hybrid.chunk")
    assert plan().startswith("inner product, HNSW sparsevec_ip_ops index, ef_search ")
    assert [r.chunk_id for r in api.retrieve("acme", query_sparse=query)] == exact  # 60 vectors: the graph finds all

"""Parallel retrieval (pyhybrid.aio, retrieve(parallel=True)): the one call's rows, one snapshot, hydrate's wall."""

from __future__ import annotations

import warnings
from typing import Any, Iterator

import psycopg
import pytest
from psycopg.rows import dict_row

from pyhybrid import AsyncHybridClient, Chunk, HybridClient, InvalidParameterError
from pyhybrid import _parallel
from pyhybrid.types import BRANCHES
from tests.conftest import Db, fresh_db
from tests.helpers import near, unit

WORDS = ["pump", "valve", "alarm", "occlusion", "sensor", "battery", "infusion", "pressure"]


def _chunks(tenant: str) -> list[Chunk]:
    out = []
    base = unit(7)
    for i in range(48):
        words = " ".join(WORDS[(i * k) % len(WORDS)] for k in (1, 3, 5)[: 1 + i % 3])
        out.append(Chunk(
            chunk_id=f"{tenant}-{i}", document_id=f"{tenant}-doc-{i // 4}", position=i % 4,
            content=f"{tenant} item{i} {words} check {WORDS[i % len(WORDS)]}",
            embedding=near(base, 1000 * len(tenant) + i, 0.2 + 0.02 * i),
            metadata={"lang": "en" if i % 3 else "de", "i": i},
            acl_labels=("finance",) if i % 7 == 3 else ()))
    return out


@pytest.fixture(scope="module")
def corpus(admin_dsn: str, template_db: str) -> Iterator[Db]:
    """acme and globex, 48 chunks each in two corpora (documents of four), some restricted to "finance",
    and a chain of edges plus an entity hub per tenant."""
    with fresh_db(admin_dsn, template_db) as d:
        with HybridClient(d.dsn("pyh_app")) as client:
            for tenant in ("acme", "globex"):
                cs = _chunks(tenant)
                with client.tenant(tenant, ["*"]) as t:
                    t.ingest(cs[:24], corpus_id="a", allow_missing_embeddings=True)
                    t.ingest(cs[24:], corpus_id="b", allow_missing_embeddings=True)
                edges = [{"src": f"{tenant}-{i}", "dst": f"{tenant}-{(i * 5 + 3) % 48}", "rel": "CITES"} for i in range(48)]
                edges += [{"src": f"{tenant}-{i}", "dst": f"{tenant}:entity:hub", "rel": "MENTIONS"} for i in range(0, 48, 6)]
                with client.tenant(tenant, ["*"]) as t:
                    t.add_edges(edges)
        yield d


CASES: list[dict[str, Any]] = [
    {},
    {"graph_expand": 3},
    {"graph_expand": 5, "graph_hops": 2, "per_source_k": 40},
    {"graph_seeds": ["acme-5", "acme:entity:hub"]},
    {"graph_seeds": ["acme-5"], "graph_expand": 2, "graph_hops": 2},
    {"filter": {"lang": "en"}, "graph_expand": 3},
    {"corpus_ids": ["b"], "graph_seeds": ["acme-30"]},
    {"per_document": True, "graph_expand": 2},
    {"siblings": 2, "with_graph_context": True, "graph_expand": 2},
    {"skip": 5, "top_k": 7, "per_source_k": 30},
    {"vector_weight": 2.0, "keyword_weight": 0.5, "graph_weight": 1.5, "rrf_k": 10, "graph_expand": 4},
    {"min_vector_score": 0.5, "min_keyword_score": 0.1, "graph_expand": 3},
    {"query_embedding": None, "graph_seeds": ["acme-9"]},
    {"query_text": None, "graph_expand": 3, "graph_seeds": ["acme-1"]},
]


def _graph(case: dict[str, Any]) -> bool:
    """Whether the case runs the graph branch: then the parallel path makes the one call (graph hits score from
    their seeds' fused scores since graph_decay, which hybrid.search_graph does not return)."""
    return bool(case.get("graph_seeds") or case.get("graph_expand"))


PARALLEL_CASES = [c for c in CASES if not _graph(c)] + [
    {"filter": {"lang": "en"}}, {"corpus_ids": ["b"]}, {"per_document": True},
    {"siblings": 2, "with_graph_context": True}, {"vector_weight": 2.0, "keyword_weight": 0.5, "rrf_k": 10},
    {"min_vector_score": 0.5, "min_keyword_score": 0.1},
    # a weak lexical list (every hit holds one of the three terms) at half weight, and term_coverage's ends
    {"query_text": "pump zyzzyva quokka"}, {"query_text": "pump zyzzyva quokka", "term_coverage": 1},
    {"term_coverage": 3}, {"term_coverage": 32},
    # the one call counts the terms in the lexical branch's own statement, for each method (the parallel path
    # asks hybrid.lexical_strength); a floor keeps a prefix of the list
    {"lexical": "ts_rank", "term_coverage": 3}, {"lexical": "ts_rank", "query_text": "pump zyzzyva quokka"},
    {"lexical": "bm25", "term_coverage": 3, "min_keyword_score": 0.5}]


def _query(**kw: Any) -> dict[str, Any]:
    q: dict[str, Any] = {"query_embedding": unit(7), "query_text": "pump occlusion alarm", "top_k": 10}
    q.update(kw)
    return q


def _same(one: list[Any], par: list[Any]) -> None:
    assert [r.chunk_id for r in par] == [r.chunk_id for r in one]
    for a, b in zip(one, par):
        assert abs(a.score - b.score) <= 1e-12, (a.chunk_id, a.score, b.score)
        for f in ("vector_rank", "keyword_rank", "graph_rank", "vector_distance", "keyword_score", "graph_distance",
                  "document_id", "corpus_id", "content", "metadata", "acl_labels", "position", "graph_context",
                  "siblings"):
            assert getattr(a, f) == getattr(b, f), (a.chunk_id, f)


@pytest.fixture()
def spied(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """What each parallel attempt ended in ('rows' or the exception's name): the real path, observed."""
    seen: list[str] = []
    real = _parallel.retrieve

    async def spy(*a: Any, **kw: Any) -> Any:
        try:
            rows = await real(*a, **kw)
        except BaseException as exc:
            seen.append(type(exc).__name__)
            raise
        seen.append("rows")
        return rows

    monkeypatch.setattr(_parallel, "retrieve", spy)
    return seen


@pytest.mark.usefixtures("require_age", "require_bm25")
@pytest.mark.parametrize("fusion", ["rrf", "convex", "dbsf", "blend"])
async def test_parallel_returns_the_one_calls_rows_for_every_fusion_method(corpus: Db, fusion: str,
                                                                           spied: list[str]) -> None:
    async with AsyncHybridClient(corpus.dsn("pyh_app"), pool=True, max_size=4) as client:
        for acl in (None, ["finance"]):
            async with client.tenant("acme", acl, read_only=True) as t:
                for case in PARALLEL_CASES + CASES:
                    q = _query(fusion=fusion, **case)
                    one = await t.retrieve(parallel=False, **q)
                    par = await t.retrieve(parallel=True, **q)
                    assert one, case
                    _same(one, par)
    # every case without the graph ran in parallel; every case with it made the one call
    assert spied == ["rows"] * (2 * sum(1 for c in PARALLEL_CASES + CASES if not _graph(c))), spied


@pytest.mark.usefixtures("require_age", "require_bm25")
async def test_parallel_branches_share_the_sessions_snapshot(corpus: Db, spied: list[str]) -> None:
    q = _query()
    async with AsyncHybridClient(corpus.dsn("pyh_app"), pool=True, max_size=4) as client:
        async with client.tenant("acme", read_only=True) as t:
            before = await t.retrieve(parallel=False, **q)
            # committed after the session's snapshot: the best dense and lexical hit of the query, for any
            # connection that took a snapshot of its own
            with HybridClient(corpus.dsn("pyh_app")) as writer, writer.tenant("acme") as w:
                w.ingest([Chunk(chunk_id="acme-late", document_id="acme-late", content="pump occlusion alarm pump",
                                embedding=unit(7), metadata={})], corpus_id="a")
            # BM25 statistics are index-wide, not versioned: the one call's keyword scores move too
            one = await t.retrieve(parallel=False, **q)
            par = await t.retrieve(parallel=True, **q)
        _same(one, par)
        assert "acme-late" not in {r.chunk_id for r in par}
        # dense ranks are those of the snapshot: acme-late, the nearest chunk, pushes none of them down
        ranks = {r.chunk_id: r.vector_rank for r in before}
        both = [r for r in par if r.chunk_id in ranks and r.vector_rank is not None]
        assert len(both) >= 5 and all(r.vector_rank == ranks[r.chunk_id] for r in both)
        async with client.tenant("acme", read_only=True) as t:
            after = await t.retrieve(parallel=True, **q)
    assert after[0].chunk_id == "acme-late"
    assert spied == ["rows", "rows"]


@pytest.mark.usefixtures("require_age", "require_bm25")
async def test_parallel_fusion_and_hydration_lock_the_callers_partition_and_no_other(corpus: Db, spied: list[str]) -> None:
    with psycopg.connect(corpus.dsn()) as admin:
        mine = admin.execute("SELECT hybrid._chunk_partition(hybrid._tenant_key('acme'))::text").fetchone()[0]  # type: ignore[index]
    async with AsyncHybridClient(corpus.dsn("pyh_app"), pool=True, max_size=4) as client:
        async with client.tenant("acme", read_only=True) as t:
            await t.retrieve(parallel=True, **_query(siblings=1, with_graph_context=True, per_document=True))
            cur = await t.conn.execute(
                "SELECT c.relname FROM pg_locks l JOIN pg_class c ON c.oid = l.relation "
                "WHERE l.pid = pg_backend_pid() AND c.relkind = 'r' AND c.relname LIKE 'chunk_p%'")
            locked = {r["relname"] for r in await cur.fetchall()}
    assert locked == {mine.split(".")[-1]}
    assert spied == ["rows"]


@pytest.mark.usefixtures("require_age", "require_bm25")
@pytest.mark.parametrize("max_size", [1, 2])
async def test_a_pool_too_small_for_two_branches_makes_the_one_call(corpus: Db, spied: list[str], max_size: int) -> None:
    q = _query()
    async with AsyncHybridClient(corpus.dsn("pyh_app"), pool=True, max_size=max_size) as client:
        async with client.tenant("acme", read_only=True) as t:
            one = await t.retrieve(parallel=False, **q)
            par = await t.retrieve(parallel=True, **q)
        assert client._pool is not None
        queued = client._pool.get_stats().get("requests_queued", 0)
    _same(one, par)
    assert spied == ["Fallback"]
    # a pool at its size with none idle is not waited for (every session might be waiting so)
    assert queued == (0 if max_size == 1 else 1)


async def test_parallel_needs_a_read_only_session_of_a_pooled_client(corpus: Db) -> None:
    async with AsyncHybridClient(corpus.dsn("pyh_app"), pool=True) as client:
        async with client.tenant("acme") as t:
            with pytest.raises(InvalidParameterError, match="parallel=True needs a read-only session"):
                await t.retrieve(parallel=True, **_query())
    async with AsyncHybridClient(corpus.dsn("pyh_app")) as client:
        async with client.tenant("acme", read_only=True) as t:
            with pytest.raises(InvalidParameterError, match="of a pooled client"):
                await t.retrieve(parallel=True, **_query())


@pytest.mark.usefixtures("require_age", "require_bm25")
async def test_a_tenant_login_role_runs_parallel_as_itself(corpus: Db, spied: list[str]) -> None:
    # pyh_acme holds no table privilege and is bound to acme with label "quality" only: its pooled
    # connections act for it, so neither globex's rows nor acme's "finance" chunks come back
    async with AsyncHybridClient(corpus.dsn("pyh_acme"), pool=True, max_size=4) as client:
        async with client.tenant("acme", read_only=True) as t:
            for case in PARALLEL_CASES[:6]:
                q = _query(**case)
                one = await t.retrieve(parallel=False, **q)
                par = await t.retrieve(parallel=True, **q)
                _same(one, par)
                assert par and all(r.tenant_id == "acme" and r.acl_labels == () for r in par)
    assert spied == ["rows"] * 6


@pytest.mark.usefixtures("require_age", "require_bm25")
async def test_a_failing_branch_falls_back_to_the_one_call(corpus: Db, spied: list[str],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    # the lexical branch's statement breaks on the pooled connection: the one call answers instead
    real = _parallel.branch_sql
    monkeypatch.setattr(_parallel, "branch_sql",
                        lambda b: "SELECT 1 / 0 AS chunk_id" if b.name == "lexical" else real(b))
    q = _query()
    async with AsyncHybridClient(corpus.dsn("pyh_app"), pool=True, max_size=4) as client:
        async with client.tenant("acme", read_only=True) as t:
            one = await t.retrieve(parallel=False, **q)
            par = await t.retrieve(parallel=True, **q)
    _same(one, par)
    assert spied == ["Fallback"]


@pytest.mark.usefixtures("require_age", "require_bm25")
async def test_a_call_with_a_broken_graph_makes_the_one_call_and_its_warning(db: Db, spied: list[str]) -> None:
    with HybridClient(db.dsn("pyh_app")) as client, client.tenant("acme") as t:
        t.ingest(_chunks("acme"), corpus_id="a", allow_missing_embeddings=True)
    with psycopg.connect(db.dsn()) as c:  # the graph disappears (as if AGE were missing)
        c.execute("DROP TABLE IF EXISTS hybrid.graph_node CASCADE")
    q = _query(graph_seeds=["acme-1"])
    async with AsyncHybridClient(db.dsn("pyh_app"), pool=True, max_size=4) as client:
        async with client.tenant("acme", read_only=True) as t:
            with pytest.warns(UserWarning, match="source=graph"):
                one = await t.retrieve(parallel=False, **q)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                par = await t.retrieve(parallel=True, **q)
    _same(one, par)
    assert any(str(w.message).startswith("hybrid_retrieve.source_failed: source=graph") for w in caught)
    assert spied == []  # a call with the graph never tries the parallel path


def _hydrate(db: Db, role: str, ids: list[str], *, tenant: str = "acme", acl: str = "", **kw: Any) -> list[dict]:
    args = "".join(f", {k} => %({k})s" for k in kw)
    with psycopg.connect(db.dsn(role), row_factory=dict_row) as c:
        c.execute("SELECT set_config('hybrid.tenant_id', %s, false), set_config('hybrid.acl_labels', %s, false)",
                  (tenant, acl))
        return c.execute(f"SELECT * FROM hybrid.hydrate(%(ids)s::text[], %(scores)s::float8[]{args})",
                         {"ids": ids, "scores": [1.0] * len(ids), **kw}).fetchall()


GUESSES = [f"globex-{i}" for i in range(48)] + [f"acme-{i}" for i in range(3, 48, 7)]
"""Every globex chunk and every acme chunk restricted to "finance"."""


def test_hydrate_returns_nothing_of_another_tenant_or_outside_the_acl_for_guessed_ids(corpus: Db) -> None:
    assert _hydrate(corpus, "pyh_acme", GUESSES, top_k=1000) == []
    assert _hydrate(corpus, "pyh_acme", GUESSES, top_k=1000, per_document=True, siblings=3,
                    with_graph_context=True) == []
    assert _hydrate(corpus, "pyh_acme", GUESSES, tenant="globex", top_k=1000) == []  # a tenant it was not granted
    assert _hydrate(corpus, "pyh_nobody", GUESSES, tenant="globex", top_k=1000) == []
    # the same ids as an app role acting for acme with "finance": exactly acme's seven restricted chunks
    assert len(_hydrate(corpus, "pyh_app", GUESSES, acl="finance", top_k=1000)) == 7


def test_hydrate_is_a_definer_function_owned_by_hybrid_definer(corpus: Db) -> None:
    with psycopg.connect(corpus.dsn()) as c:
        row = c.execute("SELECT p.prosecdef, pg_get_userbyid(p.proowner) FROM pg_proc p "
                        "WHERE p.oid = 'hybrid.hydrate'::regproc").fetchone()
    assert row == (True, "hybrid_definer")


def test_hydrate_siblings_leave_out_chunks_outside_the_acl(corpus: Db) -> None:
    # acme-2's document is acme-0..3; acme-3 is restricted to "finance"
    rows = _hydrate(corpus, "pyh_acme", ["acme-2", "globex-2"], siblings=3)
    assert [r["chunk_id"] for r in rows] == ["acme-2"]
    assert [s["chunk_id"] for s in rows[0]["siblings"]] == ["acme-0", "acme-1"]
    rows = _hydrate(corpus, "pyh_app", ["acme-2"], acl="finance", siblings=3)
    assert [s["chunk_id"] for s in rows[0]["siblings"]] == ["acme-0", "acme-1", "acme-3"]


@pytest.mark.parametrize("kw, message", [
    ({"top_k": 0}, "top_k must be between 1 and 1000"),
    ({"skip": -1}, "skip must be between 0 and 9990"),
    ({"siblings": 21}, "siblings must be between 0 and 20"),
    ({"per_document": None}, "per_document must be true or false"),
    ({"lists": '{"dense": {"ids": ["a"], "values": []}}'},
     r"lists.dense: must be \{\"ids\": \[strings\], \"values\": \[numbers between -1e12 and 1e12\]\}"),
    ({"lists": '{"nope": {"ids": [], "values": []}}'}, "branch must be one of " + ", ".join(f"'{b.name}'" for b in BRANCHES) + ", got 'nope'"),
    ({"lists": '{"dense": {"ids": ["a"], "values": [1e13]}}'}, "lists.dense: must be"),
])
def test_hydrate_rejects_bad_arguments_with_22023(corpus: Db, kw: dict[str, Any], message: str) -> None:
    with pytest.raises(psycopg.errors.InvalidParameterValue, match=message):
        _hydrate(corpus, "pyh_acme", ["acme-1"], **kw)


@pytest.mark.usefixtures("require_bm25")
async def test_a_call_with_abstain_makes_the_one_call_and_abstains_as_it_does(corpus: Db, spied: list[str]) -> None:
    import warnings

    from pyhybrid import AbstainedWarning

    async with AsyncHybridClient(corpus.dsn("pyh_app"), pool=True, max_size=4) as client:
        async with client.tenant("acme", ["*"]) as t:
            await t.calibrate_abstention()
        async with client.tenant("acme", read_only=True) as t:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                off = await t.retrieve(parallel=True, **_query(query_embedding=-unit(7), query_text="zyzzyva"),
                                       abstain=True)
                on = await t.retrieve(parallel=True, **_query(), abstain=True)
    assert off == [] and [w.category for w in caught] == [AbstainedWarning]
    _same(on, await _one_call(corpus, _query(), abstain=True))
    assert spied == []  # neither call took the parallel path


async def _one_call(corpus: Db, q: dict[str, Any], **kw: Any) -> list[Any]:
    async with AsyncHybridClient(corpus.dsn("pyh_app")) as client, client.tenant("acme", read_only=True) as t:
        return await t.retrieve(**q, **kw)

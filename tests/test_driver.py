"""The Python driver: same answers through every way in, rrf_fuse against SQL, typed errors, hygiene."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import psycopg
from psycopg import conninfo
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from psycopg.rows import dict_row
from sqlalchemy import create_engine, select, text

import pyhybrid
from pyhybrid import ChunkRef, HybridClient, InvalidParameterError, RetrievalError, TenantError, rrf_fuse
from pyhybrid.fusion import rrf_scores
from pyhybrid.server import sqlalchemy_url
from tests.conftest import Api, Db
from tests.helpers import chunks, unit

ROOT = Path(__file__).resolve().parents[1]


def test_sql_sync_async_and_sqlalchemy_return_identical_ids_and_scores(db: Db) -> None:
    from tests.conftest import Api as _Api

    sync = _Api("sync", db.dsn("pyh_app"))
    sync.ingest("acme", chunks("c", 200, doc_size=5))
    q = unit(7)
    kw = dict(query_embedding=q, query_text="chunk 17 pumps alarms", top_k=15)
    via_sync = [(r.chunk_id, r.score) for r in sync.retrieve("acme", **kw)]
    sync.close()
    aio = _Api("async", db.dsn("pyh_app"))
    via_async = [(r.chunk_id, r.score) for r in aio.retrieve("acme", **kw)]
    aio.close()
    with psycopg.connect(db.dsn("pyh_acme"), row_factory=dict_row) as c:
        c.execute("SELECT set_config('hybrid.tenant_id', 'acme', false)")
        via_sql = [(r["chunk_id"], r["score"]) for r in c.execute(
            "SELECT chunk_id, score FROM hybrid_retrieve(query_embedding => %s::vector, "
            "query_text => 'chunk 17 pumps alarms', top_k => 15)", (str([float(x) for x in q]),))]
    from pyhybrid.sqlalchemy import hybrid_retrieve

    engine = create_engine(sqlalchemy_url(db.dsn("pyh_acme")))
    with engine.begin() as conn:
        conn.execute(text("SELECT set_config('hybrid.tenant_id', :t, true)"), {"t": "acme"})
        hr = hybrid_retrieve(**kw)  # type: ignore[arg-type]
        via_sa = [(r.chunk_id, r.score) for r in conn.execute(select(hr.c.chunk_id, hr.c.score))]
    engine.dispose()
    assert len(via_sql) == 15
    assert via_sync == via_async == via_sql == via_sa


def test_sqlalchemy_table_valued_function_joins_the_chunk_table(api: Api, db: Db) -> None:
    from pyhybrid.sqlalchemy import chunk, hybrid_retrieve

    api.ingest("acme", chunks("c", 20))
    engine = create_engine(sqlalchemy_url(db.dsn("pyh_app")))  # joining the tables needs an app role
    with engine.begin() as conn:
        conn.execute(text("SELECT set_config('hybrid.tenant_id', 'acme', true)"))
        hr = hybrid_retrieve(query_text="chunk number 3", top_k=5)
        rows = conn.execute(
            select(hr.c.chunk_id, chunk.c.updated_at).join(chunk, (chunk.c.tenant_id == hr.c.tenant_id)
                                                           & (chunk.c.chunk_id == hr.c.chunk_id))
            .order_by(hr.c.score.desc())
        ).all()
    engine.dispose()
    assert rows and rows[0].chunk_id == "c-3" and rows[0].updated_at is not None


def test_rows_map_to_chunkref_by_column_name(api: Api) -> None:
    api.ingest("acme", chunks("c", 3))
    ref = api.retrieve("acme", query_text="chunk number 1 item1", top_k=1)[0]
    assert isinstance(ref, ChunkRef)
    assert (ref.chunk_id, ref.tenant_id, ref.corpus_id, ref.document_id) == ("c-1", "acme", "default", "c-doc-1")
    assert ref.metadata == {"i": 1, "lang": "de"} and ref.keyword_rank == 1 and ref.vector_rank is None
    with pytest.raises(AttributeError):
        ref.score = 1.0  # type: ignore[misc]


def test_sql_errors_map_to_typed_exceptions_with_the_psycopg_error_chained(api: Api, db: Db) -> None:
    with HybridClient(db.dsn("pyh_acme")) as c, pytest.raises(TenantError) as info:
        with c.tenant("acme") as t:
            t.conn.execute("INSERT INTO hybrid.chunk (tenant_id, chunk_id, corpus_id, document_id, content, "
                           "content_hash) VALUES ('globex', 'x', 'd', 'd', 'c', 'h')")
    assert isinstance(info.value.__cause__, psycopg.errors.InsufficientPrivilege)
    assert info.value.sqlstate == "42501"


@st.composite
def _rankings(draw: st.DrawFn) -> tuple[list[list[str]], list[float], float, int | None]:
    ids = st.sampled_from([f"d{i}" for i in range(12)])
    n = draw(st.integers(1, 4))
    lists = [draw(st.lists(ids, max_size=10)) for _ in range(n)]
    weights = [draw(st.sampled_from([0.0, 0.5, 1.0, 2.0, 0.3])) for _ in range(n)]
    k = draw(st.sampled_from([1.0, 10.0, 60.0, 0.5, 100.0]))
    top_k = draw(st.one_of(st.none(), st.integers(1, 20)))
    return lists, weights, k, top_k


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=_rankings())
def test_python_rrf_equals_sql_rrf_fuse_on_random_inputs(template_dsn_conn: psycopg.Connection, case: tuple) -> None:
    lists, weights, k, top_k = case
    rows = template_dsn_conn.execute(
        "SELECT id, score, ranks FROM hybrid.rrf_fuse(%s::jsonb, %s::float8[], %s, %s)",
        (json.dumps(lists), weights, k, top_k)).fetchall()
    assert [(r[0], r[1], r[2]) for r in rows] == [(i, s, rs) for i, s, rs in rrf_scores(lists, weights, k, top_k)]




def test_rrf_fuse_keeps_the_first_lists_metadata_and_replaces_the_score() -> None:
    a = ChunkRef("x", "t", score=9.0, metadata={"from": "dense"})
    b = ChunkRef("x", "t", score=3.0, metadata={"from": "lexical"})
    c = ChunkRef("y", "t", score=1.0)
    fused = rrf_fuse([[a, c], [b]], weights=[1.0, 1.0], rrf_k=60)
    assert [r.chunk_id for r in fused] == ["x", "y"]
    assert fused[0].metadata == {"from": "dense"} and fused[0].score == 1 / 61 + 1 / 61


def test_rrf_fuse_rules() -> None:
    a = ChunkRef("x", "t1")
    with pytest.raises(RetrievalError, match="one tenant_id"):
        rrf_fuse([[a], [ChunkRef("y", "t2")]])
    with pytest.raises(InvalidParameterError, match="rrf_k must be a finite number > 0 and <= 1000000"):
        rrf_fuse([[a]], rrf_k=0)
    with pytest.raises(InvalidParameterError, match=r"weights\[1\] must be a finite number between 0 and 1000000"):
        rrf_fuse([[a]], weights=[-1])
    with pytest.raises(InvalidParameterError, match="weights has 2 entries but rankings has 1 lists"):
        rrf_fuse([[a]], weights=[1, 1])


def _is_psycopg_composition(node: ast.expr) -> bool:
    """sql.SQL("constant").format(...): psycopg quotes every argument (a plain value becomes a Literal)."""
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format"
            and isinstance(node.func.value, ast.Call) and isinstance(node.func.value.func, ast.Attribute)
            and node.func.value.func.attr == "SQL" and len(node.func.value.args) == 1
            and isinstance(node.func.value.args[0], ast.Constant) and isinstance(node.func.value.args[0].value, str))


def test_no_user_value_is_ever_formatted_into_sql_text() -> None:
    """Every execute()/copy() in pyhybrid/ gets a constant SQL string, never an f-string, % or str.format().

    The one composition allowed is psycopg's own, from a constant template (DDL that must name an
    index, such as REINDEX CONCURRENTLY, which no function can run): it quotes what it is given.
    """
    offenders = []
    for path in (ROOT / "pyhybrid").rglob("*.py"):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr in ("execute", "executemany", "copy", "exec_driver_sql") and node.args:
                sql = node.args[0]
                bad = isinstance(sql, ast.JoinedStr) or (isinstance(sql, ast.BinOp)) or (
                    isinstance(sql, ast.Call) and isinstance(sql.func, ast.Attribute) and sql.func.attr == "format"
                    and not _is_psycopg_composition(sql)) or (
                    isinstance(sql, ast.Call) and isinstance(sql.func, ast.Attribute) and sql.func.attr == "SQL"
                    and not (len(sql.args) == 1 and isinstance(sql.args[0], ast.Constant)))
                if bad:
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert offenders == []


def test_the_sql_text_check_catches_str_format_and_accepts_psycopg_composition() -> None:
    parse = lambda src: ast.parse(src, mode="eval").body  # noqa: E731
    assert _is_psycopg_composition(parse('sql.SQL("REINDEX INDEX CONCURRENTLY {}").format(idx)'))
    assert not _is_psycopg_composition(parse('"REINDEX INDEX {}".format(name)'))
    assert not _is_psycopg_composition(parse('sql.SQL(text).format(idx)'))
    assert not _is_psycopg_composition(parse('sql.SQL(f"DROP INDEX {name}").format()'))


@pytest.mark.slow
def test_mypy_strict_passes_on_the_package() -> None:
    result = subprocess.run([sys.executable, "-m", "mypy", "--strict", "pyhybrid"], cwd=ROOT,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_package_reexports_its_public_api() -> None:
    for name in pyhybrid.__all__:
        assert hasattr(pyhybrid, name), name


def test_pooled_clients_sync_and_async_serve_concurrent_tenant_sessions(db: Db) -> None:
    import asyncio

    from pyhybrid import AsyncHybridClient

    with HybridClient(db.dsn("pyh_app"), pool=True, max_size=2) as c:
        with c.tenant("acme") as t:
            t.ingest(chunks("c", 20))
        with c.tenant("acme") as a, c.tenant("globex") as g:  # two pooled connections at once
            assert [r.chunk_id for r in a.retrieve(query_text="chunk number 3 item3", top_k=1)] == ["c-3"]
            assert g.retrieve(query_text="chunk number 3 item3") == []

    async def go() -> list[str]:
        client = await AsyncHybridClient(db.dsn("pyh_app"), pool=True, max_size=2).open()
        try:
            async with client.tenant("acme") as t:
                return [r.chunk_id for r in await t.retrieve(query_text="chunk number 3 item3", top_k=1)]
        finally:
            await client.close()

    assert asyncio.run(go()) == ["c-3"]


def test_the_python_contract_matches_the_installed_sql_function(admin_dsn: str, template_db: str) -> None:
    from pyhybrid.query import PARAMETERS, RESULT_COLUMNS

    with psycopg.connect(conninfo.make_conninfo(admin_dsn, dbname=template_db)) as c:
        args = c.execute(
            "SELECT a.name, format_type(a.type, NULL) FROM pg_proc p, "
            "unnest(p.proargnames, p.proargtypes::oid[]) WITH ORDINALITY AS a(name, type, i) "
            "WHERE p.oid = 'hybrid.retrieve'::regproc ORDER BY a.i").fetchall()
        columns = c.execute(
            "SELECT a.attname, format_type(a.atttypid, a.atttypmod) FROM pg_attribute a "
            "WHERE a.attrelid = 'hybrid.retrieve_row'::regclass AND a.attnum > 0 ORDER BY a.attnum").fetchall()
        wrapper = c.execute("SELECT pg_get_function_arguments('public.hybrid_retrieve'::regproc) = "
                            "pg_get_function_arguments('hybrid.retrieve'::regproc)").fetchone()
    assert args == list(PARAMETERS.items())
    assert columns == list(RESULT_COLUMNS.items())
    assert wrapper == (True,)

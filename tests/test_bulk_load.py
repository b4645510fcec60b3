"""HybridClient.bulk_load(): the HNSW, GIN and BM25 indexes held off for a load and rebuilt as they were.

The text indexes cost a load about twice what its rows do (bench/FINDINGS.md, textidx_ab); built after
it, the BM25 ones are one segment each, so the lexical branch takes the scan's own scores without a
merge_bm25. Meanwhile search stays correct: lexical by ts_rank, dense exact.
"""

from __future__ import annotations

import asyncio
import random
import psycopg
import pytest

from pyhybrid import Chunk, HybridClient, migrate
from pyhybrid.aio import AsyncHybridClient
from pyhybrid.doctor import check
from pyhybrid.errors import InvalidParameterError
from tests.conftest import Db
from tests.test_bm25_segments import QUERIES, _admin, _content, _exact, _is_exact_top, _search

pytestmark = pytest.mark.usefixtures("require_bm25")

_TEXT = ("chunk_tsv_gin", "chunk_content_bm25")

# each partition's text indexes, as pg_get_indexdef gives them, and the parents'
_DEFS_SQL = """
SELECT p.relname, pg_get_indexdef(i.oid)
FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class p ON p.oid = i.oid
JOIN pg_am a ON a.oid = i.relam
WHERE i.relnamespace = 'hybrid'::regnamespace AND a.amname IN ('gin', 'bm25')
  AND x.indrelid IN (SELECT 'hybrid.chunk'::regclass UNION ALL
                     SELECT inhrelid FROM pg_inherits WHERE inhparent = 'hybrid.chunk'::regclass)
ORDER BY 1"""


def _present(db: Db) -> dict[str, bool]:
    return {n: _admin(db, "SELECT to_regclass(%s) IS NOT NULL", f"hybrid.{n}")[0][0]
            for n in ("chunk_embedding_hnsw", *_TEXT)}


def _suspended(db: Db) -> set[str]:
    return {r[0] for r in _admin(db, "SELECT key FROM hybrid.setting WHERE right(key, 10) = '_suspended'")}


def _ingest(db: Db, n: int, batches: int) -> None:
    rng = random.Random(5)
    for b in range(batches):
        with HybridClient(db.dsn("pyh_app")) as c, c.tenant("acme") as t:
            t.ingest([Chunk(chunk_id=f"c{b}-{i}", document_id=f"d{b}-{i}", content=_content(rng))
                      for i in range(n)], allow_missing_embeddings=True)


def _lexical(db: Db, query: str, lexical: str | None) -> list[tuple[str, int]]:
    with HybridClient(db.dsn("pyh_acme")) as c, c.tenant("acme") as t, t.conn.transaction():
        return [(r["chunk_id"], r["rank"]) for r in t.conn.execute(
            "SELECT chunk_id, rank FROM hybrid.search_lexical(%s, 20, lexical => %s) ORDER BY rank", (query, lexical))]


def _assert_one_segment_each_with_exact_scores(db: Db) -> None:
    """Each BM25 index one segment, recorded: the scan's own scores, the exact top."""
    assert _admin(db, "SELECT count(*) FROM hybrid.bm25_merged") == [(2,)]
    for q in QUERIES:
        rows, how = _search(db, q, top_k=20)
        assert how == "index scan" and len(rows) == 20
        _is_exact_top(rows, _exact(db, q))


def test_a_bulk_load_rebuilds_the_text_indexes_as_they_were_with_exact_bm25_scans(db: Db) -> None:
    before = _admin(db, _DEFS_SQL)
    assert len(before) == 8  # the parents', acme's, globex's and the pool's (over its leaves)
    with pytest.raises(RuntimeError, match="the load failed"):
        with HybridClient(db.dsn()) as admin, admin.bulk_load():
            assert _present(db) == {"chunk_embedding_hnsw": False, "chunk_tsv_gin": False, "chunk_content_bm25": False}
            assert _suspended(db) == {"vector_index_suspended", "text_indexes_suspended"}
            _ingest(db, 200, 3)
            # BM25 meanwhile by the SQL scorer, over the GIN-less partitions (each tenant's statistics are kept)
            for q in QUERIES:
                assert _lexical(db, q, None) == _lexical(db, q, "bm25") != []
            # an upgrade or a re-apply meanwhile does not build them in the middle of the load
            migrate.upgrade(db.dsn(), reapply=True)
            assert not any(_present(db).values())
            with psycopg.connect(db.dsn()) as conn:
                found = {f.subject: f for f in check(conn)}
            for name in _TEXT:
                assert found[f"index {name}"].state == "suspended for a bulk load"
                assert found[f"index {name}"].fix == "SELECT hybrid.resume_text_indexes();"
            raise RuntimeError("the load failed")
    # rebuilt even so, one index a partition, defined as before
    assert all(_present(db).values()) and _suspended(db) == set()
    assert _admin(db, _DEFS_SQL) == before
    _assert_one_segment_each_with_exact_scores(db)


def test_text_indexes_false_holds_off_the_hnsw_index_alone(db: Db) -> None:
    async def load() -> None:
        async with AsyncHybridClient(db.dsn()) as admin, admin.bulk_load(text_indexes=False):
            assert _present(db) == {"chunk_embedding_hnsw": False, "chunk_tsv_gin": True, "chunk_content_bm25": True}
            assert _suspended(db) == {"vector_index_suspended"}

    asyncio.run(load())
    assert all(_present(db).values()) and _suspended(db) == set()


def test_bulk_load_refuses_a_text_indexes_that_is_not_a_boolean_before_dropping_anything(db: Db) -> None:
    with HybridClient(db.dsn()) as admin:
        for bad in (1, "yes", None):
            with pytest.raises(InvalidParameterError, match="text_indexes must be True or False"):
                with admin.bulk_load(text_indexes=bad):  # type: ignore[arg-type]
                    pass
    assert all(_present(db).values()) and _suspended(db) == set()


def test_the_bm25_index_is_not_rebuilt_in_the_transaction_that_dropped_it(db: Db) -> None:
    # pg_textsearch 1.0 left an index built after a drop in the same transaction with corrupt shared
    # state (pyhybrid.migrate._drop_unpartitioned_bm25): the GIN index comes back, the BM25 one waits
    notices: list[str] = []
    with psycopg.connect(db.dsn()) as conn:
        conn.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
        assert conn.execute("SELECT hybrid.suspend_text_indexes()").fetchone() == (True,)
        assert conn.execute("SELECT hybrid.resume_text_indexes()").fetchone() == (True,)
    assert any("dropped in this transaction" in n for n in notices)
    assert _present(db)["chunk_tsv_gin"] and not _present(db)["chunk_content_bm25"]
    assert _suspended(db) == {"text_indexes_suspended"}
    assert _admin(db, "SELECT hybrid.resume_text_indexes()") == [(True,)]
    assert all(_present(db).values()) and _suspended(db) == set()
    assert _admin(db, "SELECT hybrid.resume_text_indexes()") == [(False,)]  # nothing missing


@pytest.mark.parametrize("role", ["pyh_acme", "pyh_app"])
def test_tenant_and_app_roles_cannot_hold_the_text_indexes_off(db: Db, role: str) -> None:
    for call in ("SELECT hybrid.suspend_text_indexes()", "SELECT hybrid.resume_text_indexes()"):
        with psycopg.connect(db.dsn(role)) as c, pytest.raises(psycopg.errors.InsufficientPrivilege):
            c.execute(call)
    assert all(_present(db).values()) and _suspended(db) == set()



# each partition index of the kinds a bulk load holds off, by name, with its oid and the parent it is attached to
_ATTACHED_SQL = """
SELECT i.relname, i.oid, pi.relname
FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_am a ON a.oid = i.relam
LEFT JOIN pg_inherits h ON h.inhrelid = i.oid LEFT JOIN pg_class pi ON pi.oid = h.inhparent
WHERE i.relnamespace = 'hybrid'::regnamespace AND a.amname IN ('gin', 'bm25', 'hnsw')
  AND i.relname !~ '_sparse_embedding_idx$'  -- the sparse index is not held off (its NULLs cost an insert nothing)
  AND x.indrelid IN (SELECT inhrelid FROM pg_inherits WHERE inhparent = 'hybrid.chunk'::regclass)
  AND i.relname !~ '^chunk_pool'  -- the pool's (over its leaves) are built by the resume calls
ORDER BY 1"""


def test_partition_indexes_built_beforehand_on_other_connections_are_attached_not_built_again(db: Db) -> None:
    # what bulk_load(build_workers=N) does on exit: hybrid.bulk_index_jobs, each job on a connection of its
    # own, then the resume calls attach what those built (the same index, not a second build)
    before = _admin(db, _DEFS_SQL)
    density = _admin(db, "SELECT index_name, m, ef_construction FROM hybrid.vector_index_density() ORDER BY 1")
    assert _admin(db, "SELECT count(*) FROM hybrid.bulk_index_jobs()") == [(0,)]  # nothing held off
    for sql in ("SELECT hybrid.suspend_vector_index()", "SELECT hybrid.suspend_text_indexes()"):
        assert _admin(db, sql) == [(True,)]
    _ingest(db, 200, 2)
    jobs = _admin(db, "SELECT part::text, kind FROM hybrid.bulk_index_jobs()")
    parts = {p for p, _ in jobs}
    assert len(parts) == 2 and sorted(jobs) == sorted((p, k) for p in parts for k in ("hnsw", "bm25", "gin"))
    built: list[str] = []
    for part, kind in jobs:
        with psycopg.connect(db.dsn(), autocommit=True) as c:
            built.append(c.execute("SELECT hybrid.build_partition_index(%s::regclass, %s)", (part, kind)).fetchone()[0])
    assert len(set(built)) == 6 and None not in built
    assert _admin(db, "SELECT count(*) FROM hybrid.bulk_index_jobs()") == [(0,)]  # nothing left to build
    assert _admin(db, "SELECT hybrid.build_partition_index(%s::regclass, 'bm25')", jobs[0][0]) == [(None,)]
    prebuilt = {name: oid for name, oid, parent in _admin(db, _ATTACHED_SQL)}
    assert set(prebuilt) == set(built) and not any(p for _, _, p in _admin(db, _ATTACHED_SQL))  # none attached yet
    assert _admin(db, "SELECT hybrid.resume_text_indexes()") == [(True,)]
    assert _admin(db, "SELECT hybrid.resume_vector_index()") == [(True,)]
    after = _admin(db, _ATTACHED_SQL)
    assert {name: oid for name, oid, _ in after} == prebuilt  # attached as they were
    assert {(name.rsplit("_", 2)[-2], parent) for name, _, parent in after} == {
        ("embedding", "chunk_embedding_hnsw"), ("content", "chunk_content_bm25"), ("tsv", "chunk_tsv_gin")}
    assert all(_present(db).values()) and _suspended(db) == set()
    assert _admin(db, _DEFS_SQL) == before
    assert _admin(db, "SELECT index_name, m, ef_construction FROM hybrid.vector_index_density() ORDER BY 1") == density
    _assert_one_segment_each_with_exact_scores(db)


def test_bulk_load_builds_on_several_connections_and_rebuilds_a_prebuilt_index_that_no_longer_matches(db: Db) -> None:
    with HybridClient(db.dsn()) as admin, admin.bulk_load(build_workers=3):
        _ingest(db, 200, 2)
        part = _admin(db, "SELECT part::text FROM hybrid.bulk_index_jobs() WHERE kind = 'hnsw' LIMIT 1")[0][0]
        # an index under the name the HNSW build uses, but not one of the parent's key: rebuilt, not attached
        _admin(db, f"CREATE INDEX {part.split('.')[-1]}_embedding_idx ON {part} (chunk_id)")
        assert _admin(db, "SELECT count(*) FROM hybrid.bulk_index_jobs() WHERE kind = 'hnsw'") == [(1,)]
    assert all(_present(db).values()) and _suspended(db) == set()
    kinds = _admin(db, "SELECT a.amname, count(*) FROM pg_inherits h JOIN pg_class i ON i.oid = h.inhrelid "
                       "JOIN pg_am a ON a.oid = i.relam WHERE h.inhparent IN ('hybrid.chunk_embedding_hnsw'::regclass, "
                       "'hybrid.chunk_content_bm25'::regclass, 'hybrid.chunk_tsv_gin'::regclass) GROUP BY 1 ORDER BY 1")
    assert kinds == [("bm25", 3), ("gin", 3), ("hnsw", 3)]  # acme's, globex's and the pool's
    for q in QUERIES:
        rows, how = _search(db, q, top_k=20)
        assert how == "index scan" and len(rows) == 20


def test_build_partition_index_names_the_parameter_it_refuses(db: Db) -> None:
    for args, message in (((None, "bm25"), "part must be a partition of hybrid.chunk, got NULL"),
                          (("hybrid.tenant", "bm25"), "part must be a partition of hybrid.chunk, got hybrid.tenant"),
                          (("hybrid.chunk", "gin"), "part must be a partition of hybrid.chunk"),
                          (None, "kind must be hnsw, bm25 or gin, got 'btree'"),
                          ("null-kind", "kind must be hnsw, bm25 or gin, got NULL")):
        if args is None:
            args = (_admin(db, "SELECT inhrelid::regclass::text FROM pg_inherits WHERE inhparent = 'hybrid.chunk'::regclass LIMIT 1")[0][0], "btree")
        elif args == "null-kind":
            args = ("hybrid.tenant", None)
        with psycopg.connect(db.dsn()) as c, pytest.raises(psycopg.errors.InvalidParameterValue, match=message):
            c.execute("SELECT hybrid.build_partition_index(%s::regclass, %s)", args)
    # not the BM25 index in the transaction that dropped it, as hybrid.resume_text_indexes: a WARNING, no error
    # (a rollback after the drop can crash the backends that used the index on pg_textsearch 1.0)
    notices: list[str] = []
    with psycopg.connect(db.dsn()) as c:
        c.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
        assert c.execute("SELECT hybrid.suspend_text_indexes()").fetchone() == (True,)
        part = c.execute("SELECT part::text FROM hybrid.bulk_index_jobs() WHERE kind = 'bm25' LIMIT 1").fetchone()[0]
        assert c.execute("SELECT hybrid.build_partition_index(%s::regclass, 'bm25')", (part,)).fetchone() == (None,)
    assert any("dropped in this transaction" in n for n in notices)
    assert _admin(db, "SELECT count(*) FROM hybrid.bulk_index_jobs() WHERE kind = 'bm25'") == [(2,)]  # none built
    assert _admin(db, "SELECT hybrid.resume_text_indexes()") == [(True,)]
    with HybridClient(db.dsn()) as admin:
        for bad in (0, 17, True, "2", None):
            with pytest.raises(InvalidParameterError, match="build_workers must be an integer from 1 to 16"):
                with admin.bulk_load(build_workers=bad):  # type: ignore[arg-type]
                    pass
    assert all(_present(db).values()) and _suspended(db) == set()


@pytest.mark.parametrize("role", ["pyh_acme", "pyh_app"])
def test_tenant_and_app_roles_cannot_list_or_build_partition_indexes(db: Db, role: str) -> None:
    part = _admin(db, "SELECT inhrelid::regclass::text FROM pg_inherits WHERE inhparent = 'hybrid.chunk'::regclass LIMIT 1")[0][0]
    for call, args in (("SELECT * FROM hybrid.bulk_index_jobs()", ()),
                       ("SELECT hybrid.build_partition_index(%s::regclass, 'gin')", (part,))):
        with psycopg.connect(db.dsn(role)) as c, pytest.raises(psycopg.errors.InsufficientPrivilege):
            c.execute(call, args)


def test_a_build_that_fails_on_a_worker_connection_is_raised_and_the_rest_still_resumed(db: Db) -> None:
    # a malformed setting fails every HNSW build (hybrid._hnsw_density); the text indexes still come back,
    # the HNSW index stays suspended, and once the setting is fixed the resume call builds it
    with pytest.raises(InvalidParameterError, match="setting hnsw_m must be an integer between 2 and 100"):
        with HybridClient(db.dsn()) as admin, admin.bulk_load(build_workers=2):
            _ingest(db, 200, 1)
            _admin(db, "INSERT INTO hybrid.setting (key, value) VALUES ('hnsw_m', 'many')")
    assert _present(db) == {"chunk_embedding_hnsw": False, "chunk_tsv_gin": True, "chunk_content_bm25": True}
    assert _suspended(db) == {"vector_index_suspended"}
    _admin(db, "DELETE FROM hybrid.setting WHERE key = 'hnsw_m'")
    assert _admin(db, "SELECT hybrid.resume_vector_index()") == [(True,)]
    assert all(_present(db).values()) and _suspended(db) == set()

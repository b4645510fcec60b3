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
from pyhybrid.errors import InvalidParameterError, RetrievalError
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


def test_a_bulk_load_rebuilds_the_text_indexes_as_they_were_with_exact_bm25_scans(db: Db) -> None:
    before = _admin(db, _DEFS_SQL)
    assert len(before) == 6  # the parents' and acme's and globex's
    with pytest.raises(RuntimeError, match="the load failed"):
        with HybridClient(db.dsn()) as admin, admin.bulk_load():
            assert _present(db) == {"chunk_embedding_hnsw": False, "chunk_tsv_gin": False, "chunk_content_bm25": False}
            assert _suspended(db) == {"vector_index_suspended", "text_indexes_suspended"}
            _ingest(db, 200, 3)
            # lexical search ranks by ts_rank meanwhile; BM25 asked for by name says why it cannot
            for q in QUERIES:
                assert _lexical(db, q, None) == _lexical(db, q, "ts_rank") != []
            with pytest.raises(RetrievalError, match="suspended for a bulk load"):
                _lexical(db, "w1 w2", "bm25")
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
    # each BM25 index one segment, recorded: the scan's own scores, the exact top
    assert _admin(db, "SELECT count(*) FROM hybrid.bm25_merged") == [(2,)]
    for q in QUERIES:
        rows, how = _search(db, q, top_k=20)
        assert how == "index scan" and len(rows) == 20
        _is_exact_top(rows, _exact(db, q))


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


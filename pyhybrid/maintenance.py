"""Server maintenance: rebuild the BM25 indexes a restart left stale, merge them after loads, HNSW graphs a tenant
outgrew, and change what the HNSW index holds."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Callable

import psycopg
from psycopg import conninfo, sql

from . import _base
from .errors import InvalidParameterError, SchemaError, from_psycopg

logger = logging.getLogger("pyhybrid")


@dataclass(frozen=True)
class Bm25IndexState:
    """One BM25 index as hybrid.bm25_status() sees it: state is ok, stale or unknown."""

    index_name: str
    table_name: str
    total_docs: int | None
    memtable_docs: int | None
    segment_docs: int | None
    state: str
    reason: str | None


@dataclass(frozen=True)
class HealAction:
    """What hybrid.heal_bm25() did to one index (action: rebuilt, or skipped with the reason)."""

    index_name: str
    action: str
    reason: str | None


HEAL_COMMAND = "pyhybrid doctor --heal"
HEAL_SQL = "SELECT * FROM hybrid.heal_bm25()"


def _has_function(conn: psycopg.Connection[Any], signature: str) -> bool:
    return conn.execute("SELECT to_regprocedure(%s) IS NOT NULL", (signature,)).fetchone() == (True,)


def bm25_status(conn: psycopg.Connection[Any]) -> list[Bm25IndexState]:
    """Every BM25 index of the connected database and whether it is stale (empty without the schema)."""
    if not _has_function(conn, "hybrid.bm25_status()"):
        return []
    rows = conn.execute(
        "SELECT index_name, table_name, total_docs, memtable_docs, segment_docs, state, reason "
        "FROM hybrid.bm25_status()"
    ).fetchall()
    return [Bm25IndexState(*row) for row in rows]


BM25_INDEXES_SQL = (
    "SELECT c.oid::regclass::text FROM pg_class c JOIN pg_am a ON a.oid = c.relam "
    "WHERE a.amname = 'bm25' AND c.relkind = 'i' ORDER BY c.oid"
)


def _touch_bm25_indexes(conn: psycopg.Connection[Any]) -> None:
    # pg_textsearch 1.0's first access to an index after a restart holds LWLocks until the
    # transaction ends (200 at most): the hybrid.heal_bm25() of schemas before 0.3 failed past ~70
    # tenants' indexes with "too many LWLocks taken". One statement per index, in autocommit.
    for (index_name,) in conn.execute(BM25_INDEXES_SQL).fetchall():
        conn.execute("SELECT hybrid._bm25_summary(to_regclass(%s))", (index_name,))


def heal_bm25(dsn: str) -> list[HealAction]:
    """Rebuild every stale BM25 index of the database at dsn (as its owner); returns what was done.

    Each index is checked, and rebuilt if stale, in a transaction of its own (what hybrid.heal_bm25()
    does in one), so that what was rebuilt stays rebuilt and no lock is held longer than one rebuild.
    """
    with psycopg.connect(dsn, autocommit=True) as conn:
        if not _has_function(conn, "hybrid.heal_bm25()"):
            return []
        if not _has_function(conn, "hybrid._bm25_heal_index(regclass, boolean)"):  # a schema before 0.3
            if _has_function(conn, "hybrid._bm25_summary(regclass)"):
                _touch_bm25_indexes(conn)
            return [HealAction(*row) for row in conn.execute(
                "SELECT index_name, action, reason FROM hybrid.heal_bm25()").fetchall()]
        conn.execute("SELECT hybrid._bm25_begin_generation()")
        actions: list[HealAction] = []
        for (index_name,) in conn.execute("SELECT index_name::text FROM hybrid._bm25_indexes()").fetchall():
            actions += [HealAction(*row) for row in conn.execute(
                "SELECT index_name, action, reason FROM hybrid._bm25_heal_index(to_regclass(%s))",
                (index_name,)).fetchall()]
    return actions


def heal_bm25_everywhere(admin_dsn: str, report: Callable[[str], None] | None = None) -> dict[str, list[HealAction]]:
    """heal_bm25 in every database of the server that has the hybrid schema; report() gets one line per action."""
    say = report or logger.warning
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        names = [r[0] for r in conn.execute(
            "SELECT datname FROM pg_database WHERE datallowconn AND NOT datistemplate ORDER BY 1").fetchall()]
    done: dict[str, list[HealAction]] = {}
    for name in names:
        try:
            actions = heal_bm25(conninfo.make_conninfo(admin_dsn, dbname=name))
        except psycopg.OperationalError:  # dropped meanwhile, or not ours to connect to
            continue
        if actions:
            done[name] = actions
            for a in actions:
                say(f"pyhybrid: BM25 index {a.index_name} in database {name}: {a.action} ({a.reason})")
    return done


@dataclass(frozen=True)
class MergeAction:
    """What hybrid.merge_bm25() did to one tenant's BM25 index (action: none, spilled, merged, rebuilt, skipped)."""

    index_name: str
    segments_before: int | None
    segments_after: int | None
    action: str


def merge_bm25(dsn: str, tenants: list[str] | None = None) -> list[MergeAction]:
    """Merge each tenant's BM25 index (or the given tenants') into one segment, as the schema owner.

    Run it after bulk loads: on pg_textsearch before 1.3.1 the lexical branch re-scores every fetched
    row unless the tenant's index has one segment and no write since. One transaction per tenant, so
    each holds that tenant's writes off for its own merge only.
    """
    with psycopg.connect(dsn, autocommit=True) as conn:
        if not _has_function(conn, "hybrid.merge_bm25(text)"):
            raise SchemaError("hybrid.merge_bm25(text) is missing: run pyhybrid migrate first")
        names = tenants if tenants is not None else [r[0] for r in conn.execute(
            "SELECT tenant_id FROM hybrid.tenant ORDER BY tenant_id").fetchall()]
        actions: list[MergeAction] = []
        for name in names:
            try:
                rows = conn.execute(
                    "SELECT index_name, segments_before, segments_after, action FROM hybrid.merge_bm25(%s)",
                    (name,)).fetchall()
            except psycopg.Error as exc:  # an unknown tenant (22023), a lock timeout, not the owner
                raise from_psycopg(exc) from exc
            actions += [MergeAction(*row) for row in rows]
    return actions


@dataclass(frozen=True)
class VectorIndexDensity:
    """One tenant's partition HNSW index as hybrid.vector_index_density() sees it.

    m and ef_construction: the graph density it was built with; due_m and due_ef_construction: the
    one its live rows call for now (a tenant grown by online ingest past the setting hnsw_dense_rows).
    """

    tenant_id: str
    index_name: str
    live_rows: int
    m: int
    ef_construction: int
    due_m: int
    due_ef_construction: int
    build_memory: str

    @property
    def due(self) -> bool:
        """Whether a rebuild would give this index a denser graph."""
        return (self.due_m, self.due_ef_construction) > (self.m, self.ef_construction)


DENSIFY_COMMAND = "pyhybrid doctor --densify"


def vector_index_density(conn: psycopg.Connection[Any]) -> list[VectorIndexDensity]:
    """Every tenant's HNSW index density (admin; empty without the schema or while the index is suspended)."""
    if not _has_function(conn, "hybrid.vector_index_density()") or conn.execute(
            "SELECT has_function_privilege('hybrid.vector_index_density()', 'EXECUTE')").fetchone() != (True,):
        return []
    rows = conn.execute(
        "SELECT tenant_id, index_name, live_rows, m, ef_construction, due_m, due_ef_construction, build_memory "
        "FROM hybrid.vector_index_density()"
    ).fetchall()
    return [VectorIndexDensity(*row) for row in rows]


def densify_vector_indexes(dsn: str, tenants: list[str] | None = None,
                           report: Callable[[str], None] | None = None) -> list[VectorIndexDensity]:
    """Rebuild, with the density its rows call for, the HNSW index of each due tenant (of tenants, when given).

    Each index gets ALTER INDEX ... SET (m, ef_construction) and REINDEX INDEX CONCURRENTLY: the
    tenant's reads and writes go on meanwhile (the old index serves until the swap). A rebuild that
    fails gets its old density back and leaves no half-built index. Returns the indexes rebuilt
    (with the density they had before).
    """
    done: list[VectorIndexDensity] = []
    with psycopg.connect(dsn, autocommit=True) as conn, _base.translate_errors():
        for d in vector_index_density(conn):
            if not d.due or (tenants is not None and d.tenant_id not in tenants):
                continue
            idx = sql.Identifier("hybrid", d.index_name)
            conn.execute("SELECT set_config('maintenance_work_mem', %(mem)s, false) "
                         "WHERE pg_size_bytes(current_setting('maintenance_work_mem')) < pg_size_bytes(%(mem)s)",
                         {"mem": d.build_memory})
            conn.execute(sql.SQL("ALTER INDEX {} SET (m = {}, ef_construction = {})").format(
                idx, sql.Literal(d.due_m), sql.Literal(d.due_ef_construction)))
            try:
                conn.execute(sql.SQL("REINDEX INDEX CONCURRENTLY {}").format(idx))
            except psycopg.Error as failed:
                # the old graph still serves: give it back its own density, drop the half-built copy
                # (REINDEX CONCURRENTLY leaves it behind, invalid, named <index>_ccnew)
                conn.execute(sql.SQL("ALTER INDEX {} RESET (m, ef_construction)").format(idx))
                if (d.m, d.ef_construction) != (16, 64):  # pgvector's defaults
                    conn.execute(sql.SQL("ALTER INDEX {} SET (m = {}, ef_construction = {})").format(
                        idx, sql.Literal(d.m), sql.Literal(d.ef_construction)))
                leftover = sql.Identifier("hybrid", d.index_name + "_ccnew")
                try:
                    conn.execute(sql.SQL("DROP INDEX CONCURRENTLY IF EXISTS {}").format(leftover))
                except psycopg.Error as also:
                    raise SchemaError(
                        f"densifying the HNSW index of tenant {d.tenant_id} failed ({failed}) and its half-built "
                        f"copy hybrid.{d.index_name}_ccnew could not be dropped ({also}): drop it with "
                        f"DROP INDEX CONCURRENTLY hybrid.{d.index_name}_ccnew", sqlstate=also.sqlstate) from failed
                raise
            done.append(d)
            (report or logger.info)(f"HNSW index of tenant {d.tenant_id} ({d.live_rows:,} chunks): m {d.m}, "
                                    f"ef_construction {d.ef_construction} -> m {d.due_m}, "
                                    f"ef_construction {d.due_ef_construction}")
    return done


DENSE_KINDS = ("auto", "vector", "halfvec", "bit")
# lists: where the index holds the vectors (kind vector), a partition of at least ivfflat_rows chunks gets an IVFFlat
# index of its own (hybrid._ivfflat_lists), which hybrid.set_dense_index_kind keeps unattached
_PARTITIONS_SQL = """SELECT c.relname, greatest(c.reltuples, 0)::bigint AS rows, d.m, d.ef_construction,
       pg_size_pretty(hybrid._hnsw_build_memory(c.reltuples, d.m)) AS mem,
       hybrid._dense_index_key(hybrid.embedding_dim(), %(kind)s) AS key,
       CASE WHEN %(kind)s = 'vector' THEN hybrid._ivfflat_lists(c.reltuples) END AS lists
FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid CROSS JOIN LATERAL hybrid._hnsw_density(c.reltuples) d
WHERE i.inhparent = 'hybrid.chunk'::regclass AND c.relkind = 'r' ORDER BY i.inhrelid"""
_BUILT_OPCLASS_SQL = """SELECT o.opcname FROM pg_index x JOIN pg_opclass o ON o.oid = x.indclass[0]
WHERE x.indexrelid = to_regclass('hybrid.chunk_embedding_hnsw')"""


def set_dense_index_kind(dsn: str, kind: str, report: Callable[[str], None] | None = None) -> str:
    """Make the HNSW index hold kind (vector, halfvec, bit, or auto: the dimension's default), online (admin).

    Each partition's index of the new kind is built first with CREATE INDEX CONCURRENTLY, beside the
    old one, which serves reads and writes meanwhile; then hybrid.set_dense_index_kind swaps them in one
    short transaction, with the setting dense_index_kind. A build that fails leaves no half-built index
    and the old kind in place. For kind vector, a partition large enough for IVFFlat (setting ivfflat_rows) gets
    an IVFFlat index, built CONCURRENTLY the same way and kept the partition's own. Returns what it reports.
    """
    if kind not in DENSE_KINDS:
        raise InvalidParameterError(f"kind must be one of {', '.join(DENSE_KINDS)}, got {kind!r}")
    say = report or logger.info
    with psycopg.connect(dsn, autocommit=True) as conn, _base.translate_errors():
        dim = conn.execute("SELECT hybrid.embedding_dim()").fetchone()[0]  # type: ignore[index]
        target = (conn.execute("SELECT CASE WHEN %(k)s::text = 'auto' THEN hybrid._default_dense_kind(%(d)s) "
                               "ELSE hybrid._valid_dense_kind(%(k)s, %(d)s) END", {"k": kind, "d": dim}).fetchone()
                  or ("",))[0]
        opclass = conn.execute("SELECT split_part(hybrid._dense_index_key(%s, %s), ' ', -1)", (dim, target)).fetchone()
        built = conn.execute(_BUILT_OPCLASS_SQL).fetchone()
        if built is not None and opclass is not None and built[0] != opclass[0]:
            for rel, rows, m, efc, mem, key, lists in conn.execute(_PARTITIONS_SQL, {"kind": target}).fetchall():
                name = sql.Identifier("hybrid", f"{rel}_embedding_{target}")
                conn.execute(sql.SQL("DROP INDEX CONCURRENTLY IF EXISTS {}").format(name))  # a leftover of a failed run
                conn.execute("SELECT set_config('maintenance_work_mem', %(mem)s, false) "
                             "WHERE pg_size_bytes(current_setting('maintenance_work_mem')) < pg_size_bytes(%(mem)s)",
                             {"mem": mem})
                with_ = sql.SQL("") if (m, efc) == (16, 64) else sql.SQL(" WITH (m = {}, ef_construction = {})").format(
                    sql.Literal(m), sql.Literal(efc))
                if lists is not None:
                    with_ = sql.SQL(" WITH (lists = {})").format(sql.Literal(lists))
                try:
                    conn.execute(sql.SQL("CREATE INDEX CONCURRENTLY {} ON {} USING {} ({}){} WHERE NOT superseded").format(
                        sql.Identifier(f"{rel}_embedding_{target}"), sql.Identifier("hybrid", rel),
                        sql.SQL("hnsw" if lists is None else "ivfflat"), sql.SQL(key), with_))
                except psycopg.Error:
                    conn.execute(sql.SQL("DROP INDEX CONCURRENTLY IF EXISTS {}").format(name))  # left invalid
                    raise
                say(f"built {target} HNSW index of {rel} (~{rows:,} chunks, m {m}, ef_construction {efc})" if lists is None
                    else f"built {target} IVFFlat index of {rel} (~{rows:,} chunks, {lists} lists)")
        done = conn.execute("SELECT hybrid.set_dense_index_kind(%s)", (kind,)).fetchone()
    result = str(done[0]) if done else target
    say(f"dense index kind: {result}")
    return result


PLACE_COMMAND = "pyhybrid tenant place"


def place_tenants(dsn: str, tenants: list[str] | None = None, report: Callable[[str], None] | None = None) -> list[str]:
    """Give each pooled tenant (of tenants, when given) past setting pool_max_chunks a partition of its own
    (hybrid.pool_due, largest first; hybrid.move_tenant, online: its searches go on, its writes wait for the move's
    last transaction). Admin only, as a role that bypasses RLS. Returns the tenants moved."""
    moved: list[str] = []
    with psycopg.connect(dsn, autocommit=True) as conn, _base.translate_errors():
        conn.add_notice_handler(_base.notice_handler)
        for tenant_id, chunks in conn.execute("SELECT tenant_id, chunks FROM hybrid.pool_due() "
                                              "WHERE %(t)s::text[] IS NULL OR tenant_id = ANY (%(t)s)",
                                              {"t": tenants}).fetchall():
            conn.execute("CALL hybrid.move_tenant(%s, 'dedicated')", (tenant_id,))
            moved.append(tenant_id)
            if report is not None:
                report(f"tenant {tenant_id}: {chunks} chunks, moved from the pool to a partition of its own")
    return moved

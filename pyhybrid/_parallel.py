"""Parallel retrieval for the async client: hybrid_retrieve's branches on pooled connections sharing one snapshot."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, Sequence

import psycopg
from psycopg import sql
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from .query import RetrieveQuery

_FLOOR = "({f}::float8 IS NULL OR hybrid._branch_score('{b}', s.value) >= {f}::float8)"
DENSE_SQL = ("SELECT s.chunk_id, s.value FROM hybrid.search_dense(%(query_embedding)s::vector, %(k)s::integer, "
             "%(corpus_ids)s::text[], %(filter)s::jsonb) s WHERE "
             + _FLOOR.format(f="%(min_vector_score)s", b="dense") + " ORDER BY s.rank")
LEXICAL_SQL = ("SELECT s.chunk_id, s.value FROM hybrid.search_lexical(%(query_text)s::text, %(k)s::integer, "
               "%(corpus_ids)s::text[], %(filter)s::jsonb, %(lexical)s::text) s WHERE "
               + _FLOOR.format(f="%(min_keyword_score)s", b="lexical") + " ORDER BY s.rank")
# seeds: the given ones, else the best graph_expand of the dense and lexical lists fused, as hybrid.retrieve
# picks them (NULL when both are empty: then the graph branch does not run)
GRAPH_SQL = ("SELECT s.chunk_id, s.value::integer AS value FROM ("
             "SELECT CASE WHEN cardinality(%(graph_seeds)s::text[]) > 0 THEN %(graph_seeds)s::text[] ELSE (SELECT array_agg(f.id ORDER BY f.score DESC, f.id) "
             "FROM hybrid.rrf_fuse(jsonb_build_array(to_jsonb(%(d_ids)s::text[]), to_jsonb(%(l_ids)s::text[])), "
             "ARRAY[%(vector_weight)s, %(keyword_weight)s]::float8[], rrf_k => %(rrf_k)s::float8, "
             "top_k => %(graph_expand)s::integer) f) END AS seeds) z "
             "CROSS JOIN LATERAL (SELECT * FROM hybrid.search_graph(z.seeds, %(graph_hops)s::integer, %(k)s::integer, "
             "%(corpus_ids)s::text[], %(filter)s::jsonb, %(graph_edge_types)s::text[]) WHERE z.seeds IS NOT NULL) s "
             "WHERE " + _FLOOR.format(f="%(min_graph_score)s", b="graph") + " ORDER BY s.rank")
_SCORES = ("(SELECT coalesce(jsonb_agg(hybrid._fusion_score(%(fusion)s::text, '{b}', u.v) ORDER BY u.o), '[]') "
           "FROM unnest(%({v})s::float8[]) WITH ORDINALITY u(v, o))")
FUSE_HYDRATE_SQL = (
    # the lexical list weighs keyword_weight * its strength, as in hybrid.retrieve (term_coverage)
    "WITH f AS (SELECT array_agg(x.id) AS ids, array_agg(x.score) AS scores FROM hybrid.fuse("
    "jsonb_build_array(to_jsonb(%(d_ids)s::text[]), to_jsonb(%(l_ids)s::text[]), to_jsonb(%(g_ids)s::text[])), "
    "ARRAY[%(vector_weight)s, %(keyword_weight)s::float8 * CASE WHEN %(term_coverage)s::integer > 1 AND cardinality(%(l_ids)s::text[]) > 0 "
    "THEN hybrid.lexical_strength(%(query_text)s::text, %(l_ids)s::text[], %(term_coverage)s::integer) ELSE 1 END, "
    "%(graph_weight)s]::float8[], %(fusion)s::text, %(rrf_k)s::float8, "
    "NULL, CASE WHEN %(fusion)s::text <> 'rrf' THEN jsonb_build_array("
    + ", ".join(_SCORES.format(b=b, v=v) for b, v in (("dense", "d_vals"), ("lexical", "l_vals"), ("graph", "g_vals")))
    + ") END) x) "
    "SELECT h.* FROM f, hybrid.hydrate(f.ids, f.scores, %(d_ids)s::text[], %(d_vals)s::float8[], %(l_ids)s::text[], "
    "%(l_vals)s::float8[], %(g_ids)s::text[], %(g_vals)s::integer[], top_k => %(top_k)s::integer, "
    "skip => %(skip)s::integer, per_document => %(per_document)s::boolean, siblings => %(siblings)s::integer, "
    "with_graph_context => %(with_graph_context)s::boolean) h")
"""Fusion (hybrid.fuse, hybrid.retrieve's arithmetic) and hydration (hybrid.hydrate) of the branch lists, in one statement."""
READ_ONLY_SNAPSHOT_SQL = "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY"
"""How a pooled client's read-only session starts: one snapshot for all its statements, which it can share."""
LEADER_SQL = ("SELECT pg_export_snapshot() AS snapshot, current_setting('transaction_isolation') AS isolation, "
              "current_setting('role') AS role, session_user::text AS login, "
              "coalesce(current_setting('hybrid.tenant_id', true), '') AS tenant, "
              "coalesce(current_setting('hybrid.acl_labels', true), '') AS acl")
# SQLSTATE classes hybrid.retrieve lets end the call (lock timeout, deadlock, serialization, resources,
# cancellation): a branch that raised one ends the parallel call too, rather than being retried
FATAL = ("40", "53", "57")


@dataclass
class Plan:
    """Which branches a query runs, as hybrid.retrieve decides: those independent of each other, and a
    graph branch that waits for dense and lexical (graph_expand with no graph_seeds)."""

    first: list[str] = field(default_factory=list)
    graph_after: bool = False
    graph: bool = False
    abstain: bool = False

    @classmethod
    def of(cls, q: RetrieveQuery) -> Plan:
        plan = cls(abstain=q.abstain)
        if q.query_embedding is not None and q.vector_weight > 0:
            plan.first.append("dense")
        if q.query_text is not None and q.query_text.strip() and q.keyword_weight > 0:
            plan.first.append("lexical")
        if q.graph_weight > 0 and (q.graph_seeds or q.graph_expand > 0):
            plan.graph = True
        if q.graph_weight > 0:
            if q.graph_seeds:
                plan.first.append("graph")
            elif q.graph_expand > 0:
                plan.graph_after = True
        return plan

    @property
    def worth_it(self) -> bool:
        """At least two branches can run at once (else the one call does the same in fewer round trips), and no
        graph branch: since graph_decay a graph hit scores from the fused score of the seed that reached it,
        which hybrid.search_graph does not return, so a call with the graph runs as the one call; so does a call
        with abstain (the decision and its notice are hybrid.retrieve's)."""
        return len(self.first) >= 2 and not self.graph and not self.abstain


def params(q: RetrieveQuery) -> dict[str, Any]:
    """The query's parameters plus each branch's depth k, as hybrid.retrieve computes it."""
    p = q.params()
    p["k"] = q.per_source_k if q.per_source_k is not None else min(10000, max((q.skip + q.top_k) * 3, 30))
    for b in ("d", "l", "g"):
        p[f"{b}_ids"], p[f"{b}_vals"] = [], []
    return p


_BRANCH_SQL = {"dense": DENSE_SQL, "lexical": LEXICAL_SQL, "graph": GRAPH_SQL}
_KEYS = {"dense": "d", "lexical": "l", "graph": "g"}


class Fallback(Exception):
    """The parallel call cannot go on as the one call would (a branch failed, the pool is short, the roles
    differ): run the one call instead."""


async def _import(conn: psycopg.AsyncConnection[Any], leader: dict[str, Any]) -> None:
    """Start a transaction on conn in the leader's snapshot, as the same role and tenant."""
    await conn.set_autocommit(True)  # our BEGIN, sent with the rest in one round trip
    parts = [sql.SQL("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"),
             sql.SQL("SET TRANSACTION SNAPSHOT {}").format(sql.Literal(leader["snapshot"]))]
    if leader["role"] != "none":
        parts.append(sql.SQL("SET LOCAL ROLE {}").format(sql.Identifier(leader["role"])))
    parts.append(sql.SQL("SELECT set_config('hybrid.tenant_id', {}, true), set_config('hybrid.acl_labels', {}, true), "
                         "session_user::text AS login").format(sql.Literal(leader["tenant"]), sql.Literal(leader["acl"])))
    cur = await conn.execute(sql.SQL("; ").join(parts))
    while cur.nextset():  # the SELECT's result is the last
        pass
    row = await cur.fetchone()
    if row is None or row["login"] != leader["login"]:
        raise Fallback("a pooled connection logs in as another role than the session's")


async def _release(pool: AsyncConnectionPool[Any], conn: psycopg.AsyncConnection[Any]) -> None:
    try:
        if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            await conn.execute("ROLLBACK")
        await conn.set_autocommit(False)
    finally:
        await pool.putconn(conn)


async def _acquire(pool: AsyncConnectionPool[Any], n: int, wait: float) -> list[psycopg.AsyncConnection[Any]]:
    """Up to n pooled connections: those idle now, or that the pool can open within wait seconds; none
    when the pool is at its size with none idle (every session may be waiting for one: no deadlock)."""
    got: list[psycopg.AsyncConnection[Any]] = []
    for _ in range(n):
        stats = pool.get_stats()
        if stats.get("pool_available", 0) == 0 and stats.get("pool_size", 0) >= pool.max_size:
            break
        try:
            got.append(await pool.getconn(timeout=wait))
        except PoolTimeout:
            break
    return got


async def retrieve(leader_conn: psycopg.AsyncConnection[Any], pool: AsyncConnectionPool[Any], q: RetrieveQuery,
                   leader: dict[str, Any], wait: float = 1.0) -> list[dict[str, Any]]:
    """hybrid.retrieve's rows for q, its branches run at once on pooled connections in the leader's snapshot
    (leader: LEADER_SQL's row), fused and hydrated on the leader connection. Raises Fallback where the one
    call must be made instead."""
    plan = Plan.of(q)
    p = params(q)
    conns = await _acquire(pool, len(plan.first), wait)
    try:
        if len(conns) < 2:
            raise Fallback("fewer than two pooled connections free")
        _check(await asyncio.gather(*(_import(c, leader) for c in conns), return_exceptions=True))

        async def run(conn: psycopg.AsyncConnection[Any], branches: list[str]) -> None:
            for b in branches:
                cur = await conn.execute(_BRANCH_SQL[b], p)
                rows = await cur.fetchall()
                p[f"{_KEYS[b]}_ids"] = [r["chunk_id"] for r in rows]
                p[f"{_KEYS[b]}_vals"] = [r["value"] for r in rows]

        # the branches round-robin over the connections; a dependent graph branch after dense and lexical
        share = [plan.first[i::len(conns)] for i in range(len(conns))]
        _check(await asyncio.gather(*(run(c, s) for c, s in zip(conns, share)), return_exceptions=True))
        if plan.graph_after:
            _check(await asyncio.gather(run(conns[0], ["graph"]), return_exceptions=True))
    except BaseException:
        await asyncio.gather(*(_release(pool, c) for c in conns), return_exceptions=True)
        raise
    # the workers' transactions end while the leader fuses and hydrates
    releases = asyncio.gather(*(_release(pool, c) for c in conns), return_exceptions=True)
    try:
        cur = await leader_conn.execute(FUSE_HYDRATE_SQL, p)
        return await cur.fetchall()
    finally:
        await releases


def _check(results: Sequence[Any]) -> None:
    """Raise the first error that ends hybrid.retrieve too (or that is no database error); Fallback for any other."""
    errors = [r for r in results if isinstance(r, BaseException)]
    for e in errors:
        if isinstance(e, psycopg.Error) and e.sqlstate and (e.sqlstate[:2] in FATAL or e.sqlstate == "55P03"):
            raise e
    for e in errors:
        if not isinstance(e, (psycopg.Error, Fallback)):
            raise e
    if errors:
        raise Fallback(f"a branch failed: {errors[0]}") from errors[0]

"""Parallel retrieval for the async client: hybrid_retrieve's branches on pooled connections sharing one snapshot."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, Sequence

import psycopg
from psycopg import sql
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from .query import PARAMETERS, RetrieveQuery
from .types import BRANCHES, Branch

LISTS = tuple(b for b in BRANCHES if b.stage == "list")
"""The branches searched from the query and fused (hybrid.branch's list stage), in their order."""


def branch_sql(b: Branch) -> str:
    """One list branch's hits as hybrid.retrieve takes them: its search function, cut at its floor."""
    extra = "".join(f", {e} => %({e})s::{PARAMETERS[e]}" for e in b.extra)
    return (f"SELECT s.chunk_id, s.value FROM {b.search}(%({b.query_param})s::{PARAMETERS[b.query_param]}, "
            f"%(k)s::integer, %(corpus_ids)s::text[], %(filter)s::jsonb{extra}) s "
            f"WHERE (%({b.floor_param})s::float8 IS NULL OR hybrid._branch_score('{b.name}', s.value) >= "
            f"%({b.floor_param})s::float8) ORDER BY s.rank")


def fuse_hydrate_sql(names: Sequence[str]) -> str:
    """Fusion (hybrid.fuse, hybrid.retrieve's arithmetic) and hydration (hybrid.hydrate) of the lists of the branches
    that ran, in one statement. The lexical list weighs its weight x its strength, as in hybrid.retrieve (term_coverage)."""
    def weight(n: str) -> str:
        w = f"%(w_{n})s::float8"
        if n == "lexical":
            w += (f" * CASE WHEN %(term_coverage)s::integer > 1 AND cardinality(%(ids_{n})s::text[]) > 0 "
                  f"THEN hybrid.lexical_strength(%(query_text)s::text, %(ids_{n})s::text[], %(term_coverage)s::integer) "
                  f"ELSE 1 END")
        return w

    scores = ", ".join(f"(SELECT coalesce(jsonb_agg(hybrid._fusion_score(%(fusion)s::text, '{n}', u.v) ORDER BY u.o), "
                       f"'[]') FROM unnest(%(vals_{n})s::float8[]) WITH ORDINALITY u(v, o))" for n in names)
    return ("WITH f AS (SELECT array_agg(x.id) AS ids, array_agg(x.score) AS scores FROM hybrid.fuse("
            "jsonb_build_array(" + ", ".join(f"to_jsonb(%(ids_{n})s::text[])" for n in names) + "), "
            "ARRAY[" + ", ".join(weight(n) for n in names) + "]::float8[], %(fusion)s::text, %(rrf_k)s::float8, NULL, "
            "CASE WHEN %(fusion)s::text <> 'rrf' THEN jsonb_build_array(" + scores + ") END) x) "
            "SELECT h.* FROM f, hybrid.hydrate(f.ids, f.scores, jsonb_build_object("
            + ", ".join(f"'{n}', jsonb_build_object('ids', to_jsonb(%(ids_{n})s::text[]), "
                        f"'values', to_jsonb(%(vals_{n})s::float8[]))" for n in names)
            + "), top_k => %(top_k)s::integer, skip => %(skip)s::integer, per_document => %(per_document)s::boolean, "
            "siblings => %(siblings)s::integer, with_graph_context => %(with_graph_context)s::boolean) h")


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
    """Which list branches a query runs at once, as hybrid.retrieve decides: those whose query is given and whose
    weight is above 0. A call with the graph branch (whose hits score from their seeds' fused scores, graph_decay)
    or with abstain (hybrid.retrieve's decision and notice) is left to the one call."""

    first: list[str] = field(default_factory=list)
    graph: bool = False
    abstain: bool = False

    @classmethod
    def of(cls, q: RetrieveQuery) -> Plan:
        def asked(b: Branch) -> bool:
            value = getattr(q, b.query_param)
            return value is not None and (not isinstance(value, str) or value.strip() != "")

        return cls(first=[b.name for b in LISTS if asked(b) and getattr(q, b.weight_param) > 0],
                   graph=q.graph_weight > 0 and (bool(q.graph_seeds) or q.graph_expand > 0), abstain=q.abstain)

    @property
    def worth_it(self) -> bool:
        """At least two branches can run at once (else the one call does the same in fewer round trips), and no
        graph branch or abstention."""
        return len(self.first) >= 2 and not self.graph and not self.abstain


def params(q: RetrieveQuery, plan: Plan) -> dict[str, Any]:
    """The query's parameters plus each branch's depth k, as hybrid.retrieve computes it, and its weight."""
    p = q.params()
    p["k"] = q.per_source_k if q.per_source_k is not None else min(10000, max((q.skip + q.top_k) * 3, 30))
    for b in LISTS:
        p[f"ids_{b.name}"], p[f"vals_{b.name}"] = [], []
        p[f"w_{b.name}"] = getattr(q, b.weight_param)
    return p


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
    p = params(q, plan)
    conns = await _acquire(pool, len(plan.first), wait)
    try:
        if len(conns) < 2:
            raise Fallback("fewer than two pooled connections free")
        _check(await asyncio.gather(*(_import(c, leader) for c in conns), return_exceptions=True))

        async def run(conn: psycopg.AsyncConnection[Any], branches: list[str]) -> None:
            for name in branches:
                cur = await conn.execute(branch_sql(next(b for b in LISTS if b.name == name)), p)
                rows = await cur.fetchall()
                p[f"ids_{name}"] = [r["chunk_id"] for r in rows]
                p[f"vals_{name}"] = [r["value"] for r in rows]

        # the branches round-robin over the connections
        share = [plan.first[i::len(conns)] for i in range(len(conns))]
        _check(await asyncio.gather(*(run(c, s) for c, s in zip(conns, share)), return_exceptions=True))
    except BaseException:
        await asyncio.gather(*(_release(pool, c) for c in conns), return_exceptions=True)
        raise
    # the workers' transactions end while the leader fuses and hydrates
    releases = asyncio.gather(*(_release(pool, c) for c in conns), return_exceptions=True)
    try:
        cur = await leader_conn.execute(fuse_hydrate_sql(plan.first), p)
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

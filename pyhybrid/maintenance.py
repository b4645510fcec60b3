"""Server maintenance: find the BM25 indexes a restart left stale and rebuild them."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Callable

import psycopg
from psycopg import conninfo

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


def heal_bm25(dsn: str) -> list[HealAction]:
    """Rebuild every stale BM25 index of the database at dsn (as its owner); returns what was done."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        if not _has_function(conn, "hybrid.heal_bm25()"):
            return []
        rows = conn.execute("SELECT index_name, action, reason FROM hybrid.heal_bm25()").fetchall()
    return [HealAction(*row) for row in rows]


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

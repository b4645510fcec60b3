"""Apply the SQL in sql/ through Alembic: upgrade, downgrade and what the server offers."""

from __future__ import annotations

import contextlib
import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

from ._paths import migrations_dir, sql_dir
from .errors import ExtensionMissingError, InvalidParameterError, SchemaError
from .server import resolve_dsn, sqlalchemy_url

OPTIONAL_EXTENSIONS = {
    "age": "graph retrieval (the graph branch and add_edges)",
    "pg_textsearch": "BM25 ranking (without it the lexical branch uses ts_rank)",
}


@dataclass(frozen=True)
class ExtensionReport:
    """Which extensions the server can install and which pyhybrid features that enables."""

    available: dict[str, str]
    missing_optional: dict[str, str]


def check_extensions(conn: psycopg.Connection[Any]) -> ExtensionReport:
    """Raise ExtensionMissingError without pgvector; report the optional extensions missing."""
    rows = conn.execute(
        "SELECT name, default_version FROM pg_available_extensions WHERE name = ANY(%s)",
        (["vector", *OPTIONAL_EXTENSIONS],),
    ).fetchall()
    available = {str(n): str(v) for n, v in rows}
    if "vector" not in available:
        raise ExtensionMissingError(
            "extension 'vector' (pgvector) is not available on this server; pyhybrid needs it "
            "for embeddings. Install pgvector (https://github.com/pgvector/pgvector) or use the "
            "embedded server (unset PYHYBRID_DSN)."
        )
    missing = {n: d for n, d in OPTIONAL_EXTENSIONS.items() if n not in available}
    return ExtensionReport(available=available, missing_optional=missing)


def apply_sql_file(cursor: Any, path: Path) -> None:
    """Run one SQL file as a single multi-statement string (no parameters)."""
    cursor.execute(path.read_text(encoding="utf-8"))


def idempotent_files() -> list[Path]:
    """sql/idempotent/*.sql in the order they run."""
    return sorted(sql_dir().joinpath("idempotent").glob("*.sql"))


def sql_digest() -> str:
    """A digest of sql/idempotent/ and sql/optional/: when it changes, finish_upgrade re-applies them."""
    h = hashlib.sha256()
    for path in [*idempotent_files(), *sorted(sql_dir().joinpath("optional").glob("*.sql"))]:
        h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def _textsearch_choice(cur: Any, pg_textsearch: bool | None) -> bool:
    """Record pg_textsearch=False (setting pg_textsearch 'off': no BM25 index, though the server offers it) or
    True (forget it); None keeps the recorded choice. Returns whether the BM25 index may be installed."""
    if pg_textsearch is False:
        cur.execute("SELECT to_regclass('hybrid.chunk_content_bm25') IS NOT NULL")
        if cur.fetchone()[0]:
            raise SchemaError("--no-pg-textsearch: this install has its BM25 index already, and the choice applies "
                              "to a fresh install (pyhybrid migrate --downgrade base, then migrate --no-pg-textsearch)")
        cur.execute("INSERT INTO hybrid.setting (key, value) VALUES ('pg_textsearch', 'off') "
                    "ON CONFLICT (key) DO UPDATE SET value = excluded.value")
    elif pg_textsearch is True:
        cur.execute("DELETE FROM hybrid.setting WHERE key = 'pg_textsearch'")
    cur.execute("SELECT value FROM hybrid.setting WHERE key = 'pg_textsearch'")
    row = cur.fetchone()
    return row is None or row[0] != "off"


def _optional_parts(cur: Any, pg_textsearch: bool | None = None) -> list[str]:
    """Install the optional parts whose extension the server now offers and that are missing (not the BM25
    index where the install chose to go without it: _textsearch_choice)."""
    cur.execute("SELECT name FROM pg_available_extensions WHERE name IN ('age', 'pg_textsearch')")
    available = {r[0] for r in cur.fetchall()}
    added = []
    if "pg_textsearch" in available and _textsearch_choice(cur, pg_textsearch):
        # not while a bulk load holds it off (hybrid.suspend_text_indexes): hybrid.resume_text_indexes builds it
        cur.execute("SELECT to_regclass('hybrid.chunk_content_bm25') IS NULL AND NOT EXISTS "
                    "(SELECT 1 FROM hybrid.setting WHERE key = 'text_indexes_suspended')")
        if cur.fetchone()[0]:
            apply_sql_file(cur, sql_dir() / "optional" / "bm25_index.sql")
            added.append("bm25")
    if "age" in available:
        cur.execute("SELECT to_regclass('hybrid.graph_node') IS NULL")
        if cur.fetchone()[0]:
            apply_sql_file(cur, sql_dir() / "optional" / "age_graph.sql")
            added.append("age")
    return added


def finish_upgrade(dbapi_conn: Any, *, force: bool = False, pg_textsearch: bool | None = None) -> list[str]:
    """The end of every upgrade, in its transaction: install optional parts the server now offers, then
    re-apply sql/idempotent/ if anything was installed, its digest changed, or force. Returns what it did."""
    from . import __version__

    cur = dbapi_conn.cursor()
    cur.execute("SELECT to_regclass('hybrid.setting') IS NOT NULL")
    if not cur.fetchone()[0]:  # downgraded to base
        return []
    done = [f"installed {part}" for part in _optional_parts(cur, pg_textsearch)]
    digest = sql_digest()
    cur.execute("SELECT value FROM hybrid.setting WHERE key = 'sql_digest'")
    row = cur.fetchone()
    if force or done or row is None or row[0] != digest:
        for path in idempotent_files():
            apply_sql_file(cur, path)
        cur.execute(
            "INSERT INTO hybrid.setting (key, value) VALUES ('sql_digest', %s), ('version', %s) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value", (digest, __version__))
        done.append("re-applied sql/idempotent")
    else:  # a release whose SQL did not change still names itself in hybrid.version()
        cur.execute("INSERT INTO hybrid.setting (key, value) VALUES ('version', %s) "
                    "ON CONFLICT (key) DO UPDATE SET value = excluded.value "
                    "WHERE hybrid.setting.value IS DISTINCT FROM excluded.value", (__version__,))
    return done


_REVISION = re.compile(r'^(down_revision|revision)\s*=\s*(?:"([^"]*)"|None)', re.M)


def head_revision() -> str:
    """The Alembic head of this package's migrations, read from the revision files (without loading Alembic)."""
    revisions: set[str] = set()
    parents: set[str] = set()
    for path in migrations_dir().joinpath("versions").glob("*.py"):
        for key, value in _REVISION.findall(path.read_text(encoding="utf-8")):
            if value:
                (revisions if key == "revision" else parents).add(value)
    heads = sorted(revisions - parents)
    if len(heads) != 1:
        raise SchemaError(f"the package's migrations have {len(heads)} heads ({heads}), expected one")
    return heads[0]


_STATE_SQL = """SELECT (SELECT string_agg(version_num, ',') FROM public.alembic_version) AS revision,
       (SELECT value FROM hybrid.setting WHERE key = 'sql_digest') AS digest,
       %s::text IS NULL OR EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = %s) AS role"""


def is_current(conn: psycopg.Connection[Any], role: str | None = None) -> bool:
    """Whether the database's schema is this package's: its Alembic revision and sql_digest, and role exists
    if given (one statement; False when the schema or the version table is missing). On a connection that
    is not in autocommit, the statement runs in a savepoint, so that a failure leaves the transaction usable."""
    try:
        with contextlib.nullcontext() if conn.autocommit else conn.transaction():
            row = conn.execute(_STATE_SQL, (role, role)).fetchone()
    except (psycopg.errors.UndefinedTable, psycopg.errors.InvalidSchemaName):
        return False
    return row is not None and row[0] == head_revision() and row[1] == sql_digest() and bool(row[2])


MAX_DIM = 16000
DIM_RULE = ("between 1 and 16000 (pgvector's vector limit; the HNSW index holds the vectors up to 2,000 "
            "dimensions, halfvec up to 4,000, binary codes re-ranked by exact cosine above)")


def check_dim(dim: int | None, name: str = "dim") -> None:
    """Raise InvalidParameterError unless dim is None or an embedding dimension pyhybrid can install."""
    if dim is not None and (isinstance(dim, bool) or not isinstance(dim, int) or not 1 <= dim <= MAX_DIM):
        raise InvalidParameterError(f"{name} must be {DIM_RULE}, got {dim!r}")


def _alembic_config(url: str, dim: int | None, reapply: bool = False, pg_textsearch: bool | None = None) -> Any:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(migrations_dir()))
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    # revision 0001 installs up to 2,000 dimensions; wider, revision 0011 widens the fresh install's column
    cfg.attributes["embedding_dim"] = dim if dim is None or dim <= 2000 else None
    cfg.attributes["wide_embedding_dim"] = dim if dim is not None and dim > 2000 else None
    cfg.attributes["reapply_idempotent"] = reapply
    cfg.attributes["pg_textsearch"] = pg_textsearch
    return cfg


def upgrade(dsn: str | None = None, *, revision: str = "head", dim: int | None = None,
            reapply: bool = False, pg_textsearch: bool | None = None) -> None:
    """Alembic upgrade to revision (default head), in one transaction. dim: embedding dimension for a
    fresh install.

    Every upgrade ends with finish_upgrade: optional parts the server now offers are installed, and
    sql/idempotent/ (functions, policies, grants) is re-applied when it changed since the last upgrade,
    or always with reapply=True (after an extension update, for example). Re-applying briefly locks
    the tables, so it is never done when nothing changed.

    dim is between 1 and 16,000 (MAX_DIM): up to 2,000 the HNSW index holds the vectors, up to 4,000
    halfvec copies of them, above that binary codes whose candidates are re-ranked by exact cosine.

    pg_textsearch=False installs no BM25 index even where the server offers pg_textsearch (the lexical branch
    ranks by ts_rank, as on a server without it), and later upgrades keep that; True installs it again; None
    (default) keeps the install's choice. Refused (SchemaError) on an install that has the index already.
    """
    check_dim(dim)
    from alembic import command

    target = resolve_dsn(dsn)
    _drop_unpartitioned_bm25(target)
    cfg = _alembic_config(sqlalchemy_url(target), dim, reapply, pg_textsearch)
    cfg.attributes["upgrading"] = True  # migrations/env.py: revisions ran up, so sql/idempotent/ is re-applied
    command.upgrade(cfg, revision)


# objects outside hybrid.chunk that depend on it or its row type (views, policies and foreign keys of
# other tables, functions with SQL-standard bodies, columns of its type): revision 0004 renames the
# table they follow and drops it, which they would block
_CHUNK_DEPENDENTS_SQL = """
SELECT DISTINCT CASE WHEN d.classid = 'pg_rewrite'::regclass  -- a view's rule: name the view
           THEN pg_describe_object('pg_class'::regclass, (SELECT r.ev_class FROM pg_rewrite r WHERE r.oid = d.objid), 0)
           ELSE pg_describe_object(d.classid, d.objid, d.objsubid) END
FROM pg_depend d
WHERE d.refclassid IN ('pg_class'::regclass, 'pg_type'::regclass)
  AND d.refobjid IN ('hybrid.chunk'::regclass, (SELECT c.reltype FROM pg_class c WHERE c.oid = 'hybrid.chunk'::regclass))
  AND d.deptype = 'n'
  AND CASE d.classid
      WHEN 'pg_rewrite'::regclass THEN (SELECT r.ev_class FROM pg_rewrite r WHERE r.oid = d.objid) <> 'hybrid.chunk'::regclass
      WHEN 'pg_policy'::regclass THEN (SELECT p.polrelid FROM pg_policy p WHERE p.oid = d.objid) <> 'hybrid.chunk'::regclass
      WHEN 'pg_constraint'::regclass THEN (SELECT k.conrelid FROM pg_constraint k WHERE k.oid = d.objid) <> 'hybrid.chunk'::regclass
      WHEN 'pg_proc'::regclass THEN true
      WHEN 'pg_class'::regclass THEN d.objid <> 'hybrid.chunk'::regclass AND d.objsubid > 0
      ELSE false END
ORDER BY 1"""


def _drop_unpartitioned_bm25(dsn: str) -> None:
    """Before the upgrade that partitions hybrid.chunk (revision 0004): drop the BM25 index of the
    unpartitioned table in a transaction of its own.

    pg_textsearch 1.0 frees a dropped index's shared state at once. Dropped in the upgrade's
    transaction, an index that had served queries left that state corrupt for the new partitions'
    indexes built after it (the next BM25 query hung on a spinlock and took the server down: measured
    on an upgrade from 0.1.0 with data), and a rollback after the drop would crash every backend that
    had used it (timescale/pg_textsearch#506). Committed on its own, neither can happen. Until the
    upgrade re-creates the index, the lexical branch ranks by ts_rank; if the upgrade fails, the
    next `pyhybrid migrate` re-creates it.
    """
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute("SELECT c.relkind FROM pg_class c WHERE c.oid = to_regclass('hybrid.chunk')").fetchone()
        if row is None or row[0] != "r":
            return  # no schema yet, or already partitioned
        blockers = [r[0] for r in conn.execute(_CHUNK_DEPENDENTS_SQL).fetchall()]
        if blockers:  # refused before anything is dropped: the upgrade would fail at its end
            raise SchemaError(
                "the upgrade to per-tenant partitions (revision 0004) replaces the table hybrid.chunk, and these "
                f"objects depend on it: {'; '.join(blockers)}. Drop them, run pyhybrid migrate, then re-create "
                "them (reading hybrid.chunk with tenant_key = <the tenant's key> keeps a query on one partition)")
        if conn.execute("SELECT to_regclass('hybrid.chunk_content_bm25') IS NOT NULL").fetchone() == (True,):
            conn.execute("SET lock_timeout = '30s'")
            conn.execute("DROP INDEX hybrid.chunk_content_bm25")


def downgrade(dsn: str | None = None, *, revision: str = "base") -> None:
    """Alembic downgrade to revision (default base: removes the hybrid schema and graph)."""
    from alembic import command

    target = resolve_dsn(dsn)
    command.downgrade(_alembic_config(sqlalchemy_url(target), None), revision)

"""Base schema: tables and RLS (functions, policies, grants and optional parts come from finish_upgrade).

Revision ID: 0001
Revises:
Create Date: 2026-11-30
"""

from __future__ import annotations

from alembic import context, op

from pyhybrid._paths import sql_dir

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def _cursor():  # type: ignore[no-untyped-def]
    return op.get_bind().connection.dbapi_connection.cursor()


def _run(cur, *parts: str) -> None:  # type: ignore[no-untyped-def]
    cur.execute(sql_dir().joinpath(*parts).read_text(encoding="utf-8"))


def _available(cur, name: str) -> bool:  # type: ignore[no-untyped-def]
    cur.execute("SELECT 1 FROM pg_available_extensions WHERE name = %s", (name,))
    return cur.fetchone() is not None


def upgrade() -> None:
    cur = _cursor()
    if not _available(cur, "vector"):
        raise RuntimeError("extension 'vector' (pgvector) is not available on this server; pyhybrid needs it")
    dim = context.config.attributes.get("embedding_dim") or 384
    cur.execute("SELECT set_config('hybrid.install_dim', %s, true)", (str(int(dim)),))
    _run(cur, "incremental", "0001_schema.sql")
    # the optional parts (BM25 index, AGE graph) and sql/idempotent/ follow at the end of the
    # upgrade: pyhybrid.migrate.finish_upgrade, called by migrations/env.py


def downgrade() -> None:
    cur = _cursor()
    cur.execute(
        "SELECT 1 FROM pg_extension e JOIN pg_namespace n ON n.nspname = 'ag_catalog' "
        "WHERE e.extname = 'age'"
    )
    if cur.fetchone() is not None:
        cur.execute("SELECT 1 FROM ag_catalog.ag_graph WHERE name = 'hybrid_graph'")
        if cur.fetchone() is not None:
            cur.execute("SELECT ag_catalog.drop_graph('hybrid_graph', true)")
    cur.execute("DROP FUNCTION IF EXISTS public.hybrid_retrieve")
    cur.execute("DROP SCHEMA IF EXISTS hybrid CASCADE")

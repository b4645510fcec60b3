"""The pool's HNSW graphs at pgvector's lightest (m 2, ef_construction 4): no pooled tenant is searched through them,
and at the default density every pooled insert paid for a graph search.

Revision ID: 0024
Revises: 0023
Create Date: 2026-12-07
"""

from __future__ import annotations

from alembic import op

from pyhybrid._paths import sql_dir

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None


def upgrade() -> None:
    cur = op.get_bind().connection.dbapi_connection.cursor()
    cur.execute(sql_dir().joinpath("incremental", "0024_pool_light_graphs.sql").read_text(encoding="utf-8"))


def downgrade() -> None:
    # the leaves' options back to hybrid.chunk's (a graph built light keeps its m until the pool's index is rebuilt);
    # hybrid._pool_graph_options goes, and the older hybrid._build_partition_hnsw no longer calls it
    cur = op.get_bind().connection.dbapi_connection.cursor()
    cur.execute("""
        DO $$
        DECLARE
            r record;
        BEGIN
            FOR r IN SELECT x.indexrelid::regclass AS idx
                     FROM pg_inherits h JOIN pg_index x ON x.indrelid = h.inhrelid
                     JOIN pg_class c ON c.oid = x.indexrelid JOIN pg_am a ON a.oid = c.relam
                     WHERE h.inhparent = 'hybrid.chunk_pool'::regclass AND a.amname = 'hnsw' LOOP
                EXECUTE format('ALTER INDEX %s RESET (m, ef_construction)', r.idx);
            END LOOP;
        END
        $$;
        DROP FUNCTION IF EXISTS hybrid._pool_graph_options();
    """)

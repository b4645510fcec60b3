"""The chunk's tsvector kept in its row (STORAGE MAIN, each leaf's toast_tuple_target 4000) where the vector leaves
room: the SQL BM25 scorer, ts_rank and term coverage read it without a TOAST probe.

Revision ID: 0026
Revises: 0025
Create Date: 2026-12-07
"""

from __future__ import annotations

from alembic import op

from pyhybrid._paths import sql_dir

revision = "0026"
down_revision = "0025"
branch_labels = None
depends_on = None


def upgrade() -> None:
    cur = op.get_bind().connection.dbapi_connection.cursor()
    cur.execute(sql_dir().joinpath("incremental", "0026_tsv_inline.sql").read_text(encoding="utf-8"))


def downgrade() -> None:
    # revision 0016's EXTERNAL and PostgreSQL's default target again (rows keep the layout they were written with)
    cur = op.get_bind().connection.dbapi_connection.cursor()
    cur.execute("""
        DO $$
        DECLARE
            r record;
        BEGIN
            ALTER TABLE hybrid.chunk ALTER COLUMN tsv SET STORAGE EXTERNAL;
            FOR r IN SELECT t.relid FROM pg_partition_tree('hybrid.chunk') t WHERE t.isleaf ORDER BY 1 LOOP
                EXECUTE format('ALTER TABLE %s RESET (toast_tuple_target)', r.relid::regclass);
            END LOOP;
        END
        $$;
    """)

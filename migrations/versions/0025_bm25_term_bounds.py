"""A bound on each lexeme's BM25 term score (hybrid.bm25_term_stats.max_tf, min_dl_tf), kept by the statistics'
triggers: the SQL scorer prunes by what a term can add, not by k1 + 1.

Revision ID: 0025
Revises: 0024
Create Date: 2026-12-07
"""

from __future__ import annotations

from alembic import op

from pyhybrid._paths import sql_dir

revision = "0025"
down_revision = "0024"
branch_labels = None
depends_on = None


def upgrade() -> None:
    cur = op.get_bind().connection.dbapi_connection.cursor()
    cur.execute(sql_dir().joinpath("incremental", "0025_bm25_term_bounds.sql").read_text(encoding="utf-8"))


def downgrade() -> None:
    # hybrid._bm25_counted's older row type: the older release's sql/idempotent/ re-creates it and the functions
    # that read or write the two columns
    cur = op.get_bind().connection.dbapi_connection.cursor()
    cur.execute("""
        DROP FUNCTION IF EXISTS hybrid._bm25_counted(integer, regclass);
        ALTER TABLE hybrid.bm25_term_stats DROP COLUMN IF EXISTS max_tf, DROP COLUMN IF EXISTS min_dl_tf;
    """)

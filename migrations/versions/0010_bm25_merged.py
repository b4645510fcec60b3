"""BM25 indexes known to have one segment, whose index scan scores the lexical branch trusts.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-02
"""

from __future__ import annotations

from alembic import op

from pyhybrid._paths import sql_dir

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    cur = op.get_bind().connection.dbapi_connection.cursor()
    cur.execute(sql_dir().joinpath("incremental", "0010_bm25_merged.sql").read_text(encoding="utf-8"))


def downgrade() -> None:
    # the older release's sql/idempotent/ re-creates hybrid._bm25_summary with its old columns
    cur = op.get_bind().connection.dbapi_connection.cursor()
    cur.execute("DROP TABLE hybrid.bm25_merged; DROP FUNCTION IF EXISTS hybrid._bm25_summary(regclass)")

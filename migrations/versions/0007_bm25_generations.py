"""BM25 healing per index: which indexes were checked since the last shared-memory reset.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01
"""

from __future__ import annotations

from alembic import op

from pyhybrid._paths import sql_dir

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    cur = op.get_bind().connection.dbapi_connection.cursor()
    cur.execute(sql_dir().joinpath("incremental", "0007_bm25_generations.sql").read_text(encoding="utf-8"))


def downgrade() -> None:
    cur = op.get_bind().connection.dbapi_connection.cursor()
    cur.execute("DROP TABLE hybrid.bm25_index_checked, hybrid.bm25_generation")

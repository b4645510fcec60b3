"""The chunk's tsvector stored without a compression attempt (STORAGE EXTERNAL).

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-05
"""

from __future__ import annotations

from alembic import op

from pyhybrid._paths import sql_dir

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    cur = op.get_bind().connection.dbapi_connection.cursor()
    cur.execute(sql_dir().joinpath("incremental", "0016_tsv_uncompressed.sql").read_text(encoding="utf-8"))


def downgrade() -> None:
    cur = op.get_bind().connection.dbapi_connection.cursor()
    cur.execute("ALTER TABLE hybrid.chunk ALTER COLUMN tsv SET STORAGE EXTENDED")

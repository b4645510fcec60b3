"""Embeddings stored in the row (STORAGE MAIN): exact scans no longer read each vector from TOAST.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01
"""

from __future__ import annotations

from alembic import op

from pyhybrid._paths import sql_dir

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    cur = op.get_bind().connection.dbapi_connection.cursor()
    cur.execute(sql_dir().joinpath("incremental", "0006_inline_embeddings.sql").read_text(encoding="utf-8"))


def downgrade() -> None:
    # pgvector's default for the type; rows keep the layout they were written with
    cur = op.get_bind().connection.dbapi_connection.cursor()
    cur.execute("ALTER TABLE hybrid.chunk ALTER COLUMN embedding SET STORAGE EXTERNAL")

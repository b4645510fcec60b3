"""One content hash: hybrid.content_hash, computed in SQL over text and metadata; stored hashes recomputed.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30
"""

from __future__ import annotations

from alembic import op

from pyhybrid._paths import sql_dir

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    cur = op.get_bind().connection.dbapi_connection.cursor()
    cur.execute(sql_dir().joinpath("incremental", "0003_content_hash.sql").read_text(encoding="utf-8"))


def downgrade() -> None:
    # the stored hashes stay as they are: 0.1 read them as opaque strings (a re-ingest rewrites each once)
    cur = op.get_bind().connection.dbapi_connection.cursor()
    cur.execute("DROP FUNCTION IF EXISTS hybrid.content_hash(text, integer, text, text[], jsonb, text) CASCADE")

"""The dense audit's sample by row: an index of the live chunks in hashtext(chunk_id) order, per partition.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-04
"""

from __future__ import annotations

from alembic import op

from pyhybrid._paths import sql_dir

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    cur = op.get_bind().connection.dbapi_connection.cursor()
    cur.execute(sql_dir().joinpath("incremental", "0014_audit_sample.sql").read_text(encoding="utf-8"))


def downgrade() -> None:
    # 0013's search_dense (the older release's sql/idempotent/) samples with TABLESAMPLE SYSTEM
    cur = op.get_bind().connection.dbapi_connection.cursor()
    cur.execute("DROP INDEX IF EXISTS hybrid.chunk_audit_sample_idx")

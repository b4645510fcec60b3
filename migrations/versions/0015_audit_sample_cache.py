"""The dense audit's sample, cached: the sampled chunks' ids and vectors together, per partition.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-04
"""

from __future__ import annotations

from alembic import op

from pyhybrid._paths import sql_dir

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    cur = op.get_bind().connection.dbapi_connection.cursor()
    cur.execute(sql_dir().joinpath("incremental", "0015_audit_sample_cache.sql").read_text(encoding="utf-8"))


def downgrade() -> None:
    # the older release's search_dense reads the sample from the partition
    cur = op.get_bind().connection.dbapi_connection.cursor()
    cur.execute("DROP TABLE IF EXISTS hybrid.chunk_audit_sample_state, hybrid.chunk_audit_sample")

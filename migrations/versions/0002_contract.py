"""One contract: row types for branch hits and retrieve rows; functions with changed signatures dropped.

sql/idempotent/ re-creates them at the end of the upgrade (pyhybrid.migrate.finish_upgrade).

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30
"""

from __future__ import annotations

from alembic import op

from pyhybrid._paths import sql_dir

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    cur = op.get_bind().connection.dbapi_connection.cursor()
    cur.execute(sql_dir().joinpath("incremental", "0002_contract.sql").read_text(encoding="utf-8"))


def downgrade() -> None:
    # the 0.2 functions go with the types they return; 0.1's come back only with a 0.1 install
    cur = op.get_bind().connection.dbapi_connection.cursor()
    cur.execute("DROP TYPE IF EXISTS hybrid.retrieve_row, hybrid.branch_hit CASCADE")
    cur.execute("DELETE FROM hybrid.setting WHERE key = 'sql_digest'")

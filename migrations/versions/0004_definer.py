"""Graph writes behind a definer: the role hybrid_definer (sql/idempotent/ gives it finish_edges and its grants).

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30
"""

from __future__ import annotations

from alembic import op

from pyhybrid._paths import sql_dir

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    cur = op.get_bind().connection.dbapi_connection.cursor()
    cur.execute(sql_dir().joinpath("incremental", "0004_definer.sql").read_text(encoding="utf-8"))


def downgrade() -> None:
    # the role is cluster-wide and other databases may use it: it stays; its functions go with the schema
    cur = op.get_bind().connection.dbapi_connection.cursor()
    cur.execute("ALTER FUNCTION hybrid.finish_edges() OWNER TO CURRENT_USER")

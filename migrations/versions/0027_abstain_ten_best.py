"""Abstention by the dense branch's ten best hits: stored floors rescaled by 0.60 / 0.73, hybrid._abstains takes the
ten similarities.

Revision ID: 0027
Revises: 0026
Create Date: 2026-12-07
"""

from __future__ import annotations

from alembic import op

from pyhybrid._paths import sql_dir

revision = "0027"
down_revision = "0026"
branch_labels = None
depends_on = None


def upgrade() -> None:
    cur = op.get_bind().connection.dbapi_connection.cursor()
    cur.execute(sql_dir().joinpath("incremental", "0027_abstain_ten_best.sql").read_text(encoding="utf-8"))


def downgrade() -> None:
    # the best hit's floors again; the older release's sql/idempotent/ re-creates its hybrid._abstains
    cur = op.get_bind().connection.dbapi_connection.cursor()
    cur.execute("""
        UPDATE hybrid.tenant SET abstain_floor = abstain_floor * 0.73 / 0.60 WHERE abstain_floor IS NOT NULL;
        DROP FUNCTION IF EXISTS hybrid._abstains(text, double precision[], boolean, boolean);
    """)

"""term_coverage and abstain in hybrid_retrieve: a weak lexical list weighs less; no rows below the tenant's floor.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-02
"""

from __future__ import annotations

from alembic import op

from pyhybrid._paths import sql_dir

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

_NEW = ("vector, text, text[], text[], integer, integer, double precision, double precision, double precision, "
        "double precision, jsonb, integer, text, integer, boolean, boolean, text, integer, integer, text[], "
        "double precision, double precision, double precision, double precision, integer, boolean")


def upgrade() -> None:
    cur = op.get_bind().connection.dbapi_connection.cursor()
    cur.execute(sql_dir().joinpath("incremental", "0013_term_coverage.sql").read_text(encoding="utf-8"))


def downgrade() -> None:
    # back to 0012's signatures: the older release's sql/idempotent/ re-creates the functions
    cur = op.get_bind().connection.dbapi_connection.cursor()
    many = _NEW.replace("vector, text, ", "vector[], text[], ", 1)
    cur.execute(f"""
        DROP FUNCTION IF EXISTS public.hybrid_retrieve({_NEW});
        DROP FUNCTION IF EXISTS hybrid.explain_retrieve({_NEW});
        DROP FUNCTION IF EXISTS hybrid.retrieve_many({many});
        DROP FUNCTION IF EXISTS hybrid.retrieve({_NEW});
        DROP FUNCTION IF EXISTS hybrid.calibrate_abstention(double precision, integer);
        DROP FUNCTION IF EXISTS hybrid.documents(text, text, text[]);
        DROP POLICY IF EXISTS tenant_floor ON hybrid.tenant;
        ALTER TABLE hybrid.tenant DROP COLUMN IF EXISTS abstain_floor;
    """)

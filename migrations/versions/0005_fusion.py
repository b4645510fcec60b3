"""Fusion methods (rrf, convex, dbsf), skip, siblings and graph_edge_types in hybrid_retrieve; no
foreign key from hybrid.chunk to hybrid.corpus (its cascade locked every partition).

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01
"""

from __future__ import annotations

from alembic import op

from pyhybrid._paths import sql_dir

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    cur = op.get_bind().connection.dbapi_connection.cursor()
    cur.execute(sql_dir().joinpath("incremental", "0005_fusion.sql").read_text(encoding="utf-8"))


def downgrade() -> None:
    # back to 0004's signatures: the older release's sql/idempotent/ re-creates the functions
    cur = op.get_bind().connection.dbapi_connection.cursor()
    cur.execute("""
        DROP FUNCTION IF EXISTS public.hybrid_retrieve(vector, text, text[], text[], integer, integer, double precision,
            double precision, double precision, double precision, jsonb, integer, text, integer, boolean, boolean,
            text, integer, integer, text[]);
        DROP FUNCTION IF EXISTS hybrid.retrieve(vector, text, text[], text[], integer, integer, double precision,
            double precision, double precision, double precision, jsonb, integer, text, integer, boolean, boolean,
            text, integer, integer, text[]);
        DROP FUNCTION IF EXISTS hybrid.search_graph(text[], integer, integer, text[], jsonb, text[]);
        DROP FUNCTION IF EXISTS hybrid.retrieve_many(vector[], text[], text[], text[], integer, integer, double precision,
            double precision, double precision, double precision, jsonb, integer, text, integer, boolean, boolean,
            text, integer, integer, text[]);
        DROP FUNCTION IF EXISTS hybrid.explain_retrieve(vector, text, text[], text[], integer, integer, double precision,
            double precision, double precision, double precision, jsonb, integer, text, integer, boolean, boolean,
            text, integer, integer, text[]);
        DROP FUNCTION IF EXISTS hybrid.fuse(jsonb, double precision[], text, double precision, integer, jsonb);
        ALTER TYPE hybrid.retrieve_row DROP ATTRIBUTE siblings;
        ALTER TABLE hybrid.chunk ADD FOREIGN KEY (tenant_id, corpus_id) REFERENCES hybrid.corpus ON DELETE CASCADE;
    """)

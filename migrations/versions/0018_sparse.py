"""The learned-sparse branch: hybrid.chunk.sparse_embedding (sparsevec, HNSW by inner product per partition), and
hybrid_retrieve's query_sparse, sparse_weight and min_sparse_score.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-06
"""

from __future__ import annotations

from alembic import op

from pyhybrid._paths import sql_dir

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None

_NEW = ("vector, text, text[], text[], integer, integer, double precision, double precision, double precision, "
        "double precision, jsonb, integer, text, integer, boolean, boolean, text, integer, integer, text[], "
        "double precision, double precision, double precision, double precision, integer, boolean, double precision, "
        "sparsevec, double precision, double precision")


def upgrade() -> None:
    cur = op.get_bind().connection.dbapi_connection.cursor()
    cur.execute(sql_dir().joinpath("incremental", "0018_sparse.sql").read_text(encoding="utf-8"))


def downgrade() -> None:
    # back to 0017's signatures: the older release's sql/idempotent/ re-creates the functions (and the branch's row
    # goes with its search function)
    cur = op.get_bind().connection.dbapi_connection.cursor()
    many = _NEW.replace("vector, text, ", "vector[], text[], ", 1)
    cur.execute(f"""
        DROP FUNCTION IF EXISTS public.hybrid_retrieve({_NEW});
        DROP FUNCTION IF EXISTS hybrid.explain_retrieve({_NEW});
        DROP FUNCTION IF EXISTS hybrid.retrieve_many({many});
        DROP FUNCTION IF EXISTS hybrid.retrieve({_NEW});
        DROP FUNCTION IF EXISTS hybrid._check_retrieve;
        DROP FUNCTION IF EXISTS hybrid._list_stage;
        DROP FUNCTION IF EXISTS hybrid._run_branch;
        DROP FUNCTION IF EXISTS hybrid.search_sparse(sparsevec, integer, text[], jsonb);
        DROP FUNCTION IF EXISTS hybrid._sparse(text);
        DROP FUNCTION IF EXISTS hybrid._sparse_rule(text);
        DROP FUNCTION IF EXISTS hybrid._check_tsvector_sizes();
        DROP FUNCTION IF EXISTS hybrid._scope();
        DROP FUNCTION IF EXISTS hybrid._writer_scope();
        DROP FUNCTION IF EXISTS hybrid._textsearch_schema();
        DELETE FROM hybrid.branch WHERE name = 'sparse';
        DROP INDEX IF EXISTS hybrid.chunk_sparse_hnsw;
        ALTER TABLE hybrid.chunk DROP COLUMN IF EXISTS sparse_embedding;
    """)

"""Branches as data: the hybrid.branch registry, ranks and scores by branch in hybrid_retrieve's rows, diversity.

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-06
"""

from __future__ import annotations

from alembic import op

from pyhybrid._paths import sql_dir

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None

_NEW = ("vector, text, text[], text[], integer, integer, double precision, double precision, double precision, "
        "double precision, jsonb, integer, text, integer, boolean, boolean, text, integer, integer, text[], "
        "double precision, double precision, double precision, double precision, integer, boolean, double precision")


# the internals this revision's sql/idempotent/ added (every overload dropped on the way down)
_ADDED = ("_abstains", "_branch_plan", "_check_retrieve", "_dense_audit_miss", "_dense_index_list", "_diversify",
          "_edge_type_tables", "_fuse_lists", "_graph_stage", "_no_such", "_run_branch", "_list_stage",
          "branches", "fusion_methods")
# and those whose arguments changed (every overload dropped: the older release re-creates its own)
_CHANGED = ("_hydrate", "hydrate", "_branch_score", "_blend_score")


def upgrade() -> None:
    cur = op.get_bind().connection.dbapi_connection.cursor()
    cur.execute(sql_dir().joinpath("incremental", "0017_branches.sql").read_text(encoding="utf-8"))


def downgrade() -> None:
    # back to 0016's signatures and row type: the older release's sql/idempotent/ re-creates the functions
    cur = op.get_bind().connection.dbapi_connection.cursor()
    many = _NEW.replace("vector, text, ", "vector[], text[], ", 1)
    names = ", ".join(f"'{n}'" for n in _ADDED + _CHANGED)
    cur.execute(f"""
        DROP FUNCTION IF EXISTS public.hybrid_retrieve({_NEW});
        DROP FUNCTION IF EXISTS hybrid.explain_retrieve({_NEW});
        DROP FUNCTION IF EXISTS hybrid.retrieve_many({many});
        DROP FUNCTION IF EXISTS hybrid.retrieve({_NEW});
        DO $d$
        DECLARE f regprocedure;
        BEGIN
            FOR f IN SELECT p.oid::regprocedure FROM pg_proc p
                     WHERE p.pronamespace = 'hybrid'::regnamespace AND p.proname IN ({names}) LOOP
                EXECUTE format('DROP FUNCTION %s', f);
            END LOOP;
        END
        $d$;
        DROP TABLE IF EXISTS hybrid.branch;
        ALTER TYPE hybrid.retrieve_row DROP ATTRIBUTE IF EXISTS scores;
        ALTER TYPE hybrid.retrieve_row DROP ATTRIBUTE IF EXISTS ranks;
    """)

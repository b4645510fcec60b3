"""BM25 statistics per tenant in ordinary tables (hybrid.bm25_tenant_stats, hybrid.bm25_term_stats), kept by
hybrid.chunk's statement triggers: lexical => 'bm25' on any PostgreSQL, on standbys, while an index is stale.

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-06
"""

from __future__ import annotations

from alembic import op

from pyhybrid._paths import sql_dir

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    cur = op.get_bind().connection.dbapi_connection.cursor()
    cur.execute(sql_dir().joinpath("incremental", "0019_bm25_stats.sql").read_text(encoding="utf-8"))


def downgrade() -> None:
    # the triggers first (their functions read the tables), then what sql/idempotent/046_bm25_stats.sql added;
    # the older release's sql/idempotent/ re-creates the functions whose bodies changed
    cur = op.get_bind().connection.dbapi_connection.cursor()
    cur.execute("""
        DROP TRIGGER IF EXISTS bm25_stats_insert ON hybrid.chunk;
        DROP TRIGGER IF EXISTS bm25_stats_update ON hybrid.chunk;
        DROP TRIGGER IF EXISTS bm25_stats_delete ON hybrid.chunk;
        DROP TRIGGER IF EXISTS bm25_stats_truncate ON hybrid.chunk;
        DROP FUNCTION IF EXISTS hybrid._bm25_stats_insert();
        DROP FUNCTION IF EXISTS hybrid._bm25_stats_update();
        DROP FUNCTION IF EXISTS hybrid._bm25_stats_delete();
        DROP FUNCTION IF EXISTS hybrid._bm25_stats_truncate();
        DROP FUNCTION IF EXISTS hybrid._bm25_stats_trigger();
        DROP FUNCTION IF EXISTS hybrid._bm25_sql_hits(integer, text, text[], boolean, text, integer, text[], jsonb,
                                                      text[]);
        DROP FUNCTION IF EXISTS hybrid._bm25_sql_scored(integer, text, text[], boolean, text[], jsonb, tsquery, text[],
                                                        double precision[], double precision[], double precision, tsquery,
                                                        integer, integer);
        DROP FUNCTION IF EXISTS hybrid._bm25_must_match(text[], double precision[], double precision[], double precision, integer,
                                                        integer);
        DROP FUNCTION IF EXISTS hybrid._bm25_counted(integer);
        DROP FUNCTION IF EXISTS hybrid._bm25_stats_add(integer[], tsvector[], integer[]);
        DROP FUNCTION IF EXISTS hybrid._bm25_index_hits(integer, text, text[], boolean, text, integer, text[], jsonb,
                                                        text[], text);
        DROP FUNCTION IF EXISTS hybrid._bm25_scorer(integer);
        DROP FUNCTION IF EXISTS hybrid._bm25_fieldnorm(integer);
        DROP FUNCTION IF EXISTS hybrid._tsv_length(tsvector);
        DROP FUNCTION IF EXISTS hybrid._matched_tsv_length(tsvector, tsquery);
        DROP FUNCTION IF EXISTS hybrid._lexeme_tsquery(text[]);
        DROP FUNCTION IF EXISTS hybrid.rebuild_bm25_stats(text);
        DROP FUNCTION IF EXISTS hybrid.bm25_stats_drift(text);
        DROP FUNCTION IF EXISTS hybrid.audit_bm25(text, integer, integer, boolean);
        DROP FUNCTION IF EXISTS hybrid._bm25_reindex(regclass);
        DROP FUNCTION IF EXISTS hybrid._bm25_compare(integer, text, text, integer);
        DROP TABLE IF EXISTS hybrid.bm25_audit;
        DROP TABLE IF EXISTS hybrid.bm25_term_stats;
        DROP TABLE IF EXISTS hybrid.bm25_tenant_stats;
    """)

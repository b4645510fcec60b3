"""A text-search language per tenant: hybrid.tenant.text_config (english by default), set by
hybrid.set_tenant_language, is the configuration of the tenant's partition's generated tsv, of its BM25 index
(text_config) and of its queries' lexemes (ts_rank, the SQL BM25 scorer, term coverage, abstention).
hybrid._or_tsquery(text) becomes hybrid._or_tsquery(text, regconfig), and hybrid.create_tenant(text) hybrid.create_tenant(text, language).

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-06
"""

from __future__ import annotations

from alembic import op

from pyhybrid._paths import sql_dir

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None


def upgrade() -> None:
    cur = op.get_bind().connection.dbapi_connection.cursor()
    cur.execute(sql_dir().joinpath("incremental", "0022_tenant_language.sql").read_text(encoding="utf-8"))


def downgrade() -> None:
    # every tenant back to english (its partition rewritten, its BM25 index rebuilt), then what 0022 and
    # sql/idempotent/047_languages.sql added; the older release's sql/idempotent/ re-creates hybrid._or_tsquery(text), hybrid.create_tenant(text),
    # hybrid.tenants(text, integer) with its own columns and hybrid._bm25_counted(integer)
    cur = op.get_bind().connection.dbapi_connection.cursor()
    cur.execute("""
        DO $$
        DECLARE
            t record;
        BEGIN
            FOR t IN SELECT x.tenant_id, x.tenant_key FROM hybrid.tenant x WHERE x.text_config <> 'english' LOOP
                UPDATE hybrid.tenant x SET text_config = 'english' WHERE x.tenant_key = t.tenant_key;
                PERFORM hybrid._swap_partition(t.tenant_key, 'english');
            END LOOP;
        END
        $$;
        DROP FUNCTION IF EXISTS hybrid.set_tenant_language(text, text);
        DROP FUNCTION IF EXISTS hybrid._bm25_text_configs();
        DROP FUNCTION IF EXISTS hybrid._swap_partition(integer, text);
        DROP FUNCTION IF EXISTS hybrid._move_select(regclass, integer, text);
        DROP FUNCTION IF EXISTS hybrid._forget_bm25_indexes(regclass);
        DROP FUNCTION IF EXISTS hybrid._partition_table(text, text);
        DROP FUNCTION IF EXISTS hybrid.create_tenant(text, text);
        DROP FUNCTION IF EXISTS hybrid.tenants(text, integer);
        DROP FUNCTION IF EXISTS hybrid._bm25_recount(integer, regclass);
        DROP FUNCTION IF EXISTS hybrid._bm25_counted(integer, regclass);
        DROP FUNCTION IF EXISTS hybrid._language(text);
        DROP FUNCTION IF EXISTS hybrid._or_tsquery(text, regconfig);
        DROP FUNCTION IF EXISTS hybrid._text_config(integer);
        ALTER TABLE hybrid.tenant DROP COLUMN IF EXISTS text_config;
    """)

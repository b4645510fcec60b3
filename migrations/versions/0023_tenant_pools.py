"""Small tenants pooled: hybrid.chunk_pool, hybrid.chunk's DEFAULT partition hashed into 8 leaves, holds every
pooled tenant's chunks (keys of 2^30 and up), a tenant moves between the pool and a partition of its own
(hybrid.move_tenant), and hybrid.chunk.text_config says what each row's tsv is generated with in the pool.
hybrid.create_tenant(text, text) becomes hybrid.create_tenant(text, text, text) (placement), and hybrid.tenants
gains a placement column.

Revision ID: 0023
Revises: 0022
Create Date: 2026-12-07
"""

from __future__ import annotations

from alembic import op

from pyhybrid._paths import sql_dir

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None


def upgrade() -> None:
    cur = op.get_bind().connection.dbapi_connection.cursor()
    cur.execute(sql_dir().joinpath("incremental", "0023_tenant_pools.sql").read_text(encoding="utf-8"))


def downgrade() -> None:
    # the older release has no pool: a pooled tenant must move to a partition of its own first (hybrid.move_tenant,
    # pyhybrid tenant move T --dedicated), which needs transactions of its own; this one refuses and changes nothing.
    # hybrid._move_select and hybrid._forget_bm25_indexes stay: hybrid._swap_partition, which revision 0022's
    # downgrade runs, calls them (that downgrade drops them)
    cur = op.get_bind().connection.dbapi_connection.cursor()
    cur.execute("""
        DO $$
        DECLARE
            n bigint := (SELECT count(*) FROM hybrid.tenant t WHERE t.tenant_key >= 1073741824);
        BEGIN
            IF n > 0 THEN
                RAISE EXCEPTION 'cannot downgrade below revision 0023: % tenants are pooled', n
                    USING ERRCODE = '55000',
                          HINT = 'Move each to a partition of its own first: pyhybrid tenant move <tenant> --dedicated.';
            END IF;
        END
        $$;
        SET LOCAL lock_timeout = '5s';
        ALTER TABLE hybrid.chunk DETACH PARTITION hybrid.chunk_pool;
        DROP TABLE hybrid.chunk_pool;
        ALTER TABLE hybrid.chunk DROP COLUMN text_config;
        DROP PROCEDURE IF EXISTS hybrid.move_tenant(text, text);
        DROP FUNCTION IF EXISTS hybrid._move_rows(text, text);
        DROP FUNCTION IF EXISTS hybrid._drop_partition(regclass);
        DROP FUNCTION IF EXISTS hybrid.pool_due();
        DROP FUNCTION IF EXISTS hybrid._writer_key(text);
        DROP FUNCTION IF EXISTS hybrid._pooled(integer);
        DROP FUNCTION IF EXISTS hybrid._placement(text);
        DROP FUNCTION IF EXISTS hybrid.create_tenant(text, text, text);
        DROP FUNCTION IF EXISTS hybrid.tenants(text, integer);
        DROP FUNCTION IF EXISTS hybrid._create_partition(integer, text);
    """)

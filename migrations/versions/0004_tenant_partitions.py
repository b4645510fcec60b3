"""Per-tenant storage: hybrid.chunk partitioned by an opaque tenant key, one partition per tenant.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01
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
    cur.execute(sql_dir().joinpath("incremental", "0004_tenant_partitions.sql").read_text(encoding="utf-8"))


def downgrade() -> None:
    # back to one table: the rows move, the tenant keys go; sql/idempotent/ of the older release
    # re-creates the policies, grants and the HNSW index
    cur = op.get_bind().connection.dbapi_connection.cursor()
    cur.execute("""
        CREATE TABLE hybrid.chunk_single (LIKE hybrid.chunk INCLUDING DEFAULTS INCLUDING GENERATED INCLUDING CONSTRAINTS);
        ALTER TABLE hybrid.chunk_single DROP COLUMN tenant_key;
        INSERT INTO hybrid.chunk_single (tenant_id, chunk_id, corpus_id, document_id, position, content, embedding,
                                         acl_labels, metadata, content_hash, superseded, created_at, updated_at)
        SELECT tenant_id, chunk_id, corpus_id, document_id, position, content, embedding, acl_labels, metadata,
               content_hash, superseded, created_at, updated_at FROM hybrid.chunk;
        DROP TABLE hybrid.chunk CASCADE;
        ALTER TABLE hybrid.chunk_single RENAME TO chunk;
        ALTER TABLE hybrid.chunk ADD CONSTRAINT chunk_pkey PRIMARY KEY (tenant_id, chunk_id);
        ALTER TABLE hybrid.chunk ADD FOREIGN KEY (tenant_id, corpus_id) REFERENCES hybrid.corpus ON DELETE CASCADE;
        CREATE INDEX chunk_document_idx ON hybrid.chunk (tenant_id, document_id);
        CREATE INDEX chunk_corpus_idx ON hybrid.chunk (tenant_id, corpus_id) INCLUDE (superseded, acl_labels);
        CREATE INDEX chunk_tsv_gin ON hybrid.chunk USING gin (tsv) WHERE NOT superseded;
        ALTER TABLE hybrid.chunk ENABLE ROW LEVEL SECURITY;
        ALTER TABLE hybrid.chunk FORCE ROW LEVEL SECURITY;
        ALTER TABLE hybrid.tenant DROP COLUMN tenant_key;
    """)

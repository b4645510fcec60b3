-- pyhybrid base schema: runs exactly once per database (Alembic revision 0001).
-- The embedding dimension is read from the setting hybrid.install_dim (default 384),
-- which the migration sets for this transaction only.

CREATE EXTENSION IF NOT EXISTS vector;

DO $roles$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'hybrid_user') THEN
        CREATE ROLE hybrid_user NOLOGIN;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'hybrid_app') THEN
        CREATE ROLE hybrid_app NOLOGIN;
    END IF;
    EXECUTE 'GRANT hybrid_user TO hybrid_app';
END
$roles$;

CREATE SCHEMA hybrid;
REVOKE ALL ON SCHEMA hybrid FROM PUBLIC;

CREATE TABLE hybrid.setting (
    key   text PRIMARY KEY,
    value text NOT NULL
);

CREATE TABLE hybrid.tenant (
    tenant_id  text PRIMARY KEY
               CONSTRAINT tenant_id_format CHECK (tenant_id ~ '^[A-Za-z0-9][A-Za-z0-9_.:-]{0,62}$'),
    created_at timestamptz NOT NULL DEFAULT now()
);

-- Binds a tenant login role to the tenants it may act for, and the ACL labels it may claim there.
CREATE TABLE hybrid.tenant_grant (
    role_name  name NOT NULL,
    tenant_id  text NOT NULL REFERENCES hybrid.tenant ON DELETE CASCADE,
    acl_labels text[] NOT NULL DEFAULT '{}',
    PRIMARY KEY (role_name, tenant_id)
);

CREATE TABLE hybrid.corpus (
    tenant_id  text NOT NULL REFERENCES hybrid.tenant ON DELETE CASCADE,
    corpus_id  text NOT NULL CONSTRAINT corpus_id_not_blank CHECK (btrim(corpus_id) <> ''),
    metadata   jsonb NOT NULL DEFAULT '{}',
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, corpus_id)
);

CREATE TABLE hybrid.chunk (
    tenant_id    text NOT NULL,
    chunk_id     text NOT NULL CONSTRAINT chunk_id_not_blank CHECK (btrim(chunk_id) <> ''),
    corpus_id    text NOT NULL,
    document_id  text NOT NULL CONSTRAINT document_id_not_blank CHECK (btrim(document_id) <> ''),
    position     integer NOT NULL DEFAULT 0,
    content      text NOT NULL,
    embedding    vector,
    tsv          tsvector GENERATED ALWAYS AS (to_tsvector('english'::regconfig, content)) STORED,
    acl_labels   text[] NOT NULL DEFAULT '{}',
    metadata     jsonb NOT NULL DEFAULT '{}',
    content_hash text NOT NULL,
    superseded   boolean NOT NULL DEFAULT false,
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, chunk_id),
    FOREIGN KEY (tenant_id, corpus_id) REFERENCES hybrid.corpus ON DELETE CASCADE
);

CREATE INDEX chunk_document_idx ON hybrid.chunk (tenant_id, document_id);
-- covers the RLS policy's columns, so counting a tenant's rows (hybrid._scope_size) is index-only
CREATE INDEX chunk_corpus_idx ON hybrid.chunk (tenant_id, corpus_id) INCLUDE (superseded, acl_labels);
CREATE INDEX chunk_tsv_gin ON hybrid.chunk USING gin (tsv) WHERE NOT superseded;

DO $dim$
DECLARE
    dim integer := coalesce(nullif(current_setting('hybrid.install_dim', true), ''), '384')::integer;
BEGIN
    IF dim < 1 OR dim > 2000 THEN
        RAISE EXCEPTION 'hybrid.install_dim must be between 1 and 2000 (HNSW limit), got %', dim
            USING ERRCODE = '22023';
    END IF;
    EXECUTE format('ALTER TABLE hybrid.chunk ALTER COLUMN embedding TYPE vector(%s)', dim);
    INSERT INTO hybrid.setting (key, value) VALUES ('embedding_dim', dim::text);
END
$dim$;

-- the HNSW index is created by hybrid.resume_vector_index() (sql/idempotent/045_indexes.sql)

-- tenant and tenant_grant are control tables (no tenant data): RLS is on for callers,
-- not forced, so the owner's admin functions (create_tenant, grant_tenant) can manage them.
ALTER TABLE hybrid.tenant ENABLE ROW LEVEL SECURITY;
ALTER TABLE hybrid.tenant_grant ENABLE ROW LEVEL SECURITY;
ALTER TABLE hybrid.corpus ENABLE ROW LEVEL SECURITY;
ALTER TABLE hybrid.corpus FORCE ROW LEVEL SECURITY;
ALTER TABLE hybrid.chunk ENABLE ROW LEVEL SECURITY;
ALTER TABLE hybrid.chunk FORCE ROW LEVEL SECURITY;

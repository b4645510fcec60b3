-- pyhybrid 0.3: each tenant's chunks in a partition of its own, with its own HNSW, BM25, GIN and
-- btree indexes. Runs exactly once per database (Alembic revision 0004), with the data: downtime,
-- since hybrid.chunk is rebuilt. The partition key is an opaque integer (hybrid.tenant.tenant_key):
-- partition bounds are readable by every role, so they must not carry a tenant id, and nor do the
-- partitions' names (hybrid.chunk_p<key>).

CREATE SEQUENCE hybrid.tenant_key_seq AS integer;
ALTER TABLE hybrid.tenant ADD COLUMN tenant_key integer;
UPDATE hybrid.tenant t SET tenant_key = k.key
FROM (SELECT tenant_id, nextval('hybrid.tenant_key_seq')::integer AS key
      FROM (SELECT tenant_id FROM hybrid.tenant ORDER BY created_at, tenant_id) o) k
WHERE k.tenant_id = t.tenant_id;
ALTER TABLE hybrid.tenant ALTER COLUMN tenant_key SET DEFAULT nextval('hybrid.tenant_key_seq'),
                          ALTER COLUMN tenant_key SET NOT NULL,
                          ADD CONSTRAINT tenant_key_unique UNIQUE (tenant_key);
ALTER SEQUENCE hybrid.tenant_key_seq OWNED BY hybrid.tenant.tenant_key;

ALTER TABLE hybrid.chunk RENAME TO chunk_unpartitioned;
CREATE TABLE hybrid.chunk (
    LIKE hybrid.chunk_unpartitioned INCLUDING DEFAULTS INCLUDING GENERATED INCLUDING CONSTRAINTS,
    tenant_key integer NOT NULL
) PARTITION BY LIST (tenant_key);
-- a partition's unique keys must hold the partition key; (tenant_id, chunk_id) stays the lookup key
ALTER TABLE hybrid.chunk_unpartitioned RENAME CONSTRAINT chunk_pkey TO chunk_unpartitioned_pkey;
ALTER INDEX hybrid.chunk_document_idx RENAME TO chunk_unpartitioned_document_idx;
ALTER INDEX hybrid.chunk_corpus_idx RENAME TO chunk_unpartitioned_corpus_idx;
ALTER INDEX hybrid.chunk_tsv_gin RENAME TO chunk_unpartitioned_tsv_gin;
DO $renames$
BEGIN
    IF to_regclass('hybrid.chunk_embedding_hnsw') IS NOT NULL THEN
        ALTER INDEX hybrid.chunk_embedding_hnsw RENAME TO chunk_unpartitioned_embedding_hnsw;
    END IF;
    IF to_regclass('hybrid.chunk_content_bm25') IS NOT NULL THEN
        ALTER INDEX hybrid.chunk_content_bm25 RENAME TO chunk_unpartitioned_content_bm25;
    END IF;
END
$renames$;

DO $partitions$
DECLARE
    k integer;
BEGIN
    FOR k IN SELECT tenant_key FROM hybrid.tenant ORDER BY tenant_key LOOP
        EXECUTE format('CREATE TABLE hybrid.%I PARTITION OF hybrid.chunk FOR VALUES IN (%s)', 'chunk_p' || k, k);
    END LOOP;
END
$partitions$;

INSERT INTO hybrid.chunk (tenant_id, chunk_id, corpus_id, document_id, position, content, embedding, acl_labels,
                          metadata, content_hash, superseded, created_at, updated_at, tenant_key)
SELECT c.tenant_id, c.chunk_id, c.corpus_id, c.document_id, c.position, c.content, c.embedding, c.acl_labels,
       c.metadata, c.content_hash, c.superseded, c.created_at, c.updated_at, t.tenant_key
FROM hybrid.chunk_unpartitioned c JOIN hybrid.tenant t ON t.tenant_id = c.tenant_id;

-- the indexes, defined once on the parent: every partition gets its own (the HNSW index is built
-- by hybrid.resume_vector_index and the BM25 one by sql/optional/bm25_index.sql, after this file)
ALTER TABLE hybrid.chunk ADD CONSTRAINT chunk_pkey PRIMARY KEY (tenant_id, chunk_id, tenant_key);
ALTER TABLE hybrid.chunk ADD FOREIGN KEY (tenant_id, corpus_id) REFERENCES hybrid.corpus ON DELETE CASCADE;
CREATE INDEX chunk_document_idx ON hybrid.chunk (tenant_id, document_id);
CREATE INDEX chunk_corpus_idx ON hybrid.chunk (tenant_id, corpus_id) INCLUDE (superseded, acl_labels);
CREATE INDEX chunk_tsv_gin ON hybrid.chunk USING gin (tsv) WHERE NOT superseded;
ALTER TABLE hybrid.chunk ENABLE ROW LEVEL SECURITY;
ALTER TABLE hybrid.chunk FORCE ROW LEVEL SECURITY;

-- last: this drops a BM25 index, whose shared state pg_textsearch 1.0 frees at once even if the
-- transaction then rolls back (timescale/pg_textsearch#506), so nothing may fail after it
DROP TABLE hybrid.chunk_unpartitioned;

-- pyhybrid 0.5: small tenants pooled. Runs exactly once per database (Alembic revision 0023).
--  * hybrid.chunk_pool, hybrid.chunk's DEFAULT partition, hashed on tenant_key into 8 leaves (hybrid.chunk_pool_0
--    to _7), holds every pooled tenant's chunks: a tenant costs no relation of its own there. Its keys are 2^30 and
--    up (hybrid._pooled), which its CHECK states, so that attaching a dedicated tenant's partition (keys below 2^30)
--    proves the pool holds none of its rows without scanning it.
--  * hybrid.chunk.text_config: the text search configuration a row's tsv is generated with in the pool (tenants of
--    several languages share a leaf); a dedicated partition generates its tsv in its tenant's configuration, as
--    before, and its rows carry the same name.
--  * A tenant moves between the pool and a partition of its own under a new key (hybrid.move_tenant): the tables
--    keyed by tenant_key follow hybrid.tenant's (ON UPDATE CASCADE).
ALTER TABLE hybrid.chunk ADD COLUMN text_config regconfig NOT NULL DEFAULT 'english';
COMMENT ON COLUMN hybrid.chunk.text_config IS
'The text search configuration of the row''s tenant (hybrid.tenant.text_config): what its tsv is generated with in the pool, where tenants of several languages share a partition.';

CREATE TABLE hybrid.chunk_pool (LIKE hybrid.chunk INCLUDING DEFAULTS INCLUDING GENERATED INCLUDING CONSTRAINTS
                                INCLUDING STORAGE) PARTITION BY HASH (tenant_key);
ALTER TABLE hybrid.chunk_pool ALTER COLUMN tsv SET EXPRESSION AS (to_tsvector(text_config, content));
ALTER TABLE hybrid.chunk_pool ADD CONSTRAINT chunk_pool_keys CHECK (tenant_key >= 1073741824);
DO $$
BEGIN
    FOR i IN 0..7 LOOP
        EXECUTE format('CREATE TABLE hybrid.chunk_pool_%s PARTITION OF hybrid.chunk_pool FOR VALUES WITH (MODULUS 8, REMAINDER %s)',
                       i, i);
    END LOOP;
END
$$;
COMMENT ON TABLE hybrid.chunk_pool IS
'The pooled tenants'' chunks (hybrid.chunk''s DEFAULT partition, hashed on tenant_key into 8 leaves): tenant keys of 2^30 and up. Their dense and sparse searches are exact over their own rows, their BM25 the SQL scorer over their own statistics.';
SET LOCAL client_min_messages = warning;
ALTER TABLE hybrid.chunk ATTACH PARTITION hybrid.chunk_pool DEFAULT;

ALTER TABLE hybrid.bm25_tenant_stats DROP CONSTRAINT bm25_tenant_stats_tenant_key_fkey,
    ADD CONSTRAINT bm25_tenant_stats_tenant_key_fkey FOREIGN KEY (tenant_key) REFERENCES hybrid.tenant (tenant_key)
        ON DELETE CASCADE ON UPDATE CASCADE;
ALTER TABLE hybrid.chunk_audit_sample DROP CONSTRAINT chunk_audit_sample_tenant_key_fkey,
    ADD CONSTRAINT chunk_audit_sample_tenant_key_fkey FOREIGN KEY (tenant_key) REFERENCES hybrid.tenant (tenant_key)
        ON DELETE CASCADE ON UPDATE CASCADE;
ALTER TABLE hybrid.chunk_audit_sample_state DROP CONSTRAINT chunk_audit_sample_state_tenant_key_fkey,
    ADD CONSTRAINT chunk_audit_sample_state_tenant_key_fkey FOREIGN KEY (tenant_key) REFERENCES hybrid.tenant (tenant_key)
        ON DELETE CASCADE ON UPDATE CASCADE;

-- a tenant is created pooled or dedicated, and its listing says where it is (other signatures, other columns)
DROP FUNCTION IF EXISTS hybrid.create_tenant(text, text);
DROP FUNCTION IF EXISTS hybrid.tenants(text, integer);
DROP FUNCTION IF EXISTS hybrid._create_partition(integer);

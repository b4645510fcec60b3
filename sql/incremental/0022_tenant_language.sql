-- A text-search language per tenant: hybrid.tenant.text_config names the PostgreSQL text search configuration
-- (english by default) of the tenant's partition's generated tsv, its BM25 index's text_config, and the query side
-- of ts_rank, the SQL BM25 scorer, term coverage and abstention (hybrid.set_tenant_language changes it).
ALTER TABLE hybrid.tenant ADD COLUMN text_config text NOT NULL DEFAULT 'english';
-- the tsquery of user text now takes the tenant's configuration, and a tenant is created in a language
DROP FUNCTION IF EXISTS hybrid._or_tsquery(text);
DROP FUNCTION IF EXISTS hybrid.create_tenant(text);
-- a tenant's BM25 statistics may be counted from a partition being built
DROP FUNCTION IF EXISTS hybrid._bm25_counted(integer);
-- and a tenant's listing says its language (another result type)
DROP FUNCTION IF EXISTS hybrid.tenants(text, integer);

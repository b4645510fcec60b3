-- pyhybrid 0.4: BM25 statistics per tenant in ordinary tables, so that lexical => 'bm25' scores exactly on any
-- PostgreSQL (hybrid._bm25_sql_hits), without pg_textsearch, on a hot standby (the tables are WAL-logged) and
-- while a BM25 index is stale or suspended. Runs exactly once per database (Alembic revision 0019).
--  * hybrid.bm25_tenant_stats: a tenant's document count and total length; hybrid.bm25_term_stats: the
--    document frequency of each lexeme. They count what pg_textsearch's index of the tenant's partition counts
--    when freshly built: every row whose tsv holds a lexeme, superseded versions too until pruned.
--  * Statement-level triggers on hybrid.chunk keep them (sql/idempotent/046_bm25_stats.sql); this revision fills
--    them once from the rows already there.
--  * No CHECK (df >= 0): INSERT ... ON CONFLICT checks the proposed row, a negative delta, before the update;
--    hybrid.bm25_stats_drift finds a counter that went wrong.

CREATE TABLE hybrid.bm25_tenant_stats (
    tenant_key integer PRIMARY KEY REFERENCES hybrid.tenant (tenant_key) ON DELETE CASCADE,
    n_docs     bigint NOT NULL,
    total_len  bigint NOT NULL
) WITH (fillfactor = 50);  -- one row a tenant, updated by every write statement: room for HOT updates
COMMENT ON TABLE hybrid.bm25_tenant_stats IS
'BM25 statistics of a tenant: how many of its rows hold a lexeme (N) and their total length (the sum of the position counts of their tsv). Kept by hybrid.chunk''s statement triggers; no tenant role reads it.';

CREATE TABLE hybrid.bm25_term_stats (
    tenant_key integer NOT NULL,
    lexeme     text COLLATE "C" NOT NULL,
    df         bigint NOT NULL,
    PRIMARY KEY (tenant_key, lexeme)
) WITH (fillfactor = 70);  -- df is not indexed: a frequent lexeme's row is updated in place (HOT)
COMMENT ON TABLE hybrid.bm25_term_stats IS
'BM25 document frequency of each lexeme of a tenant (rows with df 0 stay until the tenant is rebuilt). Kept by hybrid.chunk''s statement triggers; hybrid.drop_tenant deletes a tenant''s rows; no tenant role reads it.';
REVOKE ALL ON hybrid.bm25_tenant_stats, hybrid.bm25_term_stats FROM PUBLIC;

INSERT INTO hybrid.bm25_tenant_stats (tenant_key, n_docs, total_len)
SELECT t.tenant_key, count(c.tenant_key),
       coalesce(sum((SELECT sum(coalesce(cardinality(u.positions), 1)) FROM unnest(c.tsv) u)), 0)
FROM hybrid.tenant t LEFT JOIN hybrid.chunk c ON c.tenant_key = t.tenant_key AND length(c.tsv) > 0
GROUP BY t.tenant_key;
INSERT INTO hybrid.bm25_term_stats (tenant_key, lexeme, df)
SELECT c.tenant_key, l.lexeme, count(*)
FROM hybrid.chunk c, unnest(tsvector_to_array(c.tsv)) l(lexeme)
GROUP BY 1, 2;

-- the lexical audit's last verdict on each BM25 index (hybrid.audit_bm25): an index whose top hits disagreed with the
-- exact SQL scorer is not answered from until it is rebuilt
CREATE TABLE hybrid.bm25_audit (
    index_oid  oid PRIMARY KEY,
    tenant_key integer NOT NULL,
    audited_at timestamptz NOT NULL DEFAULT now(),
    queries    integer NOT NULL,
    mismatches integer NOT NULL,
    worst      double precision,
    example    text
);
COMMENT ON TABLE hybrid.bm25_audit IS
'The last audit of each BM25 index (hybrid.audit_bm25): how many sampled queries'' top hits disagreed with the exact SQL scorer (mismatches), the largest relative score difference seen, and the first such query (lexemes of the tenant). Where mismatches > 0 the SQL scorer answers until the index is rebuilt. No tenant role reads it.';
REVOKE ALL ON hybrid.bm25_audit FROM PUBLIC;

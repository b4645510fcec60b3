-- What the installed SQL is: its version, and the documentation of the schema and its tables.

-- hybrid.version: the release the installed SQL comes from
CREATE OR REPLACE FUNCTION hybrid.version() RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$ SELECT value FROM hybrid.setting WHERE key = 'version' $$;
COMMENT ON FUNCTION hybrid.version() IS
'The pyhybrid release the installed SQL comes from (pyhybrid.__version__, written at each upgrade); see sql/README.md for what a version promises SQL callers.';

COMMENT ON SCHEMA hybrid IS
'pyhybrid: hybrid retrieval (dense + lexical + graph, fused by convex, RRF or DBSF fusion) under row-level security. Call public.hybrid_retrieve(...) or hybrid.retrieve(...); see COMMENT ON FUNCTION of each.';
COMMENT ON TABLE hybrid.setting IS
'Install-wide settings, one row a key: embedding_dim (the vector dimension, fixed at install), graph (the AGE graph''s name, where AGE is installed), version (the pyhybrid release the SQL comes from), sql_digest (a digest of sql/idempotent/, to re-apply it only when it changed), vector_index_suspended (present while hybrid.suspend_vector_index holds the HNSW index off for a bulk load), text_indexes_suspended (present while hybrid.suspend_text_indexes holds the GIN and BM25 indexes off for one), and the optional tuning keys exact_threshold (dense search is exact up to this many visible chunks, default 500), hnsw_ef_search (the HNSW search breadth; default: growing with the partition, 100 to 300, 150 at most on the denser graph, see hybrid._dense_plan), hnsw_m and hnsw_ef_construction (the HNSW graph''s density for hybrid.resume_vector_index''s next build, every partition), dense_index_kind (what the HNSW index holds, vector, halfvec or bit, written by hybrid.set_dense_index_kind; unset: by the dimension), hnsw_dense_rows (without those two, partitions of at least this many live chunks, default 100,000, get m 24 and ef_construction 128 instead of pgvector''s 16 and 64; see hybrid._hnsw_density).';
COMMENT ON TABLE hybrid.tenant IS 'Tenants: the unit of isolation. Created by hybrid.create_tenant (admin).';
COMMENT ON TABLE hybrid.tenant_grant IS
'Binds a tenant login role to the tenants it may act for, and the ACL labels it may claim there (hybrid.grant_tenant).';
COMMENT ON TABLE hybrid.corpus IS 'A tenant''s named collections of documents; chunks belong to one.';
COMMENT ON TABLE hybrid.chunk IS
'The retrievable units: text, embedding and metadata of a document''s chunks, one tenant each, under forced RLS.';
COMMENT ON COLUMN hybrid.chunk.embedding IS 'The chunk''s embedding (dimension: hybrid.embedding_dim()); NULL: only lexical and graph search find it.';
COMMENT ON COLUMN hybrid.chunk.tsv IS 'to_tsvector(<the tenant''s text_config>, content) (english unless hybrid.set_tenant_language set another on its partition), for ts_rank search over its GIN index and the SQL BM25 scorer.';
COMMENT ON COLUMN hybrid.chunk.acl_labels IS 'Empty: every caller of the tenant sees the chunk; else only callers holding one of these labels.';
COMMENT ON COLUMN hybrid.chunk.content_hash IS 'What makes re-ingesting the chunk a no-op when unchanged.';
COMMENT ON COLUMN hybrid.chunk.superseded IS 'True for chunks of a document re-ingested without them: kept, never returned.';

DO $graph$
BEGIN
    IF to_regclass('hybrid.graph_node') IS NOT NULL THEN
        COMMENT ON TABLE hybrid.graph_node IS
            'Maps a tenant''s node ids (chunk ids and entity ids) to vertices of the AGE graph hybrid_graph.';
    END IF;
END
$graph$;

-- BM25 over chunk content: runs once, only where pg_textsearch is available.
CREATE EXTENSION IF NOT EXISTS pg_textsearch;
CREATE INDEX chunk_content_bm25 ON hybrid.chunk USING bm25 (content) WITH (text_config = 'english');
-- a tenant of another language (hybrid.set_tenant_language) gets its own text_config back: the line above gave
-- every partition the parent's
DO $$
BEGIN
    IF to_regprocedure('hybrid._bm25_text_configs()') IS NOT NULL THEN
        PERFORM hybrid._bm25_text_configs();
    END IF;
END
$$;

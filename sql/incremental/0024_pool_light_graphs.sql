-- pyhybrid 0.5: the pool's HNSW graphs at pgvector's lightest. Runs exactly once per database (Alembic revision 0024).
-- No pooled tenant is searched through the pool's HNSW indexes (its dense and sparse searches are exact over its own
-- rows), but they exist, cloned from hybrid.chunk's at the default density, and every pooled insert paid for a graph
-- search in them. Each leaf's HNSW index gets m 2 and ef_construction 4 (hybrid._pool_graph_options): inserts read
-- ef_construction at once; an empty leaf's index is rebuilt here (m is fixed when a graph is built), a filled one's
-- keeps its m until the pool's index is next built (hybrid.set_dense_index_kind).
DO $$
DECLARE
    r record;
    v_empty boolean;
BEGIN
    FOR r IN SELECT x.indexrelid::regclass AS idx, x.indrelid::regclass AS leaf
             FROM pg_inherits h JOIN pg_index x ON x.indrelid = h.inhrelid
             JOIN pg_class c ON c.oid = x.indexrelid JOIN pg_am a ON a.oid = c.relam
             WHERE h.inhparent = 'hybrid.chunk_pool'::regclass AND a.amname = 'hnsw' ORDER BY 1 LOOP
        EXECUTE format('ALTER INDEX %s SET (m = 2, ef_construction = 4)', r.idx);
        EXECUTE format('SELECT NOT EXISTS (SELECT 1 FROM %s)', r.leaf) INTO v_empty;
        IF v_empty THEN
            EXECUTE format('REINDEX INDEX %s', r.idx);
        END IF;
    END LOOP;
END
$$;

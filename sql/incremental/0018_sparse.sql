-- pyhybrid 0.4: the learned-sparse branch. Runs exactly once per database (Alembic revision 0018).
--  * hybrid.chunk gains sparse_embedding (pgvector sparsevec, optional), stored at one dimension, pgvector's
--    largest (1,000,000,000; hybrid._sparse), so that vectors of any vocabulary compare; each partition gets its
--    HNSW index by inner product from the partitioned index below (a partition created later too).
--  * hybrid_retrieve gains query_sparse, sparse_weight and min_sparse_score (the branch's row in hybrid.branch
--    is written by sql/idempotent/050_search.sql): the functions whose arguments change are dropped here and
--    re-created by sql/idempotent/ in the same transaction.

ALTER TABLE hybrid.chunk ADD COLUMN sparse_embedding sparsevec(1000000000);  -- HNSW needs the dimension
COMMENT ON COLUMN hybrid.chunk.sparse_embedding IS
'The chunk''s learned-sparse vector (SPLADE and the like; NULL: the sparse branch does not find it), at most 1,000 non-zero values, stored at dimension 1,000,000,000 (hybrid._sparse).';
CREATE INDEX chunk_sparse_hnsw ON hybrid.chunk USING hnsw (sparse_embedding sparsevec_ip_ops);

DO $drop$
DECLARE
    f regprocedure;
BEGIN
    -- 0017's signatures (27 arguments), and the stages whose arguments grew
    FOR f IN SELECT p.oid::regprocedure FROM pg_proc p
             WHERE (p.pronamespace::regnamespace::text || '.' || p.proname IN ('public.hybrid_retrieve', 'hybrid.retrieve',
                        'hybrid.explain_retrieve', 'hybrid.retrieve_many') AND p.pronargs = 27)
                OR p.oid IN (to_regproc('hybrid._check_retrieve'), to_regproc('hybrid._list_stage'),
                             to_regproc('hybrid._run_branch')) LOOP
        EXECUTE format('DROP FUNCTION %s', f);
    END LOOP;
END
$drop$;

-- pyhybrid 0.4: embeddings of more than 2,000 dimensions (pgvector's HNSW limit for vector). Runs
-- exactly once per database (Alembic revision 0011). On an existing database it changes nothing. On a
-- fresh install of more than 2,000 dimensions (pyhybrid migrate --dim N: revision 0001 installed
-- vector(384), since its own check stops at 2,000), the column becomes vector(N) here, in the same
-- transaction; sql/idempotent/045_indexes.sql then builds the HNSW index over halfvec or binary codes
-- (hybrid._dense_kind). The dimension comes in the setting hybrid.install_dim, set by the revision
-- only on a fresh install.
DO $wide$
DECLARE
    dim integer := nullif(current_setting('hybrid.install_dim', true), '')::integer;
BEGIN
    IF dim IS NULL OR dim <= 2000 THEN
        RETURN;
    END IF;
    IF dim > 16000 THEN
        RAISE EXCEPTION 'hybrid.install_dim must be between 1 and 16000 (pgvector''s vector limit), got %', dim
            USING ERRCODE = '22023';
    END IF;
    IF EXISTS (SELECT 1 FROM hybrid.chunk) THEN
        RAISE EXCEPTION 'the embedding dimension is fixed at install: this database already holds chunks'
            USING ERRCODE = '55000';
    END IF;
    EXECUTE format('ALTER TABLE hybrid.chunk ALTER COLUMN embedding TYPE vector(%s)', dim);
    ALTER TABLE hybrid.chunk ALTER COLUMN embedding SET STORAGE MAIN;  -- as revision 0006 left it
    UPDATE hybrid.setting SET value = dim::text WHERE key = 'embedding_dim';
END
$wide$;

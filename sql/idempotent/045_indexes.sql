-- The HNSW index, defined once: created here at install, dropped and rebuilt around bulk loads.

CREATE OR REPLACE FUNCTION hybrid.resume_vector_index() RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
SET maintenance_work_mem = '1GB'
SET client_min_messages = warning
AS $$
BEGIN
    IF to_regclass('hybrid.chunk_embedding_hnsw') IS NOT NULL THEN
        RETURN false;
    END IF;
    -- every core the server allows: a rebuild after a bulk load is the one time it matters
    PERFORM set_config('max_parallel_maintenance_workers',
                       current_setting('max_worker_processes'), true);
    CREATE INDEX chunk_embedding_hnsw ON hybrid.chunk
        USING hnsw (embedding vector_cosine_ops) WHERE NOT superseded;
    RETURN true;
END
$$;
COMMENT ON FUNCTION hybrid.resume_vector_index() IS
'Creates the HNSW index on chunk embeddings if it is missing (after hybrid.suspend_vector_index and a bulk load); returns whether it built one. Admin only.';
REVOKE ALL ON FUNCTION hybrid.resume_vector_index() FROM PUBLIC;

CREATE OR REPLACE FUNCTION hybrid.suspend_vector_index() RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
AS $$
BEGIN
    IF to_regclass('hybrid.chunk_embedding_hnsw') IS NULL THEN
        RETURN false;
    END IF;
    -- Inserting into HNSW costs ~1.5 ms a row on 2 cores, building it afterwards far less; meanwhile
    -- dense search stays correct (exact scans) but slow for large tenants.
    DROP INDEX hybrid.chunk_embedding_hnsw;
    RETURN true;
END
$$;
COMMENT ON FUNCTION hybrid.suspend_vector_index() IS
'Drops the HNSW index for a bulk load (rebuild it with hybrid.resume_vector_index); returns whether it dropped one. Admin only.';
REVOKE ALL ON FUNCTION hybrid.suspend_vector_index() FROM PUBLIC;

SELECT hybrid.resume_vector_index();

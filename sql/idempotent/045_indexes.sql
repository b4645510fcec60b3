-- The HNSW index, defined once: created here at install, dropped and rebuilt around bulk loads.

-- hybrid.resume_vector_index: build the HNSW index if missing (admin)
CREATE OR REPLACE FUNCTION hybrid.resume_vector_index() RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
SET client_min_messages = warning
AS $$
BEGIN
    IF to_regclass('hybrid.chunk_embedding_hnsw') IS NOT NULL THEN
        RETURN false;
    END IF;
    -- at least 1GB for the build (a larger server setting is kept): past it HNSW builds slow ~4x
    IF pg_size_bytes(current_setting('maintenance_work_mem')) < pg_size_bytes('1GB') THEN
        PERFORM set_config('maintenance_work_mem', '1GB', true);
    END IF;
    CREATE INDEX chunk_embedding_hnsw ON hybrid.chunk
        USING hnsw (embedding vector_cosine_ops) WHERE NOT superseded;
    DELETE FROM hybrid.setting WHERE key = 'vector_index_suspended';
    RETURN true;
END
$$;
COMMENT ON FUNCTION hybrid.resume_vector_index() IS
'Creates the HNSW index on chunk embeddings if it is missing (after hybrid.suspend_vector_index and a bulk load); returns whether it built one. Admin only.';
REVOKE ALL ON FUNCTION hybrid.resume_vector_index() FROM PUBLIC;

-- hybrid.suspend_vector_index: drop the HNSW index for a bulk load (admin)
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
    -- re-applying sql/idempotent/ (an upgrade) must not rebuild it in the middle of the load
    INSERT INTO hybrid.setting (key, value) VALUES ('vector_index_suspended', now()::text)
    ON CONFLICT (key) DO NOTHING;
    RETURN true;
END
$$;
COMMENT ON FUNCTION hybrid.suspend_vector_index() IS
'Drops the HNSW index for a bulk load (rebuild it with hybrid.resume_vector_index); returns whether it dropped one. Admin only.';
REVOKE ALL ON FUNCTION hybrid.suspend_vector_index() FROM PUBLIC;

-- at install, and after an upgrade that found it missing, unless a bulk load holds it off
SELECT hybrid.resume_vector_index()
WHERE NOT EXISTS (SELECT 1 FROM hybrid.setting WHERE key = 'vector_index_suspended');

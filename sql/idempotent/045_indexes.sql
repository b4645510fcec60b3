-- The HNSW index, defined once: created here at install, dropped and rebuilt around bulk loads.

-- hybrid.resume_vector_index: build the HNSW index if missing (admin)
CREATE OR REPLACE FUNCTION hybrid.resume_vector_index() RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
SET client_min_messages = warning
AS $$
DECLARE
    -- the graph's density (pgvector's m and ef_construction; its defaults 16 and 64 without the
    -- settings): a denser graph costs build and insert time and finds the true neighbours of a
    -- large partition more often (bench/results/dense_tuning.md)
    v_m text := (SELECT s.value FROM hybrid.setting s WHERE s.key = 'hnsw_m');
    v_efc text := (SELECT s.value FROM hybrid.setting s WHERE s.key = 'hnsw_ef_construction');
    v_efc_min integer;
    v_with text := '';
BEGIN
    IF to_regclass('hybrid.chunk_embedding_hnsw') IS NOT NULL THEN
        RETURN false;
    END IF;
    IF v_m IS NOT NULL AND (v_m !~ '^[0-9]{1,3}$' OR v_m::integer NOT BETWEEN 2 AND 100) THEN
        RAISE EXCEPTION 'setting hnsw_m must be an integer between 2 and 100, got %', quote_literal(v_m)
            USING ERRCODE = '22023';
    END IF;
    v_efc_min := greatest(4, 2 * coalesce(v_m, '16')::integer);  -- pgvector: ef_construction >= 2 x m
    IF v_efc IS NOT NULL AND (v_efc !~ '^[0-9]{1,4}$' OR v_efc::integer NOT BETWEEN v_efc_min AND 1000) THEN
        RAISE EXCEPTION 'setting hnsw_ef_construction must be an integer between % (2 x hnsw_m) and 1000, got %',
            v_efc_min, quote_literal(v_efc) USING ERRCODE = '22023';
    END IF;
    IF v_m IS NOT NULL OR v_efc IS NOT NULL THEN
        v_with := format('WITH (m = %s, ef_construction = %s)', coalesce(v_m, '16'), coalesce(v_efc, '64'));
    END IF;
    -- at least 1GB for the build (a larger server setting is kept): past it HNSW builds slow ~4x
    IF pg_size_bytes(current_setting('maintenance_work_mem')) < pg_size_bytes('1GB') THEN
        PERFORM set_config('maintenance_work_mem', '1GB', true);
    END IF;
    EXECUTE format('CREATE INDEX chunk_embedding_hnsw ON hybrid.chunk USING hnsw (embedding vector_cosine_ops) %s '
                   'WHERE NOT superseded', v_with);
    DELETE FROM hybrid.setting WHERE key = 'vector_index_suspended';
    RETURN true;
END
$$;
COMMENT ON FUNCTION hybrid.resume_vector_index() IS
'Creates the HNSW index on chunk embeddings if it is missing (after hybrid.suspend_vector_index and a bulk load), with the settings hnsw_m and hnsw_ef_construction where present (pgvector''s defaults 16 and 64 otherwise); returns whether it built one. Admin only.';
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

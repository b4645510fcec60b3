-- The HNSW index, defined once: created here at install, dropped and rebuilt around bulk loads.

-- hybrid._valid_dense_kind: a dense index kind checked against the dimension's limits
CREATE OR REPLACE FUNCTION hybrid._valid_dense_kind(kind text, dim integer, name text DEFAULT 'kind') RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
-- pgvector 0.8 builds HNSW on vector up to 2,000 dimensions, on halfvec up to 4,000 and on bit up
-- to 64,000; a vector column holds up to 16,000. The column stays vector(dim) whatever the kind.
AS $$
BEGIN
    IF kind IS NULL OR kind NOT IN ('vector', 'halfvec', 'bit') THEN
        RAISE EXCEPTION '% must be vector, halfvec or bit, got %', name, hybrid._shown(kind)
            USING ERRCODE = '22023';
    END IF;
    IF (kind = 'vector' AND dim > 2000) OR (kind = 'halfvec' AND dim > 4000) THEN
        RAISE EXCEPTION '% %: pgvector builds HNSW on % up to % dimensions, this install stores %',
            name, kind, kind, CASE kind WHEN 'vector' THEN 2000 ELSE 4000 END, dim
            USING ERRCODE = '22023', HINT = 'Use halfvec (up to 4,000 dimensions) or bit.';
    END IF;
    RETURN kind;
END
$$;
COMMENT ON FUNCTION hybrid._valid_dense_kind(text, integer, text) IS
'Returns kind if it is a dense index kind (vector, halfvec, bit) pgvector can build HNSW on at dim dimensions (vector up to 2,000, halfvec up to 4,000, bit up to 64,000); raises 22023 naming name otherwise.';
REVOKE ALL ON FUNCTION hybrid._valid_dense_kind(text, integer, text) FROM PUBLIC;

-- hybrid._default_dense_kind: the index kind of a dimension where no setting chose one
CREATE OR REPLACE FUNCTION hybrid._default_dense_kind(dim integer) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT CASE WHEN dim <= 2000 THEN 'vector' WHEN dim <= 4000 THEN 'halfvec' ELSE 'bit' END $$;
COMMENT ON FUNCTION hybrid._default_dense_kind(integer) IS
'The HNSW index kind for dim dimensions when the setting dense_index_kind is absent: vector up to 2,000, halfvec up to 4,000, bit above (pgvector''s HNSW limits).';
REVOKE ALL ON FUNCTION hybrid._default_dense_kind(integer) FROM PUBLIC;

-- hybrid._dense_kind: what the HNSW index holds for embeddings of a dimension
CREATE OR REPLACE FUNCTION hybrid._dense_kind(dim integer) RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan  -- a setting's read, planned once a session (hybrid._hnsw_dense_vectors)
-- the setting dense_index_kind is written only by hybrid.set_dense_index_kind, in the transaction that
-- builds the index of that kind, so the kind read here is always the one the index holds
AS $$
    SELECT CASE WHEN v.kind IS NOT NULL THEN hybrid._valid_dense_kind(v.kind, dim, 'setting dense_index_kind')
                ELSE hybrid._default_dense_kind(dim) END
    FROM (SELECT (SELECT s.value FROM hybrid.setting s WHERE s.key = 'dense_index_kind') AS kind) v
$$;
COMMENT ON FUNCTION hybrid._dense_kind(integer) IS
'The HNSW index kind for embeddings of dim dimensions: the setting dense_index_kind where hybrid.set_dense_index_kind wrote it, else by the dimension: vector (up to 2,000: the embeddings themselves), halfvec (2,001 to 4,000: an expression index on embedding::halfvec(dim), ranked by the exact cosine of the vectors) or bit (4,001 to 16,000: binary_quantize(embedding)::bit(dim) by Hamming distance, a wider candidate list re-ranked by the exact cosine).';
REVOKE ALL ON FUNCTION hybrid._dense_kind(integer) FROM PUBLIC;

-- hybrid._dense_index_key: the HNSW index's key (expression and operator class) for a dimension
CREATE OR REPLACE FUNCTION hybrid._dense_index_key(dim integer, kind text DEFAULT NULL) RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT CASE coalesce(kind, hybrid._dense_kind(dim))
           WHEN 'vector' THEN 'embedding vector_cosine_ops'
           WHEN 'halfvec' THEN format('(embedding::halfvec(%s)) halfvec_cosine_ops', dim)
           ELSE format('(binary_quantize(embedding)::bit(%s)) bit_hamming_ops', dim) END
$$;
COMMENT ON FUNCTION hybrid._dense_index_key(integer, text) IS
'The key of hybrid.chunk_embedding_hnsw and its partitions'' indexes for dim dimensions (kind: hybrid._dense_kind(dim) unless given): the same expression and operator class on every partition, the one hybrid.search_dense orders by.';
REVOKE ALL ON FUNCTION hybrid._dense_index_key(integer, text) FROM PUBLIC;

-- hybrid._hnsw_density: the HNSW graph's density for a partition of so many rows (admin)
CREATE OR REPLACE FUNCTION hybrid._hnsw_density(live_rows double precision, OUT m integer, OUT ef_construction integer)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    -- pgvector's m and ef_construction. The settings hnsw_m and hnsw_ef_construction, where present,
    -- fix them for every partition. Otherwise a partition gets pgvector's defaults (16, 64) below
    -- hnsw_dense_rows live chunks (setting, default 100,000) and (24, 128) from there: on the
    -- synthetic benchmark's vectors (bench/FINDINGS.md#exact-scan-against-hnsw-per-partition-size-dense_tuning-dense_exact_topn) recall@10 with (16, 64) was
    -- 0.991 at 100,000 chunks (ef_search 300) but at most 0.967 at 500,000 whatever the ef_search;
    -- (24, 128) reached 0.992 / 0.998 there at ef_search 200 / 400, for 2.2x the build time (on
    -- the product path at 1M chunks: 0.995 at ef_search 671,
    -- bench/FINDINGS.md#hnsw-misses-at-1m-why-the-50-tenant-loses-some-queries-density_ab-density_ab_1m_findings;
    -- at the 300 of hybrid._dense_plan with the audit, bench/FINDINGS.md#a-wider-list-before-the-exact-scan-breadth_ab).
    v_m text := (SELECT s.value FROM hybrid.setting s WHERE s.key = 'hnsw_m');
    v_efc text := (SELECT s.value FROM hybrid.setting s WHERE s.key = 'hnsw_ef_construction');
    v_dense text := (SELECT s.value FROM hybrid.setting s WHERE s.key = 'hnsw_dense_rows');
    v_efc_min integer;
BEGIN
    IF v_m IS NOT NULL AND (v_m !~ '^[0-9]{1,3}$' OR v_m::integer NOT BETWEEN 2 AND 100) THEN
        RAISE EXCEPTION 'setting hnsw_m must be an integer between 2 and 100, got %', hybrid._shown(v_m)
            USING ERRCODE = '22023';
    END IF;
    v_efc_min := greatest(4, 2 * coalesce(v_m, '16')::integer);  -- pgvector: ef_construction >= 2 x m
    IF v_efc IS NOT NULL AND (v_efc !~ '^[0-9]{1,4}$' OR v_efc::integer NOT BETWEEN v_efc_min AND 1000) THEN
        RAISE EXCEPTION 'setting hnsw_ef_construction must be an integer between % (2 x hnsw_m) and 1000, got %',
            v_efc_min, hybrid._shown(v_efc) USING ERRCODE = '22023';
    END IF;
    IF v_dense IS NOT NULL AND v_dense !~ '^[0-9]{1,12}$' THEN
        RAISE EXCEPTION 'setting hnsw_dense_rows must be a non-negative integer, got %', hybrid._shown(v_dense)
            USING ERRCODE = '22023';
    END IF;
    IF v_m IS NOT NULL OR v_efc IS NOT NULL THEN
        m := coalesce(v_m, '16')::integer;
        ef_construction := coalesce(v_efc, '64')::integer;
    ELSIF coalesce(live_rows, 0) >= coalesce(v_dense, '100000')::bigint THEN
        m := 24;
        ef_construction := 128;
    ELSE
        m := 16;
        ef_construction := 64;
    END IF;
END
$$;
COMMENT ON FUNCTION hybrid._hnsw_density(double precision) IS
'The HNSW graph density (m, ef_construction) for a partition of live_rows chunks: the settings hnsw_m and hnsw_ef_construction where present (for every partition); otherwise pgvector''s 16 and 64, and 24 and 128 from hnsw_dense_rows live chunks (setting, default 100,000). Raises 22023 for a malformed setting.';
REVOKE ALL ON FUNCTION hybrid._hnsw_density(double precision) FROM PUBLIC;

-- hybrid._hnsw_build_memory: maintenance_work_mem for an HNSW build of so many rows
CREATE OR REPLACE FUNCTION hybrid._hnsw_build_memory(live_rows double precision, m integer) RETURNS bigint
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
-- the graph in memory for the build: past maintenance_work_mem pgvector builds ~4x slower
-- (measured); at least 1GB, or what the graph takes (its vector, ~200 bytes and 40 per unit of m a
-- row: the "no longer fits" notices of dense_tuning.md at commit 49a26d2), at most 8GB. The vector
-- is what the index holds: 4 bytes a dimension, 2 for halfvec, 1/8 for bit (hybrid._dense_kind).
AS $$ SELECT least(pg_size_bytes('8GB'), greatest(pg_size_bytes('1GB'),
          (greatest(coalesce(live_rows, 0), 0)
           * (CASE hybrid._dense_kind(hybrid.embedding_dim()) WHEN 'vector' THEN 4 * hybrid.embedding_dim()
                   WHEN 'halfvec' THEN 2 * hybrid.embedding_dim() ELSE hybrid.embedding_dim() / 8 + 1 END
              + 200 + 40 * m))::bigint)) $$;
COMMENT ON FUNCTION hybrid._hnsw_build_memory(double precision, integer) IS
'Bytes of maintenance_work_mem an HNSW build of live_rows chunks at density m needs to keep its graph in memory: 1GB to 8GB.';
REVOKE ALL ON FUNCTION hybrid._hnsw_build_memory(double precision, integer) FROM PUBLIC;

-- hybrid._ivfflat_lists: the IVFFlat lists of a partition of so many rows, or NULL where it gets HNSW (admin)
CREATE OR REPLACE FUNCTION hybrid._ivfflat_lists(live_rows double precision) RETURNS integer
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    -- A partition of at least ivfflat_rows live chunks (setting, default 10,000; 0: never) gets a
    -- pgvector IVFFlat index where the engine builds its dense index (a bulk load's rebuild,
    -- hybrid.resume_vector_index, hybrid.set_dense_index_kind), with sqrt(2 x rows) lists, searched
    -- 20 lists at a time (setting ivfflat_probes): on the 1M benchmark's 500,000-chunk partition it
    -- built in 38 to 43 core-seconds against HNSW's (24, 128) 452, recalled 0.996 to 0.997 over 3 builds
    -- against 0.987 (both without the audit) at about twice HNSW's p50, and took inserts 13x faster;
    -- from 24,144 chunks every build recalled at least HNSW's; at 10,730 and 13,796 chunks the builds
    -- recalled 0.990 to 0.998 against HNSW's 0.990 and 0.996 (one query at 0 of HNSW's, none of IVFFlat's)
    -- for an eighth of the build's core-seconds and 3x the inserts (a later run than the 20,000 first chosen;
    -- docs/benchmarks.md#hnsw-against-ivfflat-by-partition-size). Only where the index holds the
    -- vectors (kind vector); new tenants and smaller partitions get HNSW. Its lists are fixed when built.
    v_min text := (SELECT s.value FROM hybrid.setting s WHERE s.key = 'ivfflat_rows');
BEGIN
    IF v_min IS NOT NULL AND v_min !~ '^[0-9]{1,12}$' THEN
        RAISE EXCEPTION 'setting ivfflat_rows must be a non-negative integer, got %', hybrid._shown(v_min)
            USING ERRCODE = '22023';
    END IF;
    IF coalesce(v_min, '10000')::bigint = 0 OR coalesce(live_rows, 0) < coalesce(v_min, '10000')::bigint THEN
        RETURN NULL;
    END IF;
    RETURN least(32768, ceil(sqrt(2 * live_rows)))::integer;  -- pgvector: at most 32,768 lists
END
$$;
COMMENT ON FUNCTION hybrid._ivfflat_lists(double precision) IS
'The lists of the IVFFlat index a partition of live_rows chunks gets where the index holds the vectors (dense kind vector: the callers check), ceil(sqrt(2 x live_rows)); NULL where it gets HNSW: below setting ivfflat_rows (default 10,000; 0: never). Raises 22023 for a malformed setting.';
REVOKE ALL ON FUNCTION hybrid._ivfflat_lists(double precision) FROM PUBLIC;

-- hybrid._attach_partition_dense: attach a partition's dense index to hybrid.chunk_embedding_hnsw if it is HNSW
CREATE OR REPLACE FUNCTION hybrid._attach_partition_dense(index_name text) RETURNS boolean
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, public, pg_temp
AS $$
BEGIN
    -- a partitioned index has one access method: an IVFFlat index stays the partition's own (the parent's
    -- index then stays invalid, which the planner does not read: each partition is planned with its own)
    IF (SELECT a.amname FROM pg_class i JOIN pg_am a ON a.oid = i.relam
        WHERE i.oid = to_regclass(format('hybrid.%I', index_name))) = 'hnsw' THEN
        EXECUTE format('ALTER INDEX hybrid.chunk_embedding_hnsw ATTACH PARTITION hybrid.%I', index_name);
        RETURN true;
    END IF;
    RETURN false;
END
$$;
COMMENT ON FUNCTION hybrid._attach_partition_dense(text) IS
'Attaches hybrid.<index_name>, a partition''s dense index, to hybrid.chunk_embedding_hnsw if it is an HNSW index; an IVFFlat index (hybrid._ivfflat_lists) stays the partition''s own. Returns whether it attached. Admin only.';
REVOKE ALL ON FUNCTION hybrid._attach_partition_dense(text) FROM PUBLIC;

-- hybrid._drop_partition_dense: drop the partitions' dense indexes that no parent index holds (admin)
CREATE OR REPLACE FUNCTION hybrid._drop_partition_dense() RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, public, pg_temp
AS $$
DECLARE
    v_idx regclass;
BEGIN
    -- the IVFFlat indexes, which dropping hybrid.chunk_embedding_hnsw leaves behind
    FOR v_idx IN SELECT to_regclass(format('hybrid.%I', c.relname || '_embedding_idx'))
                 FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
                 WHERE i.inhparent = 'hybrid.chunk'::regclass LOOP
        IF v_idx IS NOT NULL AND NOT EXISTS (SELECT 1 FROM pg_inherits h WHERE h.inhrelid = v_idx) THEN
            EXECUTE format('DROP INDEX %s', v_idx);
        END IF;
    END LOOP;
END
$$;
COMMENT ON FUNCTION hybrid._drop_partition_dense() IS
'Drops each partition''s <partition>_embedding_idx that is not attached to a parent index (the IVFFlat ones, once hybrid.chunk_embedding_hnsw is dropped). Admin only.';
REVOKE ALL ON FUNCTION hybrid._drop_partition_dense() FROM PUBLIC;

-- hybrid._pool_graph_options: the storage options of the pool's HNSW indexes (dense and sparse)
CREATE OR REPLACE FUNCTION hybrid._pool_graph_options() RETURNS text
LANGUAGE sql IMMUTABLE
AS $$ SELECT 'm = 2, ef_construction = 4' $$;
COMMENT ON FUNCTION hybrid._pool_graph_options() IS
'The storage options of the pool''s HNSW indexes, pgvector''s lightest graph: no pooled tenant is searched through them (its dense and sparse searches are exact over its own rows, hybrid._dense_plan), they exist because hybrid.chunk''s indexes cover every partition, and at the default density each pooled insert paid for a graph search (docs/benchmarks.md, "Pooled tenants"). Revision 0024 set them on the existing pool; hybrid._build_partition_hnsw builds the pool''s with them. Admin only.';
REVOKE ALL ON FUNCTION hybrid._pool_graph_options() FROM PUBLIC;

-- hybrid._build_partition_hnsw: one partition's HNSW index, as dense as its size calls for (admin)
CREATE OR REPLACE FUNCTION hybrid._build_partition_hnsw(part regclass, index_name text) RETURNS text
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
SET client_min_messages = warning
AS $$
DECLARE
    v_rows bigint;
    v_m integer;
    v_efc integer;
    v_with text := '';
    v_mem bigint;
    v_lists integer;
BEGIN
    IF (SELECT c.relkind FROM pg_class c WHERE c.oid = part) = 'p' THEN
        -- the pool (over its leaves): no pooled tenant is searched through it (hybrid._dense_plan), so the lightest
        -- graph pgvector builds (hybrid._pool_graph_options), which keeps hybrid.chunk_embedding_hnsw whole
        EXECUTE format('CREATE INDEX %I ON %s USING hnsw (%s) WITH (%s) WHERE NOT superseded',
                       index_name, part, hybrid._dense_index_key(hybrid.embedding_dim()), hybrid._pool_graph_options());
        RETURN format('%s, the pool''s (exact search for pooled tenants)', hybrid._pool_graph_options());
    END IF;
    EXECUTE format('SELECT count(*) FROM %s WHERE NOT superseded AND embedding IS NOT NULL', part) INTO v_rows;
    v_lists := CASE WHEN hybrid._dense_kind(hybrid.embedding_dim()) = 'vector' THEN hybrid._ivfflat_lists(v_rows) END;
    IF v_lists IS NOT NULL THEN
        -- the k-means sample (50 rows a list) and the lists' centres fit in 1GB up to pgvector's 32,768 lists
        IF pg_size_bytes(current_setting('maintenance_work_mem')) < pg_size_bytes('1GB') THEN
            PERFORM set_config('maintenance_work_mem', '1GB', true);
        END IF;
        EXECUTE format('CREATE INDEX %I ON %s USING ivfflat (%s) WITH (lists = %s) WHERE NOT superseded',
                       index_name, part, hybrid._dense_index_key(hybrid.embedding_dim()), v_lists);
        RETURN format('ivfflat, lists %s, %s rows', v_lists, v_rows);
    END IF;
    SELECT d.m, d.ef_construction INTO v_m, v_efc FROM hybrid._hnsw_density(v_rows) d;
    IF (v_m, v_efc) <> (16, 64) THEN
        v_with := format('WITH (m = %s, ef_construction = %s)', v_m, v_efc);
    END IF;
    v_mem := hybrid._hnsw_build_memory(v_rows, v_m);
    IF pg_size_bytes(current_setting('maintenance_work_mem')) < v_mem THEN
        PERFORM set_config('maintenance_work_mem', (v_mem / 1024) || 'kB', true);
    END IF;
    EXECUTE format('CREATE INDEX %I ON %s USING hnsw (%s) %s WHERE NOT superseded',
                   index_name, part, hybrid._dense_index_key(hybrid.embedding_dim()), v_with);
    RETURN format('m %s, ef_construction %s, %s rows', v_m, v_efc, v_rows);
END
$$;
COMMENT ON FUNCTION hybrid._build_partition_hnsw(regclass, text) IS
'Builds index_name, the dense index of one partition of hybrid.chunk (not attached to hybrid.chunk_embedding_hnsw; the pool''s, over its leaves, HNSW at hybrid._pool_graph_options: no pooled tenant is searched through it): IVFFlat where hybrid._ivfflat_lists gives its live rows lists, else HNSW with the density hybrid._hnsw_density gives them and enough maintenance_work_mem for the graph (1GB to 8GB); returns the kind, its parameters and the rows. Admin only.';
REVOKE ALL ON FUNCTION hybrid._build_partition_hnsw(regclass, text) FROM PUBLIC;

-- hybrid._create_parent_hnsw: hybrid.chunk's own (partitioned) HNSW index, no partition attached (admin)
CREATE OR REPLACE FUNCTION hybrid._create_parent_hnsw() RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, public, pg_temp
AS $$
DECLARE
    v_base record;
BEGIN
    -- the parent's index holds the density a new (empty) partition gets when create_tenant attaches it
    SELECT * INTO v_base FROM hybrid._hnsw_density(0);
    EXECUTE format('CREATE INDEX chunk_embedding_hnsw ON ONLY hybrid.chunk USING hnsw (%s) %s WHERE NOT superseded',
                   hybrid._dense_index_key(hybrid.embedding_dim()),
                   CASE WHEN (v_base.m, v_base.ef_construction) <> (16, 64)
                        THEN format('WITH (m = %s, ef_construction = %s)', v_base.m, v_base.ef_construction) ELSE '' END);
END
$$;
COMMENT ON FUNCTION hybrid._create_parent_hnsw() IS
'Creates hybrid.chunk_embedding_hnsw on hybrid.chunk only, with the key of hybrid._dense_index_key and the density an empty partition gets (hybrid._hnsw_density(0)); the callers build and attach each partition''s index. Admin only (hybrid.resume_vector_index, hybrid.set_dense_index_kind).';
REVOKE ALL ON FUNCTION hybrid._create_parent_hnsw() FROM PUBLIC;

-- hybrid.resume_vector_index: build the HNSW index if missing (admin)
CREATE OR REPLACE FUNCTION hybrid.resume_vector_index() RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
SET client_min_messages = warning
AS $$
DECLARE
    v_base record;
    v_part regclass;
    v_rel text;
    v_pre regclass;
    v_opc text := split_part(hybrid._dense_index_key(hybrid.embedding_dim()), ' ', -1);
BEGIN
    SELECT * INTO v_base FROM hybrid._hnsw_density(0);  -- raises for malformed settings before anything is built
    IF to_regclass('hybrid.chunk_embedding_hnsw') IS NOT NULL THEN
        RETURN false;
    END IF;
    -- each existing partition gets its own index, as dense as its rows call for, attached to it
    PERFORM hybrid._create_parent_hnsw();
    FOR v_part, v_rel IN SELECT i.inhrelid::regclass, c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
                         WHERE i.inhparent = 'hybrid.chunk'::regclass ORDER BY i.inhrelid LOOP
        -- one hybrid.build_partition_index built beforehand (on another connection) is kept as it is
        -- if it is a valid HNSW or IVFFlat index of this partition with the parent's key (an HNSW one is
        -- attached); anything else there is rebuilt
        v_pre := to_regclass(format('hybrid.%I', v_rel || '_embedding_idx'));
        IF v_pre IS NOT NULL AND NOT EXISTS (
                SELECT 1 FROM pg_index x JOIN pg_opclass o ON o.oid = x.indclass[0]
                JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_am a ON a.oid = i.relam
                WHERE x.indexrelid = v_pre AND x.indrelid = v_part AND x.indisvalid AND x.indisready
                  AND o.opcname = v_opc AND x.indpred IS NOT NULL AND a.amname IN ('hnsw', 'ivfflat')) THEN
            EXECUTE format('DROP INDEX %s', v_pre);
            v_pre := NULL;
        END IF;
        IF v_pre IS NULL THEN
            PERFORM hybrid._build_partition_hnsw(v_part, v_rel || '_embedding_idx');
        END IF;
        PERFORM hybrid._attach_partition_dense(v_rel || '_embedding_idx');
    END LOOP;
    DELETE FROM hybrid.setting WHERE key = 'vector_index_suspended';
    -- the end of a bulk load: the dense audit's sample of each partition is cached (not yet defined
    -- while pyhybrid migrate applies this file: 050_search.sql defines it)
    BEGIN
        IF to_regprocedure('hybrid.refresh_audit_samples(text)') IS NOT NULL THEN
            PERFORM hybrid.refresh_audit_samples();
        END IF;
    EXCEPTION WHEN insufficient_privilege THEN
        NULL;  -- an owner under RLS: the audit reads its sample from the partition, as before
    END;
    RETURN true;
END
$$;
COMMENT ON FUNCTION hybrid.resume_vector_index() IS
'Creates the HNSW index on chunk embeddings if it is missing (after hybrid.suspend_vector_index and a bulk load): one index per partition (keeping the valid ones hybrid.build_partition_index built beforehand); a partition of at least ivfflat_rows live chunks (setting, default 10,000) gets an IVFFlat index of its own instead (hybrid._ivfflat_lists), the others HNSW indexes attached to it, as dense as hybrid._hnsw_density gives for its live rows (settings hnsw_m and hnsw_ef_construction for all where present; pgvector''s 16 and 64 below hnsw_dense_rows, default 100,000, and 24 and 128 from there), then caches the dense audit''s samples (hybrid.refresh_audit_samples, where its owner bypasses RLS); returns whether it built one. Admin only.';
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
    PERFORM hybrid._drop_partition_dense();  -- the partitions' IVFFlat indexes: inserting costs there too
    -- re-applying sql/idempotent/ (an upgrade) must not rebuild it in the middle of the load
    INSERT INTO hybrid.setting (key, value) VALUES ('vector_index_suspended', now()::text)
    ON CONFLICT (key) DO NOTHING;
    RETURN true;
END
$$;
COMMENT ON FUNCTION hybrid.suspend_vector_index() IS
'Drops the HNSW index, and the partitions'' IVFFlat indexes, for a bulk load (rebuild them with hybrid.resume_vector_index); returns whether it dropped one. Admin only.';
REVOKE ALL ON FUNCTION hybrid.suspend_vector_index() FROM PUBLIC;

-- hybrid.suspend_text_indexes: drop the GIN and BM25 indexes for a bulk load (admin)
CREATE OR REPLACE FUNCTION hybrid.suspend_text_indexes() RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
AS $$
DECLARE
    v_gin boolean := to_regclass('hybrid.chunk_tsv_gin') IS NOT NULL;
    v_bm25 boolean := to_regclass('hybrid.chunk_content_bm25') IS NOT NULL;
BEGIN
    IF NOT (v_gin OR v_bm25) THEN
        RETURN false;
    END IF;
    -- A row's GIN and BM25 entries cost a load about twice its heap row; building both afterwards
    -- costs a fraction of that, and the serial BM25 build writes the one segment hybrid.merge_bm25
    -- would (bench/FINDINGS.md#text-indexes-during-a-bulk-load-textidx_ab). Meanwhile the lexical
    -- branch stays correct (BM25 by the SQL scorer over the tenant's partition) but slow for large tenants.
    -- the time of this transaction: hybrid.resume_text_indexes tells by it a drop in its own transaction
    INSERT INTO hybrid.setting (key, value) VALUES ('text_indexes_suspended', now()::text)
    ON CONFLICT (key) DO UPDATE SET value = excluded.value;
    IF v_gin THEN
        DROP INDEX hybrid.chunk_tsv_gin;
    END IF;
    IF v_bm25 THEN
        -- what is recorded of the partitions' indexes goes with them (an oid may be used again)
        DELETE FROM hybrid.bm25_merged m WHERE m.index_oid IN
            (SELECT i.inhrelid FROM pg_inherits i WHERE i.inhparent = 'hybrid.chunk_content_bm25'::regclass);
        DELETE FROM hybrid.bm25_index_checked c WHERE c.index_oid IN
            (SELECT i.inhrelid FROM pg_inherits i WHERE i.inhparent = 'hybrid.chunk_content_bm25'::regclass);
        -- last: dropping a BM25 index frees pg_textsearch's shared state at once, even if the
        -- transaction then rolls back (timescale/pg_textsearch#506), so nothing may fail after it
        DROP INDEX hybrid.chunk_content_bm25;
    END IF;
    RETURN true;
END
$$;
COMMENT ON FUNCTION hybrid.suspend_text_indexes() IS
'Drops the GIN (hybrid.chunk_tsv_gin) and BM25 (hybrid.chunk_content_bm25) indexes for a bulk load, and records it (setting text_indexes_suspended); rebuild them with hybrid.resume_text_indexes in a later transaction. Meanwhile BM25 comes from the exact SQL scorer (the tenant''s statistics stay current), correct but reading the whole partition. Call it as a transaction of its own: a rollback after it can crash the backends that used the BM25 index (pg_textsearch 1.0, timescale/pg_textsearch#506). Returns whether it dropped one. Admin only.';
REVOKE ALL ON FUNCTION hybrid.suspend_text_indexes() FROM PUBLIC;

-- hybrid._text_index_sql: the CREATE INDEX of a text index on hybrid.chunk or one partition of it (admin)
CREATE OR REPLACE FUNCTION hybrid._text_index_sql(kind text, rel regclass, index_name text) RETURNS text
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
-- the definitions of sql/incremental/0004_tenant_partitions.sql (GIN) and sql/optional/bm25_index.sql
-- (BM25), written once: a partition's index built beforehand is attached to the parent's only if it
-- matches it
AS $$
    SELECT CASE kind
           WHEN 'gin' THEN format('CREATE INDEX %I ON %s USING gin (tsv) WHERE NOT superseded', index_name, rel)
           -- a partition's: its tenant's language (hybrid.set_tenant_language)
           WHEN 'bm25' THEN format('CREATE INDEX %I ON %s USING bm25 (content) WITH (text_config = %L)', index_name, rel,
                                   coalesce((SELECT t.text_config FROM hybrid.tenant t
                                             WHERE t.tenant_key = (SELECT substring(c.relname FROM '^chunk_p([0-9]+)$')::integer
                                                                   FROM pg_class c WHERE c.oid = rel)), 'english')) END
$$;
COMMENT ON FUNCTION hybrid._text_index_sql(text, regclass, text) IS
'The CREATE INDEX statement of the text index kind (gin: hybrid.chunk_tsv_gin''s, bm25: hybrid.chunk_content_bm25''s) named index_name on rel, hybrid.chunk or one of its partitions. Admin only.';
REVOKE ALL ON FUNCTION hybrid._text_index_sql(text, regclass, text) FROM PUBLIC;

-- hybrid._build_text_index: build one text index as a bulk load's rebuild builds it (admin)
CREATE OR REPLACE FUNCTION hybrid._build_text_index(kind text, rel regclass, index_name text, caller text) RETURNS boolean
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, public, pg_temp
AS $$
DECLARE
    v_workers text := current_setting('max_parallel_maintenance_workers');
    v_sql text := hybrid._text_index_sql(kind, rel, index_name);
BEGIN
    IF pg_size_bytes(current_setting('maintenance_work_mem')) < pg_size_bytes('1GB') THEN
        PERFORM set_config('maintenance_work_mem', '1GB', true);
    END IF;
    IF kind <> 'bm25' THEN
        EXECUTE v_sql;
        RETURN true;
    END IF;
    IF (SELECT s.value FROM hybrid.setting s WHERE s.key = 'text_indexes_suspended') = now()::text THEN
        -- dropped in this transaction: pg_textsearch 1.0 left a BM25 index built after a drop in the same
        -- transaction with corrupt shared state (pyhybrid.migrate._drop_unpartitioned_bm25); and no error
        -- either, since a rollback after that drop can crash the backends that used the index
        RAISE WARNING '%: the BM25 index was dropped in this transaction; it is built only in a later one', caller
            USING HINT = format('Commit, then call %s again.', caller);
        RETURN false;
    END IF;
    -- before 1.3.1 only a serial build writes the one segment whose scan scores are exact (see
    -- hybrid.merge_bm25); pg_textsearch builds 100,000 rows or more in parallel otherwise, and fails
    -- with 53000 where no worker can start
    IF NOT hybrid._bm25_fixed('rescan') THEN
        PERFORM set_config('max_parallel_maintenance_workers', '0', true);
    END IF;
    BEGIN
        EXECUTE v_sql;
    EXCEPTION WHEN SQLSTATE '53000' THEN
        PERFORM set_config('max_parallel_maintenance_workers', '0', true);
        EXECUTE v_sql;
    END;
    PERFORM set_config('max_parallel_maintenance_workers', v_workers, true);
    RETURN true;
END
$$;
COMMENT ON FUNCTION hybrid._build_text_index(text, regclass, text, text) IS
'Builds the text index kind (gin, bm25) named index_name on rel (hybrid.chunk or a partition) with maintenance_work_mem at least 1GB, a BM25 index serially before pg_textsearch 1.3.1 (one segment); not a BM25 index in the transaction that dropped the BM25 indexes (a WARNING naming caller, and false). Returns whether it built. Admin only (hybrid.resume_text_indexes, hybrid.build_partition_index).';
REVOKE ALL ON FUNCTION hybrid._build_text_index(text, regclass, text, text) FROM PUBLIC;

-- hybrid.resume_text_indexes: build the GIN and BM25 indexes if missing (admin)
CREATE OR REPLACE FUNCTION hybrid.resume_text_indexes() RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
SET client_min_messages = warning
AS $$
DECLARE
    v_built boolean := false;
    v_part regclass;
BEGIN
    IF to_regclass('hybrid.chunk_tsv_gin') IS NULL THEN
        -- each partition's index with it: built here, or attached where hybrid.build_partition_index
        -- built it beforehand (PostgreSQL attaches a partition's matching index instead of building one)
        v_built := hybrid._build_text_index('gin', 'hybrid.chunk', 'chunk_tsv_gin', 'hybrid.resume_text_indexes');
    END IF;
    IF to_regclass('hybrid.chunk_content_bm25') IS NULL
       AND EXISTS (SELECT 1 FROM pg_extension e WHERE e.extname = 'pg_textsearch') THEN
        IF NOT hybrid._build_text_index('bm25', 'hybrid.chunk', 'chunk_content_bm25', 'hybrid.resume_text_indexes') THEN
            RETURN v_built;  -- dropped in this transaction (a WARNING): built in a later one
        END IF;
        -- writers wait for this transaction (CREATE INDEX holds each partition in SHARE mode), so
        -- the segments read here are what the lexical branch will scan
        PERFORM hybrid._bm25_text_configs();  -- a tenant of another language, whose index was built for the parent's
        FOR v_part IN SELECT i.inhrelid::regclass FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
                      WHERE i.inhparent = 'hybrid.chunk_content_bm25'::regclass AND c.relkind = 'i'  -- not the pool's
                      ORDER BY 1 LOOP
            PERFORM hybrid._bm25_record_segments(v_part);
        END LOOP;
        v_built := true;
    END IF;
    DELETE FROM hybrid.setting WHERE key = 'text_indexes_suspended';
    RETURN v_built;
END
$$;
COMMENT ON FUNCTION hybrid.resume_text_indexes() IS
'Creates the GIN and BM25 indexes on chunk content if they are missing (after hybrid.suspend_text_indexes and a bulk load), one per partition, attaching those hybrid.build_partition_index built beforehand: the BM25 ones serially before pg_textsearch 1.3.1, so each is one segment recorded in hybrid.bm25_merged (what hybrid.merge_bm25 would leave); with maintenance_work_mem at least 1GB. Not the BM25 index in the transaction that dropped it (a WARNING; call it again after the commit). Returns whether it built one. Admin only.';
REVOKE ALL ON FUNCTION hybrid.resume_text_indexes() FROM PUBLIC;

-- hybrid.bulk_index_jobs: the partition indexes a bulk load's rebuild builds, largest first (admin)
CREATE OR REPLACE FUNCTION hybrid.bulk_index_jobs()
RETURNS TABLE (part regclass, kind text, bytes bigint)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    -- Each index held off by hybrid.suspend_vector_index / suspend_text_indexes is one index a partition
    -- once rebuilt. hybrid.build_partition_index builds them one at a time, so a client can build them on
    -- several connections at once (pyhybrid's bulk_load does), and resume_* then attaches them. Largest
    -- first, by the partition's size times about what a chunk of it costs to index (at 1M chunks on 2
    -- cores, in core-ms a chunk: HNSW 0.3 at m 16 and 1.1 at m 24, BM25 0.11, GIN 0.07), so the longest
    -- builds start first and the short ones fill the connections at the end.
    SELECT i.inhrelid::regclass, k.kind, pg_relation_size(i.inhrelid)
    FROM pg_inherits i
    JOIN pg_class c ON c.oid = i.inhrelid
    CROSS JOIN (VALUES ('hnsw', 'chunk_embedding_hnsw', '_embedding_idx', 'vector_index_suspended', 3),
                       ('bm25', 'chunk_content_bm25', '_content_idx', 'text_indexes_suspended', 1),
                       ('gin', 'chunk_tsv_gin', '_tsv_idx', 'text_indexes_suspended', 0.7)) k(kind, parent, suffix, flag, weight)
    WHERE i.inhparent = 'hybrid.chunk'::regclass
      AND c.relkind = 'r'  -- the tenants' partitions; the pool's leaves get theirs from the resume calls
      AND to_regclass('hybrid.' || k.parent) IS NULL
      AND EXISTS (SELECT 1 FROM hybrid.setting s WHERE s.key = k.flag)
      AND (k.kind <> 'bm25' OR EXISTS (SELECT 1 FROM pg_extension e WHERE e.extname = 'pg_textsearch'))
      AND to_regclass(format('hybrid.%I', c.relname || k.suffix)) IS NULL
    -- (an IVFFlat build, hybrid._ivfflat_lists: about 0.08 core-ms a chunk at 500,000 chunks)
    ORDER BY pg_relation_size(i.inhrelid)
             * CASE WHEN k.kind = 'hnsw' AND hybrid._dense_kind(hybrid.embedding_dim()) = 'vector'
                         AND hybrid._ivfflat_lists(c.reltuples) IS NOT NULL THEN 0.1 ELSE k.weight END DESC, 1, 2
$$;
COMMENT ON FUNCTION hybrid.bulk_index_jobs() IS
'The partition indexes that hybrid.resume_vector_index and hybrid.resume_text_indexes would build after a bulk load (those held off and not yet built beforehand): each partition and kind (hnsw: the dense index, IVFFlat where hybrid._ivfflat_lists gives lists; bm25, gin) with the partition''s size in bytes, the longest build first. Build each with hybrid.build_partition_index, on several connections at once if the server has the cores. Admin only.';
REVOKE ALL ON FUNCTION hybrid.bulk_index_jobs() FROM PUBLIC;

-- hybrid.build_partition_index: one partition's index of a kind held off by a bulk load (admin)
CREATE OR REPLACE FUNCTION hybrid.build_partition_index(part regclass, kind text) RETURNS text
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
SET client_min_messages = warning
AS $$
DECLARE
    v_rel text;
    v_name text;
BEGIN
    IF kind IS NULL OR kind NOT IN ('hnsw', 'bm25', 'gin') THEN
        RAISE EXCEPTION 'kind must be hnsw, bm25 or gin, got %', hybrid._shown(kind)
            USING ERRCODE = '22023';
    END IF;
    IF part IS NULL OR NOT EXISTS (SELECT 1 FROM pg_inherits i
                                   WHERE i.inhrelid = part AND i.inhparent = 'hybrid.chunk'::regclass) THEN
        RAISE EXCEPTION 'part must be a partition of hybrid.chunk, got %', coalesce(part::text, 'NULL')
            USING ERRCODE = '22023';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM hybrid.bulk_index_jobs() j WHERE j.part = build_partition_index.part
                                                            AND j.kind = build_partition_index.kind) THEN
        RETURN NULL;  -- not held off, or built already
    END IF;
    SELECT c.relname INTO v_rel FROM pg_class c WHERE c.oid = part;
    -- the names PostgreSQL gives a partition's index when the parent's is created (the GIN on tsv, the
    -- BM25 on content), and the one hybrid.resume_vector_index gives the HNSW's
    v_name := v_rel || CASE kind WHEN 'hnsw' THEN '_embedding_idx' WHEN 'bm25' THEN '_content_idx' ELSE '_tsv_idx' END;
    IF kind = 'hnsw' THEN
        PERFORM hybrid._build_partition_hnsw(part, v_name);
    ELSIF NOT hybrid._build_text_index(kind, part, v_name, 'hybrid.build_partition_index') THEN
        RETURN NULL;  -- BM25, in the transaction that dropped it (a WARNING)
    END IF;
    RETURN v_name;
END
$$;
COMMENT ON FUNCTION hybrid.build_partition_index(regclass, text) IS
'Builds the index of kind (hnsw, bm25 or gin) of part, a partition of hybrid.chunk, while a bulk load holds that index off (hybrid.bulk_index_jobs lists them), as hybrid.resume_vector_index / resume_text_indexes would build it; those attach it when they run. Each call is one build in its own transaction, so a client can run several on separate connections at once. Returns the index''s name, or NULL if there is nothing to build (or, with a WARNING, for a BM25 index in the transaction that dropped the BM25 indexes). Raises 22023 for a kind or part it does not know. Admin only.';
REVOKE ALL ON FUNCTION hybrid.build_partition_index(regclass, text) FROM PUBLIC;

-- hybrid.set_dense_index_kind: change what the HNSW index holds (admin)
CREATE OR REPLACE FUNCTION hybrid.set_dense_index_kind(kind text) RETURNS text
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
SET client_min_messages = warning
AS $$
DECLARE
    v_dim integer := hybrid.embedding_dim();
    v_kind text;
    v_opc text;
    v_part regclass;
    v_rel text;
    v_pre regclass;
    v_built integer := 0;
    v_reused integer := 0;
BEGIN
    IF kind IS NULL OR kind = 'auto' THEN
        DELETE FROM hybrid.setting WHERE key = 'dense_index_kind';
    ELSE
        PERFORM hybrid._valid_dense_kind(kind, v_dim);
        INSERT INTO hybrid.setting (key, value) VALUES ('dense_index_kind', kind)
        ON CONFLICT (key) DO UPDATE SET value = excluded.value;
    END IF;
    v_kind := hybrid._dense_kind(v_dim);
    v_opc := split_part(hybrid._dense_index_key(v_dim), ' ', -1);
    IF to_regclass('hybrid.chunk_embedding_hnsw') IS NULL THEN
        RETURN format('%s (the index is suspended: hybrid.resume_vector_index builds it so)', v_kind);
    END IF;
    IF (SELECT o.opcname FROM pg_index x JOIN pg_opclass o ON o.oid = x.indclass[0]
        WHERE x.indexrelid = 'hybrid.chunk_embedding_hnsw'::regclass) = v_opc THEN
        RETURN format('%s (the index holds it already)', v_kind);
    END IF;
    -- the setting and the index change in this one transaction: hybrid.search_dense reads the kind
    -- from the setting, so it never orders by an expression no index holds
    DROP INDEX hybrid.chunk_embedding_hnsw;
    PERFORM hybrid._drop_partition_dense();
    PERFORM hybrid._create_parent_hnsw();
    FOR v_part, v_rel IN SELECT i.inhrelid::regclass, c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
                         WHERE i.inhparent = 'hybrid.chunk'::regclass ORDER BY i.inhrelid LOOP
        -- pyhybrid doctor --dense-kind builds <partition>_embedding_<kind> beforehand, CONCURRENTLY (reads
        -- and writes go on); a partition without a valid one (a tenant created since) is built here
        v_pre := to_regclass(format('hybrid.%I', v_rel || '_embedding_' || v_kind));
        IF v_pre IS NOT NULL AND EXISTS (
                SELECT 1 FROM pg_index x JOIN pg_opclass o ON o.oid = x.indclass[0]
                WHERE x.indexrelid = v_pre AND x.indrelid = v_part AND x.indisvalid AND x.indisready
                  AND o.opcname = v_opc AND x.indpred IS NOT NULL) THEN
            EXECUTE format('ALTER INDEX %s RENAME TO %I', v_pre, v_rel || '_embedding_idx');
            v_reused := v_reused + 1;
        ELSE
            IF v_pre IS NOT NULL THEN
                EXECUTE format('DROP INDEX %s', v_pre);
            END IF;
            PERFORM hybrid._build_partition_hnsw(v_part, v_rel || '_embedding_idx');
            -- (the pool's, over its leaves, is always built here: pooled tenants' writes wait for it)
            v_built := v_built + CASE WHEN v_rel = 'chunk_pool' THEN 0 ELSE 1 END;
        END IF;
        PERFORM hybrid._attach_partition_dense(v_rel || '_embedding_idx');
    END LOOP;
    RETURN format('%s (%s partition indexes built here, %s built beforehand%s)', v_kind, v_built, v_reused,
                  CASE WHEN to_regclass('hybrid.chunk_pool') IS NOT NULL THEN ', the pool''s built here' ELSE '' END);
END
$$;
COMMENT ON FUNCTION hybrid.set_dense_index_kind(text) IS
'Changes what the HNSW index holds: kind vector, halfvec or bit (hybrid._valid_dense_kind: within pgvector''s dimension limits), or auto / NULL for the dimension''s default (hybrid._dense_kind); writes the setting dense_index_kind and, in the same transaction, replaces hybrid.chunk_embedding_hnsw by an index of that kind, each partition''s either the valid index <partition>_embedding_<kind> built beforehand (pyhybrid doctor --dense-kind builds them CONCURRENTLY) or built here (which holds the partition''s writes until commit). While the index is suspended it only writes the setting. Returns the kind and what it built. Admin only.';
REVOKE ALL ON FUNCTION hybrid.set_dense_index_kind(text) FROM PUBLIC;

-- hybrid.vector_index_density: each tenant's HNSW graph density, and the one its size calls for (admin)
CREATE OR REPLACE FUNCTION hybrid.vector_index_density()
RETURNS TABLE (tenant_id text, index_name text, live_rows bigint, m integer, ef_construction integer,
               due_m integer, due_ef_construction integer, build_memory text)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    -- a partition's index keeps the density it was built with while its tenant grows by online
    -- ingest: those whose rows now call for a denser graph are due for a rebuild (pyhybrid doctor
    -- --densify: REINDEX CONCURRENTLY, reads and writes go on). Rows from the statistics (no scan).
    SELECT t.tenant_id, i.relname::text, greatest(p.reltuples, 0)::bigint,
           coalesce((SELECT split_part(o, '=', 2)::integer FROM unnest(i.reloptions) o WHERE o LIKE 'm=%'), 16),
           coalesce((SELECT split_part(o, '=', 2)::integer FROM unnest(i.reloptions) o WHERE o LIKE 'ef_construction=%'), 64),
           d.m, d.ef_construction,
           pg_size_pretty(hybrid._hnsw_build_memory(p.reltuples, d.m))
    FROM hybrid.tenant t
    JOIN pg_class p ON p.oid = hybrid._chunk_partition(t.tenant_key)
    JOIN pg_inherits h ON h.inhparent = to_regclass('hybrid.chunk_embedding_hnsw')
    JOIN pg_index x ON x.indexrelid = h.inhrelid AND x.indrelid = p.oid
    JOIN pg_class i ON i.oid = x.indexrelid
    CROSS JOIN LATERAL hybrid._hnsw_density(p.reltuples) d
    ORDER BY p.reltuples DESC, t.tenant_id
$$;
COMMENT ON FUNCTION hybrid.vector_index_density() IS
'Each tenant''s partition HNSW index (its name in schema hybrid): its live rows (the partition''s statistics), the density it was built with (m, ef_construction) and the one hybrid._hnsw_density gives for its rows now (due_m, due_ef_construction), with the maintenance_work_mem a rebuild needs. A tenant grown by online ingest past hnsw_dense_rows is due: ALTER INDEX ... SET (m, ef_construction) and REINDEX INDEX CONCURRENTLY (pyhybrid doctor --densify). Admin only.';
REVOKE ALL ON FUNCTION hybrid.vector_index_density() FROM PUBLIC;

-- at install, and after an upgrade that found it missing, unless a bulk load holds it off
SELECT hybrid.resume_vector_index()
WHERE NOT EXISTS (SELECT 1 FROM hybrid.setting WHERE key = 'vector_index_suspended');

-- The dense audit's sample (hybrid.search_dense): the live chunks in hashtext(chunk_id) order, one
-- index per partition. Revision 0014 creates it; re-created here if it went missing (pyhybrid migrate
-- --reapply), as without it each audit would sort the whole partition.
CREATE INDEX IF NOT EXISTS chunk_audit_sample_idx ON hybrid.chunk (hashtext(chunk_id)) WHERE NOT superseded;

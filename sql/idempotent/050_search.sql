-- Retrieval: the visibility rule, one branch function per source, and the RRF fusion.

-- hybrid._visible: the visibility rule (tenant, live, ACL), inlined
CREATE OR REPLACE FUNCTION hybrid._visible(row_tenant text, row_superseded boolean, row_acl text[],
                                           tenant text, acl text[], acl_all boolean) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
-- no SET clause and not SECURITY DEFINER: the planner inlines it, so "row_tenant = tenant" stays an
-- index condition on the tenant btree in every branch (tests/test_plans.py checks it)
AS $$
    SELECT row_tenant OPERATOR(pg_catalog.=) tenant AND NOT row_superseded
       AND (row_acl OPERATOR(pg_catalog.=) '{}'::text[] OR row_acl OPERATOR(pg_catalog.&&) acl OR acl_all)
$$;
COMMENT ON FUNCTION hybrid._visible(text, boolean, text[], text, text[], boolean) IS
'The visibility rule, written once: a chunk row is visible when it belongs to the caller''s tenant, is live, and carries no ACL label or one the caller holds (or the caller is an app role acting with all labels). Every branch and the hydration use it, with the caller''s hybrid._current_tenant(), _current_acl() and _acl_all(); RLS enforces the same on the tables.';

-- hybrid._scope_size: how many chunks the caller can see, up to a cap
DROP FUNCTION IF EXISTS hybrid._scope_size(text[], jsonb, integer);
CREATE OR REPLACE FUNCTION hybrid._scope_size(tenant_key integer, corpus_ids text[], filter jsonb, cap integer)
RETURNS integer
LANGUAGE sql STABLE SECURITY INVOKER
SET search_path = pg_catalog, public, pg_temp
SET plan_cache_mode = force_custom_plan  -- tenant_key a constant: the tenant's partition alone is planned
AS $$
    SELECT count(*)::integer FROM (
        SELECT 1 FROM hybrid.chunk c
        WHERE c.tenant_key = _scope_size.tenant_key
          AND hybrid._visible(c.tenant_id, c.superseded, c.acl_labels,
                              (SELECT hybrid._current_tenant()), (SELECT hybrid._current_acl()), (SELECT hybrid._acl_all()))
          AND (corpus_ids IS NULL OR c.corpus_id = ANY (corpus_ids))
          AND (filter IS NULL OR c.metadata @> filter)
        LIMIT cap + 1) s
$$;
COMMENT ON FUNCTION hybrid._scope_size(integer, text[], jsonb, integer) IS
'How many live chunks the caller can see in its partition and the given corpora (counting stops past cap): picks exact or index search.';

-- hybrid.search_dense: the dense branch
-- hybrid._hnsw_dense_vectors: whether a partition's HNSW index holds the vectors in the denser graph
CREATE OR REPLACE FUNCTION hybrid._hnsw_dense_vectors(part regclass) RETURNS boolean
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
-- its statement reads the catalogs only: planned once a session. The branches that call it and the helpers
-- below run under force_custom_plan (for their reads of hybrid.chunk), which planned these catalog and
-- settings reads anew on every call: 0.55 ms of a 1% tenant's 7.6 ms call at 1M chunks went to them
-- (pg_stat_user_functions; bench/FINDINGS.md#catalog-reads-planned-once-a-session-plan_mode_ab)
SET plan_cache_mode = force_generic_plan
AS $$
    -- the partition's HNSW indexes on the embedding column itself (no expression: kind vector), every one
    -- valid and built with m >= 24 and ef_construction >= 128 (hybrid._hnsw_density from hnsw_dense_rows;
    -- pgvector: 16 and 64). pyhybrid doctor --densify sets the old index's options before its REINDEX
    -- CONCURRENTLY, whose copy stays invalid until the swap: meanwhile the old, sparser graph serves, at 300
    SELECT coalesce((SELECT bool_and(x.indisvalid AND coalesce((SELECT split_part(o, '=', 2)::integer FROM unnest(i.reloptions) o WHERE o LIKE 'm=%'), 16) >= 24
                                     AND coalesce((SELECT split_part(o, '=', 2)::integer FROM unnest(i.reloptions) o
                                                   WHERE o LIKE 'ef\_construction=%'), 64) >= 128)
                     FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_am a ON a.oid = i.relam
                     WHERE x.indrelid = part AND a.amname = 'hnsw' AND x.indexprs IS NULL
                       AND x.indkey[0] = (SELECT t.attnum FROM pg_attribute t WHERE t.attrelid = part AND t.attname = 'embedding')), false)
$$;
COMMENT ON FUNCTION hybrid._hnsw_dense_vectors(regclass) IS
'True when the partition''s HNSW indexes on the embedding column itself (kind vector) are all valid and built with m >= 24 and ef_construction >= 128 (the graph hybrid._hnsw_density gives from hnsw_dense_rows; not while pyhybrid doctor --densify rebuilds one), where hybrid._dense_plan searches at ef_search 150 at most.';
REVOKE ALL ON FUNCTION hybrid._hnsw_dense_vectors(regclass) FROM PUBLIC;

-- hybrid._ivfflat_plan: how the dense branch searches a partition whose index is IVFFlat (NULL: it is not)
CREATE OR REPLACE FUNCTION hybrid._ivfflat_plan(tenant_key integer) RETURNS text
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan  -- catalogs and settings only (hybrid._hnsw_dense_vectors)
AS $$
    SELECT format('IVFFlat index, %s of %s lists', coalesce((SELECT s.value FROM hybrid.setting s WHERE s.key = 'ivfflat_probes'), '20'),
                  coalesce((SELECT split_part(o, '=', 2) FROM unnest(i.reloptions) o WHERE o LIKE 'lists=%'), '100'))
    FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_am a ON a.oid = i.relam
    WHERE x.indrelid = hybrid._chunk_partition(tenant_key) AND a.amname = 'ivfflat' AND x.indisvalid
    LIMIT 1
$$;
COMMENT ON FUNCTION hybrid._ivfflat_plan(integer) IS
'For explain_retrieve: "IVFFlat index, <probes> of <lists> lists" where the tenant''s partition has a valid IVFFlat index (hybrid._ivfflat_lists), else NULL (HNSW or none).';
REVOKE ALL ON FUNCTION hybrid._ivfflat_plan(integer) FROM PUBLIC;

-- hybrid._dense_plan: how the dense branch searches: 0 (an exact scan) or the HNSW ef_search to use
DROP FUNCTION IF EXISTS hybrid._dense_exact(integer, text[], jsonb, integer);
CREATE OR REPLACE FUNCTION hybrid._dense_plan(tenant_key integer, corpus_ids text[], filter jsonb,
                                              exact_threshold integer, top_k integer)
RETURNS integer
LANGUAGE plpgsql STABLE SECURITY INVOKER
SET search_path = pg_catalog, public, pg_temp
-- settings and catalogs only, planned once a session (hybrid._hnsw_dense_vectors); hybrid._scope_size,
-- which counts chunks, plans its own statement for the tenant's partition
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    -- Exact search up to exact_threshold chunks in scope (setting exact_threshold, default 500:
    -- where HNSW overtook an exact scan on this project's machine, bench/FINDINGS.md#exact-scan-against-hnsw-per-partition-size-dense_tuning-dense_exact_topn;
    -- at 1,000 chunks HNSW was 1.2-1.4x faster at recall@10 1.000, at 5,000 2.7x at 0.996)
    v_threshold integer;
    v_audit text := (SELECT s.value FROM hybrid.setting s WHERE s.key = 'dense_audit_rows');
    v_part regclass;
    v_rows double precision;
    v_scope double precision;
    v_ef integer;
BEGIN
    IF v_audit IS NOT NULL AND v_audit !~ '^[0-9]{1,9}$' THEN
        RAISE EXCEPTION 'setting dense_audit_rows must be a non-negative integer, got %', hybrid._shown(v_audit)
            USING ERRCODE = '22023';
    END IF;
    -- a pooled tenant is searched exactly, always: the pool's index holds its neighbours' vectors too (a post-filter
    -- loses recall), and a tenant large enough for an index of its own gets a partition (hybrid.move_tenant). Before
    -- the other lookups, which its call would compile and plan for nothing
    IF hybrid._pooled(tenant_key) THEN
        RETURN 0;
    END IF;
    v_threshold := coalesce(exact_threshold, (SELECT s.value::integer FROM hybrid.setting s WHERE s.key = 'exact_threshold'), 500);
    v_part := hybrid._chunk_partition(tenant_key);
    v_ef := (SELECT s.value::integer FROM hybrid.setting s WHERE s.key = 'hnsw_ef_search');
    -- unless the caller gives exact_threshold: a scope no larger than the audit's sample (hybrid.search_dense,
    -- setting dense_audit_rows) is searched exactly, as the audit would read as many rows as the exact scan
    IF exact_threshold IS NULL THEN
        v_threshold := greatest(v_threshold, coalesce(v_audit, '1000')::integer);
    END IF;
    -- the partition's size from its statistics (no scan); with corpus or filter, the visible rows
    -- are counted up to the threshold instead (counting a large tenant on every call cost +2 ms at
    -- 100k chunks, measured)
    v_rows := (SELECT c.reltuples FROM pg_class c WHERE c.oid = v_part);
    v_scope := v_rows;
    IF corpus_ids IS NOT NULL OR filter IS NOT NULL OR v_rows IS NULL OR v_rows < 0 THEN
        v_scope := hybrid._scope_size(tenant_key, corpus_ids, filter, v_threshold);
    END IF;
    IF v_scope <= v_threshold THEN
        RETURN 0;
    END IF;
    -- the search breadth: setting hnsw_ef_search, or by default growing with the square root of
    -- the partition's rows from 100 (up to ~11,000 chunks) to 300 (from 100,000, where partitions get
    -- the denser graph of hybrid._hnsw_density). Measured on the synthetic benchmark's clustered
    -- vectors (bench/FINDINGS.md#exact-scan-against-hnsw-per-partition-size-dense_tuning-dense_exact_topn, m 16,
    -- ef_construction 64), recall@10 at ef_search 100 fell from 0.996 (10,000 chunks) to 0.989
    -- (50,000) and 0.976 (100,000); this rule gives 212 at 50,000 (0.999) and 300 at 100,000 (0.991).
    -- Past 100,000 the breadth stays at 300: at 500,000 chunks (24, 128) 300 lost what 671 did not
    -- only on lists that the audit now finds (a sample of rows growing with the partition) and
    -- searches again at 1000, for dense p95 x0.68 to x0.69 and hybrid_retrieve p95 x0.75 to x0.77 against 671, which the
    -- rule gave there before (bench/FINDINGS.md#a-wider-list-before-the-exact-scan-breadth_ab). Where the partition's
    -- index holds the vectors (kind vector) in a graph at least as dense as (24, 128), at most 150: at 500,000 chunks
    -- over 3 builds x 300 queries recall@10 at 150 equalled 300's on every build, for dense p50 x0.74 to x0.86 and
    -- hybrid_retrieve p95 x0.80 to x0.91 (bench/FINDINGS.md#a-lower-breadth-on-the-denser-graph-breadth_ab-again).
    -- At least 2 x top_k.
    IF v_ef IS NULL THEN
        v_ef := least(300, greatest(100, round(100 * sqrt(greatest(coalesce(v_rows, 0), 0) / 11111.0))))::integer;
        IF hybrid._hnsw_dense_vectors(v_part) THEN
            v_ef := least(v_ef, 150);
        END IF;
    END IF;
    RETURN least(1000, greatest(v_ef, top_k * 2));
END
$$;
COMMENT ON FUNCTION hybrid._dense_plan(integer, text[], jsonb, integer, integer) IS
'The dense branch''s plan, written once: 0 for an exact scan, always for a pooled tenant (hybrid._pooled) and when the scope holds at most exact_threshold chunks (the argument; else the larger of setting exact_threshold, default 500, and setting dense_audit_rows, default 1,000, the audit''s sample; the partition''s row estimate, or with corpus_ids or filter the visible rows counted up to the threshold); otherwise the ef_search of a scan of the partition''s HNSW index: setting hnsw_ef_search, or by default 100 x sqrt(rows / 11,111) between 100 and 300 (from 100,000 rows), at most 150 where the index holds the vectors in a graph of m >= 24 and ef_construction >= 128 (hybrid._hnsw_dense_vectors), at least 2 x top_k and at most 1000 (pgvector''s limit).';

-- hybrid._audit_sample_rows: how many rows the dense audit samples in a partition
CREATE OR REPLACE FUNCTION hybrid._audit_sample_rows(part regclass, base integer) RETURNS integer
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan  -- the catalogs only, planned once a session (hybrid._hnsw_dense_vectors)
AS $$
    -- base (setting dense_audit_rows) up to 100,000 rows, growing with the square root of the partition past
    -- them (as the breadth did up to 100,000 chunks), to 4 x base: a topic cluster at risk holds a few hundred
    -- chunks whatever the partition's size, so its share of a larger partition is smaller
    SELECT coalesce((SELECT round(base * least(4.0, greatest(1.0, sqrt(greatest(c.reltuples, 0) / 100000.0))))
                     FROM pg_class c WHERE c.oid = part)::integer, base)
$$;
COMMENT ON FUNCTION hybrid._audit_sample_rows(regclass, integer) IS
'The dense audit''s sample size for a partition: base (setting dense_audit_rows) up to 100,000 rows (its row estimate), base x sqrt(rows / 100,000) past them, at most 4 x base.';

-- hybrid._audit_sample_written: a write to a tenant's chunks forgets its cached audit sample
CREATE OR REPLACE FUNCTION hybrid._audit_sample_written(tenant_key integer) RETURNS void
LANGUAGE sql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    DELETE FROM hybrid.chunk_audit_sample_state s WHERE s.tenant_key = _audit_sample_written.tenant_key;
    DELETE FROM hybrid.chunk_audit_sample s WHERE s.tenant_key = _audit_sample_written.tenant_key;
$$;
COMMENT ON FUNCTION hybrid._audit_sample_written(integer) IS
'Called by every writer of a tenant''s chunks (through hybrid._bm25_written: hybrid.finish_ingest, hybrid.delete_document; and hybrid.prune_documents): the dense audit reads the partition''s sample from the partition again until hybrid.refresh_audit_samples caches it anew.';
REVOKE ALL ON FUNCTION hybrid._audit_sample_written(integer) FROM PUBLIC;

-- hybrid.refresh_audit_samples: cache the dense audit's sample of each partition searched through HNSW (admin)
CREATE OR REPLACE FUNCTION hybrid.refresh_audit_samples(tenant_id text DEFAULT NULL)
RETURNS TABLE (tenant text, sampled integer)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
AS $$
DECLARE
    v_audit text := (SELECT s.value FROM hybrid.setting s WHERE s.key = 'dense_audit_rows');
    v_base integer;
    v_part regclass;
    v_n integer;
    r record;
BEGIN
    IF v_audit IS NOT NULL AND v_audit !~ '^[0-9]{1,9}$' THEN
        RAISE EXCEPTION 'setting dense_audit_rows must be a non-negative integer, got %', hybrid._shown(v_audit)
            USING ERRCODE = '22023';
    END IF;
    v_base := coalesce(v_audit, '1000')::integer;
    FOR r IN SELECT t.tenant_id AS tid, t.tenant_key AS k FROM hybrid._tenants_chosen('hybrid.refresh_audit_samples(text)',
                                                                       refresh_audit_samples.tenant_id) t LOOP
        v_part := hybrid._chunk_partition(r.k);
        v_n := 0;
        IF v_part IS NOT NULL THEN
            -- no writer of the tenant commits between the sample's read and its record (a writer's
            -- ROW EXCLUSIVE waits; one that committed before is in the statement's snapshot)
            EXECUTE format('LOCK TABLE %s IN SHARE MODE', v_part);
            PERFORM hybrid._audit_sample_written(r.k);
            -- only partitions the dense branch searches through HNSW are audited (hybrid._dense_plan)
            IF v_base > 0 AND hybrid._dense_plan(r.k, NULL, NULL, NULL, 10) > 0 THEN
                EXECUTE format('INSERT INTO hybrid.chunk_audit_sample (tenant_key, ord, chunk_id, embedding) '
                               'SELECT $1, row_number() OVER (ORDER BY s.h, s.chunk_id)::integer, s.chunk_id, s.embedding '
                               'FROM (SELECT c.chunk_id, c.embedding, hashtext(c.chunk_id) AS h FROM %s c '
                               'WHERE NOT c.superseded ORDER BY hashtext(c.chunk_id) LIMIT $2) s', v_part)
                    USING r.k, hybrid._audit_sample_rows(v_part, v_base);
                GET DIAGNOSTICS v_n = ROW_COUNT;
                INSERT INTO hybrid.chunk_audit_sample_state (tenant_key, base, sample_rows) VALUES (r.k, v_base, v_n);
            END IF;
        END IF;
        tenant := r.tid;
        sampled := v_n;
        RETURN NEXT;
    END LOOP;
END
$$;
COMMENT ON FUNCTION hybrid.refresh_audit_samples(text) IS
'Caches the dense audit''s sample of each tenant''s partition (or one tenant''s) that the dense branch searches through HNSW: the ids and vectors of its first live chunks in hashtext(chunk_id) order (hybrid._audit_sample_rows of them), in hybrid.chunk_audit_sample, which the audit reads instead of the scattered rows until the next write to that tenant''s chunks. hybrid.resume_vector_index (the end of a bulk load) and hybrid.merge_bm25 call it. Returns the rows cached per tenant. Admin only; its owner must bypass RLS.';
REVOKE ALL ON FUNCTION hybrid.refresh_audit_samples(text) FROM PUBLIC;

-- hybrid._dense_statement: the dense branch's ordered scan of an index over halfvec or binary codes
CREATE OR REPLACE FUNCTION hybrid._dense_statement(kind text, dim integer) RETURNS text
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
    -- parameters: $1 query_embedding, $2 tenant key, $3-$5 tenant, ACL labels, all labels, $6 corpus_ids,
    -- $7 filter, $8 top_k, $9 how many candidates the index gives for re-ranking by exact cosine
    SELECT 'SELECT s.chunk_id, (row_number() OVER (ORDER BY s.d, s.chunk_id))::integer, s.d '
        || 'FROM (SELECT b.chunk_id, b.d FROM ('
        || 'SELECT c.chunk_id, (c.embedding <=> $1)::double precision AS d FROM hybrid.chunk c '
        || 'WHERE c.tenant_key = $2 AND hybrid._visible(c.tenant_id, c.superseded, c.acl_labels, $3, $4, $5) '
        || 'AND ($6::text[] IS NULL OR c.corpus_id = ANY ($6)) AND ($7::jsonb IS NULL OR c.metadata @> $7) '
        || 'ORDER BY ' || CASE kind
               WHEN 'vector' THEN 'c.embedding <=> $1'
               WHEN 'halfvec' THEN format('c.embedding::halfvec(%s) <=> $1::halfvec(%s)', dim, dim)
               WHEN 'bit' THEN format('binary_quantize(c.embedding)::bit(%s) <~> binary_quantize($1)::bit(%s)', dim, dim) END
        || ' LIMIT $9) b ORDER BY b.d, b.chunk_id LIMIT $8) s ORDER BY s.d, s.chunk_id'
$$;
COMMENT ON FUNCTION hybrid._dense_statement(text, integer) IS
'The text of the dense branch''s index scan for an index kind (hybrid._dense_kind; the dimension spliced in, as a typmod cannot be a parameter): candidates in the order of the index''s expression, ranked by the exact cosine distance. hybrid.search_dense runs it for halfvec and bit (for vector it runs the equivalent static statement); bench/latency.py --index-kinds runs it for each kind.';

-- hybrid._dense_index_list: one list through the partition's dense index, at the breadth the session has set
CREATE OR REPLACE FUNCTION hybrid._dense_index_list(tenant_key integer, kind text, dim integer, ef integer, tenant text,
                                                    acl text[], acl_all boolean, corpus_ids text[], filter jsonb,
                                                    query_embedding vector, top_k integer,
                                                    OUT ids text[], OUT ds double precision[])
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, public, pg_temp
SET plan_cache_mode = force_custom_plan  -- tenant_key a constant: the tenant's partition alone is planned
AS $$
BEGIN
    IF kind = 'vector' THEN
        SELECT array_agg(s.chunk_id ORDER BY s.d, s.chunk_id), array_agg(s.d ORDER BY s.d, s.chunk_id) INTO ids, ds
        FROM (SELECT c.chunk_id, (c.embedding <=> query_embedding)::double precision AS d
              FROM hybrid.chunk c
              WHERE c.tenant_key = _dense_index_list.tenant_key
                AND hybrid._visible(c.tenant_id, c.superseded, c.acl_labels, tenant, acl, acl_all)
                AND (corpus_ids IS NULL OR c.corpus_id = ANY (corpus_ids))
                AND (filter IS NULL OR c.metadata @> filter)
              ORDER BY c.embedding <=> query_embedding
              LIMIT top_k) s;
        RETURN;
    END IF;
    -- above 2,000 dimensions the index holds embedding::halfvec(dim), or above 4,000 binary_quantize(embedding)::bit(dim)
    -- (hybrid._dense_kind): the scan orders by that same expression, the dimension spliced in as a literal (a typmod
    -- cannot be a parameter), and the candidates are ranked by the exact cosine of the vectors. Binary codes rank
    -- coarsely: a wider list (ef_search, at least 4 x top_k) is re-ranked. The values are parameters of a one-shot
    -- plan, so the tenant key still prunes to one partition.
    EXECUTE 'SELECT array_agg(h.chunk_id ORDER BY h.rank), array_agg(h.value ORDER BY h.rank) FROM ('
            || hybrid._dense_statement(kind, dim) || ') h (chunk_id, rank, value)'
    INTO ids, ds
    USING query_embedding, tenant_key, tenant, acl, acl_all, corpus_ids, filter, top_k,
          CASE kind WHEN 'halfvec' THEN top_k ELSE greatest(ef, 4 * top_k) END;
END
$$;
COMMENT ON FUNCTION hybrid._dense_index_list(integer, text, integer, integer, text, text[], boolean, text[], jsonb, vector,
                                             integer) IS
'hybrid.search_dense''s list through the partition''s index of kind (vector: the embedding''s own HNSW or IVFFlat index; halfvec, bit: the index of that expression, re-ranked by exact cosine): the caller''s top_k visible chunks in corpus_ids matching filter, by cosine distance, at the breadth set in the session (hnsw.ef_search, ivfflat.probes).';
REVOKE ALL ON FUNCTION hybrid._dense_index_list(integer, text, integer, integer, text, text[], boolean, text[], jsonb, vector,
                                                integer) FROM PUBLIC;

-- hybrid._dense_audit_miss: whether the dense audit's sample proves an index list wrong
CREATE OR REPLACE FUNCTION hybrid._dense_audit_miss(tenant_key integer, part regclass, cached boolean, sample_rows integer,
                                                    tenant text, acl text[], acl_all boolean, corpus_ids text[],
                                                    filter jsonb, query_embedding vector, d10 double precision,
                                                    ids text[]) RETURNS boolean
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, public, pg_temp
SET plan_cache_mode = force_custom_plan  -- tenant_key a constant: the tenant's partition alone is planned
AS $$
DECLARE
    v_miss boolean;
BEGIN
    -- HNSW can miss a query's true neighbours entirely (the beam descends into another topic cluster:
    -- bench/FINDINGS.md#queries-at-recall-0-in-mid-sized-partitions-and-the-dense-audit-dense_audit). A fixed sample
    -- of the partition is compared with the list: a visible chunk of the sample nearer than the list's 10th row (d10;
    -- any, for a list shorter than top_k) and not in it proves the list wrong. It never fires on a list whose top 10 is
    -- right; it catches a miss when a chunk of the missed region is in the sample.
    IF cached THEN
        -- the sample cached with the same setting and no write since (hybrid.refresh_audit_samples): its rows
        -- together, where read from the partition each was a page of its own; its nearer rows outside the list are
        -- then asked of the partition, which says whether the caller sees them (ACL, corpus, filter)
        RETURN EXISTS (
            SELECT 1 FROM hybrid.chunk c
            WHERE c.tenant_key = _dense_audit_miss.tenant_key AND c.tenant_id = tenant
              AND c.chunk_id = ANY (ARRAY(SELECT s.chunk_id FROM hybrid.chunk_audit_sample s
                                          WHERE s.tenant_key = _dense_audit_miss.tenant_key
                                            AND (s.embedding <=> query_embedding) < d10 AND s.chunk_id <> ALL (ids)))
              AND hybrid._visible(c.tenant_id, c.superseded, c.acl_labels, tenant, acl, acl_all)
              AND (corpus_ids IS NULL OR c.corpus_id = ANY (corpus_ids))
              AND (filter IS NULL OR c.metadata @> filter)
              AND (c.embedding <=> query_embedding) < d10);
    END IF;
    -- the partition by name (planning the parent's scan cost more): its first live chunks in hashtext(chunk_id) order
    -- (hybrid.chunk_audit_sample_idx), a sample of rows across the partition, not of blocks, whose chunks share
    -- documents and topics (bench/FINDINGS.md#the-dense-audits-sample-by-row-audit_eval)
    EXECUTE format('SELECT EXISTS (SELECT 1 FROM (SELECT c.chunk_id, c.embedding, c.tenant_id, c.superseded, '
        'c.acl_labels, c.corpus_id, c.metadata FROM %s c WHERE NOT c.superseded ORDER BY hashtext(c.chunk_id) '
        'LIMIT $1) c WHERE hybrid._visible(c.tenant_id, c.superseded, c.acl_labels, $2, $3, $4) '
        'AND ($5::text[] IS NULL OR c.corpus_id = ANY ($5)) AND ($6::jsonb IS NULL OR c.metadata @> $6) '
        'AND (c.embedding <=> $7) < $8 AND c.chunk_id <> ALL ($9))', part)
    INTO v_miss
    USING sample_rows, tenant, acl, acl_all, corpus_ids, filter, query_embedding, d10, ids;
    RETURN v_miss;
END
$$;
COMMENT ON FUNCTION hybrid._dense_audit_miss(integer, regclass, boolean, integer, text, text[], boolean, text[], jsonb,
                                             vector, double precision, text[]) IS
'The dense audit''s verdict on one index list (ids): true when a chunk of the partition''s sample (the cached copy, hybrid.chunk_audit_sample, where cached, else the partition''s first sample_rows live chunks by hashtext(chunk_id)) that the caller can see, in corpus_ids and matching filter, is nearer to query_embedding than d10 (the list''s 10th distance; infinity for a short list) and not in the list.';
REVOKE ALL ON FUNCTION hybrid._dense_audit_miss(integer, regclass, boolean, integer, text, text[], boolean, text[], jsonb,
                                                vector, double precision, text[]) FROM PUBLIC;

CREATE OR REPLACE FUNCTION hybrid.search_dense(
    query_embedding vector, top_k integer DEFAULT 30, corpus_ids text[] DEFAULT NULL, filter jsonb DEFAULT NULL,
    exact_threshold integer DEFAULT NULL)
RETURNS SETOF hybrid.branch_hit
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
SET hnsw.iterative_scan = 'relaxed_order'
SET hnsw.ef_search = 100
SET ivfflat.iterative_scan = 'relaxed_order'
SET ivfflat.probes = 20
SET enable_sort = on  -- the exact scan's top-N sort; turned off for the HNSW scan, restored at exit
SET plan_cache_mode = force_custom_plan  -- v_key a constant: the tenant's partition alone is planned
SET jit = off  -- a large tenant's exact scan costs past jit_above_cost (hybrid._lexical_hits)
AS $$
DECLARE
    -- explicit tenant and ACL predicates repeat RLS, so a role that bypasses RLS (a superuser)
    -- still gets one tenant's rows; the tenant key prunes hybrid.chunk to the tenant's partition,
    -- whose own HNSW index holds no other tenant's vectors
    v_tenant text; v_key integer; v_acl text[]; v_all boolean;
    v_ef integer;
    v_dim integer;
    v_kind text;
    v_ids text[];
    v_ds double precision[];
    v_audit text;
    v_sample integer;
    v_part regclass;
    v_sample_rows integer;
    v_miss boolean;
    v_widened boolean := false;
    v_cached boolean;
    v_probes text;
BEGIN
    SELECT * INTO v_tenant, v_key, v_acl, v_all FROM hybrid._scope();  -- the caller's tenant and labels
    PERFORM hybrid._check_range('top_k', top_k, 1, 10000);
    IF exact_threshold IS NOT NULL THEN
        PERFORM hybrid._check_range('exact_threshold', exact_threshold, 0, 1000000000);
    END IF;
    IF v_tenant IS NULL OR v_key IS NULL THEN
        RETURN;
    END IF;
    v_ef := hybrid._dense_plan(v_key, corpus_ids, filter, exact_threshold, top_k);
    IF v_ef > 0 THEN
        v_dim := hybrid.embedding_dim();
        v_kind := hybrid._dense_kind(v_dim);
        -- dense_audit_rows is checked by _dense_plan; a partition of IVFFlat (hybrid._ivfflat_lists) searches
        -- ivfflat_probes lists, 4x that when widened (both settings in one read: this runs on every dense call)
        SELECT max(s.value) FILTER (WHERE s.key = 'dense_audit_rows'),
               coalesce(max(s.value) FILTER (WHERE s.key = 'ivfflat_probes'), '20')
        INTO v_audit, v_probes
        FROM hybrid.setting s WHERE s.key IN ('dense_audit_rows', 'ivfflat_probes');
        v_sample := coalesce(v_audit, '1000')::integer;
        IF v_probes !~ '^[0-9]{1,5}$' OR v_probes::integer NOT BETWEEN 1 AND 8192 THEN
            RAISE EXCEPTION 'setting ivfflat_probes must be an integer between 1 and 8192, got %', hybrid._shown(v_probes)
                USING ERRCODE = '22023';
        END IF;
        -- the index's ordered scan, always: with a larger ef_search pgvector's cost estimate grows
        -- and the planner chose a sequential scan and sort instead (14x slower at 10,000 chunks with
        -- ef_search 300, measured); enable_sort is restored at exit (SET clause above)
        PERFORM set_config('enable_sort', 'off', true);
        -- at most two lists: the plan's breadth, then, where the audit below proves that list wrong,
        -- pgvector's widest (1000) before the exact scan (at 500,000 chunks the exact scan took ~1 s,
        -- a list at 1000 ~40 ms: bench/FINDINGS.md#a-wider-list-before-the-exact-scan-breadth_ab)
        LOOP
            PERFORM set_config('hnsw.ef_search', v_ef::text, true);
            PERFORM set_config('ivfflat.probes', (v_probes::integer * CASE WHEN v_widened THEN 4 ELSE 1 END)::text, true);
            SELECT l.ids, l.ds INTO v_ids, v_ds
            FROM hybrid._dense_index_list(v_key, v_kind, v_dim, v_ef, v_tenant, v_acl, v_all, corpus_ids, filter,
                                          query_embedding, top_k) l;
            -- the audit (hybrid._dense_audit_miss): a sampled chunk nearer than the list's 10th and not in it proves
            -- the list wrong
            v_ids := coalesce(v_ids, '{}');
            v_miss := false;
            IF v_sample > 0 THEN
                v_part := coalesce(v_part, hybrid._chunk_partition(v_key));
                v_sample_rows := coalesce(v_sample_rows, hybrid._audit_sample_rows(v_part, v_sample));
                v_cached := coalesce(v_cached, EXISTS (SELECT 1 FROM hybrid.chunk_audit_sample_state st
                                                       WHERE st.tenant_key = v_key AND st.base = v_sample));
                v_miss := hybrid._dense_audit_miss(v_key, v_part, v_cached, v_sample_rows, v_tenant, v_acl, v_all,
                                                   corpus_ids, filter, query_embedding,
                                                   CASE WHEN cardinality(v_ids) < top_k THEN 'Infinity'::float8
                                                        ELSE v_ds[least(cardinality(v_ds), 10)] END, v_ids);
            END IF;
            EXIT WHEN NOT v_miss OR v_ef >= 1000;
            v_ef := 1000;
            v_widened := true;
        END LOOP;
        PERFORM set_config('hybrid.dense_audit', CASE WHEN v_sample = 0 THEN 'off' WHEN v_miss THEN 'failed: searched exactly'
                                                      -- (the index's kind read only here, on the rare widened list)
                                                      WHEN v_widened THEN CASE WHEN hybrid._ivfflat_plan(v_key) IS NULL
                                                                               THEN 'failed: widened to ef_search 1000'
                                                                               ELSE format('failed: widened to %s probes', v_probes::integer * 4) END
                                                      ELSE 'passed' END, true);
        PERFORM set_config('hybrid.dense_audit_sample', CASE WHEN v_sample = 0 THEN 'off' WHEN v_cached THEN 'cached'
                                                             ELSE 'partition' END, true);
        IF NOT v_miss THEN
            RETURN QUERY SELECT u.id, u.ord::integer, u.d FROM unnest(v_ids, v_ds) WITH ORDINALITY u (id, d, ord);
            RETURN;
        END IF;
        PERFORM set_config('enable_sort', 'on', true);
    END IF;
    -- small scope, or an HNSW list the audit found wrong: exact distances over the tenant's rows (the
    -- btree finds them); "+ 0" keeps the planner off the HNSW index, whose RLS post-filter would lose
    -- recall. LIMIT inside, ranks outside: a top-N sort keeps top_k rows; with row_number() over the
    -- whole scan, every row was sorted with its embedding (on disk from ~2,600 rows, measured)
    RETURN QUERY
    SELECT s.chunk_id, (row_number() OVER (ORDER BY s.d, s.chunk_id))::integer, s.d
    FROM (SELECT c.chunk_id, (c.embedding <=> query_embedding)::double precision AS d
          FROM hybrid.chunk c
          WHERE c.tenant_key = v_key AND hybrid._visible(c.tenant_id, c.superseded, c.acl_labels, v_tenant, v_acl, v_all)
            AND c.embedding IS NOT NULL
            AND (corpus_ids IS NULL OR c.corpus_id = ANY (corpus_ids))
            AND (filter IS NULL OR c.metadata @> filter)
          ORDER BY (c.embedding <=> query_embedding) + 0, c.chunk_id
          LIMIT top_k) s
    ORDER BY s.d, s.chunk_id;
END
$$;
COMMENT ON FUNCTION hybrid.search_dense(vector, integer, text[], jsonb, integer) IS
'Dense branch: the caller''s top_k nearest live chunks by cosine distance (rank 1 = nearest; value = the distance). Reads the tenant''s partition alone. Scopes of at most exact_threshold chunks (the argument, else the larger of settings exact_threshold, default 500, and dense_audit_rows, default 1,000; the partition''s row estimate, or with corpus_ids or filter the visible rows counted) are searched exactly; larger ones through the partition''s HNSW index with iterative scans, always its ordered scan (ef_search from hybrid._dense_plan), or its IVFFlat index (a partition of at least ivfflat_rows chunks when its index was built: hybrid._ivfflat_lists) searching ivfflat_probes lists (setting, default 20); above 2,000 dimensions the index ranks halfvec or binary codes (hybrid._dense_kind) and the candidates are ranked by their exact cosine distance (binary codes: max(ef_search, 4 x top_k) candidates). Each HNSW list is audited against a fixed sample of the partition (its first live chunks in hashtext(chunk_id) order: setting dense_audit_rows, default 1,000, past 100,000 chunks x sqrt(rows / 100,000), at most 4x; 0: off; read from the copy hybrid.refresh_audit_samples made, where no write came since, else from the partition): a visible sampled chunk nearer than the list''s 10th row (or any outside a list shorter than top_k) and not in it has the index searched again at ef_search 1000 (pgvector''s widest; IVFFlat: 4 x ivfflat_probes lists), and a list that fails again makes the search exact; the outcome (passed, failed: widened to ef_search 1000 or on IVFFlat failed: widened to <4 x ivfflat_probes> probes, failed: searched exactly, off) is left in the transaction''s hybrid.dense_audit setting, which explain_retrieve reports, and where the sample was read (cached, partition, off) in hybrid.dense_audit_sample.';

-- hybrid.search_sparse: the learned-sparse branch
CREATE OR REPLACE FUNCTION hybrid.search_sparse(
    query_sparse sparsevec, top_k integer DEFAULT 30, corpus_ids text[] DEFAULT NULL, filter jsonb DEFAULT NULL)
RETURNS SETOF hybrid.branch_hit
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
SET hnsw.iterative_scan = 'relaxed_order'
SET hnsw.ef_search = 100
SET enable_indexscan = on  -- turned off for the exact scan, restored at exit
SET plan_cache_mode = force_custom_plan  -- v_key a constant: the tenant's partition alone is planned
SET jit = off  -- as hybrid.search_dense
AS $$
DECLARE
    -- explicit tenant and ACL predicates repeat RLS, as in hybrid.search_dense
    v_tenant text; v_key integer; v_acl text[]; v_all boolean;
    v_query sparsevec := hybrid._sparse(query_sparse::text);
    v_ef integer;
BEGIN
    SELECT * INTO v_tenant, v_key, v_acl, v_all FROM hybrid._scope();  -- the caller's tenant and labels
    PERFORM hybrid._check_range('top_k', top_k, 1, 10000);
    IF v_tenant IS NULL OR v_key IS NULL OR query_sparse IS NULL THEN
        RETURN;
    END IF;
    -- the dense branch's rule (hybrid._dense_plan): an exact scan up to its threshold of chunks in scope, else the
    -- partition's HNSW index by inner product at its breadth, with iterative scans (so that the ACL, corpus and
    -- filter predicates do not shorten the list); a hit shares a token with the query (inner product above 0)
    v_ef := hybrid._dense_plan(v_key, corpus_ids, filter, NULL, top_k);
    IF v_ef = 0 THEN
        PERFORM set_config('enable_indexscan', 'off', true);
    ELSE
        PERFORM set_config('hnsw.ef_search', v_ef::text, true);
    END IF;
    RETURN QUERY
    SELECT s.chunk_id, (row_number() OVER (ORDER BY s.v DESC, s.chunk_id))::integer, s.v
    FROM (SELECT c.chunk_id, -(c.sparse_embedding <#> v_query) AS v
          FROM hybrid.chunk c
          WHERE c.tenant_key = v_key AND hybrid._visible(c.tenant_id, c.superseded, c.acl_labels, v_tenant, v_acl, v_all)
            AND c.sparse_embedding IS NOT NULL
            AND (corpus_ids IS NULL OR c.corpus_id = ANY (corpus_ids))
            AND (filter IS NULL OR c.metadata @> filter)
          ORDER BY c.sparse_embedding <#> v_query
          LIMIT top_k) s
    WHERE s.v > 0
    ORDER BY s.v DESC, s.chunk_id;
END
$$;
COMMENT ON FUNCTION hybrid.search_sparse(sparsevec, integer, text[], jsonb) IS
'Learned-sparse branch: the caller''s top_k live chunks by the inner product of their sparse_embedding with query_sparse (rank 1 = largest; value = the inner product; only chunks sharing a non-zero index with the query, inner product above 0). Both vectors are compared at one dimension (hybrid._sparse). Reads the tenant''s partition alone: exactly where the dense branch''s rule (hybrid._dense_plan) searches exactly, else through its HNSW sparsevec_ip_ops index with iterative scans at the breadth that rule gives.';

-- hybrid.bm25_available: whether the BM25 index exists
CREATE OR REPLACE FUNCTION hybrid.bm25_available() RETURNS boolean
LANGUAGE sql STABLE SECURITY INVOKER
SET search_path = pg_catalog, public, pg_temp
AS $$ SELECT to_regclass('hybrid.chunk_content_bm25') IS NOT NULL $$;
COMMENT ON FUNCTION hybrid.bm25_available() IS 'True when the pg_textsearch BM25 index on chunk content exists.';

-- hybrid._bm25_partition_index: the BM25 index of a tenant's partition
CREATE OR REPLACE FUNCTION hybrid._bm25_partition_index(tenant_key integer) RETURNS text
LANGUAGE sql STABLE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan  -- the catalogs only, planned once a session (hybrid._hnsw_dense_vectors)
AS $$
    -- from the partition's few indexes to their parents (the parent's hundred partitions hashed cost every
    -- lexical search 0.2 ms, measured at 100 tenants)
    SELECT x.indexrelid::regclass::text FROM pg_index x
    WHERE x.indrelid = hybrid._chunk_partition(tenant_key)
      AND EXISTS (SELECT 1 FROM pg_inherits i
                  WHERE i.inhrelid = x.indexrelid AND i.inhparent = to_regclass('hybrid.chunk_content_bm25'))
$$;
COMMENT ON FUNCTION hybrid._bm25_partition_index(integer) IS
'The name of the BM25 index of the partition of a tenant key (its partition of hybrid.chunk_content_bm25), NULL without one.';
REVOKE ALL ON FUNCTION hybrid._bm25_partition_index(integer) FROM PUBLIC;

-- hybrid._terms_held: how many of a query's terms a chunk holds, written once
CREATE OR REPLACE FUNCTION hybrid._terms_held(tsv tsvector, terms text[]) RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE
-- no SET clause: the planner inlines it into the statements that count (hybrid._lexical_hits, _term_match_in)
AS $$ SELECT pg_catalog.length(tsv) - pg_catalog.length(pg_catalog.ts_delete(tsv, terms)) $$;
COMMENT ON FUNCTION hybrid._terms_held(tsvector, text[]) IS
'How many of terms (a query''s distinct lexemes) the chunk whose stored tsv (to_tsvector of its tenant''s configuration, content) this is holds: its lexemes less those left once terms are deleted. The term coverage of hybrid.retrieve and hybrid.lexical_strength counts with it.';
REVOKE ALL ON FUNCTION hybrid._terms_held(tsvector, text[]) FROM PUBLIC;

-- hybrid._bm25_scorer: which scorer answers lexical => 'bm25' for a tenant, and why
CREATE OR REPLACE FUNCTION hybrid._bm25_scorer(tenant_key integer, OUT index_name text, OUT reason text)
-- Volatile: the first BM25 search after a restart may rebuild the index (hybrid._bm25_ready)
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, public, pg_temp
AS $$
DECLARE
    v_mode text := coalesce(current_setting('hybrid.bm25_scorer', true), '');
    v_max text := coalesce(nullif(current_setting('hybrid.bm25_sql_max_chunks', true), ''), '0');
    v_size bigint;
BEGIN
    IF v_mode NOT IN ('', 'sql', 'index') THEN
        RAISE EXCEPTION 'hybrid.bm25_scorer must be sql, index or empty (by size), got %', hybrid._shown(v_mode)
            USING ERRCODE = '22023';
    ELSIF v_max !~ '^[0-9]{1,18}$' THEN
        RAISE EXCEPTION 'hybrid.bm25_sql_max_chunks must be a whole number of chunks, got %', hybrid._shown(v_max)
            USING ERRCODE = '22023';
    END IF;
    -- pg_textsearch's index where it is there and can be trusted, else the exact SQL scorer over the tenant's
    -- statistics (hybrid._bm25_sql_hits): the same scores, slower (docs/searching.md#bm25-on-any-postgresql: the
    -- index was at least as fast at every tenant size measured, so hybrid.bm25_sql_max_chunks, the size up to which
    -- the SQL scorer answers anyway, is 0 unless set). SET hybrid.bm25_scorer = sql or index forces one
    IF v_mode = 'sql' THEN
        reason := 'SET hybrid.bm25_scorer = sql';
    ELSIF NOT hybrid.bm25_available() THEN
        reason := CASE WHEN EXISTS (SELECT 1 FROM hybrid.setting s WHERE s.key = 'text_indexes_suspended')
                       THEN 'the BM25 index is suspended for a bulk load'
                       WHEN EXISTS (SELECT 1 FROM hybrid.setting s WHERE s.key = 'pg_textsearch' AND s.value = 'off')
                       THEN 'the install goes without pg_textsearch'
                       ELSE 'pg_textsearch is not installed' END;
    ELSIF hybrid._pooled(tenant_key) THEN  -- first: a pooled tenant's call looks up no index (its first call compiles less)
        reason := 'the tenant is pooled: the pool''s index counts its neighbours'' documents too';
    ELSE
        index_name := hybrid._bm25_partition_index(tenant_key);
        SELECT s.n_docs INTO v_size FROM hybrid.bm25_tenant_stats s WHERE s.tenant_key = _bm25_scorer.tenant_key;
        IF index_name IS NULL THEN
            reason := 'the tenant''s partition has no BM25 index';
        ELSIF v_mode <> 'index' AND coalesce(v_size, 0) <= v_max::bigint THEN
            reason := format('the tenant holds %s chunks, at most hybrid.bm25_sql_max_chunks (%s)',
                             coalesce(v_size, 0), v_max);
        -- pg_textsearch 1.0 loses its statistics at a server restart and does not keep a hot standby current
        -- (sql/idempotent/048_bm25_health.sql): never answer from a stale index
        ELSIF NOT hybrid._bm25_ready(index_name::regclass) THEN
            reason := 'the BM25 index is stale (a server restart or a hot standby) and cannot be rebuilt here';
        ELSIF EXISTS (SELECT 1 FROM hybrid.bm25_audit a WHERE a.index_oid = index_name::regclass AND a.mismatches > 0) THEN
            reason := 'the BM25 index disagreed with the exact scores at its last audit (hybrid.audit_bm25)';
        END IF;
    END IF;
    IF reason IS NOT NULL THEN
        index_name := NULL;
    END IF;
END
$$;
COMMENT ON FUNCTION hybrid._bm25_scorer(integer) IS
'Which scorer answers lexical => ''bm25'' for a tenant key: for a pooled tenant always the SQL scorer (the pool''s index counts its neighbours); else index_name, the partition''s pg_textsearch index where it is installed, present, current (rebuilt here first after a restart where it can be) and did not fail its last audit (hybrid.audit_bm25); else reason, why the exact SQL scorer over the tenant''s statistics answers (hybrid._bm25_sql_hits): it does for a tenant of at most hybrid.bm25_sql_max_chunks chunks (a setting; 0, none, unless set). SET hybrid.bm25_scorer = sql or index forces one.';
REVOKE ALL ON FUNCTION hybrid._bm25_scorer(integer) FROM PUBLIC;

-- hybrid._bm25_must_match: the lexemes a document must hold to score theta or more
CREATE OR REPLACE FUNCTION hybrid._bm25_must_match(lexemes text[], ub double precision[], rest double precision[],
    theta double precision, i integer DEFAULT 1, INOUT budget integer DEFAULT 64, OUT must text)
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_with record; v_without record; j integer := i;
BEGIN
    -- lexemes in descending order of ub, the most each can add to a score (rest[i]: the sum of ub[i:]): a document
    -- reaches theta only by holding terms whose ub add up to theta, so it holds lexeme i and reaches theta - ub[i]
    -- by the rest, or reaches theta by the rest alone. 'TRUE' where any document does, 'FALSE' where none can
    IF theta <= 0 THEN
        must := 'TRUE';
    ELSIF i > cardinality(lexemes) OR rest[i] < theta THEN
        must := 'FALSE';
    ELSIF budget <= 0 THEN
        -- past the budget, a superset: one of the lexemes without which the rest falls short of theta
        WHILE j < cardinality(lexemes) AND rest[j + 1] >= theta LOOP
            j := j + 1;
        END LOOP;
        must := hybrid._lexeme_tsquery(lexemes[i:j])::text;
    ELSE
        budget := budget - 1;
        v_with := hybrid._bm25_must_match(lexemes, ub, rest, theta - ub[i], i + 1, budget);
        v_without := hybrid._bm25_must_match(lexemes, ub, rest, theta, i + 1, v_with.budget);
        budget := v_without.budget;
        must := hybrid._lexeme_tsquery(ARRAY[lexemes[i]])::text;
        must := CASE WHEN v_with.must = 'FALSE' THEN 'FALSE'
                     WHEN v_with.must = 'TRUE' AND v_without.must = 'FALSE' THEN must
                     WHEN v_with.must = 'TRUE' THEN must || ' | (' || v_without.must || ')'
                     WHEN v_without.must = 'FALSE' THEN must || ' & (' || v_with.must || ')'
                     ELSE '(' || must || ' & (' || v_with.must || ')) | (' || v_without.must || ')' END;
    END IF;
END
$$;
COMMENT ON FUNCTION hybrid._bm25_must_match(text[], double precision[], double precision[], double precision, integer, integer) IS
'The tsquery (as text; ''TRUE'' or ''FALSE'' where it is either) that every document able to score theta by BM25 matches, from the query''s lexemes in descending order of ub, the most each can add to a score, and rest, the sums of ub from each on. Exact up to budget branches, then a superset.';
REVOKE ALL ON FUNCTION hybrid._bm25_must_match(text[], double precision[], double precision[], double precision, integer, integer) FROM PUBLIC;

-- hybrid._bm25_sql_scored: the top_k BM25 scores of the documents matching a tsquery
CREATE OR REPLACE FUNCTION hybrid._bm25_sql_scored(p_key integer, p_tenant text, p_acl text[], p_all boolean,
    corpus_ids text[], filter jsonb, must tsquery, lexemes text[], idf double precision[], qf double precision[],
    avgdl double precision, any_term tsquery, top_k integer, sample integer DEFAULT NULL)
RETURNS TABLE (chunk_id text, score double precision, tsv tsvector)
LANGUAGE sql STABLE
-- no SET clause: inlined into hybrid._bm25_sql_hits' statements
AS $$
    -- pg_textsearch's standalone <@> to the bit (docs/searching.md#bm25-on-any-postgresql): idf (given) and each
    -- term's score rounded to float4 as its C code does, k1 1.2 and b 0.75 as float4, the length quantized
    -- (hybrid._bm25_fieldnorm), a query lexeme repeated weighted by its count (qf). A chunk's matching lexemes
    -- (setweight marks them, ts_filter keeps them) and its length (hybrid._matched_tsv_length: weights don't
    -- change it) come from its tsv, read once (each function reading the stored tsv would fetch it from TOAST)
    SELECT c.chunk_id,
           (SELECT sum((idf[m.i] * ((m.tf * (1.2::real::double precision + 1))
                        / (m.tf + 1.2::real::double precision * (1 - 0.75::real::double precision
                              + 0.75::real::double precision * (l.dl / avgdl)))) * qf[m.i])::real::double precision)
            FROM (SELECT pg_catalog.array_position(lexemes, u.lexeme) AS i,
                         coalesce(cardinality(u.positions), 1)::double precision AS tf
                  FROM pg_catalog.unnest(pg_catalog.ts_filter(w.tsv, '{a}')) u) m),
           c.tsv
    FROM (SELECT c.chunk_id, c.tsv
          FROM hybrid.chunk c
          WHERE c.tenant_key = p_key
            AND hybrid._visible(c.tenant_id, c.superseded, c.acl_labels, p_tenant, p_acl, p_all)
            AND c.tsv @@ must
            AND (corpus_ids IS NULL OR c.corpus_id = ANY (corpus_ids))
            AND (filter IS NULL OR c.metadata @> filter)
          LIMIT sample) c  -- sample: any that many of them (NULL: all)
    -- read once: the tsv (detoasted) with the query's lexemes weighted A
    CROSS JOIN LATERAL (SELECT pg_catalog.setweight(c.tsv, 'A', lexemes) AS tsv OFFSET 0) w
    CROSS JOIN LATERAL (SELECT hybrid._bm25_fieldnorm(hybrid._matched_tsv_length(w.tsv, any_term))::double precision AS dl) l
    ORDER BY 2 DESC, 1
    LIMIT top_k
$$;
COMMENT ON FUNCTION hybrid._bm25_sql_scored(integer, text, text[], boolean, text[], jsonb, tsquery, text[], double precision[], double precision[], double precision, tsquery, integer, integer) IS
'The top_k live chunks of tenant key p_key the caller sees that match must (of any sample of them, where sample is not NULL), by BM25 over the query''s lexemes (their idf and query counts qf; any_term, an OR of them all) with the tenant''s mean length avgdl: hybrid._bm25_sql_hits'' scoring, written once.';
REVOKE ALL ON FUNCTION hybrid._bm25_sql_scored(integer, text, text[], boolean, text[], jsonb, tsquery, text[], double precision[], double precision[], double precision, tsquery, integer, integer) FROM PUBLIC;

-- hybrid._bm25_sql_hits: BM25 from the tenant's statistics in plain SQL, as pg_textsearch scores
CREATE OR REPLACE FUNCTION hybrid._bm25_sql_hits(p_key integer, p_tenant text, p_acl text[], p_all boolean,
    query_text text, top_k integer, corpus_ids text[], filter jsonb, terms text[])
RETURNS TABLE (chunk_id text, rank integer, value double precision, terms_held integer)
-- invoker rights: hybrid._lexical_hits calls it, as hybrid_definer
LANGUAGE plpgsql STABLE SECURITY INVOKER
SET search_path = pg_catalog, public, pg_temp
SET plan_cache_mode = force_custom_plan  -- tenant_key a constant: the tenant's partition alone is planned
AS $$
DECLARE
    v_n double precision; v_avgdl double precision;
    v_lexemes text[]; v_idf double precision[]; v_qf double precision[];
    v_by_ub text[]; v_ub double precision[]; v_rest double precision[]; v_tau double precision;
    v_query tsquery; v_must tsquery; v_found integer; v_theta double precision; v_held bigint; v_sample integer;
    v_p double precision[];
BEGIN
    -- idf and avgdl rounded to float4 as pg_textsearch does (hybrid._bm25_sql_scored scores)
    SELECT s.n_docs, (s.total_len::double precision / s.n_docs)::real::double precision INTO v_n, v_avgdl
    FROM hybrid.bm25_tenant_stats s WHERE s.tenant_key = p_key AND s.n_docs > 0 AND s.total_len > 0;
    IF v_n IS NULL THEN
        RETURN;
    END IF;
    -- ub: the most a term adds to a score, idf * qf * w, with a margin for rounding. w = tf * (k1 + 1) / (tf + k1 *
    -- (1 - b + b * dl / avgdl)) grows with tf and falls with dl / tf: at most its value at the lexeme's max_tf and
    -- min_dl_tf (hybrid.bm25_term_stats), and below k1 + 1 where they are unknown
    SELECT array_agg(q.lexeme ORDER BY q.lexeme), array_agg(q.idf ORDER BY q.lexeme), array_agg(q.qf ORDER BY q.lexeme),
           array_agg(q.lexeme ORDER BY q.idf * q.qf * q.w DESC, q.lexeme),
           array_agg(q.idf * q.qf * q.w * 1.0001 ORDER BY q.idf * q.qf * q.w DESC, q.lexeme),
           array_agg(q.df / v_n ORDER BY q.idf * q.qf * q.w DESC, q.lexeme), sum(q.df)
    INTO v_lexemes, v_idf, v_qf, v_by_ub, v_ub, v_p, v_held
    FROM (SELECT u.lexeme COLLATE "C" AS lexeme, coalesce(cardinality(u.positions), 1)::double precision AS qf, d.df,
                 ln(1.0::double precision + (v_n - d.df + 0.5) / (d.df + 0.5))::real::double precision AS idf,
                 coalesce(2.2 / (1 + 1.2 * 0.25 / d.max_tf + 1.2 * 0.75 * d.min_dl_tf / v_avgdl), 2.2) AS w
          FROM unnest(to_tsvector(hybrid._text_config(p_key), query_text)) u
          JOIN hybrid.bm25_term_stats d ON d.tenant_key = p_key AND d.lexeme = u.lexeme COLLATE "C" AND d.df > 0) q;
    IF v_lexemes IS NULL THEN
        RETURN;
    END IF;
    v_query := hybrid._lexeme_tsquery(v_lexemes);
    v_must := v_query;
    SELECT array_agg((SELECT sum(u) FROM unnest(v_ub[i:]) u) ORDER BY i) INTO v_rest
    FROM generate_series(1, cardinality(v_ub)) i;
    -- Pruning (MaxScore's bound, applied through the GIN index): the k-th best score of a sample of the chunks
    -- holding terms worth tau (then 0.7 times that, and so on down) is a floor theta for the answer's k-th score,
    -- and only chunks holding terms worth theta (hybrid._bm25_must_match) are scored. Exact: a chunk left out scores
    -- below theta, so below k chunks that are in. Not where the chunks holding any term (at most the sum of the
    -- terms' document frequencies) are no more than a sample. The sample's size and step: the fastest of a grid at
    -- 100,000 chunks (docs/searching.md#bm25-on-any-postgresql). The first tau: the most that top_k chunks
    -- would hold were the terms independent (each held by df / N of the chunks; the eight best terms), so that the
    -- first sample mostly finds its k (three quarters of the most a chunk can score took four or five tries)
    v_sample := greatest(4 * top_k, 400);
    IF v_held > v_sample THEN
        WITH RECURSIVE s(i, ub, pr) AS (
            SELECT 0, 0::double precision, 1::double precision
            UNION ALL
            SELECT s.i + 1, s.ub + CASE WHEN x.held THEN v_ub[s.i + 1] ELSE 0 END,
                   s.pr * CASE WHEN x.held THEN v_p[s.i + 1] ELSE 1 - v_p[s.i + 1] END
            FROM s, (VALUES (true), (false)) x(held)
            WHERE s.i < least(cardinality(v_ub), 8))
        SELECT max(e.ub) INTO v_tau
        FROM (SELECT s.ub, sum(s.pr) OVER (ORDER BY s.ub DESC) * v_n AS expected
              FROM s WHERE s.i = least(cardinality(v_ub), 8)) e
        WHERE e.expected >= top_k;
    END IF;
    WHILE v_tau >= v_ub[cardinality(v_ub)] LOOP  -- below, any one lexeme would do: every chunk holding one
        SELECT count(*), min(s.score) INTO v_found, v_theta
        FROM hybrid._bm25_sql_scored(p_key, p_tenant, p_acl, p_all, corpus_ids, filter,
                                     (hybrid._bm25_must_match(v_by_ub, v_ub, v_rest, v_tau)).must::tsquery,
                                     v_lexemes, v_idf, v_qf, v_avgdl, v_query, top_k, v_sample) s;
        IF v_found >= top_k THEN
            v_must := (hybrid._bm25_must_match(v_by_ub, v_ub, v_rest, v_theta)).must::tsquery;
            EXIT;
        END IF;
        v_tau := v_tau * 0.7;
    END LOOP;
    RETURN QUERY
    SELECT r.chunk_id, r.rank, r.score,
           CASE WHEN terms IS NOT NULL AND r.rank <= 3 THEN hybrid._terms_held(r.tsv, terms) END
    FROM (SELECT s.chunk_id, s.score, s.tsv, (row_number() OVER (ORDER BY s.score DESC, s.chunk_id))::integer AS rank
          FROM hybrid._bm25_sql_scored(p_key, p_tenant, p_acl, p_all, corpus_ids, filter, v_must,
                                       v_lexemes, v_idf, v_qf, v_avgdl, v_query, top_k) s) r
    ORDER BY r.rank;
END
$$;
COMMENT ON FUNCTION hybrid._bm25_sql_hits(integer, text, text[], boolean, text, integer, text[], jsonb, text[]) IS
'The lexical branch''s BM25 by the exact SQL scorer: the caller''s top_k live chunks of tenant key p_key by pg_textsearch''s BM25 (k1 1.2, b 0.75, its quantized lengths and float4 roundings) computed from the tenant''s statistics (hybrid.bm25_tenant_stats, hybrid.bm25_term_stats), each with terms_held as hybrid._lexical_hits gives it. Only chunks that can reach the k-th score are scored (hybrid._bm25_must_match).';
REVOKE ALL ON FUNCTION hybrid._bm25_sql_hits(integer, text, text[], boolean, text, integer, text[], jsonb, text[]) FROM PUBLIC;

-- hybrid._bm25_index_hits: BM25 through the partition's pg_textsearch index
CREATE OR REPLACE FUNCTION hybrid._bm25_index_hits(p_key integer, p_tenant text, p_acl text[], p_all boolean,
    query_text text, top_k integer, corpus_ids text[], filter jsonb, terms text[], index_name text)
RETURNS TABLE (chunk_id text, rank integer, value double precision, terms_held integer)
-- invoker rights: hybrid._lexical_hits calls it, as hybrid_definer
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, public, pg_temp
SET enable_sort = off  -- keeps the planner on the BM25 index's ordered scan (see below)
AS $$
DECLARE
    v_scan boolean;
BEGIN
    -- Always the BM25 index's ordered scan of the tenant's partition, by name, through the partition's own index,
    -- whose statistics are the tenant's alone (through the parent, pg_textsearch 1.0 scores every partition's rows
    -- against one partition's index); it keeps scanning past rows the tenant, ACL or filter drop. Before 1.3.1 a
    -- multi-segment index can leave a term out of a score (pg_textsearch #365) or return a row twice (#417): unless the
    -- index is known to have one segment and no write since (hybrid._bm25_scan_exact), a few extra rows are fetched and
    -- re-scored with <@>, as is a query of one word repeated, which 1.0's scan scores as if written once.
    -- hybrid.bm25_scores says which for the transaction. Scores are negative (lower is better); 0: no term matched.
    -- SET hybrid.bm25_rescore = on forces the re-score (bench/latency.py --bm25-ab compares the two)
    v_scan := coalesce(current_setting('hybrid.bm25_rescore', true), '') <> 'on'
        AND hybrid._bm25_scan_exact(index_name::regclass) AND NOT coalesce(
        (SELECT count(*) = 1 AND sum(cardinality(t.positions)) > 1
         FROM unnest(to_tsvector((SELECT substring(o FROM '^text_config=(.*)$')::regconfig
                                  FROM pg_class k, unnest(k.reloptions) o
                                  WHERE k.oid = index_name::regclass AND o LIKE 'text_config=%'), query_text)) t), true);
    PERFORM set_config('hybrid.bm25_scores', CASE WHEN v_scan THEN 'index scan' ELSE 're-scored' END, true);
    -- the terms a hit holds (hybrid.retrieve's term coverage: hybrid._terms_held), read by the primary key for the
    -- three best hits only, in this statement (bench/FINDINGS.md#the-one-calls-own-statements-fewer-and-flatter-engine_ab)
    RETURN QUERY EXECUTE format($sql$
    SELECT r.chunk_id, r.rank, r.sc,
           CASE WHEN $8 IS NOT NULL AND r.rank <= 3
                THEN (SELECT hybrid._terms_held(t.tsv, $8) FROM %2$s t
                      WHERE t.tenant_id = $2 AND t.chunk_id = r.chunk_id) END
    FROM (SELECT s.chunk_id, (row_number() OVER (ORDER BY s.sc DESC, s.chunk_id))::integer AS rank, s.sc
    FROM (SELECT x.chunk_id, max(-x.raw) AS sc
          FROM (SELECT c.chunk_id, %1$s::double precision AS raw
                FROM %2$s c
                WHERE hybrid._visible(c.tenant_id, c.superseded, c.acl_labels, $2, $3, $4)
                  AND ($5 IS NULL OR c.corpus_id = ANY ($5))
                  AND ($6 IS NULL OR c.metadata @> $6)
                ORDER BY c.content <@> to_bm25query($1, %3$L)
                LIMIT $7 + greatest(5, $7 / 5)) x
          WHERE x.raw < 0
          GROUP BY x.chunk_id
          ORDER BY 2 DESC, 1
          LIMIT $7) s) r
    ORDER BY r.rank
    $sql$, CASE WHEN v_scan THEN 'bm25_get_current_score()' ELSE format('(c.content <@> to_bm25query($1, %L))', index_name) END,
           hybrid._chunk_partition(p_key), index_name)
    USING query_text, p_tenant, p_acl, p_all, corpus_ids, filter, top_k, terms;
END
$$;
COMMENT ON FUNCTION hybrid._bm25_index_hits(integer, text, text[], boolean, text, integer, text[], jsonb, text[], text) IS
'The lexical branch''s BM25 through pg_textsearch: the caller''s top_k live chunks of tenant key p_key by the ordered scan of index_name, its partition''s BM25 index (re-scored where pg_textsearch 1.0 could get a score wrong), each with terms_held as hybrid._lexical_hits gives it.';
REVOKE ALL ON FUNCTION hybrid._bm25_index_hits(integer, text, text[], boolean, text, integer, text[], jsonb, text[], text) FROM PUBLIC;

-- hybrid._lexical_hits: the lexical branch (BM25 or ts_rank), with the terms its three best hits hold
CREATE OR REPLACE FUNCTION hybrid._lexical_hits(
    query_text text, top_k integer, corpus_ids text[], filter jsonb, lexical text, terms text[])
RETURNS TABLE (chunk_id text, rank integer, value double precision, terms_held integer)
-- invoker rights: only hybrid.search_lexical and hybrid.retrieve (both run as hybrid_definer) call it.
-- Volatile: the first BM25 search after a restart may rebuild the index
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, public, pg_temp
SET plan_cache_mode = force_custom_plan  -- v_key a constant: the tenant's partition alone is planned
-- Never JIT-compiled (the setting holds for the scorers it calls): the SQL scorer's last statement at a
-- 500,000-chunk tenant planned above jit_above_cost's default (100,000) for 9 of 30 ten-word queries at top_k 100,
-- and a server with JIT (PostgreSQL's default where it is built with LLVM) would compile it on every such call
SET jit = off
AS $$
DECLARE
    v_tenant text; v_key integer;
    v_acl text[] := hybrid._current_acl();
    v_all boolean := hybrid._acl_all();
    v_method text := coalesce(lexical, 'bm25');
    v_query tsquery;
    v_scorer record;
BEGIN
    SELECT s.tenant, s.key INTO v_tenant, v_key FROM hybrid._scope() s;
    IF v_method NOT IN ('bm25', 'ts_rank') THEN
        RAISE EXCEPTION 'lexical must be ''bm25'' or ''ts_rank'', got %', hybrid._shown(v_method) USING ERRCODE = '22023';
    END IF;
    PERFORM hybrid._check_text('query_text', query_text, 20000);
    PERFORM hybrid._check_range('top_k', top_k, 1, 10000);
    IF v_tenant IS NULL OR v_key IS NULL OR query_text IS NULL OR btrim(query_text) = '' THEN
        RETURN;
    END IF;
    IF v_method = 'bm25' THEN
        v_scorer := hybrid._bm25_scorer(v_key);
        IF v_scorer.index_name IS NOT NULL THEN
            RETURN QUERY SELECT * FROM hybrid._bm25_index_hits(v_key, v_tenant, v_acl, v_all, query_text, top_k,
                                                               corpus_ids, filter, terms, v_scorer.index_name);
        ELSE
            PERFORM set_config('hybrid.bm25_scores', 'SQL scorer: ' || v_scorer.reason, true);
            RETURN QUERY SELECT * FROM hybrid._bm25_sql_hits(v_key, v_tenant, v_acl, v_all, query_text, top_k,
                                                             corpus_ids, filter, terms);
        END IF;
        RETURN;
    END IF;
    v_query := hybrid._or_tsquery(query_text, hybrid._text_config(v_key));
    IF numnode(v_query) = 0 THEN
        RETURN;
    END IF;
    RETURN QUERY
    SELECT s.chunk_id, (row_number() OVER w)::integer, s.r,
           CASE WHEN terms IS NOT NULL AND row_number() OVER w <= 3 THEN hybrid._terms_held(s.tsv, terms) END
    FROM (SELECT c.chunk_id, ts_rank(c.tsv, v_query)::double precision AS r, c.tsv
          FROM hybrid.chunk c
          WHERE c.tenant_key = v_key AND hybrid._visible(c.tenant_id, c.superseded, c.acl_labels, v_tenant, v_acl, v_all)
            AND c.tsv @@ v_query
            AND (corpus_ids IS NULL OR c.corpus_id = ANY (corpus_ids))
            AND (filter IS NULL OR c.metadata @> filter)
          ORDER BY 2 DESC, 1
          LIMIT top_k) s
    WINDOW w AS (ORDER BY s.r DESC, s.chunk_id)
    ORDER BY s.r DESC, s.chunk_id;
END
$$;
COMMENT ON FUNCTION hybrid._lexical_hits(text, integer, text[], jsonb, text, text[]) IS
'hybrid.search_lexical''s branch, each hit with terms_held: for the three best, how many of terms (the query''s distinct lexemes, to_tsvector of the tenant''s configuration; NULL: not counted) it holds, else NULL. BM25 (the default) through pg_textsearch''s index or the exact SQL scorer (hybrid._bm25_scorer says which; hybrid.bm25_scores names it for the transaction), or ts_rank by name. hybrid.retrieve calls it for its term coverage.';
REVOKE ALL ON FUNCTION hybrid._lexical_hits(text, integer, text[], jsonb, text, text[]) FROM PUBLIC;

-- hybrid.search_lexical: the lexical branch (BM25 or ts_rank)
CREATE OR REPLACE FUNCTION hybrid.search_lexical(
    query_text text, top_k integer DEFAULT 30, corpus_ids text[] DEFAULT NULL, filter jsonb DEFAULT NULL,
    lexical text DEFAULT NULL)
RETURNS SETOF hybrid.branch_hit
LANGUAGE plpgsql VOLATILE SECURITY DEFINER  -- the first BM25 search after a restart may rebuild the index
SET search_path = pg_catalog, public, pg_temp
AS $$
DECLARE
    v_key integer;
    v_hits hybrid.branch_hit[];
BEGIN
    -- each statement of a volatile function reads a snapshot of its own: a move of the tenant (hybrid.move_tenant)
    -- that commits between the branch's read of its key and its search leaves it searching where the tenant was.
    -- Searched again where it is now, as hybrid.retrieve does (moves are rare)
    FOR attempt IN 1..3 LOOP
        v_key := (SELECT s.key FROM hybrid._scope() s);
        v_hits := ARRAY(SELECT ROW(h.chunk_id, h.rank, h.value)::hybrid.branch_hit
                        FROM hybrid._lexical_hits(query_text, top_k, corpus_ids, filter, lexical, NULL) h ORDER BY h.rank);
        EXIT WHEN (SELECT s.key FROM hybrid._scope() s) IS NOT DISTINCT FROM v_key;
    END LOOP;
    RETURN QUERY SELECT * FROM unnest(v_hits);
END
$$;
COMMENT ON FUNCTION hybrid.search_lexical(text, integer, text[], jsonb, text) IS
'Lexical branch: the caller''s top_k best live chunks for query_text by BM25 (the default: pg_textsearch''s index where it is installed and current, else the exact SQL scorer over the tenant''s statistics, with the same scores) or ts_rank over the GIN index (lexical => ''ts_rank''); value = the score, higher is better (BM25''s sign flipped). User text never raises a syntax error. A BM25 index left stale by a server restart is rebuilt first, or, where it cannot be (read-only, a standby), the SQL scorer answers.';

-- hybrid._visible_chunk_ids: which of some chunk ids of one tenant the caller can see
CREATE OR REPLACE FUNCTION hybrid._visible_chunk_ids(tenant_key integer, ids text[], corpus_ids text[], filter jsonb,
                                                     tenant text, acl text[], acl_all boolean) RETURNS text[]
LANGUAGE sql STABLE SECURITY INVOKER
SET search_path = pg_catalog, public, pg_temp
SET plan_cache_mode = force_custom_plan  -- tenant_key a constant: the tenant's partition alone is planned
AS $$
    SELECT coalesce(array_agg(c.chunk_id), '{}') FROM hybrid.chunk c
    WHERE c.tenant_key = _visible_chunk_ids.tenant_key AND c.tenant_id = tenant AND c.chunk_id = ANY (ids)
      AND hybrid._visible(c.tenant_id, c.superseded, c.acl_labels, tenant, acl, acl_all)
      AND (corpus_ids IS NULL OR c.corpus_id = ANY (corpus_ids))
      AND (filter IS NULL OR c.metadata @> filter)
$$;
COMMENT ON FUNCTION hybrid._visible_chunk_ids(integer, text[], text[], jsonb, text, text[], boolean) IS
'The ids among ids of live chunks of the tenant (its partition) that the caller may see, in the given corpora and matching filter: the graph branch''s visibility check of a hop.';

-- hybrid._edge_type_tables: the label tables of some of the caller's tenant's edge types (the graph branch's filter)
CREATE OR REPLACE FUNCTION hybrid._edge_type_tables(names text[]) RETURNS oid[]
LANGUAGE plpgsql STABLE SECURITY INVOKER  -- the graph branch's, as hybrid_definer
SET search_path = pg_catalog, public, pg_temp
AS $$
DECLARE
    v_known text[] := hybrid._edge_types_seen(names);
    v_unknown text;
BEGIN
    -- edge types are the tenant's own names (hybrid.edge_type): another tenant's type, a type whose edges the
    -- caller cannot see (hybrid._edge_types_seen) and a name nobody uses get the same answer
    SELECT t INTO v_unknown FROM unnest(names) t WHERE t IS NULL OR NOT t = ANY (v_known) LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'graph_edge_types: % is not an edge type of this tenant', hybrid._shown(v_unknown)
            USING ERRCODE = '22023', HINT = 'Loading an edge registers its type; SELECT name FROM hybrid.edge_types() lists them.';
    END IF;
    -- each type's edges live in its opaque label table
    RETURN (SELECT coalesce(array_agg(to_regclass('hybrid_graph.rel_' || et.slot)::oid), '{}') FROM hybrid.edge_type et
            WHERE et.tenant_id = hybrid._current_tenant() AND et.name = ANY (v_known));
END
$$;
COMMENT ON FUNCTION hybrid._edge_type_tables(text[]) IS
'The oids of the AGE label tables holding the current tenant''s edges of the types names; 22023 "is not an edge type of this tenant" for a name the caller may not know of (another tenant''s, one whose edges it cannot see, or nobody''s: one answer).';
REVOKE ALL ON FUNCTION hybrid._edge_type_tables(text[]) FROM PUBLIC;

-- hybrid._graph_walk: the graph branch, hop by hop, with the seed each hit was reached from
CREATE OR REPLACE FUNCTION hybrid._graph_walk(
    graph_seeds text[], graph_hops integer DEFAULT 1, top_k integer DEFAULT 30, corpus_ids text[] DEFAULT NULL,
    filter jsonb DEFAULT NULL, graph_edge_types text[] DEFAULT NULL)
RETURNS TABLE (chunk_id text, rank integer, value double precision, seed text)
-- invoker rights: only hybrid.search_graph and hybrid.retrieve (both run as hybrid_definer) call it
LANGUAGE plpgsql STABLE SECURITY INVOKER
SET search_path = pg_catalog, public, ag_catalog, pg_temp  -- graphid operators live in ag_catalog
-- each hop's statement joins short id arrays to the graph's btrees, a plan that fits every tenant and seed list:
-- planned once, not on each call (bench/FINDINGS.md#results-of-earlier-engines-removed). They read no chunk: which
-- candidates are visible chunks is asked of hybrid._visible_chunk_ids, planned for the tenant's partition alone
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    v_tenant text; v_key integer; v_acl text[]; v_all boolean;
    v_front text[];
    v_pos integer[];
    v_kind text[];
    v_ok text[];
    v_visited text[];
    v_found_ids text[] := '{}';
    v_found_dist integer[] := '{}';
    v_found_pos integer[] := '{}';
    v_next_ids text[];
    v_next_pos integer[];
    v_next_kind text[];
    v_next_via boolean[];
    v_types oid[];
    h integer;
BEGIN
    SELECT * INTO v_tenant, v_key, v_acl, v_all FROM hybrid._scope();  -- the caller's tenant and labels
    PERFORM hybrid._check_range('graph_hops', graph_hops, 1, 3);
    PERFORM hybrid._check_range('top_k', top_k, 1, 10000);
    IF v_tenant IS NULL OR v_key IS NULL OR graph_seeds IS NULL OR cardinality(graph_seeds) = 0 THEN
        RETURN;
    END IF;
    IF to_regclass('hybrid.graph_node') IS NULL THEN
        RAISE EXCEPTION 'the graph is not installed: the age extension is missing'
            USING ERRCODE = '0A000', HINT = 'Install Apache AGE and run pyhybrid migrate again.';
    END IF;
    IF graph_edge_types IS NOT NULL THEN
        v_types := hybrid._edge_type_tables(graph_edge_types);
    END IF;
    -- seeds the caller cannot see start no path: a chunk seed must be a visible live chunk
    SELECT array_agg(s.id ORDER BY s.p), array_agg(s.p ORDER BY s.p), array_agg(g.kind ORDER BY s.p)
    INTO v_front, v_pos, v_kind
    FROM (SELECT u.id, min(u.p)::integer AS p FROM unnest(graph_seeds) WITH ORDINALITY AS u(id, p) GROUP BY u.id) s
    JOIN hybrid.graph_node g ON g.tenant_id = v_tenant AND g.node_id = s.id;
    -- and an entity seed only if a chunk the caller can see links to it
    v_ok := hybrid._visible_chunk_ids(v_key, v_front, NULL, NULL, v_tenant, v_acl, v_all)
            || hybrid._entities_seen(v_key, ARRAY(SELECT x.id FROM unnest(v_front, v_kind) AS x(id, kind) WHERE x.kind = 'entity'),
                                     v_tenant, v_acl, v_all);
    SELECT array_agg(x.id ORDER BY x.o), array_agg(x.p ORDER BY x.o), array_agg(x.kind ORDER BY x.o)
    INTO v_front, v_pos, v_kind
    FROM unnest(v_front, v_pos, v_kind) WITH ORDINALITY AS x(id, p, kind, o)
    WHERE x.id = ANY (v_ok);
    v_visited := coalesce(graph_seeds, '{}');
    FOR h IN 1..graph_hops LOOP
        EXIT WHEN v_front IS NULL OR cardinality(v_front) = 0;
        SELECT array_agg(n.node_id ORDER BY n.p, n.node_id), array_agg(n.p ORDER BY n.p, n.node_id),
               array_agg(n.kind ORDER BY n.p, n.node_id), array_agg(n.via_chunk ORDER BY n.p, n.node_id)
        INTO v_next_ids, v_next_pos, v_next_kind, v_next_via
        FROM (
            SELECT g.node_id, g.kind, min(nb.p) AS p, bool_or(nb.via_chunk) AS via_chunk
            FROM (
                SELECT e.end_id AS vid, f.p, f.kind = 'chunk' AS via_chunk
                FROM unnest(v_front, v_pos, v_kind) AS f(node_id, p, kind)
                JOIN hybrid.graph_node fg ON fg.tenant_id = v_tenant AND fg.node_id = f.node_id
                JOIN hybrid_graph._ag_label_edge e ON e.start_id = fg.vertex_id
                WHERE v_types IS NULL OR e.tableoid = ANY (v_types)
                UNION ALL
                SELECT e.start_id, f.p, f.kind = 'chunk'
                FROM unnest(v_front, v_pos, v_kind) AS f(node_id, p, kind)
                JOIN hybrid.graph_node fg ON fg.tenant_id = v_tenant AND fg.node_id = f.node_id
                JOIN hybrid_graph._ag_label_edge e ON e.end_id = fg.vertex_id
                WHERE v_types IS NULL OR e.tableoid = ANY (v_types)
            ) nb
            JOIN hybrid.graph_node g ON g.vertex_id = nb.vid
            WHERE NOT (g.node_id = ANY (v_visited))
            GROUP BY g.node_id, g.kind
        ) n;
        EXIT WHEN v_next_ids IS NULL;
        -- no path crosses a chunk the caller cannot see (nor one outside corpus_ids / filter), nor an
        -- entity that no chunk the caller can see links to: one reached from a frontier chunk (which
        -- the caller sees) is seen through it, the others are asked of hybrid._entities_seen
        v_ok := hybrid._visible_chunk_ids(v_key, v_next_ids, corpus_ids, filter, v_tenant, v_acl, v_all)
                || hybrid._entities_seen(v_key, ARRAY(SELECT x.id FROM unnest(v_next_ids, v_next_kind, v_next_via) AS x(id, kind, via)
                                                      WHERE x.kind = 'entity' AND NOT x.via), v_tenant, v_acl, v_all);
        SELECT array_agg(x.id ORDER BY x.o), array_agg(x.p ORDER BY x.o), array_agg(x.kind ORDER BY x.o)
        INTO v_next_ids, v_next_pos, v_next_kind
        FROM unnest(v_next_ids, v_next_pos, v_next_kind, v_next_via) WITH ORDINALITY AS x(id, p, kind, via, o)
        WHERE x.id = ANY (v_ok) OR (x.kind = 'entity' AND x.via);
        EXIT WHEN v_next_ids IS NULL;
        v_visited := v_visited || v_next_ids;
        SELECT v_found_ids || coalesce(array_agg(x.id ORDER BY x.o), '{}'),
               v_found_dist || coalesce(array_agg(h ORDER BY x.o), '{}'),
               v_found_pos || coalesce(array_agg(x.p ORDER BY x.o), '{}')
        INTO v_found_ids, v_found_dist, v_found_pos
        FROM unnest(v_next_ids, v_next_pos, v_next_kind) WITH ORDINALITY AS x(id, p, kind, o)
        WHERE x.kind = 'chunk';
        v_front := v_next_ids;
        v_pos := v_next_pos;
        v_kind := v_next_kind;
    END LOOP;
    RETURN QUERY
    SELECT f.id, (row_number() OVER (ORDER BY f.d, f.p, f.id))::integer, f.d::double precision, graph_seeds[f.p]
    FROM unnest(v_found_ids, v_found_dist, v_found_pos) AS f(id, d, p)
    ORDER BY f.d, f.p, f.id
    LIMIT top_k;
END
$$;
COMMENT ON FUNCTION hybrid._graph_walk(text[], integer, integer, text[], jsonb, text[]) IS
'hybrid.search_graph''s walk, each hit with seed: the first of graph_seeds (in their order) that reaches it in the fewest hops, the seed hybrid.retrieve scores it from (graph_decay).';

-- hybrid.search_graph: the graph branch, hop by hop
CREATE OR REPLACE FUNCTION hybrid.search_graph(
    graph_seeds text[], graph_hops integer DEFAULT 1, top_k integer DEFAULT 30, corpus_ids text[] DEFAULT NULL,
    filter jsonb DEFAULT NULL, graph_edge_types text[] DEFAULT NULL)
RETURNS SETOF hybrid.branch_hit
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
AS $$
    SELECT w.chunk_id, w.rank, w.value FROM hybrid._graph_walk(graph_seeds, graph_hops, top_k, corpus_ids, filter, graph_edge_types) w
    ORDER BY w.rank
$$;
COMMENT ON FUNCTION hybrid.search_graph(text[], integer, integer, text[], jsonb, text[]) IS
'Graph branch: live chunks reachable from graph_seeds (chunk or entity ids) in 1..graph_hops edges of hybrid_graph (of the tenant''s edge types graph_edge_types only, where given: 22023 for a name the tenant does not use), either direction, hop by hop under RLS (no path crosses a chunk the caller cannot see, or an entity no such chunk links to); the top_k nearest, ranked by hop distance (value), then by the position of the seed they came from. Seeds themselves are not returned.';

-- The branches of 0.3, registered (hybrid.branch; a branch's row stands by its search function)
INSERT INTO hybrid.branch AS b (name, position, stage, scale, blend_k, query_param, weight_param, floor_param, search,
                               rank_column, value_column, meaning) VALUES
    ('dense', 1, 'list', 'distance', NULL, 'query_embedding', 'vector_weight', 'min_vector_score',
     'hybrid.search_dense(vector, integer, text[], jsonb, integer)', 'vector_rank', 'vector_distance',
     'the cosine distance of the chunk''s embedding to query_embedding (pgvector; an exact scan, HNSW or IVFFlat)'),
    -- blend_k 10 won bench/quality.py's leave-one-collection-out grid (k in 1..50, weights 1/1, top_k 10) on
    -- three of the four shared collections' folds, and on all four
    ('lexical', 2, 'list', 'score', 10, 'query_text', 'keyword_weight', 'min_keyword_score',
     'hybrid.search_lexical(text, integer, text[], jsonb, text)', 'keyword_rank', 'keyword_score',
     'the BM25 (pg_textsearch) or ts_rank score of the chunk''s text for query_text'),
    -- blend_k as the lexical branch's: not tuned (no judged run of a SPLADE model's vectors here)
    ('sparse', 3, 'list', 'score', 10, 'query_sparse', 'sparse_weight', 'min_sparse_score',
     'hybrid.search_sparse(sparsevec, integer, text[], jsonb)', NULL, NULL,
     'the inner product of the chunk''s sparse_embedding (SPLADE and the like) with query_sparse'),
    ('graph', 100, 'graph', 'hops', NULL, 'graph_seeds', 'graph_weight', 'min_graph_score',
     'hybrid.search_graph(text[], integer, integer, text[], jsonb, text[])', 'graph_rank', 'graph_distance',
     'the hops from the seed that reached the chunk (graph_seeds, or the best graph_expand of the fused lists)')
ON CONFLICT (name) DO UPDATE SET position = excluded.position, stage = excluded.stage, scale = excluded.scale,
    blend_k = excluded.blend_k, query_param = excluded.query_param, weight_param = excluded.weight_param,
    floor_param = excluded.floor_param, search = excluded.search, rank_column = excluded.rank_column,
    value_column = excluded.value_column, meaning = excluded.meaning
WHERE (b.*) IS DISTINCT FROM (excluded.*);

-- hybrid._branch_score and hybrid._blend_score: a branch hit's own measure as a score, written once per scale
-- and generated from hybrid.branch, so that the planner inlines a plain CASE over the branch names (a
-- lookup of the registry for every hit would cost each call its rows)
DO $scores$
DECLARE
    v_own text;
    v_blend text;
BEGIN
    SELECT string_agg(format('WHEN %L THEN %s', b.name, CASE b.scale WHEN 'distance' THEN '1 - value'
                                                             WHEN 'score' THEN 'value' ELSE '1 / value' END),
                      ' ' ORDER BY b.position),
           string_agg(format('WHEN %L THEN %s', b.name, CASE b.scale WHEN 'distance' THEN 'greatest(0, 1 - value)'
               WHEN 'score' THEN format('greatest(0, value) / (greatest(0, value) + %s)', b.blend_k)
               ELSE '1 / value' END), ' ' ORDER BY b.position)
    INTO v_own, v_blend FROM hybrid.branch b;
    -- STABLE, not IMMUTABLE: the ELSE raises (hybrid._no_such), and an immutable CASE arm with constant
    -- arguments could be run at planning whichever arm the call takes
    EXECUTE format('CREATE OR REPLACE FUNCTION hybrid._branch_score(branch text, value double precision) '
                   'RETURNS double precision LANGUAGE sql STABLE PARALLEL SAFE AS %L',
                   format('SELECT CASE branch %s ELSE hybrid._no_such(%L, branch) END', v_own, 'branch'));
    EXECUTE format('CREATE OR REPLACE FUNCTION hybrid._blend_score(branch text, value double precision) '
                   'RETURNS double precision LANGUAGE sql STABLE PARALLEL SAFE AS %L',
                   format('SELECT CASE branch %s ELSE hybrid._no_such(%L, branch) END', v_blend, 'branch'));
END
$scores$;
COMMENT ON FUNCTION hybrid._branch_score(text, double precision) IS
'A branch hit''s own measure as the score convex and dbsf fuse (higher is better), by the branch''s scale in hybrid.branch: a distance d gives 1 - d (dense: the cosine similarity), a score itself (lexical: BM25 or ts_rank), hops h give 1 / h (graph); 22023 for a name hybrid.branch does not hold. Generated from hybrid.branch.';
COMMENT ON FUNCTION hybrid._blend_score(text, double precision) IS
'A branch hit''s score on blend''s bounded, absolute 0..1 scale (no per-query normalization), by its scale in hybrid.branch: a distance d gives greatest(0, 1 - d), a score s gives s / (s + blend_k) (0 if negative; lexical: k 10), hops h give 1 / h; 22023 for an unknown branch. Generated from hybrid.branch; pyhybrid/fusion.py''s blend_score mirrors it.';

-- hybrid._rrf_term: the weighted RRF arithmetic, one list's term
CREATE OR REPLACE FUNCTION hybrid._rrf_term(weight double precision, rrf_k double precision, rank integer)
RETURNS double precision
LANGUAGE sql IMMUTABLE PARALLEL SAFE
-- no SET clause, no FROM: the planner inlines it
AS $$
    SELECT coalesce(weight / (rrf_k + rank), 0)
$$;
COMMENT ON FUNCTION hybrid._rrf_term(double precision, double precision, integer) IS
'The weighted RRF arithmetic, written once: a list''s term weight / (rrf_k + rank), 0 where the list does not hold the item (NULL rank). A fused score is the sum of the terms in list order (hybrid._fuse_lists); pyhybrid/fusion.py mirrors it (a property test holds them equal).';

-- hybrid._fusion_score: the score hybrid._fusion_term reads for a branch hit under a fusion method
CREATE OR REPLACE FUNCTION hybrid._fusion_score(fusion text, branch text, value double precision)
RETURNS double precision
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT CASE WHEN branch IS NULL THEN value  -- a caller's own scores (hybrid.fuse): as given
                WHEN fusion OPERATOR(pg_catalog.=) 'blend' THEN hybrid._blend_score(branch, value)
                ELSE hybrid._branch_score(branch, value) END
$$;
COMMENT ON FUNCTION hybrid._fusion_score(text, text, double precision) IS
'A list entry''s score as hybrid._fuse_lists fuses it: for a branch''s hit hybrid._blend_score under blend, hybrid._branch_score under the other methods; with branch NULL (scores a caller brings to hybrid.fuse) the value as given.';

-- hybrid._fusion_term: one list's contribution to a fused score, for every fusion method
CREATE OR REPLACE FUNCTION hybrid._fusion_term(fusion text, weight double precision, rrf_k double precision,
                                               rank integer, score double precision, lo double precision,
                                               hi double precision, mean double precision, sd double precision)
RETURNS double precision
LANGUAGE sql STABLE PARALLEL SAFE
-- no SET clause, no FROM: the planner inlines it into the fusing statement
AS $$
    SELECT CASE
        WHEN rank IS NULL THEN 0::double precision
        WHEN fusion OPERATOR(pg_catalog.=) 'rrf' THEN hybrid._rrf_term(weight, rrf_k, rank)
        WHEN fusion OPERATOR(pg_catalog.=) 'blend' THEN weight * score
        WHEN fusion OPERATOR(pg_catalog.=) 'convex' THEN
            weight * CASE WHEN hi > lo THEN (score - lo) / (hi - lo) ELSE 1 END
        WHEN fusion OPERATOR(pg_catalog.=) 'dbsf' THEN
            weight * CASE WHEN sd > 0 THEN least(1, greatest(0, (score - (mean - 3 * sd)) / (6 * sd))) ELSE 1 END
        ELSE hybrid._no_such('fusion', fusion)
    END
$$;
COMMENT ON FUNCTION hybrid._fusion_term(text, double precision, double precision, integer, double precision,
                                        double precision, double precision, double precision, double precision) IS
'The fusion arithmetic, written once: a list''s term in an item''s fused score, 0 where the list does not hold the item (NULL rank), by the rules of hybrid.fusion_methods(); 22023 for a method it does not list. Scores are higher-is-better. hybrid._fuse_lists adds the terms in list order; pyhybrid/fusion.py mirrors it.';

-- hybrid._fuse_lists: N ranked lists fused, every method: what hybrid.retrieve and hybrid.fuse both run
CREATE OR REPLACE FUNCTION hybrid._fuse_lists(fusion text, rrf_k double precision, names text[],
                                              weights double precision[], entry_list integer[],
                                              entry_ids text[], entry_vals double precision[])
RETURNS TABLE (id text, score double precision, ranks integer[], vals double precision[])
LANGUAGE sql STABLE
-- no SET clause: the planner inlines it into its caller's statement (whose search_path is pinned), so that the
-- columns a caller does not read (hybrid.retrieve: ranks and vals) are not computed
AS $$
    -- the lists in long form: entry j is entry_ids[j] of list entry_list[j], its raw value entry_vals[j] (a branch's own measure,
    -- or a caller's score where names[list] is NULL); an entry's rank is its place in its list. Each list's
    -- statistics are taken in rank order (the sums behind mean and sd add up as pyhybrid/fusion.py's
    -- list_stats does) and an item's terms are summed in list order
    WITH raw AS (
        SELECT x.l AS i, x.id, (row_number() OVER (PARTITION BY x.l ORDER BY x.j))::integer AS r, x.v,
               hybrid._fusion_score(fusion, names[x.l], x.v) AS s
        FROM unnest(entry_list, entry_ids, entry_vals) WITH ORDINALITY AS x(l, id, v, j)
    ), entries AS (
        -- a repeated id keeps its best rank, and its value there; the list's statistics count it once
        SELECT DISTINCT ON (raw.i, raw.id) raw.* FROM raw ORDER BY raw.i, raw.id, raw.r
    ), stats AS (
        SELECT e.*, min(e.s) OVER w AS lo, max(e.s) OVER w AS hi, avg(e.s) OVER w AS mean, stddev_pop(e.s) OVER w AS sd
        FROM entries e
        WINDOW w AS (PARTITION BY e.i ORDER BY e.r ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)
    ), fused AS (
        SELECT st.id, sum(hybrid._fusion_term(fusion, weights[st.i], rrf_k, st.r, st.s, st.lo, st.hi, st.mean, st.sd)
                          ORDER BY st.i) AS score,
               array_agg(st.i ORDER BY st.i) AS lists, array_agg(st.r ORDER BY st.i) AS rs,
               array_agg(st.v ORDER BY st.i) AS vs, bool_or(weights[st.i] > 0) AS live
        FROM stats st
        GROUP BY st.id
    )
    -- an item only lists of weight 0 hold is dropped
    SELECT f.id, f.score,
           ARRAY(SELECT f.rs[array_position(f.lists, li)] FROM generate_series(1, cardinality(weights)) li),
           ARRAY(SELECT f.vs[array_position(f.lists, li)] FROM generate_series(1, cardinality(weights)) li)
    FROM fused f
    WHERE f.live
$$;
COMMENT ON FUNCTION hybrid._fuse_lists(text, double precision, text[], double precision[], integer[], text[],
                                       double precision[]) IS
'N ranked lists fused by fusion (hybrid._fusion_term, summed in list order): entry j of the long-form arrays is entry_ids[j] at the next rank of list entry_list[j], with its raw value entry_vals[j]; names[i] is list i''s branch (its values become scores by hybrid._fusion_score) or NULL for scores as given; weights[i] its weight. Each item with its fused score and its rank and value in each list (NULL where absent), unordered; items held only by lists of weight 0 are dropped. hybrid.retrieve and hybrid.fuse both fuse through it.';

-- hybrid._lexical_strength: the factor a lexical list's weight is scaled by, from how many query terms its
-- best hit matches (issue 26: min-max crowns a list whose every hit matched one common word of the query)
CREATE OR REPLACE FUNCTION hybrid._lexical_strength(query_terms integer, best_terms integer, term_coverage integer)
RETURNS double precision
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE WHEN coalesce(query_terms, 0) = 0 OR coalesce(term_coverage, 1) <= 1 THEN 1::double precision
                ELSE least(1::double precision,
                           greatest(coalesce(best_terms, 0), 1)::double precision / least(query_terms, term_coverage)) END
$$;
COMMENT ON FUNCTION hybrid._lexical_strength(integer, integer, integer) IS
'The lexical list''s strength, written once: least(1, best_terms / least(query_terms, term_coverage)), best_terms (at least 1) the most distinct query terms one of the list''s three best hits holds, query_terms the query''s distinct terms (to_tsvector of the tenant''s configuration); 1 when the query has no term or term_coverage is 1. hybrid.retrieve multiplies keyword_weight by it under every fusion method; pyhybrid/fusion.py''s lexical_strength mirrors it.';

-- hybrid._term_match_in: the query's distinct terms, and the most of them one of the list's three best hits
-- holds, for a tenant and ACL its caller has resolved (hybrid.retrieve, hybrid._term_match); hybrid_definer only
CREATE OR REPLACE FUNCTION hybrid._term_match_in(tenant_key integer, tenant text, acl text[], all_labels boolean,
                                                 query_text text, chunk_ids text[]) RETURNS integer[]
LANGUAGE plpgsql STABLE SECURITY INVOKER
SET search_path = pg_catalog, public, pg_temp
SET plan_cache_mode = force_custom_plan  -- tenant_key a constant: only the tenant's partition is planned
AS $$
DECLARE
    v_terms text[] := tsvector_to_array(to_tsvector(hybrid._text_config(tenant_key), coalesce(query_text, '')));
    v_best integer;
BEGIN
    IF cardinality(v_terms) = 0 OR coalesce(cardinality(chunk_ids), 0) = 0 THEN
        RETURN ARRAY[cardinality(v_terms), 0];
    END IF;
    -- the terms a chunk holds: its lexemes less those left once the query's are deleted (the stored tsv
    -- is to_tsvector of the tenant's configuration, as the query's terms are); a chunk the caller cannot see counts as absent. The three best
    -- hits only: on the four shared collections the whole list gives the same rankings (docs/searching.md),
    -- and each hit read costs its tsvector
    SELECT max(hybrid._terms_held(c.tsv, v_terms)) INTO v_best
    FROM hybrid.chunk c
    WHERE c.tenant_key = _term_match_in.tenant_key AND c.tenant_id = _term_match_in.tenant
      AND c.chunk_id = ANY (chunk_ids[1:3])
      AND hybrid._visible(c.tenant_id, c.superseded, c.acl_labels, _term_match_in.tenant, acl, all_labels);
    RETURN ARRAY[cardinality(v_terms), coalesce(v_best, 0)];
END
$$;
COMMENT ON FUNCTION hybrid._term_match_in(integer, text, text[], boolean, text, text[]) IS
'ARRAY[the query''s distinct terms (to_tsvector of the tenant''s configuration, hybrid._text_config), the most of them one of the first three of chunk_ids holds], among the chunks of the given tenant visible under acl / all_labels; for hybrid_definer''s functions, which resolve the tenant first.';

-- hybrid._term_match: the same, for the current tenant and the caller's labels
CREATE OR REPLACE FUNCTION hybrid._term_match(query_text text, chunk_ids text[]) RETURNS integer[]
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
AS $$
DECLARE
    v_tenant text; v_key integer;
BEGIN
    SELECT s.tenant, s.key INTO v_tenant, v_key FROM hybrid._scope() s;
    IF cardinality(chunk_ids) > 10000 THEN
        RAISE EXCEPTION 'chunk_ids must hold at most 10000 ids (per_source_k''s limit), got %', cardinality(chunk_ids)
            USING ERRCODE = '22023';
    END IF;
    PERFORM hybrid._check_text('query_text', query_text, 20000);
    IF v_tenant IS NULL OR v_key IS NULL THEN
        RETURN ARRAY[cardinality(tsvector_to_array(to_tsvector('english'::regconfig, coalesce(query_text, '')))), 0];
    END IF;
    RETURN hybrid._term_match_in(v_key, v_tenant, hybrid._current_acl(), hybrid._acl_all(), query_text, chunk_ids);
END
$$;
COMMENT ON FUNCTION hybrid._term_match(text, text[]) IS
'ARRAY[the query''s distinct terms (to_tsvector of the tenant''s configuration; english without a tenant), the most of them one of the first three of chunk_ids (a list, best first) holds], over the chunks of the current tenant the caller can see (any other id counts as absent).';

-- hybrid.lexical_strength: the factor hybrid.retrieve scales a lexical list's weight by
CREATE OR REPLACE FUNCTION hybrid.lexical_strength(query_text text, chunk_ids text[], term_coverage integer DEFAULT 2)
RETURNS double precision
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, public, pg_temp
AS $$
DECLARE
    m integer[];
BEGIN
    PERFORM hybrid._check_range('term_coverage', term_coverage, 1, 32);
    PERFORM hybrid._check_text('query_text', query_text, 20000);
    m := hybrid._term_match(query_text, chunk_ids);
    RETURN hybrid._lexical_strength(m[1], m[2], term_coverage);
END
$$;
COMMENT ON FUNCTION hybrid.lexical_strength(text, text[], integer) IS
'The factor hybrid.retrieve multiplies keyword_weight by for the lexical list chunk_ids (best first, as hybrid.search_lexical returns it for query_text): 1 once one of its three best hits holds term_coverage of the query''s distinct terms (all of them, for a shorter query), else the share it holds (hybrid._lexical_strength): with the default 2, a list none of whose hits matches more than one word of a longer query counts at half weight. term_coverage 1: always 1. Fusing lists you bring with hybrid.fuse, pass weights[i] * this for a lexical list to score as hybrid_retrieve does.';

-- hybrid.fuse: fuse ranked id lists (with their scores) by any fusion method
CREATE OR REPLACE FUNCTION hybrid.fuse(
    rankings jsonb, weights double precision[] DEFAULT NULL, fusion text DEFAULT 'rrf',
    rrf_k double precision DEFAULT 60, top_k integer DEFAULT NULL, scores jsonb DEFAULT NULL)
RETURNS TABLE (id text, score double precision, ranks integer[])
LANGUAGE plpgsql STABLE SECURITY INVOKER
SET search_path = pg_catalog, public, pg_temp
AS $$
DECLARE
    n integer;
    v_weights double precision[];
    i integer;
    v_bad text;
    v_bad_value text;
    v_list integer[];
    v_ids text[];
    v_vals double precision[];
BEGIN
    IF rankings IS NULL OR jsonb_typeof(rankings) <> 'array' THEN
        RAISE EXCEPTION 'rankings must be a JSON array of ranked id lists' USING ERRCODE = '22023';
    END IF;
    n := jsonb_array_length(rankings);
    IF EXISTS (SELECT 1 FROM jsonb_array_elements(rankings) l WHERE jsonb_typeof(l) <> 'array')
       OR EXISTS (SELECT 1 FROM jsonb_array_elements(rankings) l, jsonb_array_elements(l) x WHERE jsonb_typeof(x) <> 'string') THEN
        RAISE EXCEPTION 'rankings must be a JSON array of arrays of string ids' USING ERRCODE = '22023';
    END IF;
    PERFORM hybrid._check_fusion(fusion);
    IF (SELECT f.needs_scores FROM hybrid.fusion_methods() f WHERE f.name = fusion) THEN
        IF scores IS NULL THEN
            RAISE EXCEPTION 'scores must be given for fusion %: one list of numbers (higher is better) per ranking', hybrid._shown(fusion)
                USING ERRCODE = '22023';
        END IF;
        IF jsonb_typeof(scores) <> 'array' OR jsonb_array_length(scores) <> n
           OR EXISTS (SELECT 1 FROM jsonb_array_elements(scores) WITH ORDINALITY s(list, i)
                      WHERE jsonb_typeof(s.list) <> 'array'
                         OR jsonb_array_length(s.list) <> jsonb_array_length(rankings -> (s.i::integer - 1)))
           OR EXISTS (SELECT 1 FROM jsonb_array_elements(scores) l, jsonb_array_elements(l) x WHERE jsonb_typeof(x) <> 'number') THEN
            RAISE EXCEPTION 'scores must be a JSON array of arrays of numbers, one number for each id of rankings'
                USING ERRCODE = '22023';
        END IF;
        -- jsonb numbers are numeric, unbounded: checked before any float8 cast could overflow (22003)
        SELECT format('scores[%s][%s]', l.i, x.j),
               CASE WHEN abs(x.v::numeric) <= 1e308 THEN (x.v::numeric)::float8::text ELSE 'a number beyond float8''s range' END
        INTO v_bad, v_bad_value
        FROM jsonb_array_elements(scores) WITH ORDINALITY l(list, i), jsonb_array_elements(l.list) WITH ORDINALITY x(v, j)
        WHERE abs(x.v::numeric) > 1e12 ORDER BY l.i, x.j LIMIT 1;
        IF FOUND THEN
            RAISE EXCEPTION '% must be a finite number between -1e12 and 1e12, got %', v_bad, v_bad_value
                USING ERRCODE = '22023';
        END IF;
    ELSE
        scores := NULL;
    END IF;
    IF weights IS NOT NULL AND cardinality(weights) <> n THEN
        RAISE EXCEPTION 'weights has % entries but rankings has % lists; they must match', cardinality(weights), n
            USING ERRCODE = '22023';
    END IF;
    v_weights := coalesce(weights, array_fill(1.0::float8, ARRAY[n]));
    FOR i IN 1..n LOOP
        PERFORM hybrid._check_number(format('weights[%s]', i), v_weights[i], false);
    END LOOP;
    PERFORM hybrid._check_number('rrf_k', rrf_k, true);
    IF top_k IS NOT NULL THEN
        PERFORM hybrid._check_range('top_k', top_k, 1, 1000);
    END IF;
    SELECT array_agg(l.i::integer ORDER BY l.i, x.r), array_agg(x.id ORDER BY l.i, x.r),
           array_agg((scores -> (l.i::integer - 1) ->> (x.r::integer - 1))::float8 ORDER BY l.i, x.r)
    INTO v_list, v_ids, v_vals
    FROM jsonb_array_elements(rankings) WITH ORDINALITY AS l(list, i),
         jsonb_array_elements_text(l.list) WITH ORDINALITY AS x(id, r);
    RETURN QUERY
    SELECT f.id, f.score, f.ranks
    FROM hybrid._fuse_lists(fusion, rrf_k, array_fill(NULL::text, ARRAY[n]), v_weights, v_list, v_ids, v_vals) f
    ORDER BY f.score DESC, f.id
    LIMIT top_k;
END
$$;
COMMENT ON FUNCTION hybrid.fuse(jsonb, double precision[], text, double precision, integer, jsonb) IS
'Fuses ranked id lists the caller brings, with the arithmetic of hybrid_retrieve (hybrid._fuse_lists). fusion: one of hybrid.fusion_methods(): ''rrf'' (ranks only: sum weights[i] / (rrf_k + rank_i)), ''convex'' (sum weights[i] * the id''s score min-max normalized within list i), ''dbsf'' (sum weights[i] * the score normalized by mean +- 3 standard deviations of list i, clipped to 0..1) or ''blend'' (sum weights[i] * the score as given: bring scores on an absolute, bounded scale, such as hybrid_retrieve''s blend maps, pyhybrid.fusion.blend_score); an id absent from a list adds 0, a repeated id keeps its best rank. scores: JSON array of arrays of numbers (-1e12..1e12), higher is better, one per id (needed by every method but rrf). Returns id, score and its rank in each list (NULL where absent), by score descending then id; ids found only in lists of weight 0 are dropped. weights default to 1; top_k: 1..1000 or NULL for all.';

-- hybrid.rrf_fuse: fuse ranked id lists by weighted RRF
CREATE OR REPLACE FUNCTION hybrid.rrf_fuse(
    rankings jsonb, weights double precision[] DEFAULT NULL, rrf_k double precision DEFAULT 60,
    top_k integer DEFAULT NULL)
RETURNS TABLE (id text, score double precision, ranks integer[])
LANGUAGE sql STABLE SECURITY INVOKER
SET search_path = pg_catalog, public, pg_temp
AS $$ SELECT * FROM hybrid.fuse(rankings, weights, 'rrf', rrf_k, top_k) $$;
COMMENT ON FUNCTION hybrid.rrf_fuse(jsonb, double precision[], double precision, integer) IS
'Weighted Reciprocal Rank Fusion of ranked id lists: hybrid.fuse with fusion ''rrf'': score(d) = sum_i weights[i] / (rrf_k + rank_i(d)), ranks 1-based, an id absent from a list adds 0 (a repeated id keeps its best rank). Returns id, score and its rank in each list (NULL where absent), by score descending then id; ids whose only lists have weight 0 are dropped. rankings: JSON array of arrays of ids; weights default to 1; top_k: 1..1000 or NULL for all.';

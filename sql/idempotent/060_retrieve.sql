-- hybrid_retrieve: every branch, fused by weighted RRF, hydrated under RLS, in one call.

-- hybrid.graph_context: each chunk's visible graph neighbourhood
CREATE OR REPLACE FUNCTION hybrid.graph_context(chunk_ids text[]) RETURNS TABLE (chunk_id text, context jsonb)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, public, ag_catalog, pg_temp  -- graphid operators live in ag_catalog
SET plan_cache_mode = force_custom_plan  -- v_key a constant: only the tenant's partition is planned
AS $$
DECLARE
    v_tenant text := hybrid._current_tenant();
    v_key integer := hybrid._tenant_key(v_tenant);
    v_acl text[] := hybrid._current_acl();
    v_all boolean := hybrid._acl_all();
    v_chunk_hits text[];
BEGIN
    IF v_tenant IS NULL OR to_regclass('hybrid.graph_node') IS NULL THEN
        RETURN;
    END IF;
    v_chunk_hits := hybrid._visible_chunk_ids(v_key, chunk_ids, NULL, NULL, v_tenant, v_acl, v_all);
    RETURN QUERY
    WITH hit AS (
        -- a chunk the caller cannot see, or an entity no such chunk links to, has no neighbourhood to show
        SELECT u.id, g.vertex_id FROM unnest(chunk_ids) AS u(id)
        JOIN hybrid.graph_node g ON g.tenant_id = v_tenant AND g.node_id = u.id
        WHERE CASE WHEN g.kind = 'entity' THEN u.id = ANY (hybrid._entities_seen(v_key, chunk_ids, v_tenant, v_acl, v_all))
                   ELSE EXISTS (SELECT 1 FROM hybrid.chunk c WHERE c.tenant_key = v_key AND c.chunk_id = u.id
                                AND hybrid._visible(c.tenant_id, c.superseded, c.acl_labels, v_tenant, v_acl, v_all)) END
    ), nb AS (
        SELECT hit.id, e.tableoid, 'out'::text AS direction, e.end_id AS vid
        FROM hit JOIN hybrid_graph._ag_label_edge e ON e.start_id = hit.vertex_id
        UNION ALL
        SELECT hit.id, e.tableoid, 'in', e.start_id
        FROM hit JOIN hybrid_graph._ag_label_edge e ON e.end_id = hit.vertex_id
    ), rel AS (
        -- the tenant's names of its edge types, by the opaque label holding each one's edges
        SELECT to_regclass('hybrid_graph.rel_' || et.slot)::oid AS tableoid, et.name
        FROM hybrid.edge_type et WHERE et.tenant_id = v_tenant
    ), seen AS (
        SELECT nb.id, nb.direction, r.name AS rel, g.node_id, g.kind, c.document_id, c.metadata->>'title' AS title
        FROM nb
        JOIN rel r ON r.tableoid = nb.tableoid
        JOIN hybrid.graph_node g ON g.vertex_id = nb.vid
        LEFT JOIN hybrid.chunk c ON g.kind = 'chunk' AND c.tenant_key = v_key AND c.chunk_id = g.node_id
              AND hybrid._visible(c.tenant_id, c.superseded, c.acl_labels, v_tenant, v_acl, v_all)
        WHERE g.kind = 'entity' OR c.chunk_id IS NOT NULL
    ), entity_seen AS (
        SELECT unnest(hybrid._entities_seen(v_key, ARRAY(SELECT DISTINCT s.node_id FROM seen s WHERE s.kind = 'entity'
                                                             AND NOT s.id = ANY (v_chunk_hits)),
                                            v_tenant, v_acl, v_all)) AS node_id
    )
    SELECT s.id,
           jsonb_agg(jsonb_build_object('rel', s.rel, 'direction', s.direction, 'node_id', s.node_id,
                                        'kind', s.kind, 'document_id', s.document_id, 'title', s.title)
                     ORDER BY s.rel, s.direction, s.node_id)
    FROM seen s
    -- an entity neighbour of a chunk hit is seen through that chunk; of an entity hit, only if a
    -- chunk the caller can see links to it
    WHERE s.kind = 'chunk' OR s.id = ANY (v_chunk_hits)
       OR s.node_id IN (SELECT x.node_id FROM entity_seen x)
    GROUP BY s.id;
END
$$;
COMMENT ON FUNCTION hybrid.graph_context(text[]) IS
'For each given chunk the caller can see (or entity that such a chunk links to), its graph neighbourhood as a jsonb array of {rel (the tenant''s edge type), direction, node_id, kind, document_id, title}; neighbours the caller cannot see are left out.';

-- hybrid._explain_branch: what hybrid.explain_retrieve reports of one branch
CREATE OR REPLACE FUNCTION hybrid._explain_branch(branch text, started timestamptz, ids text[],
                                                  vals double precision[], weight double precision, depth integer,
                                                  plan text) RETURNS jsonb
LANGUAGE sql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, public, pg_temp
AS $$
    SELECT jsonb_build_object(
        'branch', branch, 'plan', plan, 'rows', coalesce(cardinality(ids), 0), 'depth', depth, 'weight', weight,
        'ms', round((extract(epoch FROM clock_timestamp() - started) * 1000)::numeric, 3),
        -- the list's statistics, in rank order as hybrid.retrieve computes them for convex and dbsf
        'lo', (SELECT min(hybrid._branch_score(branch, v)) FROM unnest(vals) v),
        'hi', (SELECT max(hybrid._branch_score(branch, v)) FROM unnest(vals) v),
        'mean', (SELECT avg(hybrid._branch_score(branch, x.v) ORDER BY x.r) FROM unnest(vals) WITH ORDINALITY x(v, r)),
        'sd', (SELECT stddev_pop(hybrid._branch_score(branch, x.v) ORDER BY x.r) FROM unnest(vals) WITH ORDINALITY x(v, r)))
$$;
COMMENT ON FUNCTION hybrid._explain_branch(text, timestamptz, text[], double precision[], double precision, integer, text) IS
'One branch''s entry in hybrid.explain_retrieve''s report: plan, rows, depth, weight, milliseconds since started, and the lowest, highest, mean and standard deviation of its scores (hybrid._branch_score).';

-- hybrid._fuse_branches: the dense and lexical lists fused (the ranking graph expansion builds on)
CREATE OR REPLACE FUNCTION hybrid._fuse_branches(fusion text, vector_weight double precision,
                                                 keyword_weight double precision, rrf_k double precision,
                                                 d_ids text[], d_scores double precision[],
                                                 l_ids text[], l_scores double precision[])
RETURNS TABLE (id text, dr integer, lr integer, dv double precision, lv double precision, score double precision)
LANGUAGE sql IMMUTABLE
-- at most the two lists' ids (2 x per_source_k, 60 by default): with the default estimate of 1,000
-- rows the planner hashed the tenant's whole partition to hydrate them (a 9,657-chunk tenant of a 1M
-- install: a seq scan of 18 ms in a 19.6 ms statement, against 6.4 ms by the primary key)
ROWS 60
SET search_path = pg_catalog, public, pg_temp
AS $$
    -- each branch's score, higher is better: dense 1 - cosine distance, lexical its score (for blend,
    -- mapped onto 0..1 by hybrid._blend_score), with each list's lowest, highest, mean and standard
    -- deviation for convex and dbsf, summed in rank order (as hybrid.fuse and pyhybrid/fusion.py's
    -- list_stats do)
    WITH d0 AS (
        SELECT x.id, x.v, x.r::integer AS r, hybrid._fusion_score(fusion, 'dense', x.v) AS s
        FROM unnest(d_ids, d_scores) WITH ORDINALITY AS x(id, v, r)
    ), l0 AS (
        SELECT x.id, x.v, x.r::integer AS r, hybrid._fusion_score(fusion, 'lexical', x.v) AS s
        FROM unnest(l_ids, l_scores) WITH ORDINALITY AS x(id, v, r)
    ), d AS (
        SELECT d0.*, min(d0.s) OVER w AS lo, max(d0.s) OVER w AS hi, avg(d0.s) OVER w AS mean,
               stddev_pop(d0.s) OVER w AS sd
        FROM d0 WINDOW w AS (ORDER BY d0.r ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)
    ), l AS (
        SELECT l0.*, min(l0.s) OVER w AS lo, max(l0.s) OVER w AS hi, avg(l0.s) OVER w AS mean,
               stddev_pop(l0.s) OVER w AS sd
        FROM l0 WINDOW w AS (ORDER BY l0.r ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)
    )
    SELECT coalesce(d.id, l.id), d.r, l.r, d.v, l.v,
           hybrid._fusion_term(fusion, vector_weight, rrf_k, d.r, d.s, d.lo, d.hi, d.mean, d.sd)
         + hybrid._fusion_term(fusion, keyword_weight, rrf_k, l.r, l.s, l.lo, l.hi, l.mean, l.sd)
    FROM d FULL JOIN l ON l.id = d.id
$$;
COMMENT ON FUNCTION hybrid._fuse_branches(text, double precision, double precision, double precision, text[],
                                          double precision[], text[], double precision[]) IS
'hybrid.retrieve''s fusion of its dense and lexical lists (ids, values as hybrid.search_dense / search_lexical return them, best first) by fusion (hybrid._fusion_term): each id with its ranks, values and fused score. Graph expansion seeds from the best of them and scores a neighbour from its seed''s score (hybrid._graph_term).';

-- hybrid._graph_score: a graph hit's fused score
CREATE OR REPLACE FUNCTION hybrid._graph_score(own double precision, weight double precision, seed_score double precision,
                                               decay double precision, hops double precision)
RETURNS double precision
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT greatest(own, weight * seed_score * decay ^ hops)
$$;
COMMENT ON FUNCTION hybrid._graph_score(double precision, double precision, double precision, double precision, double precision) IS
'A graph hit''s fused score, written once: the greater of its own fused (dense + lexical) score own (0 if no other branch found it) and graph_weight * the fused score of the seed that reached it * graph_decay ^ hops. With graph_weight * graph_decay < 1 (hybrid.retrieve requires it), a chunk reached only through the graph scores below its seed and the graph lifts no row to its seed''s score, whatever the fusion method. pyhybrid/fusion.py''s graph_score mirrors it.';

-- hybrid.calibrate_abstention: the current tenant's abstention floor, from its own chunks
CREATE OR REPLACE FUNCTION hybrid.calibrate_abstention(quantile double precision DEFAULT 0.96, sample integer DEFAULT 400)
RETURNS double precision
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
AS $$
DECLARE
    v_tenant text := hybrid._current_tenant();
    v_key integer := hybrid._tenant_key(v_tenant);
    v_part regclass;
    v_rows double precision;
    v_n integer;
    v_floor double precision;
BEGIN
    IF quantile IS NULL OR quantile = 'NaN' OR quantile <= 0 OR quantile >= 1 THEN
        RAISE EXCEPTION 'quantile must be a number between 0 and 1 (both excluded), got %', coalesce(quantile::text, 'NULL')
            USING ERRCODE = '22023';
    END IF;
    PERFORM hybrid._check_range('sample', sample, 20, 10000);
    IF v_tenant IS NULL OR v_key IS NULL THEN
        RAISE EXCEPTION 'calibrate_abstention needs a tenant: set hybrid.tenant_id' USING ERRCODE = '42501';
    END IF;
    PERFORM hybrid._check_writer();  -- a writer sees every chunk of its tenant: the sample needs no ACL
    v_part := hybrid._chunk_partition(v_key);
    v_rows := greatest((SELECT reltuples FROM pg_class WHERE oid = v_part), 1);
    -- sample chunks: pages at random (eight times the rows asked for, so that a large partition is not
    -- read whole), then rows at random; the floor is the quantile of the cosine similarity between two of
    -- them, over every pair of the sample: a query scoring no better than that matches nothing. A tenant of
    -- at most sample chunks is sampled whole, so its floor is the quantile of all its pairs, every time
    EXECUTE format($q$
        WITH s AS (
            SELECT x.embedding, row_number() OVER (ORDER BY random()) AS i
            FROM (SELECT c.embedding FROM %s c TABLESAMPLE SYSTEM (%s)
                  WHERE NOT c.superseded AND c.embedding IS NOT NULL ORDER BY random() LIMIT $1) x
        )
        SELECT (SELECT count(*) FROM s)::integer,
               percentile_cont($2) WITHIN GROUP (ORDER BY 1 - (a.embedding <=> b.embedding))
        FROM s a JOIN s b ON a.i < b.i$q$,
        v_part, CASE WHEN v_rows <= sample * 8 THEN 100 ELSE least(100, 100.0 * sample * 8 / v_rows) END)
    INTO v_n, v_floor USING sample, quantile;
    IF v_n < 20 THEN
        RAISE EXCEPTION 'calibrate_abstention needs at least 20 chunks with embeddings in tenant %, found %', v_tenant, v_n
            USING ERRCODE = '55000', HINT = 'Ingest the tenant''s documents first.';
    END IF;
    UPDATE hybrid.tenant SET abstain_floor = v_floor WHERE tenant_id = v_tenant;
    RETURN v_floor;
END
$$;
COMMENT ON FUNCTION hybrid.calibrate_abstention(double precision, integer) IS
'Stores and returns the current tenant''s abstention floor, which hybrid_retrieve(abstain => true) applies: the quantile (default 0.96, chosen on the shared collections: docs/searching.md) of the cosine similarity between two of the tenant''s chunks, over every pair of a random sample of sample of its live chunks (all of them in a tenant that small). Writers only (42501 for a reader); 55000 with fewer than 20 chunks with embeddings. Re-run it after large ingests.';

-- hybrid._hydrate: the rows hybrid.retrieve and hybrid.hydrate return for a fused candidate list, written once
CREATE OR REPLACE FUNCTION hybrid._hydrate(p_key integer, p_tenant text, p_acl text[], p_all boolean,
                                           ids text[], scores double precision[], drs integer[], lrs integer[],
                                           grs integer[], dvs double precision[], lvs double precision[], gvs integer[],
                                           top_k integer, skip integer, per_document boolean, siblings integer,
                                           with_graph_context boolean)
RETURNS SETOF hybrid.retrieve_row
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, public, pg_temp
SET plan_cache_mode = force_custom_plan  -- p_key a constant: one partition planned
AS $$
DECLARE
    -- the candidates best first, each read by the primary key (LIMIT 1 keeps it a nested loop, which keeps
    -- that order): without per_document the read stops at skip + top_k visible ones (~skip + top_k heap
    -- reads, not one a candidate: ~70 at the defaults, which the largest tenant of a 1M install reads from disk)
    v_read constant text := $r$
        SELECT f.id AS chunk_id, c.document_id, c.corpus_id, c.tenant_id, f.score, f.dr, f.lr, f.gr, f.dv, f.lv, f.gv,
               c.content, c.metadata, c.acl_labels, c.position
        FROM (SELECT * FROM unnest($5, $6, $7, $8, $9, $10, $11, $12) AS f(id, score, dr, lr, gr, dv, lv, gv)
              ORDER BY f.score DESC, f.id) f
        CROSS JOIN LATERAL (
            SELECT c.document_id, c.corpus_id, c.tenant_id, c.content, c.metadata, c.acl_labels, c.position
            FROM hybrid.chunk c
            WHERE c.tenant_key = $1 AND c.tenant_id = $2 AND c.chunk_id = f.id
              AND hybrid._visible(c.tenant_id, c.superseded, c.acl_labels, $2, $3, $4)
            LIMIT 1) c$r$;
BEGIN
    -- one statement, planned for this call (p_key a constant), with only the collapse and the columns it
    -- needs: planning the per_document branch beside the plain one doubled the planning (1.3 against 0.6 ms
    -- at the 50% tenant of a 1M install), and the siblings' two reads of hybrid.chunk and the graph context
    -- are planned only when asked for (NULL columns otherwise). Without per_document, one level of query
    -- around the read (the chain of CTEs it had took 0.34 ms to plan at the 1M install, this 0.24:
    -- bench/FINDINGS.md#the-one-calls-own-statements-fewer-and-flatter-engine_ab). $1 p_key, $2 p_tenant, $3 p_acl,
    -- $4 p_all, $5 to $12 the candidates' arrays, $13 top_k, $14 skip, $15 siblings
    RETURN QUERY EXECUTE format($q$
    SELECT t.chunk_id, t.document_id, t.corpus_id, t.tenant_id, t.score, t.dr, t.lr, t.gr, t.dv, t.lv, t.gv,
           t.content, t.metadata, t.acl_labels, t.position, %s, %s
    FROM (%s OFFSET $14 LIMIT $13) t
    ORDER BY t.score DESC, t.chunk_id
    $q$,
         CASE WHEN with_graph_context
              THEN '(SELECT gc.context FROM hybrid.graph_context(ARRAY[t.chunk_id]) gc)' ELSE 'NULL::jsonb' END,
         CASE WHEN siblings > 0
              -- the nearest visible chunks of the same document before and after the hit, by position
              THEN $s$(SELECT coalesce(jsonb_agg(jsonb_build_object('chunk_id', x.chunk_id, 'position', x.position,
                                                                 'content', x.content) ORDER BY x.position, x.chunk_id), '[]')
                    FROM ((SELECT s.chunk_id, s.position, s.content FROM hybrid.chunk s
                           WHERE s.tenant_key = $1 AND s.tenant_id = $2 AND s.corpus_id = t.corpus_id
                             AND s.document_id = t.document_id AND s.position < t.position
                             AND hybrid._visible(s.tenant_id, s.superseded, s.acl_labels, $2, $3, $4)
                           ORDER BY s.position DESC, s.chunk_id DESC LIMIT $15)
                          UNION ALL
                          (SELECT s.chunk_id, s.position, s.content FROM hybrid.chunk s
                           WHERE s.tenant_key = $1 AND s.tenant_id = $2 AND s.corpus_id = t.corpus_id
                             AND s.document_id = t.document_id AND s.position > t.position
                             AND hybrid._visible(s.tenant_id, s.superseded, s.acl_labels, $2, $3, $4)
                           ORDER BY s.position, s.chunk_id LIMIT $15)) x)$s$
              ELSE 'NULL::jsonb' END,
         CASE WHEN per_document
              -- every candidate, the best of each document (the collapse needs each one's document)
              THEN 'SELECT * FROM (SELECT DISTINCT ON (h.corpus_id, h.document_id) h.* FROM (' || v_read || ') h
                    ORDER BY h.corpus_id, h.document_id, h.score DESC, h.chunk_id) d ORDER BY d.score DESC, d.chunk_id'
              ELSE v_read || ' ORDER BY f.score DESC, f.id' END)
    USING p_key, p_tenant, p_acl, p_all, ids, scores, drs, lrs, grs, dvs, lvs, gvs, top_k, skip, siblings;
END
$$;
COMMENT ON FUNCTION hybrid._hydrate(integer, text, text[], boolean, text[], double precision[], integer[], integer[],
                                    integer[], double precision[], double precision[], integer[], integer, integer,
                                    boolean, integer, boolean) IS
'The rows of a fused candidate list (ids, fused scores, each id''s rank and raw value in each branch, NULL where it is absent) for tenant p_tenant (partition p_key) under the visibility rule (hybrid._visible with p_acl, p_all): without per_document the candidates are read best first by the primary key and the read stops at skip + top_k visible ones; per_document keeps the best chunk per document; then skip rows and top_k rows by score then chunk_id, with siblings and graph context. hybrid.retrieve and hybrid.hydrate call it; nobody else may.';

-- hybrid.retrieve: every branch, fused, hydrated: the one call
CREATE OR REPLACE FUNCTION hybrid.retrieve(
    query_embedding vector DEFAULT NULL,
    query_text text DEFAULT NULL,
    graph_seeds text[] DEFAULT NULL,
    corpus_ids text[] DEFAULT NULL,
    top_k integer DEFAULT 10,
    per_source_k integer DEFAULT NULL,
    vector_weight double precision DEFAULT 1.0,
    keyword_weight double precision DEFAULT 1.0,
    graph_weight double precision DEFAULT 0.5,
    rrf_k double precision DEFAULT 60,
    filter jsonb DEFAULT NULL,
    graph_hops integer DEFAULT 1,
    lexical text DEFAULT NULL,
    graph_expand integer DEFAULT 0,
    with_graph_context boolean DEFAULT false,
    per_document boolean DEFAULT false,
    fusion text DEFAULT 'convex',
    skip integer DEFAULT 0,
    siblings integer DEFAULT 0,
    graph_edge_types text[] DEFAULT NULL,
    min_vector_score double precision DEFAULT NULL,
    min_keyword_score double precision DEFAULT NULL,
    min_graph_score double precision DEFAULT NULL,
    -- chosen on data: bench/graph_quality.py on CACM (docs/graph.md), at graph_weight 0.5
    graph_decay double precision DEFAULT 0.4,
    -- a lexical list none of whose three best hits holds two of the query's terms counts at half weight
    -- (hybrid.lexical_strength; 2 changes no ranking on the four shared collections: docs/searching.md)
    term_coverage integer DEFAULT 2,
    -- no rows when nothing is relevant: the dense branch's best hit below the tenant's calibrated floor
    -- (hybrid.calibrate_abstention) and none of the three best lexical hits holding every term of the query
    abstain boolean DEFAULT false)
RETURNS SETOF hybrid.retrieve_row
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
-- no plan_cache_mode of its own: its statements read no chunk (the branches and
-- hybrid._hydrate plan theirs for the tenant's partition), so they and hybrid._fuse_branches keep cached
-- plans; planned anew for each call they cost 0.9 ms more a call (the 50% tenant of a 1M install,
-- pg_stat_user_functions)
AS $$
DECLARE
    v_tenant text;
    v_key integer;
    v_acl text[] := hybrid._current_acl();
    v_all boolean := hybrid._acl_all();
    v_dim integer;
    v_k integer;
    v_dense boolean;
    v_lex boolean;
    v_graph boolean;
    v_active integer := 0;
    v_failed integer := 0;
    v_first_state text;
    v_first_msg text;
    d_ids text[]; d_scores double precision[];
    l_ids text[]; l_scores double precision[];
    g_ids text[]; g_dist integer[]; g_seed text[];
    v_top double precision;
    -- the dense and lexical lists fused once (hybrid._fuse_branches), best first: ids, ranks, values, scores
    f_ids text[]; f_dr integer[]; f_lr integer[]; f_dv double precision[]; f_lv double precision[]; f_sc double precision[];
    -- that list with the graph's hits, for hybrid._hydrate
    h_ids text[]; h_dr integer[]; h_lr integer[]; h_gr integer[]; h_dv double precision[]; h_lv double precision[];
    h_gv integer[]; h_sc double precision[];
    v_kw double precision := keyword_weight;  -- keyword_weight * the lexical list's strength
    v_match integer[];
    v_terms text[];  -- the query's distinct terms, for the lexical branch's term coverage
    v_held integer;
    v_floor double precision;
    v_seeds text[] := graph_seeds;
    v_state text; v_msg text;
    -- hybrid.explain_retrieve sets hybrid.explain: then each branch's plan, rows, time and list
    -- statistics are left in hybrid.explain_report for it (nothing of another tenant is in them)
    v_explain boolean := coalesce(current_setting('hybrid.explain', true), '') = 'on';
    v_report jsonb := '[]';
    v_t timestamptz;
BEGIN
    -- validation: every rule names its parameter (SQLSTATE 22023), in the words of pyhybrid/query.py
    PERFORM hybrid._check_range('top_k', top_k, 1, 1000);
    PERFORM hybrid._check_range('skip', skip, 0, 10000 - top_k);
    IF per_source_k IS NOT NULL THEN
        PERFORM hybrid._check_range('per_source_k', per_source_k, skip + top_k, 10000,
                                    CASE WHEN skip = 0 THEN format('top_k (%s)', top_k)
                                         ELSE format('skip + top_k (%s)', skip + top_k) END);
    END IF;
    PERFORM hybrid._check_fusion(fusion);
    PERFORM hybrid._check_range('siblings', siblings, 0, 20);
    PERFORM hybrid._check_number('vector_weight', vector_weight, false);
    PERFORM hybrid._check_number('keyword_weight', keyword_weight, false);
    PERFORM hybrid._check_number('graph_weight', graph_weight, false);
    PERFORM hybrid._check_number('rrf_k', rrf_k, true);
    IF min_vector_score IS NOT NULL THEN PERFORM hybrid._check_number('min_vector_score', min_vector_score, false); END IF;
    IF min_keyword_score IS NOT NULL THEN PERFORM hybrid._check_number('min_keyword_score', min_keyword_score, false); END IF;
    IF min_graph_score IS NOT NULL THEN PERFORM hybrid._check_number('min_graph_score', min_graph_score, false); END IF;
    PERFORM hybrid._check_range('graph_hops', graph_hops, 1, 3);
    PERFORM hybrid._check_range('graph_expand', graph_expand, 0, 100);
    PERFORM hybrid._check_range('term_coverage', term_coverage, 1, 32);
    IF graph_decay IS NULL OR graph_decay = 'NaN' OR graph_decay < 0 OR graph_decay >= 1 THEN
        RAISE EXCEPTION 'graph_decay must be a number from 0 up to (not including) 1, got %', coalesce(graph_decay::text, 'NULL')
            USING ERRCODE = '22023';
    END IF;
    IF graph_weight * graph_decay >= 1 THEN
        RAISE EXCEPTION 'graph_weight * graph_decay must be below 1, got %', graph_weight * graph_decay
            USING ERRCODE = '22023',
                  HINT = 'A chunk reached only through the graph scores graph_weight * graph_decay ^ hops times its seed''s score: below the seed only while the product is below 1.';
    END IF;
    PERFORM hybrid._check_flag('with_graph_context', with_graph_context);
    PERFORM hybrid._check_flag('per_document', per_document);
    PERFORM hybrid._check_flag('abstain', abstain);
    PERFORM hybrid._check_text('query_text', query_text, 20000);
    IF cardinality(graph_edge_types) > 100 THEN
        RAISE EXCEPTION 'graph_edge_types must hold at most 100 names, got %', cardinality(graph_edge_types) USING ERRCODE = '22023';
    END IF;
    IF cardinality(graph_seeds) > 1000 THEN
        RAISE EXCEPTION 'graph_seeds must hold at most 1000 ids, got %', cardinality(graph_seeds) USING ERRCODE = '22023';
    END IF;
    IF lexical IS NOT NULL AND lexical NOT IN ('bm25', 'ts_rank') THEN
        RAISE EXCEPTION 'lexical must be ''bm25'', ''ts_rank'' or NULL (automatic), got %', hybrid._shown(lexical) USING ERRCODE = '22023';
    END IF;
    IF filter IS NOT NULL AND jsonb_typeof(filter) <> 'object' THEN
        RAISE EXCEPTION 'filter must be a JSON object, got a JSON %', jsonb_typeof(filter) USING ERRCODE = '22023';
    END IF;
    IF query_embedding IS NOT NULL THEN
        v_dim := hybrid.embedding_dim();
        IF vector_dims(query_embedding) <> v_dim THEN
            RAISE EXCEPTION 'query_embedding has % dimensions, expected %', vector_dims(query_embedding), v_dim
                USING ERRCODE = '22023', HINT = 'Embed the query with the model used at ingestion.';
        END IF;
        IF vector_norm(query_embedding) = 0 THEN
            RAISE EXCEPTION 'query_embedding must not be the zero vector (cosine distance is undefined)' USING ERRCODE = '22023';
        END IF;
    END IF;
    IF query_embedding IS NULL AND (query_text IS NULL OR btrim(query_text) = '')
       AND (graph_seeds IS NULL OR cardinality(graph_seeds) = 0) THEN
        RAISE EXCEPTION 'nothing to search: query_embedding, query_text and graph_seeds are all NULL or empty'
            USING ERRCODE = '22023', HINT = 'Give at least one of them.';
    END IF;

    v_dense := query_embedding IS NOT NULL AND vector_weight > 0;
    v_lex := query_text IS NOT NULL AND btrim(query_text) <> '' AND keyword_weight > 0;
    v_graph := graph_weight > 0 AND ((graph_seeds IS NOT NULL AND cardinality(graph_seeds) > 0) OR graph_expand > 0);
    IF NOT (v_dense OR v_lex OR v_graph) THEN
        RAISE EXCEPTION 'every source given has weight 0: nothing to fuse' USING ERRCODE = '22023';
    END IF;

    v_tenant := hybrid._current_tenant();
    v_key := hybrid._tenant_key(v_tenant);
    IF v_tenant IS NULL OR v_key IS NULL THEN
        RETURN;  -- fail closed: no tenant context (or no such tenant), no rows
    END IF;
    -- each branch's depth depends on skip + top_k only when per_source_k is not given: stable pages need it given
    v_k := coalesce(per_source_k, least(10000, greatest((skip + top_k) * 3, 30)));

    -- each branch is collected whole or not at all, so a failure leaves nothing half-filled
    IF v_dense THEN
        v_active := v_active + 1;
        v_t := clock_timestamp();
        BEGIN
            SELECT array_agg(s.chunk_id ORDER BY s.rank), array_agg(s.value ORDER BY s.rank)
            INTO d_ids, d_scores
            FROM hybrid.search_dense(query_embedding, v_k, corpus_ids, filter) s
            -- a floor cuts the list before it seeds the graph or is fused (abstention: below it, nothing)
            WHERE min_vector_score IS NULL OR hybrid._branch_score('dense', s.value) >= min_vector_score;
            IF v_explain THEN
                v_report := v_report || hybrid._explain_branch('dense', v_t, d_ids, d_scores, vector_weight, v_k,
                    (SELECT CASE WHEN p = 0 THEN 'exact scan' ELSE coalesce(hybrid._ivfflat_plan(v_key), format('HNSW index%s, ef_search %s', CASE hybrid._dense_kind(hybrid.embedding_dim()) WHEN 'vector' THEN '' WHEN 'halfvec' THEN ' on halfvec copies (exact cosine re-rank)' ELSE ' on binary codes (exact cosine re-rank)' END, p)) || coalesce(', audit ' || current_setting('hybrid.dense_audit', true), '') END
                     FROM hybrid._dense_plan(v_key, corpus_ids, filter, NULL, v_k) p));
            END IF;
        EXCEPTION
        WHEN lock_not_available OR transaction_rollback OR insufficient_resources OR operator_intervention THEN
            RAISE;  -- a lock timeout, deadlock, serialization failure, resource or admin error ends the call
        WHEN OTHERS THEN
            GET STACKED DIAGNOSTICS v_state = RETURNED_SQLSTATE, v_msg = MESSAGE_TEXT;
            RAISE WARNING 'hybrid_retrieve.source_failed: source=dense sqlstate=% reason=%', v_state, v_msg;
            v_report := v_report || jsonb_build_object('branch', 'dense', 'failed', v_state || ': ' || v_msg);
            v_failed := v_failed + 1; v_first_state := coalesce(v_first_state, v_state); v_first_msg := coalesce(v_first_msg, v_msg);
        END;
    END IF;
    IF v_lex THEN
        v_active := v_active + 1;
        v_t := clock_timestamp();
        BEGIN
            -- a weak list (none of its three best hits holds term_coverage of the query's terms) weighs less: min-max would
            -- otherwise lift its best hit to 1 beside the dense list's. The branch counts the terms its three best
            -- hits hold (hybrid._term_match_in's rule) in its own statement; a floor keeps a prefix of the list
            IF term_coverage > 1 OR abstain THEN
                v_terms := tsvector_to_array(to_tsvector('english'::regconfig, query_text));
            END IF;
            SELECT array_agg(s.chunk_id ORDER BY s.rank), array_agg(s.value ORDER BY s.rank), max(s.terms_held)
            INTO l_ids, l_scores, v_held
            FROM hybrid._lexical_hits(query_text, v_k, corpus_ids, filter, lexical, nullif(v_terms, '{}')) s
            WHERE min_keyword_score IS NULL OR hybrid._branch_score('lexical', s.value) >= min_keyword_score;
            IF v_terms IS NOT NULL AND cardinality(l_ids) > 0 THEN
                v_match := ARRAY[cardinality(v_terms), coalesce(v_held, 0)];
                v_kw := keyword_weight * hybrid._lexical_strength(v_match[1], v_match[2], term_coverage);
            END IF;
            IF v_explain THEN
                v_report := v_report || (jsonb_build_object('given_weight', keyword_weight, 'term_coverage', jsonb_build_object(
                    'term_coverage', term_coverage, 'query_terms', v_match[1], 'best_hit_terms', v_match[2],
                    'strength', v_kw / keyword_weight))
                    || hybrid._explain_branch('lexical', v_t, l_ids, l_scores, v_kw, v_k,
                    CASE WHEN coalesce(lexical, CASE WHEN hybrid.bm25_available() THEN 'bm25' ELSE 'ts_rank' END) = 'ts_rank'
                         THEN 'ts_rank over the GIN index'
                         WHEN hybrid._bm25_ready(hybrid._bm25_partition_index(hybrid._tenant_key(hybrid._current_tenant()))::regclass) THEN format('BM25 index (the tenant''s statistics; scores: %s)', coalesce(nullif(current_setting('hybrid.bm25_scores', true), ''), 'index scan'))
                         ELSE 'ts_rank over the GIN index (the BM25 index is stale)' END));
            END IF;
        EXCEPTION
        WHEN lock_not_available OR transaction_rollback OR insufficient_resources OR operator_intervention THEN
            RAISE;  -- a lock timeout, deadlock, serialization failure, resource or admin error ends the call
        WHEN OTHERS THEN
            GET STACKED DIAGNOSTICS v_state = RETURNED_SQLSTATE, v_msg = MESSAGE_TEXT;
            RAISE WARNING 'hybrid_retrieve.source_failed: source=lexical sqlstate=% reason=%', v_state, v_msg;
            v_report := v_report || jsonb_build_object('branch', 'lexical', 'failed', v_state || ': ' || v_msg);
            v_failed := v_failed + 1; v_first_state := coalesce(v_first_state, v_state); v_first_msg := coalesce(v_first_msg, v_msg);
        END;
    END IF;
    -- abstention: with no graph_seeds of the caller's, the call answers only if the dense branch's best hit
    -- clears the tenant's floor or one of the three best lexical hits holds every term of the query
    IF abstain AND (graph_seeds IS NULL OR cardinality(graph_seeds) = 0) THEN
        SELECT t.abstain_floor INTO v_floor FROM hybrid.tenant t WHERE t.tenant_id = v_tenant;
        IF v_floor IS NULL THEN
            RAISE EXCEPTION 'abstain needs tenant %''s abstention floor, which is not calibrated', v_tenant
                USING ERRCODE = '55000',
                      HINT = 'A writer of the tenant runs SELECT hybrid.calibrate_abstention() (pyhybrid tenant calibrate), once its documents are in.';
        END IF;
        IF v_explain THEN
            PERFORM set_config('hybrid.explain_abstention', jsonb_build_object(
                'floor', v_floor, 'best_similarity', 1 - d_scores[1],
                'lexical_full_match', coalesce(v_match[1] > 0 AND v_match[2] = v_match[1], false))::text, true);
        END IF;
        IF coalesce(1 - d_scores[1] < v_floor, true) AND NOT coalesce(v_match[1] > 0 AND v_match[2] = v_match[1], false) THEN
            RAISE NOTICE 'hybrid_retrieve.abstained: the best dense hit (similarity %) is below tenant %''s floor (%) and none of the three best lexical hits holds every query term',
                coalesce(round((1 - d_scores[1])::numeric, 4)::text, 'none'), v_tenant, round(v_floor::numeric, 4);
            IF v_explain THEN
                PERFORM set_config('hybrid.explain_report', v_report::text, true);
            END IF;
            RETURN;
        END IF;
    END IF;
    -- the two lists fused once, into arrays that graph expansion and the final statement read (the call
    -- used to run the SQL function two or three times, ~0.6 ms each while its body was planned anew)
    SELECT array_agg(b.id ORDER BY b.score DESC, b.id), array_agg(b.dr ORDER BY b.score DESC, b.id),
           array_agg(b.lr ORDER BY b.score DESC, b.id), array_agg(b.dv ORDER BY b.score DESC, b.id),
           array_agg(b.lv ORDER BY b.score DESC, b.id), array_agg(b.score ORDER BY b.score DESC, b.id)
    INTO f_ids, f_dr, f_lr, f_dv, f_lv, f_sc
    FROM hybrid._fuse_branches(fusion, vector_weight, v_kw, rrf_k, d_ids, d_scores, l_ids, l_scores) b;
    -- a seed named in graph_seeds that neither list holds scores as the best fused hit (1 without one)
    v_top := coalesce((SELECT max(x) FROM unnest(f_sc) x), 1);
    IF v_graph THEN
        IF v_seeds IS NULL OR cardinality(v_seeds) = 0 THEN
            -- automatic seeds: the best graph_expand chunks of the dense and lexical lists, fused by fusion
            v_seeds := f_ids[1:graph_expand];
        END IF;
        IF v_seeds IS NOT NULL THEN
            v_active := v_active + 1;
            v_t := clock_timestamp();
            BEGIN
                SELECT array_agg(s.chunk_id ORDER BY s.rank), array_agg(s.value::integer ORDER BY s.rank),
                       array_agg(s.seed ORDER BY s.rank)
                INTO g_ids, g_dist, g_seed
                FROM hybrid._graph_walk(v_seeds, graph_hops, v_k, corpus_ids, filter, graph_edge_types) s
                WHERE min_graph_score IS NULL OR hybrid._branch_score('graph', s.value) >= min_graph_score;
                IF v_explain THEN
                    v_report := v_report || (hybrid._explain_branch('graph', v_t, g_ids, g_dist::double precision[],
                        graph_weight, v_k, format('%s hop(s) from %s seed(s)%s', graph_hops, cardinality(v_seeds),
                            CASE WHEN graph_seeds IS NULL OR cardinality(graph_seeds) = 0
                                 THEN format(' (the best %s dense/lexical hits)', graph_expand) ELSE '' END))
                        || jsonb_build_object('seeds', to_jsonb(v_seeds), 'graph_decay', graph_decay,
                               -- each hit's seed, the seed's fused score and its own, which its score builds on
                               'hits', (SELECT jsonb_object_agg(x.id, jsonb_build_object('seed', x.seed,
                                                                                         'seed_score', coalesce(sb.score, v_top),
                                                                                         'own', coalesce(ob.score, 0)))
                                        FROM unnest(g_ids, g_seed) AS x(id, seed)
                                        LEFT JOIN unnest(f_ids, f_sc) AS sb(id, score) ON sb.id = x.seed
                                        LEFT JOIN unnest(f_ids, f_sc) AS ob(id, score) ON ob.id = x.id)));
                END IF;
            EXCEPTION
            WHEN lock_not_available OR transaction_rollback OR insufficient_resources OR operator_intervention THEN
                RAISE;  -- a lock timeout, deadlock, serialization failure, resource or admin error ends the call
            WHEN OTHERS THEN
                GET STACKED DIAGNOSTICS v_state = RETURNED_SQLSTATE, v_msg = MESSAGE_TEXT;
                RAISE WARNING 'hybrid_retrieve.source_failed: source=graph sqlstate=% reason=%', v_state, v_msg;
                v_report := v_report || jsonb_build_object('branch', 'graph', 'failed', v_state || ': ' || v_msg);
                v_failed := v_failed + 1; v_first_state := coalesce(v_first_state, v_state); v_first_msg := coalesce(v_first_msg, v_msg);
            END;
        END IF;
    END IF;
    IF v_explain THEN
        PERFORM set_config('hybrid.explain_report', v_report::text, true);
    END IF;
    IF v_active > 0 AND v_failed = v_active THEN
        RAISE EXCEPTION 'hybrid_retrieve: every active source failed; first: %', v_first_msg
            USING ERRCODE = v_first_state;
    END IF;

    -- the fused list: a graph hit scores the greater of its own score and graph_weight * its seed's *
    -- graph_decay ^ hops
    WITH b AS (
        SELECT * FROM unnest(f_ids, f_dr, f_lr, f_dv, f_lv, f_sc) AS b(id, dr, lr, dv, lv, score)
    ), g AS (
        SELECT x.id, x.r::integer AS r, x.v, coalesce(sb.score, v_top) AS seed_score
        FROM unnest(g_ids, g_dist, g_seed) WITH ORDINALITY AS x(id, v, seed, r)
        LEFT JOIN b sb ON sb.id = x.seed
    )
    SELECT array_agg(coalesce(b.id, g.id)), array_agg(b.dr), array_agg(b.lr), array_agg(g.r), array_agg(b.dv),
           array_agg(b.lv), array_agg(g.v),
           array_agg(CASE WHEN g.id IS NULL THEN b.score
                          ELSE hybrid._graph_score(coalesce(b.score, 0), graph_weight, g.seed_score, graph_decay, g.v) END)
    INTO h_ids, h_dr, h_lr, h_gr, h_dv, h_lv, h_gv, h_sc
    FROM b FULL JOIN g ON g.id = b.id;
    RETURN QUERY SELECT * FROM hybrid._hydrate(v_key, v_tenant, v_acl, v_all, h_ids, h_sc, h_dr, h_lr, h_gr, h_dv, h_lv,
                                               h_gv, top_k, skip, per_document, siblings, with_graph_context);
END
$$;
COMMENT ON FUNCTION hybrid.retrieve IS
'Hybrid retrieval for the current tenant: dense (query_embedding), lexical (query_text; lexical => bm25 | ts_rank | NULL for the best available) and graph (graph_seeds, or the best graph_expand chunks of the other two; graph_edge_types: only these relations) branches, each cut to per_source_k (default greatest((skip+top_k)*3, 30)) after corpus, metadata filter and ACL, the dense and lexical lists fused by fusion (rrf: sum w/(rrf_k + rank); convex: sum w * min-max normalized score; dbsf: sum w * score normalized by mean +- 3 sd; branch scores: dense 1 - cosine distance, lexical its score; blend: sum w * the branch score on an absolute scale, dense the cosine similarity, lexical s / (s + k) for a constant k (hybrid._blend_score); see hybrid.fuse); a graph hit scores the greater of that fused score (0 without one) and graph_weight * the fused score of the seed that reached it * graph_decay ^ hops (hybrid._graph_score; graph_weight * graph_decay must be below 1, so it scores below its seed), skip rows then top_k rows by score then chunk_id (pages are stable when per_source_k is given). min_vector_score, min_keyword_score, min_graph_score (NULL: none): a branch keeps only hits whose branch score (cosine similarity, BM25 or ts_rank score, 1/hops) is at least the floor, before it seeds the graph and before fusion, so a call where every branch falls below its floor returns no rows. siblings => n adds the n nearest visible chunks of the same document on each side of each hit, by position (column siblings). A branch that is missing or broken raises a WARNING "hybrid_retrieve.source_failed ..." and the rest are fused; if all fail, the call fails. A lock timeout, deadlock, serialization failure, cancellation, resource or operator error in any branch ends the call with its own SQLSTATE. Same as public.hybrid_retrieve.';

-- public.hybrid_retrieve: hybrid.retrieve under a name on the default search_path. Derived from
-- hybrid.retrieve's catalog entry, so the parameters are written once (above) and cannot drift.
DO $wrapper$
DECLARE
    f regprocedure := 'hybrid.retrieve'::regproc::regprocedure;
BEGIN
    EXECUTE format(
        'CREATE OR REPLACE FUNCTION public.hybrid_retrieve(%s) RETURNS SETOF hybrid.retrieve_row '
        'LANGUAGE sql VOLATILE SECURITY INVOKER SET search_path = pg_catalog, public, pg_temp '
        'AS %L',
        pg_get_function_arguments(f),
        format('SELECT * FROM hybrid.retrieve(%s)',
               (SELECT string_agg(format('%1$I => %1$I', a.name), ', ' ORDER BY a.i)
                FROM pg_proc p, unnest(p.proargnames) WITH ORDINALITY AS a(name, i) WHERE p.oid = f)));
END
$wrapper$;

-- hybrid._explain_term: one branch's term in a row's fused score, from hybrid.explain_retrieve's report
CREATE OR REPLACE FUNCTION hybrid._explain_term(fusion text, info jsonb, weight double precision, rrf_k double precision,
                                                chunk_id text, rank integer, value double precision)
RETURNS double precision
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, public, pg_temp
AS $$
    SELECT CASE WHEN info ->> 'branch' = 'graph'
                THEN CASE WHEN rank IS NULL THEN 0::float8
                          -- what the graph adds to the row's own (dense + lexical) score
                          ELSE hybrid._graph_score((info -> 'hits' -> chunk_id ->> 'own')::float8, weight,
                                                   (info -> 'hits' -> chunk_id ->> 'seed_score')::float8,
                                                   (info ->> 'graph_decay')::float8, value)
                             - (info -> 'hits' -> chunk_id ->> 'own')::float8 END
                ELSE hybrid._fusion_term(fusion, weight, rrf_k, rank, hybrid._fusion_score(fusion, info ->> 'branch', value),
                                         (info ->> 'lo')::float8, (info ->> 'hi')::float8,
                                         (info ->> 'mean')::float8, (info ->> 'sd')::float8) END
$$;
COMMENT ON FUNCTION hybrid._explain_term(text, jsonb, double precision, double precision, text, integer, double precision) IS
'hybrid.explain_retrieve''s arithmetic of one branch''s term in a row''s score (hybrid._fusion_term for dense and lexical, hybrid._graph_score less own for graph), from the branch''s entry in the report.';

-- hybrid._explain_bound: the bounds a fusion method normalizes one branch's scores against
CREATE OR REPLACE FUNCTION hybrid._explain_bound(fusion text, rrf_k double precision, info jsonb) RETURNS jsonb
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, public, pg_temp
AS $$
    SELECT CASE
        WHEN info ? 'failed' THEN NULL
        WHEN info ->> 'branch' = 'graph' THEN jsonb_build_object('graph_decay', info -> 'graph_decay',
                                                                 'rule', 'seed score * graph_decay ^ hops')
        WHEN fusion = 'rrf' THEN jsonb_build_object('rrf_k', rrf_k, 'rule', '1 / (rrf_k + rank)')
        WHEN fusion = 'convex' THEN jsonb_build_object('lo', info -> 'lo', 'hi', info -> 'hi', 'rule', '(s - lo) / (hi - lo)')
        WHEN fusion = 'dbsf' THEN jsonb_build_object(
            'lo', (info ->> 'mean')::float8 - 3 * (info ->> 'sd')::float8,
            'hi', (info ->> 'mean')::float8 + 3 * (info ->> 'sd')::float8, 'rule', '(s - lo) / (hi - lo), clipped to 0..1')
        WHEN info ->> 'branch' = 'lexical' THEN jsonb_build_object('k', 10, 'rule', 's / (s + k)')
        ELSE jsonb_build_object('rule', 'the cosine similarity, 0 if negative')
    END
$$;
COMMENT ON FUNCTION hybrid._explain_bound(text, double precision, jsonb) IS
'What hybrid.explain_retrieve shows as a branch''s bound: the numbers its scores are normalized against under fusion (convex: the list''s lowest and highest score; dbsf: mean -+ 3 sd; rrf: rrf_k; blend: k for lexical scores; graph: graph_decay) and the rule.';

-- hybrid.explain_retrieve: hybrid.retrieve with, per branch, the plan, rows and time, and per row each
-- branch's contribution. Derived from hybrid.retrieve's catalog entry, so it takes the same arguments.
DO $explain$
DECLARE
    f regprocedure := 'hybrid.retrieve'::regproc::regprocedure;
    v_args text;
BEGIN
    SELECT string_agg(format('%1$I => %1$I', a.name), ', ' ORDER BY a.i) INTO v_args
    FROM pg_proc p, unnest(p.proargnames) WITH ORDINALITY AS a(name, i) WHERE p.oid = f;
    EXECUTE format($f$
CREATE OR REPLACE FUNCTION hybrid.explain_retrieve(%s) RETURNS jsonb
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, public, pg_temp
AS $body$
DECLARE
    v_rows jsonb;
    v_branches jsonb;
    v_t timestamptz := clock_timestamp();
BEGIN
    PERFORM set_config('hybrid.explain', 'on', true);
    PERFORM set_config('hybrid.explain_report', '[]', true);
    PERFORM set_config('hybrid.explain_abstention', '', true);
    SELECT coalesce(jsonb_agg(to_jsonb(r) - 'ordinality' ORDER BY r.ordinality), '[]') INTO v_rows
    FROM hybrid.retrieve(%s) WITH ORDINALITY AS r;
    PERFORM set_config('hybrid.explain', 'off', true);
    v_branches := coalesce(nullif(current_setting('hybrid.explain_report', true), ''), '[]')::jsonb;
    RETURN jsonb_build_object(
        'fusion', fusion, 'rrf_k', rrf_k, 'top_k', top_k, 'skip', skip,
        -- with abstain: the floor, the dense branch's best similarity and whether a lexical hit held every term
        'abstention', nullif(current_setting('hybrid.explain_abstention', true), '')::jsonb,
        'total_ms', round((extract(epoch FROM clock_timestamp() - v_t) * 1000)::numeric, 3),
        'branches', (SELECT coalesce(jsonb_agg(e || jsonb_build_object('bound', hybrid._explain_bound(fusion, rrf_k, e))
                                               ORDER BY o), '[]')
                     FROM jsonb_array_elements(v_branches) WITH ORDINALITY AS x(e, o)),
        'rows', coalesce((
            SELECT jsonb_agg(jsonb_build_object(
                'chunk_id', x.r ->> 'chunk_id', 'document_id', x.r ->> 'document_id', 'score', (x.r ->> 'score')::float8,
                'contributions', (
                    SELECT jsonb_object_agg(b.br, hybrid._explain_term(fusion, b.info, (b.info ->> 'weight')::float8, rrf_k,
                               x.r ->> 'chunk_id', (x.r ->> b.rank_col)::integer, (x.r ->> b.value_col)::float8))
                    FROM (SELECT e ->> 'branch' AS br, e AS info,
                                 CASE e ->> 'branch' WHEN 'dense' THEN 'vector_rank' WHEN 'lexical' THEN 'keyword_rank' ELSE 'graph_rank' END AS rank_col,
                                 CASE e ->> 'branch' WHEN 'dense' THEN 'vector_distance' WHEN 'lexical' THEN 'keyword_score' ELSE 'graph_distance' END AS value_col
                          FROM jsonb_array_elements(v_branches) e WHERE NOT e ? 'failed') b),
                -- per branch that found the row: its own score (cosine similarity, BM25 / ts_rank score, hops)
                -- and that score normalized as fusion normalizes it (the contribution at weight 1)
                'branch_scores', (
                    SELECT jsonb_object_agg(b.br, jsonb_build_object(
                               'raw', CASE WHEN b.br = 'graph' THEN (x.r ->> b.value_col)::float8
                                           ELSE hybrid._branch_score(b.br, (x.r ->> b.value_col)::float8) END,
                               'normalized', hybrid._explain_term(fusion, b.info, 1.0, rrf_k, x.r ->> 'chunk_id',
                                                                  (x.r ->> b.rank_col)::integer, (x.r ->> b.value_col)::float8)))
                    FROM (SELECT e ->> 'branch' AS br, e AS info,
                                 CASE e ->> 'branch' WHEN 'dense' THEN 'vector_rank' WHEN 'lexical' THEN 'keyword_rank' ELSE 'graph_rank' END AS rank_col,
                                 CASE e ->> 'branch' WHEN 'dense' THEN 'vector_distance' WHEN 'lexical' THEN 'keyword_score' ELSE 'graph_distance' END AS value_col
                          FROM jsonb_array_elements(v_branches) e WHERE NOT e ? 'failed') b
                    WHERE x.r ->> b.rank_col IS NOT NULL),
                'ranks', jsonb_build_object('dense', x.r -> 'vector_rank', 'lexical', x.r -> 'keyword_rank',
                                            'graph', x.r -> 'graph_rank'))
                ORDER BY x.o)
            FROM jsonb_array_elements(v_rows) WITH ORDINALITY AS x(r, o)), '[]'));
END
$body$;
$f$, pg_get_function_arguments(f), v_args);
END
$explain$;
COMMENT ON FUNCTION hybrid.explain_retrieve IS
'hybrid.retrieve''s call, explained (same arguments): jsonb with fusion, rrf_k, top_k, skip, total_ms; branches: for each branch run, its plan (exact scan or HNSW index; BM25 index or ts_rank; hops and seeds), rows, depth (per_source_k), weight, milliseconds and the statistics of its scores (or failed: the error); rows: for each returned row, chunk_id, document_id, score, ranks, the contribution of each branch to the score (they add up to it) and branch_scores (per branch that found it: its raw score and that score normalized as fusion normalizes it); each branch also carries bound, what its scores are normalized against, and the graph branch each hit''s seed, the seed''s score and the hit''s own (hits). Nothing in it counts another tenant''s rows.';

-- hybrid.retrieve_many: several formulations of one question, each retrieved (its branches fused), then
-- fused across formulations. Its arguments are hybrid.retrieve's, read from the catalog, with
-- query_embeddings / query_texts in place of query_embedding / query_text.
DO $many$
DECLARE
    f regprocedure := 'hybrid.retrieve'::regproc::regprocedure;
    v_params text;
    v_pass text;
BEGIN
    SELECT string_agg(format('%I %s DEFAULT %s', a.name, format_type(t.typ, NULL),
                             pg_get_function_arg_default(f, a.i::integer)), ', ' ORDER BY a.i),
           string_agg(format('%1$I => %1$I', a.name), ', ' ORDER BY a.i)
               FILTER (WHERE a.name NOT IN ('top_k', 'skip'))
    INTO v_params, v_pass
    FROM pg_proc p, unnest(p.proargnames) WITH ORDINALITY AS a(name, i),
         unnest(p.proargtypes::oid[]) WITH ORDINALITY AS t(typ, j)
    WHERE p.oid = f AND t.j = a.i AND a.name NOT IN ('query_embedding', 'query_text');
    EXECUTE format($f$
CREATE OR REPLACE FUNCTION hybrid.retrieve_many(query_embeddings vector[] DEFAULT NULL, query_texts text[] DEFAULT NULL, %s)
RETURNS SETOF hybrid.retrieve_row
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, public, pg_temp
AS $body$
DECLARE
    n integer := greatest(coalesce(cardinality(query_embeddings), 0), coalesce(cardinality(query_texts), 0));
    v_depth integer;
    v_rankings jsonb := '[]';
    v_scores jsonb := '[]';
    v_rows jsonb := '{}';
    v_ids text[];
    v_sc double precision[];
    v_new jsonb;
    i integer;
BEGIN
    IF n = 0 THEN
        RAISE EXCEPTION 'query_embeddings and query_texts are both NULL or empty: give one formulation or more'
            USING ERRCODE = '22023';
    END IF;
    IF query_embeddings IS NOT NULL AND query_texts IS NOT NULL AND cardinality(query_embeddings) <> cardinality(query_texts) THEN
        RAISE EXCEPTION 'query_embeddings has %% entries but query_texts has %%; they must match (NULL entries are allowed)',
            cardinality(query_embeddings), cardinality(query_texts) USING ERRCODE = '22023';
    END IF;
    IF n > 10 THEN
        RAISE EXCEPTION 'query_embeddings and query_texts must hold at most 10 formulations, got %%', n USING ERRCODE = '22023';
    END IF;
    PERFORM hybrid._check_range('top_k', top_k, 1, 1000);
    PERFORM hybrid._check_range('skip', skip, 0, 1000 - top_k);
    PERFORM hybrid._check_fusion(fusion);
    -- each formulation's fused list is as deep as hybrid.retrieve's branches would be for the page
    v_depth := least(1000, coalesce(per_source_k, greatest((skip + top_k) * 3, 30)));
    FOR i IN 1..n LOOP
        SELECT array_agg(r.chunk_id ORDER BY r.ordinality), array_agg(r.score ORDER BY r.ordinality),
               jsonb_object_agg(r.chunk_id, to_jsonb(r) - 'ordinality')
        INTO v_ids, v_sc, v_new
        FROM hybrid.retrieve(query_embedding => query_embeddings[i], query_text => query_texts[i],
                             top_k => v_depth, skip => 0, %s) WITH ORDINALITY AS r;
        v_rankings := v_rankings || jsonb_build_array(to_jsonb(coalesce(v_ids, '{}')));
        v_scores := v_scores || jsonb_build_array(to_jsonb(coalesce(v_sc, '{}')));
        v_rows := coalesce(v_new, '{}') || v_rows;  -- a row keeps the first formulation's ranks and values
    END LOOP;
    RETURN QUERY
    SELECT (jsonb_populate_record(NULL::hybrid.retrieve_row, (v_rows -> x.id) || jsonb_build_object('score', x.score))).*
    FROM hybrid.fuse(v_rankings, NULL, fusion, rrf_k, NULL, v_scores) x
    ORDER BY x.score DESC, x.id
    OFFSET skip LIMIT top_k;
END
$body$;
$f$, v_params, v_pass);
END
$many$;
COMMENT ON FUNCTION hybrid.retrieve_many IS
'Several formulations of one question (query_embeddings[i] with query_texts[i]; NULL entries allowed, at most 10): each is retrieved by hybrid.retrieve with the other arguments (its branches fused by fusion), to a depth of per_source_k or greatest((skip+top_k)*3, 30), then the formulations'' lists are fused by the same fusion with equal weights (rrf_k; convex and dbsf on the fused scores); skip, then top_k rows. A row''s ranks, values, siblings and graph context are those of the first formulation that found it; score is the fused one.';

COMMENT ON FUNCTION public.hybrid_retrieve IS
'hybrid.retrieve under a name on the default search_path: SELECT * FROM hybrid_retrieve(query_embedding => ..., query_text => ..., ...). See COMMENT ON FUNCTION hybrid.retrieve.';

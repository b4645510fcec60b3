-- hybrid_retrieve: the branches of hybrid.branch run, their lists fused, the graph expanded, hydrated under RLS: one call.

-- hybrid.graph_context: each chunk's visible graph neighbourhood
CREATE OR REPLACE FUNCTION hybrid.graph_context(chunk_ids text[]) RETURNS TABLE (chunk_id text, context jsonb)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, public, ag_catalog, pg_temp  -- graphid operators live in ag_catalog
SET plan_cache_mode = force_custom_plan  -- v_key a constant: only the tenant's partition is planned
AS $$
DECLARE
    v_tenant text; v_key integer; v_acl text[]; v_all boolean;
    v_chunk_hits text[];
BEGIN
    SELECT * INTO v_tenant, v_key, v_acl, v_all FROM hybrid._scope();  -- the caller's tenant and labels
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
CREATE OR REPLACE FUNCTION hybrid.calibrate_abstention(quantile double precision DEFAULT NULL, sample integer DEFAULT 400)
RETURNS double precision
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
AS $$
DECLARE
    v_tenant text; v_key integer;
    v_part regclass;
    v_rows double precision;
    v_pct double precision;
    v_src text;
    v_sampled text;
    v_n integer := 0;
    v_floor double precision;
BEGIN
    SELECT s.tenant, s.key INTO v_tenant, v_key FROM hybrid._scope() s;
    IF quantile = 'NaN' OR quantile <= 0 OR quantile >= 1 THEN
        RAISE EXCEPTION 'quantile must be a number between 0 and 1 (both excluded), or NULL for the neighbour floor, got %',
            quantile USING ERRCODE = '22023';
    END IF;
    PERFORM hybrid._check_range('sample', sample, 20, 10000);
    IF v_tenant IS NULL OR v_key IS NULL THEN
        RAISE EXCEPTION 'calibrate_abstention needs a tenant: set hybrid.tenant_id' USING ERRCODE = '42501';
    END IF;
    PERFORM hybrid._check_writer();  -- a writer sees every chunk of its tenant: the sample needs no ACL
    v_part := hybrid._chunk_partition(v_key);
    v_rows := greatest((SELECT reltuples FROM pg_class WHERE oid = v_part), 1);
    -- sample chunks: pages at random (eight times the rows asked for, so that a large partition is not read whole),
    -- then rows at random; a tenant of at most sample chunks is sampled whole, so its floor is the same every time.
    -- A pooled tenant (small: hybrid.move_tenant gives a large one a partition) is read whole from its leaf
    v_pct := CASE WHEN v_rows <= sample * 8 THEN 100 ELSE least(100, 100.0 * sample * 8 / v_rows) END;
    IF hybrid._pooled(v_key) THEN
        v_src := format('(SELECT * FROM hybrid.chunk_pool p WHERE p.tenant_key = %s AND p.tenant_id = %L) c', v_key, v_tenant);
        v_sampled := v_src;
        v_rows := 1;
    ELSE
        v_src := format('%s c', v_part);
        v_sampled := format('%s c TABLESAMPLE SYSTEM (%s)', v_part, v_pct);
    END IF;
    IF quantile IS NULL THEN
        -- the neighbour floor: 0.60 x the median, over the sample, of a chunk's cosine similarity to its 10th most
        -- similar chunk of another document, for the mean similarity of a question's ten best hits. A question's hits
        -- in a tenant about it are about as close as a chunk's neighbours are; a single-topic tenant's chunks are all
        -- alike, so a floor from random pairs was as high as a good answer there. Chosen on the shared collections
        -- (docs/searching.md); exact up to 5,000 chunks, through the dense index above
        EXECUTE format($q$
            WITH s AS (SELECT c.corpus_id, c.document_id, c.embedding FROM %2$s
                       WHERE NOT c.superseded AND c.embedding IS NOT NULL ORDER BY random() LIMIT $1)
            SELECT count(*)::integer, 0.60 * percentile_cont(0.5) WITHIN GROUP (ORDER BY n.sim)
            FROM s CROSS JOIN LATERAL (
                SELECT 1 - (c.embedding <=> s.embedding) AS sim FROM %1$s
                WHERE NOT c.superseded AND c.embedding IS NOT NULL
                  AND (c.corpus_id, c.document_id) IS DISTINCT FROM (s.corpus_id, s.document_id)
                ORDER BY (c.embedding <=> s.embedding)%3$s OFFSET 9 LIMIT 1) n$q$,
            v_src, v_sampled, CASE WHEN v_rows <= 5000 THEN ' + 0' ELSE '' END)
        INTO v_n, v_floor USING sample;
    END IF;
    IF v_n < 20 THEN  -- a quantile asked for, or too few chunks with ten neighbours of other documents: random pairs,
        -- 0.82 x their quantile (0.60 / 0.73: the quantile was the floor of the best hit alone, pyhybrid 0.3 to 0.5)
        EXECUTE format($q$
            WITH s AS (
                SELECT x.embedding, row_number() OVER (ORDER BY random()) AS i
                FROM (SELECT c.embedding FROM %s
                      WHERE NOT c.superseded AND c.embedding IS NOT NULL ORDER BY random() LIMIT $1) x
            )
            SELECT (SELECT count(*) FROM s)::integer,
                   0.82 * percentile_cont($2) WITHIN GROUP (ORDER BY 1 - (a.embedding <=> b.embedding))
            FROM s a JOIN s b ON a.i < b.i$q$,
            v_sampled)
        INTO v_n, v_floor USING sample, coalesce(quantile, 0.96);
    END IF;
    IF v_n < 20 THEN
        RAISE EXCEPTION 'calibrate_abstention needs at least 20 chunks with embeddings in tenant %, found %', v_tenant, v_n
            USING ERRCODE = '55000', HINT = 'Ingest the tenant''s documents first.';
    END IF;
    UPDATE hybrid.tenant SET abstain_floor = v_floor WHERE tenant_id = v_tenant;
    RETURN v_floor;
END
$$;
COMMENT ON FUNCTION hybrid.calibrate_abstention(double precision, integer) IS
'Stores and returns the current tenant''s abstention floor, which hybrid_retrieve(abstain => true) applies to the mean similarity of the dense branch''s ten best hits. By default (quantile NULL) the neighbour floor: 0.60 times the median, over a random sample of sample of its live chunks (all of them in a tenant that small), of a chunk''s cosine similarity to its 10th most similar chunk of another document (chosen on the shared collections: docs/searching.md); with fewer than 20 such chunks, or with quantile given, 0.82 times that quantile (default 0.96) of the cosine similarity between two sampled chunks, over every pair. Writers only (42501 for a reader); 55000 with fewer than 20 chunks with embeddings. Re-run it after large ingests.';

-- hybrid._run_branch: one branch of hybrid.retrieve run, its hits cut at its floor; a failure caught and reported
CREATE OR REPLACE FUNCTION hybrid._run_branch(
    branch text, k integer, score_floor double precision, weight double precision, with_report boolean,
    query_embedding vector, query_text text, lexical text, terms text[], term_coverage integer,
    seeds text[], graph_hops integer, graph_edge_types text[], corpus_ids text[], filter jsonb, query_sparse sparsevec,
    OUT ids text[], OUT vals double precision[], OUT hit_seeds text[], OUT strength double precision,
    OUT info jsonb, OUT report jsonb, OUT failed text)
LANGUAGE plpgsql VOLATILE SECURITY INVOKER  -- hybrid.retrieve's, as hybrid_definer
SET search_path = pg_catalog, public, pg_temp
AS $$
DECLARE
    v_held integer;
    v_state text;
    v_msg text;
    v_t timestamptz := clock_timestamp();
BEGIN
    strength := 1;
    info := '{}';
    -- each branch is collected whole or not at all, so a failure leaves nothing half-filled; a floor cuts the
    -- list before it seeds the graph or is fused (abstention: below it, nothing)
    BEGIN
        CASE branch
        WHEN 'dense' THEN
            SELECT array_agg(s.chunk_id ORDER BY s.rank), array_agg(s.value ORDER BY s.rank) INTO ids, vals
            FROM hybrid.search_dense(query_embedding, k, corpus_ids, filter) s
            WHERE score_floor IS NULL OR hybrid._branch_score('dense', s.value) >= score_floor;
        WHEN 'sparse' THEN
            SELECT array_agg(s.chunk_id ORDER BY s.rank), array_agg(s.value ORDER BY s.rank) INTO ids, vals
            FROM hybrid.search_sparse(query_sparse, k, corpus_ids, filter) s
            WHERE score_floor IS NULL OR hybrid._branch_score('sparse', s.value) >= score_floor;
        WHEN 'lexical' THEN
            -- the branch counts the terms its three best hits hold (hybrid._term_match_in's rule) in its own statement
            SELECT array_agg(s.chunk_id ORDER BY s.rank), array_agg(s.value ORDER BY s.rank), max(s.terms_held)
            INTO ids, vals, v_held
            FROM hybrid._lexical_hits(query_text, k, corpus_ids, filter, lexical, nullif(terms, '{}')) s
            WHERE score_floor IS NULL OR hybrid._branch_score('lexical', s.value) >= score_floor;
            info := jsonb_build_object('query_terms', NULL, 'best_hit_terms', NULL);
            IF terms IS NOT NULL AND cardinality(ids) > 0 THEN
                -- a weak list (none of its three best hits holds term_coverage of the query's terms) weighs less:
                -- min-max would otherwise lift its best hit to 1 beside the dense list's
                strength := hybrid._lexical_strength(cardinality(terms), coalesce(v_held, 0), term_coverage);
                info := jsonb_build_object('query_terms', cardinality(terms), 'best_hit_terms', coalesce(v_held, 0));
            END IF;
        WHEN 'graph' THEN
            SELECT array_agg(s.chunk_id ORDER BY s.rank), array_agg(s.value ORDER BY s.rank), array_agg(s.seed ORDER BY s.rank)
            INTO ids, vals, hit_seeds
            FROM hybrid._graph_walk(seeds, graph_hops, k, corpus_ids, filter, graph_edge_types) s
            WHERE score_floor IS NULL OR hybrid._branch_score('graph', s.value) >= score_floor;
        ELSE
            failed := 'unknown';  -- a name hybrid.branch does not hold: raised below, not caught
        END CASE;
        IF with_report AND failed IS NULL THEN  -- for hybrid.explain_retrieve: the branch's plan, rows, time and score statistics
            report := hybrid._explain_branch(branch, v_t, ids, vals, weight * strength, k,
                                             hybrid._branch_plan(branch, k, corpus_ids, filter, lexical, seeds, graph_hops))
                || CASE WHEN info ? 'query_terms' THEN jsonb_build_object('given_weight', weight, 'term_coverage',
                       info || jsonb_build_object('term_coverage', term_coverage, 'strength', strength)) ELSE '{}' END;
        END IF;
    EXCEPTION
    WHEN lock_not_available OR transaction_rollback OR insufficient_resources OR operator_intervention THEN
        RAISE;  -- a lock timeout, deadlock, serialization failure, resource or admin error ends the call
    WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS v_state = RETURNED_SQLSTATE, v_msg = MESSAGE_TEXT;
        RAISE WARNING 'hybrid_retrieve.source_failed: source=% sqlstate=% reason=%', branch, v_state, v_msg;
        ids := NULL;
        vals := NULL;
        hit_seeds := NULL;
        failed := v_state || ': ' || v_msg;
        report := jsonb_build_object('branch', branch, 'failed', failed);
    END;
    IF failed = 'unknown' THEN
        PERFORM hybrid._no_such('branch', branch);
    END IF;
    ids := coalesce(ids, '{}');
    vals := coalesce(vals, '{}');
END
$$;
COMMENT ON FUNCTION hybrid._run_branch IS
'One branch of hybrid.retrieve (a name of hybrid.branch) run for the current tenant: its hits (ids, their own measures vals, for the graph each hit''s seed) cut at score_floor; for the lexical branch the strength its term coverage gives its weight (hybrid._lexical_strength) and the counts behind it (info); with with_report, its entry in hybrid.explain_retrieve''s report (plan, rows, time, weight x strength, score statistics). A failure is caught, warned as hybrid_retrieve.source_failed and returned (failed: SQLSTATE and message), unless it is a lock timeout, deadlock, serialization, resource or admin error, which ends the call.';

-- hybrid._branch_plan: how a branch searched, for hybrid.explain_retrieve
CREATE OR REPLACE FUNCTION hybrid._branch_plan(branch text, k integer, corpus_ids text[], filter jsonb, lexical text,
                                               seeds text[], graph_hops integer) RETURNS text
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, public, pg_temp
AS $$
DECLARE
    v_key integer := hybrid._tenant_key(hybrid._current_tenant());
    p integer;
BEGIN
    CASE branch
    WHEN 'dense' THEN
        p := hybrid._dense_plan(v_key, corpus_ids, filter, NULL, k);
        RETURN CASE WHEN p = 0 THEN 'exact scan'
                    ELSE coalesce(hybrid._ivfflat_plan(v_key), format('HNSW index%s, ef_search %s',
                             CASE hybrid._dense_kind(hybrid.embedding_dim()) WHEN 'vector' THEN ''
                                  WHEN 'halfvec' THEN ' on halfvec copies (exact cosine re-rank)'
                                  ELSE ' on binary codes (exact cosine re-rank)' END, p))
                         || coalesce(', audit ' || current_setting('hybrid.dense_audit', true), '') END;
    WHEN 'lexical' THEN
        IF lexical = 'ts_rank' THEN
            RETURN 'ts_rank over the GIN index';
        END IF;
        RETURN (SELECT CASE WHEN s.index_name IS NOT NULL
                            THEN format('BM25 index (the tenant''s statistics; scores: %s)',
                                        coalesce(nullif(current_setting('hybrid.bm25_scores', true), ''), 'index scan'))
                            ELSE format('BM25 by the SQL scorer over the GIN index (the tenant''s statistics; %s)', s.reason) END
                FROM hybrid._bm25_scorer(v_key) s);
    WHEN 'sparse' THEN
        p := hybrid._dense_plan(v_key, corpus_ids, filter, NULL, k);
        RETURN CASE WHEN p = 0 THEN 'inner product, exact scan'
                    ELSE format('inner product, HNSW sparsevec_ip_ops index, ef_search %s', p) END;
    WHEN 'graph' THEN
        RETURN format('%s hop(s) from %s seed(s)', graph_hops, cardinality(seeds));
    END CASE;
END
$$;
COMMENT ON FUNCTION hybrid._branch_plan(text, integer, text[], jsonb, text, text[], integer) IS
'What hybrid.explain_retrieve reports as a branch''s plan: dense: exact scan, or the HNSW (ef_search, index kind) or IVFFlat index and the audit''s outcome; lexical: BM25 index or ts_rank (and why); sparse: the inner product over the sparse vectors; graph: hops and seeds.';

-- hybrid._diversify: maximal marginal relevance over the fused list's best candidates
CREATE OR REPLACE FUNCTION hybrid._diversify(p_key integer, p_tenant text, p_acl text[], p_all boolean, INOUT ids text[],
                                             INOUT scores double precision[], diversity double precision, pick integer)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, public, pg_temp
SET plan_cache_mode = force_custom_plan  -- p_key a constant: one partition planned
AS $$
DECLARE
    m integer := least(cardinality(ids), greatest(3 * pick, 30));  -- the candidates the page is chosen from
    v_ids text[];
    v_rel double precision[];
    v_emb vector[];
    v_sim double precision[];  -- m x m, row-major: the cosine similarity of two candidates (0 without embeddings)
    v_near double precision[];  -- each candidate's greatest similarity to those chosen
    v_free boolean[];
    v_out text[] := '{}';
    v_top double precision;
    best integer;
    best_value double precision;
    value double precision;
    i integer;
    step integer;
BEGIN
    IF coalesce(cardinality(ids), 0) < 2 OR diversity = 0 THEN
        RETURN;
    END IF;
    v_ids := ids[1:m];
    v_top := greatest((SELECT max(s) FROM unnest(scores[1:m]) s), 1e-300);
    v_rel := ARRAY(SELECT s / v_top FROM unnest(scores[1:m]) s);  -- relevance on 0..1, whatever the fusion
    -- the candidates' embeddings, where the caller can see them (one that it cannot see, hydration drops), then
    -- each pair's cosine similarity
    v_emb := ARRAY(SELECT c.embedding FROM unnest(v_ids) WITH ORDINALITY u(id, o)
                   LEFT JOIN LATERAL (SELECT c.embedding FROM hybrid.chunk c
                                      WHERE c.tenant_key = p_key AND c.tenant_id = p_tenant AND c.chunk_id = u.id
                                        AND hybrid._visible(c.tenant_id, c.superseded, c.acl_labels, p_tenant, p_acl, p_all)
                                      LIMIT 1) c ON true ORDER BY u.o);
    SELECT array_agg(coalesce(1 - (a.e <=> b.e), 0) ORDER BY a.o, b.o) INTO v_sim
    FROM unnest(v_emb) WITH ORDINALITY a(e, o), unnest(v_emb) WITH ORDINALITY b(e, o);
    v_near := array_fill(NULL::float8, ARRAY[m]);
    v_free := array_fill(true, ARRAY[m]);
    -- greedy: the next row is the free candidate of the greatest (1 - diversity) x relevance - diversity x its
    -- greatest similarity to a row already chosen (the first: the most relevant)
    FOR step IN 1..least(pick, m) LOOP
        best := NULL;
        FOR i IN 1..m LOOP
            CONTINUE WHEN NOT v_free[i];
            value := (1 - diversity) * v_rel[i] - diversity * coalesce(v_near[i], 0);
            IF best IS NULL OR value > best_value THEN
                best := i;
                best_value := value;
            END IF;
        END LOOP;
        v_out := v_out || v_ids[best];
        v_free[best] := false;
        FOR i IN 1..m LOOP
            v_near[i] := greatest(coalesce(v_near[i], '-Infinity'), v_sim[(best - 1) * m + i]);
        END LOOP;
    END LOOP;
    -- then the candidates not chosen, in their order; each keeps its fused score
    SELECT array_agg(x.id ORDER BY coalesce(array_position(v_out, x.id), m + x.o::integer)),
           array_agg(x.score ORDER BY coalesce(array_position(v_out, x.id), m + x.o::integer))
    INTO ids, scores FROM unnest(ids, scores) WITH ORDINALITY x(id, score, o);
END
$$;
COMMENT ON FUNCTION hybrid._diversify(integer, text, text[], boolean, text[], double precision[], double precision, integer) IS
'hybrid.retrieve''s diversity stage, maximal marginal relevance, over a fused list (ids, best first, and their scores, which each keeps): the first pick rows chosen one by one from the best greatest(3 x pick, 30) candidates (ids, best first, with their fused scores), each the candidate of the greatest (1 - diversity) x its score / the best score - diversity x its greatest cosine similarity to a row chosen before it (0 for a candidate without an embedding); the other candidates follow in their order. diversity 0 (or fewer than two candidates): ids as given.';

-- hybrid._hydrate: the rows hybrid.retrieve and hybrid.hydrate return for a fused candidate list, written once
CREATE OR REPLACE FUNCTION hybrid._hydrate(p_key integer, p_tenant text, p_acl text[], p_all boolean,
                                           ids text[], scores double precision[], names text[], e_list integer[],
                                           e_ids text[], e_ranks integer[], e_vals double precision[],
                                           top_k integer, skip integer, per_document boolean, siblings integer,
                                           with_graph_context boolean)
RETURNS SETOF hybrid.retrieve_row
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, public, pg_temp
SET plan_cache_mode = force_custom_plan  -- p_key a constant: one partition planned
AS $$
DECLARE
    -- the candidates in their order, each read by the primary key (LIMIT 1 keeps it a nested loop, which keeps
    -- that order): without per_document the read stops at skip + top_k visible ones
    v_read constant text := $r$
        SELECT f.id AS chunk_id, c.document_id, c.corpus_id, c.tenant_id, f.score, f.o,
               c.content, c.metadata, c.acl_labels, c.position
        FROM unnest($5, $6) WITH ORDINALITY AS f(id, score, o)
        CROSS JOIN LATERAL (
            SELECT c.document_id, c.corpus_id, c.tenant_id, c.content, c.metadata, c.acl_labels, c.position
            FROM hybrid.chunk c
            WHERE c.tenant_key = $1 AND c.tenant_id = $2 AND c.chunk_id = f.id
              AND hybrid._visible(c.tenant_id, c.superseded, c.acl_labels, $2, $3, $4)
            LIMIT 1) c$r$;
    v_legacy text;
BEGIN
    -- each branch's rank and own measure for a row, from the lists in long form ($7 names, $8 to $11 the
    -- entries): by name in ranks and scores, and in the columns of the branches of 0.3 (hybrid.branch)
    SELECT string_agg(format('max(e.r) FILTER (WHERE $7[e.l] = %1$L) AS %2$I, max(e.v) FILTER (WHERE $7[e.l] = %1$L) AS %3$I',
                             b.name, b.rank_column, b.value_column), ', ' ORDER BY b.position)
    INTO v_legacy FROM hybrid.branch b WHERE b.rank_column IS NOT NULL;
    -- one statement, planned for this call (p_key a constant), with only the collapse and the columns it needs:
    -- the siblings' reads of hybrid.chunk and the graph context are planned only when asked for
    -- (bench/FINDINGS.md#the-one-calls-own-statements-fewer-and-flatter-engine_ab). $1 p_key, $2 p_tenant, $3 p_acl,
    -- $4 p_all, $5 ids, $6 scores, $7 to $11 the lists, $12 top_k, $13 skip, $14 siblings
    RETURN QUERY EXECUTE format($q$
    SELECT t.chunk_id, t.document_id, t.corpus_id, t.tenant_id, t.score, b.vector_rank, b.keyword_rank,
           b.graph_rank, b.vector_distance, b.keyword_score, b.graph_distance::integer,
           t.content, t.metadata, t.acl_labels, t.position, %s, %s, b.ranks, b.scores
    FROM (%s OFFSET $13 LIMIT $12) t
    CROSS JOIN LATERAL (
        SELECT %s, jsonb_object_agg($7[e.l], e.r) AS ranks, jsonb_object_agg($7[e.l], e.v) AS scores
        FROM unnest($8, $9, $10, $11) AS e(l, id, r, v) WHERE e.id = t.chunk_id) b
    ORDER BY t.o
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
                           ORDER BY s.position DESC, s.chunk_id DESC LIMIT $14)
                          UNION ALL
                          (SELECT s.chunk_id, s.position, s.content FROM hybrid.chunk s
                           WHERE s.tenant_key = $1 AND s.tenant_id = $2 AND s.corpus_id = t.corpus_id
                             AND s.document_id = t.document_id AND s.position > t.position
                             AND hybrid._visible(s.tenant_id, s.superseded, s.acl_labels, $2, $3, $4)
                           ORDER BY s.position, s.chunk_id LIMIT $14)) x)$s$
              ELSE 'NULL::jsonb' END,
         CASE WHEN per_document
              -- every candidate, the first of each document (the collapse needs each one's document)
              THEN 'SELECT * FROM (SELECT DISTINCT ON (h.corpus_id, h.document_id) h.* FROM (' || v_read || ') h
                    ORDER BY h.corpus_id, h.document_id, h.o) d ORDER BY d.o'
              ELSE v_read || ' ORDER BY f.o' END,
         v_legacy)
    USING p_key, p_tenant, p_acl, p_all, ids, scores, names, e_list, e_ids, e_ranks, e_vals, top_k, skip, siblings;
END
$$;
COMMENT ON FUNCTION hybrid._hydrate(integer, text, text[], boolean, text[], double precision[], text[], integer[], text[],
                                    integer[], double precision[], integer, integer, boolean, integer, boolean) IS
'The rows of a fused candidate list (ids in the order to return them, their fused scores) for tenant p_tenant (partition p_key) under the visibility rule (hybrid._visible with p_acl, p_all): the candidates read in order by the primary key, the read stopping at skip + top_k visible ones; per_document keeps the first chunk of each document; then skip rows and top_k rows, with siblings and graph context. Each row''s rank and own measure in each branch come from the branches'' lists in long form (names[e_list[j]]''s entry e_ids[j] at rank e_ranks[j] with e_vals[j]): by name in ranks and scores, and in the columns hybrid.branch names for the branches of 0.3. hybrid.retrieve and hybrid.hydrate call it; nobody else may.';

-- hybrid._graph_stage: graph expansion of the fused list (hybrid.retrieve's stage after fusion)
CREATE OR REPLACE FUNCTION hybrid._graph_stage(
    INOUT ids text[], INOUT scores double precision[], graph_seeds text[], graph_expand integer, graph_hops integer,
    graph_edge_types text[], graph_weight double precision, graph_decay double precision,
    min_graph_score double precision, k integer, with_report boolean, corpus_ids text[], filter jsonb,
    OUT hits text[], OUT hops double precision[], OUT report jsonb, OUT failed text)
LANGUAGE plpgsql VOLATILE SECURITY INVOKER  -- hybrid.retrieve's, as hybrid_definer
SET search_path = pg_catalog, public, pg_temp
AS $$
DECLARE
    v_auto boolean := coalesce(cardinality(graph_seeds), 0) = 0;
    -- automatic seeds: the best graph_expand chunks of the fused lists
    v_seeds text[] := CASE WHEN v_auto THEN ids[1:graph_expand] ELSE graph_seeds END;
    -- a seed named in graph_seeds that no list holds scores as the best fused hit (1 without one)
    v_top double precision := coalesce((SELECT max(x) FROM unnest(scores) x), 1);
    r record;
BEGIN
    IF v_seeds IS NULL OR cardinality(v_seeds) = 0 THEN
        RETURN;
    END IF;
    r := hybrid._run_branch('graph', k, min_graph_score, graph_weight, with_report, NULL, NULL, NULL, NULL, NULL, v_seeds,
                            graph_hops, graph_edge_types, corpus_ids, filter, NULL);
    report := r.report;
    IF r.failed IS NOT NULL THEN
        failed := r.failed;
        RETURN;
    END IF;
    hits := r.ids;
    hops := r.vals;
    IF with_report THEN
        report := report || jsonb_build_object('plan', (report ->> 'plan')
                                || CASE WHEN v_auto THEN format(' (the best %s fused hits)', graph_expand) ELSE '' END)
            || jsonb_build_object('seeds', to_jsonb(v_seeds), 'graph_decay', graph_decay,
                   -- each hit's seed, the seed's fused score and its own, which its score builds on
                   'hits', (SELECT jsonb_object_agg(x.id, jsonb_build_object('seed', x.seed, 'seed_score', coalesce(sb.score, v_top),
                                                                              'own', coalesce(ob.score, 0)))
                            FROM unnest(r.ids, r.hit_seeds) AS x(id, seed)
                            LEFT JOIN unnest(ids, scores) AS sb(id, score) ON sb.id = x.seed
                            LEFT JOIN unnest(ids, scores) AS ob(id, score) ON ob.id = x.id));
    END IF;
    -- a graph hit scores the greater of its own fused score and graph_weight * its seed's * graph_decay ^ hops
    SELECT array_agg(z.id ORDER BY z.score DESC, z.id), array_agg(z.score ORDER BY z.score DESC, z.id) INTO ids, scores
    FROM (SELECT coalesce(f.id, g.id) AS id,
                 CASE WHEN g.id IS NULL THEN f.score
                      ELSE hybrid._graph_score(coalesce(f.score, 0), graph_weight, coalesce(sb.score, v_top), graph_decay, g.v) END AS score
          FROM unnest(ids, scores) AS f(id, score)
          FULL JOIN unnest(r.ids, r.vals, r.hit_seeds) AS g(id, v, seed) ON g.id = f.id
          LEFT JOIN unnest(ids, scores) AS sb(id, score) ON sb.id = g.seed) z;
END
$$;
COMMENT ON FUNCTION hybrid._graph_stage(text[], double precision[], text[], integer, integer, text[], double precision,
                                        double precision, double precision, integer, boolean, text[], jsonb) IS
'hybrid.retrieve''s graph stage: from graph_seeds, else the best graph_expand of the fused list (ids with scores, best first), the graph branch (hybrid._run_branch); each hit scores the greater of its fused score (0 without one) and graph_weight * its seed''s fused score (the best fused score for a seed no list holds, 1 without one) * graph_decay ^ hops (hybrid._graph_score). Returns the list with the hits, re-sorted, the hits and their hops, its explain report, or why it failed.';

-- hybrid._list_stage: hybrid.retrieve's list branches run and collected, before fusion
CREATE OR REPLACE FUNCTION hybrid._list_stage(
    k integer, with_report boolean, query_embedding vector, query_text text, vector_weight double precision,
    keyword_weight double precision, min_vector_score double precision, min_keyword_score double precision,
    lexical text, terms text[], term_coverage integer, corpus_ids text[], filter jsonb,
    query_sparse sparsevec, sparse_weight double precision, min_sparse_score double precision,
    OUT names text[], OUT weights double precision[], OUT e_list integer[], OUT e_ids text[], OUT e_ranks integer[],
    OUT e_vals double precision[], OUT active integer, OUT failed text[], OUT report jsonb, OUT lexical_info jsonb)
LANGUAGE plpgsql VOLATILE SECURITY INVOKER  -- hybrid.retrieve's, as hybrid_definer
SET search_path = pg_catalog, public, pg_temp
AS $$
DECLARE
    b record;
    r record;
BEGIN
    SELECT '{}', '{}', '{}', '{}', '{}', '{}', 0, '{}', '[]' INTO names, weights, e_list, e_ids, e_ranks, e_vals, active, failed, report;
    -- the list branches of hybrid.branch in their order, each one asked for (its query given) and weighed above 0;
    -- a branch's parameters map to its row here
    FOR b IN SELECT x.* FROM (VALUES ('dense', query_embedding IS NOT NULL, vector_weight, min_vector_score),
                                     ('lexical', coalesce(btrim(query_text), '') <> '', keyword_weight, min_keyword_score),
                                     ('sparse', query_sparse IS NOT NULL, sparse_weight, min_sparse_score))
                             AS x(name, asked, weight, score_floor)
             JOIN hybrid.branch br ON br.name = x.name AND br.stage = 'list'
             WHERE x.asked AND x.weight > 0 ORDER BY br.position LOOP
        active := active + 1;
        r := hybrid._run_branch(b.name, k, b.score_floor, b.weight, with_report, query_embedding, query_text, lexical,
                                terms, term_coverage, NULL, NULL, NULL, corpus_ids, filter, query_sparse);
        report := report || coalesce(r.report, '[]');
        IF r.failed IS NOT NULL THEN
            failed := failed || r.failed;
            CONTINUE;
        END IF;
        names := names || b.name;
        weights := weights || b.weight * r.strength;
        SELECT e_list || array_fill(cardinality(names), ARRAY[cardinality(r.ids)]), e_ids || r.ids,
               e_ranks || ARRAY(SELECT generate_series(1, cardinality(r.ids))), e_vals || r.vals
        INTO e_list, e_ids, e_ranks, e_vals;
        lexical_info := CASE WHEN r.info ? 'query_terms' THEN r.info ELSE lexical_info END;
    END LOOP;
END
$$;
COMMENT ON FUNCTION hybrid._list_stage IS
'hybrid.retrieve''s list branches (hybrid.branch, stage list), each run (hybrid._run_branch) when its query is given and its weight is above 0: the names of those that answered, their weights (x the lexical strength), their hits in long form (e_list: the index in names; e_ids, e_ranks, e_vals), how many were asked for, the failures (SQLSTATE: message), the explain report and the lexical branch''s term counts.';

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
    graph_decay double precision DEFAULT 0.4,  -- chosen on CACM's citations (docs/graph.md)
    term_coverage integer DEFAULT 2,  -- changes no ranking on the shared collections (docs/searching.md)
    abstain boolean DEFAULT false,
    diversity double precision DEFAULT 0,
    query_sparse sparsevec DEFAULT NULL,
    sparse_weight double precision DEFAULT 1.0,
    min_sparse_score double precision DEFAULT NULL)
RETURNS SETOF hybrid.retrieve_row
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
-- no plan_cache_mode of its own: its statements read no chunk (the branches and hybrid._hydrate plan theirs for
-- the tenant's partition), so they keep cached plans (bench/FINDINGS.md#catalog-reads-planned-once-a-session-plan_mode_ab)
AS $$
DECLARE
    v_tenant text; v_key integer;
    v_k integer := coalesce(per_source_k, least(10000, greatest((skip + top_k) * 3, 30)));
    -- hybrid.explain_retrieve sets hybrid.explain: then each branch's plan, rows, time and list statistics are
    -- left in hybrid.explain_report for it (nothing of another tenant is in them)
    v_explain boolean := coalesce(current_setting('hybrid.explain', true), '') = 'on';
    v_terms text[];  -- the query's distinct terms, for the lexical branch's term coverage
    l record;  -- the list branches (hybrid._list_stage)
    -- the branches that ran, their weights and their hits in long form (hybrid._fuse_lists, hybrid._hydrate),
    -- how many were asked for, how many failed (SQLSTATE: message) and the explain report
    v_names text[]; v_weights double precision[];
    e_list integer[]; e_ids text[]; e_ranks integer[]; e_vals double precision[];
    v_active integer; v_failed text[]; v_report jsonb;
    f_ids text[]; f_sc double precision[];  -- the fused list, best first, and its scores
    g record; v_rows hybrid.retrieve_row[];
BEGIN
    SELECT s.tenant, s.key INTO v_tenant, v_key FROM hybrid._scope() s;
    PERFORM hybrid._check_retrieve(query_embedding, query_text, graph_seeds, corpus_ids, top_k, per_source_k,
        vector_weight, keyword_weight, graph_weight, rrf_k, filter, graph_hops, lexical, graph_expand, with_graph_context,
        per_document, fusion, skip, siblings, graph_edge_types, min_vector_score, min_keyword_score, min_graph_score,
        graph_decay, term_coverage, abstain, diversity, query_sparse, sparse_weight, min_sparse_score);
    IF v_tenant IS NULL OR v_key IS NULL THEN
        RETURN;  -- fail closed: no tenant context (or no such tenant), no rows
    END IF;
    FOR attempt IN 1..3 LOOP
        v_rows := NULL;
        IF (term_coverage > 1 OR abstain) AND coalesce(btrim(query_text), '') <> '' THEN
            v_terms := tsvector_to_array(to_tsvector(hybrid._text_config(v_key), query_text));
        END IF;
        l := hybrid._list_stage(v_k, v_explain, query_embedding, query_text, vector_weight, keyword_weight,
                                min_vector_score, min_keyword_score, lexical, v_terms, term_coverage, corpus_ids, filter,
                                query_sparse, sparse_weight, min_sparse_score);
        SELECT l.names, l.weights, l.e_list, l.e_ids, l.e_ranks, l.e_vals, l.active, l.failed, l.report
        INTO v_names, v_weights, e_list, e_ids, e_ranks, e_vals, v_active, v_failed, v_report;
        -- abstention (with no graph_seeds of the caller's): by the dense branch's ten best hits and the lexical match
        IF abstain AND coalesce(cardinality(graph_seeds), 0) = 0 AND hybrid._abstains(v_tenant,
               ARRAY(SELECT 1 - e.v FROM unnest(e_list, e_vals) WITH ORDINALITY e(l, v, o)
                     WHERE v_names[e.l] = 'dense' ORDER BY e.o LIMIT 10),
               coalesce((l.lexical_info ->> 'query_terms')::integer > 0
                        AND l.lexical_info ->> 'best_hit_terms' = l.lexical_info ->> 'query_terms', false), v_explain) THEN
            PERFORM set_config('hybrid.explain_report', v_report::text, true);
            EXIT WHEN hybrid._tenant_key(v_tenant) IS NOT DISTINCT FROM v_key;
            v_key := hybrid._tenant_key(v_tenant);
            CONTINUE;
        END IF;
        SELECT array_agg(f.id ORDER BY f.score DESC, f.id), array_agg(f.score ORDER BY f.score DESC, f.id) INTO f_ids, f_sc
        FROM hybrid._fuse_lists(fusion, rrf_k, v_names, v_weights, e_list, e_ids, e_vals) f;
        IF graph_weight > 0 AND (coalesce(cardinality(graph_seeds), 0) > 0 OR graph_expand > 0) THEN
            g := hybrid._graph_stage(f_ids, f_sc, graph_seeds, graph_expand, graph_hops, graph_edge_types, graph_weight,
                                     graph_decay, min_graph_score, v_k, v_explain, corpus_ids, filter);
            v_active := v_active + CASE WHEN g.failed IS NOT NULL OR g.hits IS NOT NULL THEN 1 ELSE 0 END;
            v_report := v_report || coalesce(g.report, '[]');
            IF g.failed IS NOT NULL THEN
                v_failed := v_failed || g.failed;
            ELSIF g.hits IS NOT NULL THEN
                f_ids := g.ids;
                f_sc := g.scores;
                v_names := v_names || 'graph'::text;
                SELECT e_list || array_fill(cardinality(v_names), ARRAY[cardinality(g.hits)]), e_ids || g.hits,
                       e_ranks || ARRAY(SELECT generate_series(1, cardinality(g.hits))), e_vals || g.hops
                INTO e_list, e_ids, e_ranks, e_vals;
            END IF;
        END IF;
        IF v_explain THEN
            PERFORM set_config('hybrid.explain_report', v_report::text, true);
        END IF;
        IF v_active > 0 AND cardinality(v_failed) = v_active THEN
            RAISE EXCEPTION 'hybrid_retrieve: every active source failed; first: %', substr(v_failed[1], 8)
                USING ERRCODE = left(v_failed[1], 5);
        END IF;
        IF diversity > 0 THEN
            SELECT d.ids, d.scores INTO f_ids, f_sc
            FROM hybrid._diversify(v_key, v_tenant, hybrid._current_acl(), hybrid._acl_all(), f_ids, f_sc, diversity,
                                   skip + top_k) d;
        END IF;
        v_rows := ARRAY(SELECT h FROM hybrid._hydrate(v_key, v_tenant, hybrid._current_acl(), hybrid._acl_all(), f_ids,
                                                      f_sc, v_names, e_list, e_ids, e_ranks, e_vals, top_k, skip,
                                                      per_document, siblings, with_graph_context) h);
        -- a move of the tenant (hybrid.move_tenant) that committed meanwhile changed its key: a branch may have read
        -- one place and the hydration the other. The call runs again, where the tenant is now (moves are rare)
        EXIT WHEN hybrid._tenant_key(v_tenant) IS NOT DISTINCT FROM v_key;
        v_key := hybrid._tenant_key(v_tenant);
    END LOOP;
    RETURN QUERY SELECT (r).* FROM unnest(v_rows) r;
END
$$;
COMMENT ON FUNCTION hybrid.retrieve IS
'Hybrid retrieval for the current tenant. The list branches of hybrid.branch, each run when its query is given and its weight is above 0: dense (query_embedding, vector_weight), lexical (query_text, keyword_weight; lexical => bm25 | ts_rank | NULL for the best available) and sparse (query_sparse, sparse_weight: the inner product with the chunks'' learned-sparse vectors), each cut to per_source_k (default greatest((skip+top_k)*3, 30)) after corpus, metadata filter and ACL and to its floor (min_vector_score, min_keyword_score, min_sparse_score: the branch''s own score, before fusion); their lists fused by fusion (hybrid.fusion_methods(): convex, the default, sums each list''s min-max normalized scores x its weight; rrf sums w / (rrf_k + rank); dbsf normalizes by mean +- 3 sd; blend sums the branch scores on an absolute scale, hybrid._blend_score; see hybrid.fuse). The lexical list weighs keyword_weight x its term coverage''s strength (term_coverage, hybrid.lexical_strength). The graph branch (graph_seeds, or the best graph_expand of the fused list; graph_hops, graph_edge_types, min_graph_score) adds its hits: each scores the greater of its fused score (0 without one) and graph_weight * the fused score of the seed that reached it * graph_decay ^ hops (hybrid._graph_score; graph_weight * graph_decay must be below 1, so it scores below its seed). diversity (0..1, 0 off): the page chosen by maximal marginal relevance over the embeddings (hybrid._diversify). Then per_document (the best chunk per document), skip rows and top_k rows in that order (by score then chunk_id; pages are stable when per_source_k is given), siblings => n (the n nearest visible chunks of the same document on each side, by position) and graph context. Each row carries its rank and own measure in every branch that found it (ranks, scores by branch name; the columns vector_rank ... graph_distance for the branches of 0.3). abstain: no rows (a NOTICE) when the mean similarity of the dense branch''s ten best hits is below the tenant''s floor, its best hit below 1.5 times the floor and no lexical hit holds every query term (hybrid._abstains). A branch that is missing or broken raises a WARNING "hybrid_retrieve.source_failed ..." and the rest are fused; if all fail, the call fails. A lock timeout, deadlock, serialization failure, cancellation, resource or operator error in any branch ends the call with its own SQLSTATE. Same as public.hybrid_retrieve.';

-- hybrid._check_retrieve: hybrid.retrieve's arguments checked, every rule naming its parameter (22023), in the
-- words of pyhybrid/query.py. Its parameters are hybrid.retrieve's, read from the catalog.
DO $check$
DECLARE
    f regprocedure := 'hybrid.retrieve'::regproc::regprocedure;
BEGIN
    EXECUTE format($f$
CREATE OR REPLACE FUNCTION hybrid._check_retrieve(%s) RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, public, pg_temp
AS $body$
DECLARE
    v_dim integer;
BEGIN
    PERFORM hybrid._check_range('top_k', top_k, 1, 1000);
    PERFORM hybrid._check_range('skip', skip, 0, 10000 - top_k);
    IF per_source_k IS NOT NULL THEN
        PERFORM hybrid._check_range('per_source_k', per_source_k, skip + top_k, 10000,
                                    CASE WHEN skip = 0 THEN format('top_k (%%s)', top_k)
                                         ELSE format('skip + top_k (%%s)', skip + top_k) END);
    END IF;
    PERFORM hybrid._check_fusion(fusion);
    PERFORM hybrid._check_range('siblings', siblings, 0, 20);
    PERFORM hybrid._check_number(x.name, x.value, x.positive)
    FROM (VALUES (1, 'vector_weight', vector_weight, false), (2, 'keyword_weight', keyword_weight, false),
                 (3, 'graph_weight', graph_weight, false), (4, 'rrf_k', rrf_k, true),
                 (5, 'min_vector_score', min_vector_score, false), (6, 'min_keyword_score', min_keyword_score, false),
                 (7, 'min_graph_score', min_graph_score, false), (8, 'sparse_weight', sparse_weight, false),
                 (9, 'min_sparse_score', min_sparse_score, false)) AS x(o, name, value, positive)
    WHERE x.o <= 4 OR x.o = 8 OR x.value IS NOT NULL ORDER BY x.o;
    PERFORM hybrid._check_range('graph_hops', graph_hops, 1, 3);
    PERFORM hybrid._check_range('graph_expand', graph_expand, 0, 100);
    PERFORM hybrid._check_range('term_coverage', term_coverage, 1, 32);
    IF graph_decay IS NULL OR graph_decay = 'NaN' OR graph_decay < 0 OR graph_decay >= 1 THEN
        RAISE EXCEPTION 'graph_decay must be a number from 0 up to (not including) 1, got %%', coalesce(graph_decay::text, 'NULL')
            USING ERRCODE = '22023';
    END IF;
    IF graph_weight * graph_decay >= 1 THEN
        RAISE EXCEPTION 'graph_weight * graph_decay must be below 1, got %%', graph_weight * graph_decay
            USING ERRCODE = '22023',
                  HINT = 'A chunk reached only through the graph scores graph_weight * graph_decay ^ hops times its seed''s score: below the seed only while the product is below 1.';
    END IF;
    IF diversity IS NULL OR diversity = 'NaN' OR diversity < 0 OR diversity > 1 THEN
        RAISE EXCEPTION 'diversity must be a number from 0 (off) to 1, got %%', coalesce(diversity::text, 'NULL')
            USING ERRCODE = '22023';
    END IF;
    PERFORM hybrid._check_flag('with_graph_context', with_graph_context);
    PERFORM hybrid._check_flag('per_document', per_document);
    PERFORM hybrid._check_flag('abstain', abstain);
    PERFORM hybrid._check_text('query_text', query_text, 20000);
    IF cardinality(graph_edge_types) > 100 THEN
        RAISE EXCEPTION 'graph_edge_types must hold at most 100 names, got %%', cardinality(graph_edge_types) USING ERRCODE = '22023';
    END IF;
    IF cardinality(graph_seeds) > 1000 THEN
        RAISE EXCEPTION 'graph_seeds must hold at most 1000 ids, got %%', cardinality(graph_seeds) USING ERRCODE = '22023';
    END IF;
    IF lexical IS NOT NULL AND lexical NOT IN ('bm25', 'ts_rank') THEN
        RAISE EXCEPTION 'lexical must be ''bm25'', ''ts_rank'' or NULL (automatic), got %%', hybrid._shown(lexical) USING ERRCODE = '22023';
    END IF;
    IF filter IS NOT NULL AND jsonb_typeof(filter) <> 'object' THEN
        RAISE EXCEPTION 'filter must be a JSON object, got a JSON %%', jsonb_typeof(filter) USING ERRCODE = '22023';
    END IF;
    IF query_embedding IS NOT NULL THEN
        v_dim := hybrid.embedding_dim();
        IF vector_dims(query_embedding) <> v_dim THEN
            RAISE EXCEPTION 'query_embedding has %% dimensions, expected %%', vector_dims(query_embedding), v_dim
                USING ERRCODE = '22023', HINT = 'Embed the query with the model used at ingestion.';
        END IF;
        IF vector_norm(query_embedding) = 0 THEN
            RAISE EXCEPTION 'query_embedding must not be the zero vector (cosine distance is undefined)' USING ERRCODE = '22023';
        END IF;
    END IF;
    IF query_embedding IS NULL AND coalesce(btrim(query_text), '') = '' AND coalesce(cardinality(graph_seeds), 0) = 0
       AND query_sparse IS NULL THEN
        RAISE EXCEPTION 'nothing to search: query_embedding, query_text, query_sparse and graph_seeds are all NULL or empty'
            USING ERRCODE = '22023', HINT = 'Give at least one of them.';
    END IF;
    IF NOT ((query_embedding IS NOT NULL AND vector_weight > 0) OR (coalesce(btrim(query_text), '') <> '' AND keyword_weight > 0)
            OR (query_sparse IS NOT NULL AND sparse_weight > 0)
            OR (graph_weight > 0 AND (coalesce(cardinality(graph_seeds), 0) > 0 OR graph_expand > 0))) THEN
        RAISE EXCEPTION 'every source given has weight 0: nothing to fuse' USING ERRCODE = '22023';
    END IF;
END
$body$;
$f$, pg_get_function_arguments(f));
END
$check$;
COMMENT ON FUNCTION hybrid._check_retrieve IS
'hybrid.retrieve''s arguments checked, each rule naming its parameter (22023), as pyhybrid/query.py checks them: the ranges of top_k, skip, per_source_k, siblings, graph_hops, graph_expand, term_coverage; fusion (hybrid.fusion_methods()); weights, floors and rrf_k (hybrid._check_number); graph_decay and graph_weight * graph_decay below 1; diversity 0..1; flags not NULL; query_text at most 20,000 characters; at most 100 graph_edge_types and 1,000 graph_seeds; lexical; filter an object; query_embedding of the install''s dimension and not zero; something to search, of weight above 0. Its parameters are hybrid.retrieve''s (read from the catalog).';

-- hybrid._abstains: whether hybrid.retrieve(abstain => true) returns nothing (and says so)
CREATE OR REPLACE FUNCTION hybrid._abstains(tenant text, similarities double precision[], lexical_full_match boolean,
                                            with_report boolean) RETURNS boolean
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, public, pg_temp
AS $$
DECLARE
    v_floor double precision;
    v_mean double precision := (SELECT avg(s) FROM unnest(similarities) s);
    v_best double precision := similarities[1];
BEGIN
    SELECT t.abstain_floor INTO v_floor FROM hybrid.tenant t WHERE t.tenant_id = tenant;
    IF v_floor IS NULL THEN
        RAISE EXCEPTION 'abstain needs tenant %''s abstention floor, which is not calibrated', tenant
            USING ERRCODE = '55000',
                  HINT = 'A writer of the tenant runs SELECT hybrid.calibrate_abstention() (pyhybrid tenant calibrate), once its documents are in.';
    END IF;
    IF with_report THEN
        PERFORM set_config('hybrid.explain_abstention', jsonb_build_object(
            'floor', v_floor, 'mean_similarity', v_mean, 'best_similarity', v_best,
            'lexical_full_match', lexical_full_match)::text, true);
    END IF;
    -- answered: the ten best hits near enough on average (a question about the tenant's topic), or the best one alone
    -- 1.5 times the floor (a question one chunk answers), or a lexical hit with every query term (a part number)
    IF coalesce(v_mean < v_floor AND v_best < 1.5 * v_floor, true) AND NOT lexical_full_match THEN
        RAISE NOTICE 'hybrid_retrieve.abstained: the dense branch''s ten best hits (mean similarity %, best %) are below tenant %''s floor (%; the best alone 1.5 times it) and none of the three best lexical hits holds every query term',
            coalesce(round(v_mean::numeric, 4)::text, 'none'), coalesce(round(v_best::numeric, 4)::text, 'none'), tenant,
            round(v_floor::numeric, 4);
        RETURN true;
    END IF;
    RETURN false;
END
$$;
COMMENT ON FUNCTION hybrid._abstains(text, double precision[], boolean, boolean) IS
'hybrid.retrieve''s abstention: true (with a NOTICE hybrid_retrieve.abstained) when the mean of similarities (the cosine similarities of the dense branch''s ten best hits, best first; all of them when fewer) is below the tenant''s calibrated floor, the best of them below 1.5 times the floor (or there is no dense hit), and no lexical hit holds every query term; 55000 for a tenant never calibrated. With with_report, leaves the floor, the mean and best similarity and the match in hybrid.explain_abstention.';

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
LANGUAGE sql STABLE
SET search_path = pg_catalog, public, pg_temp
AS $$
    SELECT CASE WHEN (SELECT b.stage FROM hybrid.branch b WHERE b.name = info ->> 'branch') = 'graph'
                THEN CASE WHEN rank IS NULL THEN 0::float8
                          -- what the graph adds to the row's own (fused) score
                          ELSE hybrid._graph_score((info -> 'hits' -> chunk_id ->> 'own')::float8, weight,
                                                   (info -> 'hits' -> chunk_id ->> 'seed_score')::float8,
                                                   (info ->> 'graph_decay')::float8, value)
                             - (info -> 'hits' -> chunk_id ->> 'own')::float8 END
                ELSE hybrid._fusion_term(fusion, weight, rrf_k, rank, hybrid._fusion_score(fusion, info ->> 'branch', value),
                                         (info ->> 'lo')::float8, (info ->> 'hi')::float8,
                                         (info ->> 'mean')::float8, (info ->> 'sd')::float8) END
$$;
COMMENT ON FUNCTION hybrid._explain_term(text, jsonb, double precision, double precision, text, integer, double precision) IS
'hybrid.explain_retrieve''s arithmetic of one branch''s term in a row''s score (hybrid._fusion_term for a list branch, hybrid._graph_score less own for the graph), from the branch''s entry in the report.';

-- hybrid._explain_bound: the bounds a fusion method normalizes one branch's scores against
CREATE OR REPLACE FUNCTION hybrid._explain_bound(fusion text, rrf_k double precision, info jsonb) RETURNS jsonb
LANGUAGE sql STABLE
SET search_path = pg_catalog, public, pg_temp
AS $$
    SELECT CASE
        WHEN info ? 'failed' THEN NULL
        WHEN b.stage = 'graph' THEN jsonb_build_object('graph_decay', info -> 'graph_decay',
                                                       'rule', 'seed score * graph_decay ^ hops')
        WHEN fusion = 'rrf' THEN jsonb_build_object('rrf_k', rrf_k, 'rule', '1 / (rrf_k + rank)')
        WHEN fusion = 'convex' THEN jsonb_build_object('lo', info -> 'lo', 'hi', info -> 'hi', 'rule', '(s - lo) / (hi - lo)')
        WHEN fusion = 'dbsf' THEN jsonb_build_object(
            'lo', (info ->> 'mean')::float8 - 3 * (info ->> 'sd')::float8,
            'hi', (info ->> 'mean')::float8 + 3 * (info ->> 'sd')::float8, 'rule', '(s - lo) / (hi - lo), clipped to 0..1')
        WHEN b.scale = 'score' THEN jsonb_build_object('k', b.blend_k, 'rule', 's / (s + k)')
        WHEN b.scale = 'distance' THEN jsonb_build_object('rule', 'the cosine similarity, 0 if negative')
        ELSE jsonb_build_object('rule', '1 / hops')
    END
    FROM hybrid.branch b WHERE b.name = info ->> 'branch'
$$;
COMMENT ON FUNCTION hybrid._explain_bound(text, double precision, jsonb) IS
'What hybrid.explain_retrieve shows as a branch''s bound: the numbers its scores are normalized against under fusion (convex: the list''s lowest and highest score; dbsf: mean -+ 3 sd; rrf: rrf_k; blend: the branch''s blend_k for a score, hybrid.branch; graph: graph_decay) and the rule.';

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
        -- with abstain: the floor, the mean and best similarity of the dense branch's ten best hits and whether a
        -- lexical hit held every term
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
                               x.r ->> 'chunk_id', (x.r -> 'ranks' ->> b.br)::integer, (x.r -> 'scores' ->> b.br)::float8))
                    FROM (SELECT e ->> 'branch' AS br, e AS info FROM jsonb_array_elements(v_branches) e
                          WHERE NOT e ? 'failed') b),
                -- per branch that found the row: its own score (cosine similarity, BM25 / ts_rank score, hops)
                -- and that score normalized as fusion normalizes it (the contribution at weight 1)
                'branch_scores', (
                    SELECT jsonb_object_agg(b.br, jsonb_build_object(
                               'raw', CASE WHEN b.br = 'graph' THEN (x.r -> 'scores' ->> b.br)::float8
                                           ELSE hybrid._branch_score(b.br, (x.r -> 'scores' ->> b.br)::float8) END,
                               'normalized', hybrid._explain_term(fusion, b.info, 1.0, rrf_k, x.r ->> 'chunk_id',
                                   (x.r -> 'ranks' ->> b.br)::integer, (x.r -> 'scores' ->> b.br)::float8)))
                    FROM (SELECT e ->> 'branch' AS br, e AS info FROM jsonb_array_elements(v_branches) e
                          WHERE NOT e ? 'failed') b
                    WHERE x.r -> 'ranks' ? b.br),
                'ranks', (SELECT jsonb_object_agg(g.name, x.r -> 'ranks' -> g.name) FROM hybrid.branch g))
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

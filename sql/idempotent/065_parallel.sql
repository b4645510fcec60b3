-- Parallel retrieval (pyhybrid.aio): the branches run on several connections sharing one snapshot, then
-- hybrid.fuse fuses their lists and hybrid.hydrate returns the rows, as hybrid.retrieve would.

-- hybrid.hydrate: the final rows of a fused list, under the visibility rule of hybrid.retrieve
CREATE OR REPLACE FUNCTION hybrid.hydrate(
    ids text[],
    scores double precision[],
    dense_ids text[] DEFAULT NULL,
    dense_values double precision[] DEFAULT NULL,
    lexical_ids text[] DEFAULT NULL,
    lexical_values double precision[] DEFAULT NULL,
    graph_ids text[] DEFAULT NULL,
    graph_values integer[] DEFAULT NULL,
    top_k integer DEFAULT 10,
    skip integer DEFAULT 0,
    per_document boolean DEFAULT false,
    siblings integer DEFAULT 0,
    with_graph_context boolean DEFAULT false)
RETURNS SETOF hybrid.retrieve_row
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
SET plan_cache_mode = force_custom_plan  -- v_key a constant: one partition planned
AS $$
DECLARE
    v_tenant text := hybrid._current_tenant();
    v_key integer := hybrid._tenant_key(v_tenant);
    v_acl text[] := hybrid._current_acl();
    v_all boolean := hybrid._acl_all();
    h_ids text[]; h_dr integer[]; h_lr integer[]; h_gr integer[]; h_dv double precision[]; h_lv double precision[];
    h_gv integer[]; h_sc double precision[];
BEGIN
    PERFORM hybrid._check_range('top_k', top_k, 1, 1000);
    PERFORM hybrid._check_range('skip', skip, 0, 10000 - top_k);
    PERFORM hybrid._check_range('siblings', siblings, 0, 20);
    PERFORM hybrid._check_flag('per_document', per_document);
    PERFORM hybrid._check_flag('with_graph_context', with_graph_context);
    PERFORM hybrid._check_scores('scores', scores);
    PERFORM hybrid._check_scores('dense_values', dense_values);
    PERFORM hybrid._check_scores('lexical_values', lexical_values);
    IF coalesce(cardinality(ids), 0) <> coalesce(cardinality(scores), 0) THEN
        RAISE EXCEPTION 'ids has % entries but scores has %; they must match', coalesce(cardinality(ids), 0),
            coalesce(cardinality(scores), 0) USING ERRCODE = '22023';
    END IF;
    IF cardinality(ids) > 30000 THEN
        RAISE EXCEPTION 'ids must hold at most 30000 ids (three branches of 10000), got %', cardinality(ids)
            USING ERRCODE = '22023';
    END IF;
    IF coalesce(cardinality(dense_ids), 0) <> coalesce(cardinality(dense_values), 0)
       OR coalesce(cardinality(lexical_ids), 0) <> coalesce(cardinality(lexical_values), 0)
       OR coalesce(cardinality(graph_ids), 0) <> coalesce(cardinality(graph_values), 0) THEN
        RAISE EXCEPTION 'each branch list needs one value per id (dense_ids / dense_values, lexical_ids / lexical_values, graph_ids / graph_values)'
            USING ERRCODE = '22023';
    END IF;
    IF greatest(cardinality(dense_ids), cardinality(lexical_ids), cardinality(graph_ids)) > 10000 THEN
        RAISE EXCEPTION 'a branch list must hold at most 10000 ids (per_source_k''s limit)' USING ERRCODE = '22023';
    END IF;
    IF v_tenant IS NULL OR v_key IS NULL THEN
        RETURN;  -- fail closed: no tenant context, no rows
    END IF;
    -- a branch's rank is the id's position in its list (1 = best), as hybrid.retrieve numbers them
    SELECT array_agg(f.id), array_agg(f.score), array_agg(d.r::integer), array_agg(l.r::integer), array_agg(g.r::integer),
           array_agg(d.v), array_agg(l.v), array_agg(g.v)
    INTO h_ids, h_sc, h_dr, h_lr, h_gr, h_dv, h_lv, h_gv
    FROM unnest(ids, scores) AS f(id, score)
    LEFT JOIN unnest(dense_ids, dense_values) WITH ORDINALITY AS d(id, v, r) ON d.id = f.id
    LEFT JOIN unnest(lexical_ids, lexical_values) WITH ORDINALITY AS l(id, v, r) ON l.id = f.id
    LEFT JOIN unnest(graph_ids, graph_values) WITH ORDINALITY AS g(id, v, r) ON g.id = f.id;
    RETURN QUERY SELECT * FROM hybrid._hydrate(v_key, v_tenant, v_acl, v_all, h_ids, h_sc, h_dr, h_lr, h_gr, h_dv, h_lv,
                                               h_gv, top_k, skip, per_document, siblings, with_graph_context);
END
$$;
COMMENT ON FUNCTION hybrid.hydrate(text[], double precision[], text[], double precision[], text[], double precision[],
                                   text[], integer[], integer, integer, boolean, integer, boolean) IS
'The rows hybrid.retrieve returns for a fused list the caller brings (ids with their fused scores, e.g. from hybrid.fuse; dense_ids / lexical_ids / graph_ids with their raw values: each row''s rank in a branch is its position there): only chunks the caller can see (its tenant, live, its ACL), per_document (the best chunk per document), skip then top_k rows by score then chunk_id, siblings and graph context as hybrid.retrieve adds them. An id the caller cannot see returns nothing. pyhybrid''s async client calls it after running the branches on several connections (pyhybrid.aio, parallel).';

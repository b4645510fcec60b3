-- Parallel retrieval (pyhybrid.aio): the branches run on several connections sharing one snapshot, then
-- hybrid.fuse fuses their lists and hybrid.hydrate returns the rows, as hybrid.retrieve would.

-- hybrid.hydrate: the final rows of a fused list, under the visibility rule of hybrid.retrieve
CREATE OR REPLACE FUNCTION hybrid.hydrate(
    ids text[],
    scores double precision[],
    lists jsonb DEFAULT NULL,
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
    v_tenant text; v_key integer;
    v_bad text;
    v_names text[];
    v_list integer[];
    v_ids text[];
    v_ranks integer[];
    v_vals double precision[];
    h_ids text[];
    h_sc double precision[];
BEGIN
    SELECT s.tenant, s.key INTO v_tenant, v_key FROM hybrid._scope() s;
    PERFORM hybrid._check_range('top_k', top_k, 1, 1000);
    PERFORM hybrid._check_range('skip', skip, 0, 10000 - top_k);
    PERFORM hybrid._check_range('siblings', siblings, 0, 20);
    PERFORM hybrid._check_flag('per_document', per_document);
    PERFORM hybrid._check_flag('with_graph_context', with_graph_context);
    PERFORM hybrid._check_scores('scores', scores);
    IF coalesce(cardinality(ids), 0) <> coalesce(cardinality(scores), 0) THEN
        RAISE EXCEPTION 'ids has % entries but scores has %; they must match', coalesce(cardinality(ids), 0),
            coalesce(cardinality(scores), 0) USING ERRCODE = '22023';
    END IF;
    IF cardinality(ids) > 30000 THEN
        RAISE EXCEPTION 'ids must hold at most 30000 ids (three branches of 10000), got %', cardinality(ids)
            USING ERRCODE = '22023';
    END IF;
    -- lists: {"<branch>": {"ids": [...], "values": [...]}, ...}, each list best first
    IF lists IS NOT NULL AND jsonb_typeof(lists) <> 'object' THEN
        RAISE EXCEPTION 'lists must be a JSON object of branch lists, {"dense": {"ids": [...], "values": [...]}, ...}'
            USING ERRCODE = '22023';
    END IF;
    SELECT l.key INTO v_bad FROM jsonb_each(coalesce(lists, '{}')) l
    WHERE NOT EXISTS (SELECT 1 FROM hybrid.branch b WHERE b.name = l.key) ORDER BY l.key LIMIT 1;
    IF FOUND THEN
        PERFORM hybrid._no_such('branch', v_bad);
    END IF;
    SELECT l.key INTO v_bad FROM jsonb_each(coalesce(lists, '{}')) l
    WHERE jsonb_typeof(l.value -> 'ids') IS DISTINCT FROM 'array' OR jsonb_typeof(l.value -> 'values') IS DISTINCT FROM 'array'
       OR jsonb_array_length(l.value -> 'ids') <> jsonb_array_length(l.value -> 'values')
       OR jsonb_array_length(l.value -> 'ids') > 10000
       OR EXISTS (SELECT 1 FROM jsonb_array_elements(l.value -> 'ids') x WHERE jsonb_typeof(x) <> 'string')
       OR EXISTS (SELECT 1 FROM jsonb_array_elements(l.value -> 'values') x
                  WHERE jsonb_typeof(x) <> 'number' OR abs(x::numeric) > 1e12)
    ORDER BY l.key LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'lists.%: must be {"ids": [strings], "values": [numbers between -1e12 and 1e12]}, as many values as ids, at most 10000',
            v_bad USING ERRCODE = '22023';
    END IF;
    IF v_tenant IS NULL OR v_key IS NULL THEN
        RETURN;  -- fail closed: no tenant context, no rows
    END IF;
    -- the lists in long form, in hybrid.branch's order; a rank is the id's place in its list (1 = best)
    SELECT array_agg(b.name ORDER BY b.position) INTO v_names
    FROM hybrid.branch b WHERE lists ? b.name;
    SELECT array_agg(array_position(v_names, l.key) ORDER BY array_position(v_names, l.key), x.r),
           array_agg(x.id ORDER BY array_position(v_names, l.key), x.r),
           array_agg(x.r::integer ORDER BY array_position(v_names, l.key), x.r),
           array_agg((l.value -> 'values' ->> (x.r::integer - 1))::float8 ORDER BY array_position(v_names, l.key), x.r)
    INTO v_list, v_ids, v_ranks, v_vals
    FROM jsonb_each(coalesce(lists, '{}')) l, jsonb_array_elements_text(l.value -> 'ids') WITH ORDINALITY x(id, r);
    -- the candidates by score, then id, as hybrid.retrieve orders them
    SELECT array_agg(f.id ORDER BY f.score DESC, f.id), array_agg(f.score ORDER BY f.score DESC, f.id) INTO h_ids, h_sc
    FROM unnest(ids, scores) AS f(id, score);
    RETURN QUERY SELECT * FROM hybrid._hydrate(v_key, v_tenant, hybrid._current_acl(), hybrid._acl_all(), h_ids, h_sc,
                                               coalesce(v_names, '{}'), coalesce(v_list, '{}'), coalesce(v_ids, '{}'),
                                               coalesce(v_ranks, '{}'), coalesce(v_vals, '{}'), top_k, skip, per_document,
                                               siblings, with_graph_context);
END
$$;
COMMENT ON FUNCTION hybrid.hydrate(text[], double precision[], jsonb, integer, integer, boolean, integer, boolean) IS
'The rows hybrid.retrieve returns for a fused list the caller brings (ids with their fused scores, e.g. from hybrid.fuse; lists: each branch''s list by name, {"dense": {"ids": [...], "values": [...]}, ...}, best first, its own measures as the branch returns them: a row''s rank in a branch is its place there): only chunks the caller can see (its tenant, live, its ACL), by score then id, per_document (the best chunk per document), skip then top_k rows, siblings and graph context as hybrid.retrieve adds them. An id the caller cannot see returns nothing. pyhybrid''s async client calls it after running the branches on several connections (pyhybrid.aio, parallel).';

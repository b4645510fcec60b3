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
BEGIN
    PERFORM hybrid._check_range('top_k', top_k, 1, 1000);
    PERFORM hybrid._check_range('skip', skip, 0, 10000 - top_k);
    PERFORM hybrid._check_range('siblings', siblings, 0, 20);
    PERFORM hybrid._check_flag('per_document', per_document);
    PERFORM hybrid._check_flag('with_graph_context', with_graph_context);
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
    RETURN QUERY
    -- a branch's rank is the id's position in its list (1 = best), as hybrid.retrieve numbers them
    WITH fused AS (
        SELECT f.id, f.score, d.r AS dr, l.r AS lr, g.r AS gr, d.v AS dv, l.v AS lv, g.v AS gv
        FROM unnest(ids, scores) AS f(id, score)
        LEFT JOIN unnest(dense_ids, dense_values) WITH ORDINALITY AS d(id, v, r) ON d.id = f.id
        LEFT JOIN unnest(lexical_ids, lexical_values) WITH ORDINALITY AS l(id, v, r) ON l.id = f.id
        LEFT JOIN unnest(graph_ids, graph_values) WITH ORDINALITY AS g(id, v, r) ON g.id = f.id
    ), hydrated AS (
        SELECT c.chunk_id, c.document_id, c.corpus_id, c.tenant_id, f.score, f.dr::integer AS dr, f.lr::integer AS lr,
               f.gr::integer AS gr, f.dv, f.lv, f.gv, c.content, c.metadata, c.acl_labels, c.position
        FROM fused f
        JOIN hybrid.chunk c ON c.tenant_key = v_key AND c.tenant_id = v_tenant AND c.chunk_id = f.id
         AND hybrid._visible(c.tenant_id, c.superseded, c.acl_labels, v_tenant, v_acl, v_all)
    ), collapsed AS (
        SELECT * FROM hydrated h
        WHERE NOT per_document
        UNION ALL
        SELECT * FROM (SELECT DISTINCT ON (h.corpus_id, h.document_id) h.* FROM hydrated h
                       WHERE per_document ORDER BY h.corpus_id, h.document_id, h.score DESC, h.chunk_id) x
    ), top AS (
        SELECT * FROM collapsed ORDER BY collapsed.score DESC, collapsed.chunk_id OFFSET skip LIMIT top_k
    )
    SELECT t.chunk_id, t.document_id, t.corpus_id, t.tenant_id, t.score, t.dr, t.lr, t.gr, t.dv, t.lv, t.gv,
           t.content, t.metadata, t.acl_labels, t.position,
           CASE WHEN with_graph_context
                THEN (SELECT gc.context FROM hybrid.graph_context(ARRAY[t.chunk_id]) gc) END,
           CASE WHEN siblings > 0 THEN (
                -- the nearest visible chunks of the same document before and after the hit, by position
                SELECT coalesce(jsonb_agg(jsonb_build_object('chunk_id', x.chunk_id, 'position', x.position,
                                                             'content', x.content) ORDER BY x.position, x.chunk_id), '[]')
                FROM ((SELECT s.chunk_id, s.position, s.content FROM hybrid.chunk s
                       WHERE s.tenant_key = v_key AND s.tenant_id = v_tenant AND s.corpus_id = t.corpus_id
                         AND s.document_id = t.document_id AND s.position < t.position
                         AND hybrid._visible(s.tenant_id, s.superseded, s.acl_labels, v_tenant, v_acl, v_all)
                       ORDER BY s.position DESC, s.chunk_id DESC LIMIT siblings)
                      UNION ALL
                      (SELECT s.chunk_id, s.position, s.content FROM hybrid.chunk s
                       WHERE s.tenant_key = v_key AND s.tenant_id = v_tenant AND s.corpus_id = t.corpus_id
                         AND s.document_id = t.document_id AND s.position > t.position
                         AND hybrid._visible(s.tenant_id, s.superseded, s.acl_labels, v_tenant, v_acl, v_all)
                       ORDER BY s.position, s.chunk_id LIMIT siblings)) x) END
    FROM top t
    ORDER BY t.score DESC, t.chunk_id;
END
$$;
COMMENT ON FUNCTION hybrid.hydrate(text[], double precision[], text[], double precision[], text[], double precision[],
                                   text[], integer[], integer, integer, boolean, integer, boolean) IS
'The rows hybrid.retrieve returns for a fused list the caller brings (ids with their fused scores, e.g. from hybrid.fuse; dense_ids / lexical_ids / graph_ids with their raw values: each row''s rank in a branch is its position there): only chunks the caller can see (its tenant, live, its ACL), per_document (the best chunk per document), skip then top_k rows by score then chunk_id, siblings and graph context as hybrid.retrieve adds them. An id the caller cannot see returns nothing. pyhybrid''s async client calls it after running the branches on several connections (pyhybrid.aio, parallel).';

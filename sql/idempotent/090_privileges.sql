-- Every privilege pyhybrid grants, in one place, derived from one allow-list. Roles get them through
-- hybrid_user (tenant login roles and, by membership, app roles). A function missing from the list
-- is callable by no one but its owner: a new internal function is closed until it is listed here.
-- tests/golden/privileges.txt holds the effective privileges that result; a test compares them.
GRANT USAGE ON SCHEMA hybrid TO hybrid_user;
GRANT SELECT ON hybrid.setting TO hybrid_user;
GRANT SELECT ON hybrid.tenant, hybrid.tenant_grant TO hybrid_user;
GRANT SELECT, INSERT, UPDATE, DELETE ON hybrid.corpus, hybrid.chunk TO hybrid_user;
GRANT USAGE ON TYPE hybrid.branch_hit, hybrid.retrieve_row TO hybrid_user;

REVOKE ALL ON ALL FUNCTIONS IN SCHEMA hybrid FROM PUBLIC;
REVOKE ALL ON FUNCTION public.hybrid_retrieve FROM PUBLIC;

DO $grants$
DECLARE
    fn text;
BEGIN
    -- a bare name where the function has one signature, else name(argument types)
    FOREACH fn IN ARRAY ARRAY[
        -- the API
        'public.hybrid_retrieve', 'hybrid.retrieve',
        'hybrid.search_dense(vector, integer, text[], jsonb, integer)',
        'hybrid.search_lexical(text, integer, text[], jsonb, text)',
        'hybrid.search_graph(text[], integer, integer, text[], jsonb)',
        'hybrid.rrf_fuse(jsonb, double precision[], double precision, integer)',
        'hybrid.graph_context(text[])',
        'hybrid.begin_ingest()', 'hybrid.finish_ingest(text)', 'hybrid.delete_document(text, text)',
        'hybrid.begin_edges()', 'hybrid.finish_edges()',
        'hybrid.embedding_dim()', 'hybrid.bm25_available()', 'hybrid.version()',
        -- helpers the API's invoker-rights functions and RLS policies call as the caller
        'hybrid._current_tenant()', 'hybrid._current_acl()', 'hybrid._acl_all()', 'hybrid._with_all_labels()',
        'hybrid._ensure_edge_label(text)', 'hybrid._scope_size(text[], jsonb, integer)', 'hybrid._or_tsquery(text)',
        'hybrid._bm25_ready()', 'hybrid._visible(text, boolean, text[], text, text[], boolean)',
        'hybrid._rrf_score(double precision[], double precision, integer[])',
        'hybrid._check_range(text, integer, integer, integer, text)',
        'hybrid._check_number(text, double precision, boolean)', 'hybrid._check_flag(text, boolean)'
    ] LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO hybrid_user',
                       CASE WHEN strpos(fn, '(') > 0 THEN fn::regprocedure ELSE fn::regproc::regprocedure END);
    END LOOP;
END
$grants$;

SELECT hybrid._secure_graph();

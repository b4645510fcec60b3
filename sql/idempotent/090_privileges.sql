-- Every privilege pyhybrid grants, in one place, derived from one allow-list. Roles get them through
-- hybrid_user (tenant login roles and, by membership, app roles). A function missing from the list
-- is callable by no one but its owner: a new internal function is closed until it is listed here.
-- tests/golden/privileges.txt holds the effective privileges that result; a test compares them.
GRANT USAGE ON SCHEMA hybrid TO hybrid_user;
GRANT SELECT ON hybrid.setting TO hybrid_user;
GRANT SELECT ON hybrid.tenant, hybrid.tenant_grant TO hybrid_user;
-- Tenant login roles hold no privilege on the tables with tenant data: the API functions read and write
-- them as hybrid_definer (under RLS, for the caller's tenant). A role that can read a table can EXPLAIN
-- ANALYZE around RLS's counts and hold locks on it; one that can write it can lock out every tenant.
-- Trusted app roles may still read them directly, under RLS.
REVOKE ALL ON hybrid.corpus, hybrid.chunk FROM hybrid_user;
GRANT SELECT ON hybrid.corpus, hybrid.chunk, hybrid.edge_type TO hybrid_app;
REVOKE ALL ON hybrid.edge_type FROM hybrid_user;
GRANT USAGE ON TYPE hybrid.branch_hit, hybrid.retrieve_row TO hybrid_user;
GRANT SELECT ON hybrid.branch TO hybrid_user, hybrid_definer;  -- the registry of branches: no tenant data

REVOKE ALL ON ALL FUNCTIONS IN SCHEMA hybrid FROM PUBLIC;
-- and from hybrid_user, so that an upgrade takes back what the allow-list no longer names (an upgraded
-- database's privileges equal a fresh install's)
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA hybrid FROM hybrid_user;
REVOKE ALL ON FUNCTION public.hybrid_retrieve FROM PUBLIC;

DO $grants$
DECLARE
    fn text;
BEGIN
    -- a bare name where the function has one signature, else name(argument types)
    FOREACH fn IN ARRAY ARRAY[
        -- the API
        'public.hybrid_retrieve', 'hybrid.retrieve', 'hybrid.explain_retrieve', 'hybrid.retrieve_many',
        'hybrid.fusion_methods()', 'hybrid.branches()',
        'hybrid.rrf_fuse(jsonb, double precision[], double precision, integer)',
        'hybrid.fuse(jsonb, double precision[], text, double precision, integer, jsonb)',
        'hybrid.graph_context(text[])', 'hybrid.hydrate', 'hybrid.lexical_strength(text, text[], integer)',
        'hybrid.calibrate_abstention(double precision, integer)',
        'hybrid.begin_ingest()', 'hybrid.finish_ingest(text)', 'hybrid.delete_document(text, text)',
        'hybrid.unchanged_documents(text, jsonb)',
        'hybrid.classify_ids(text[])',
        'hybrid.documents(text, text, text[])', 'hybrid.corpora()', 'hybrid.set_corpus_root(text, text)',
        'hybrid.use_embedder(text, jsonb, boolean)', 'hybrid.begin_reembed(text, jsonb)', 'hybrid.reembed_batch(text, integer)',
        'hybrid.reembed_chunks(text, text[], text[], text[])', 'hybrid.finish_reembed(text)', 'hybrid.corpus_embedders(text[])',
        'hybrid.prune_documents(text, text[], text, boolean)',
        'hybrid.begin_edges()', 'hybrid.finish_edges()', 'hybrid.edge_types()', 'hybrid.edge_type_label(text)',
        'hybrid.embedding_dim()', 'hybrid.bm25_available()', 'hybrid.version()', 'hybrid.content_hash',
        -- helpers the API's invoker-rights functions and RLS policies call as the caller
        'hybrid._current_tenant()', 'hybrid._only_tenant()', 'hybrid._current_acl()', 'hybrid._acl_all()', 'hybrid._with_all_labels()',
        'hybrid._may_write()', 'hybrid._check_writer()', 'hybrid._trusted(name)', 'hybrid._check_pool_writer()',
        'hybrid._entity_seen(text, text, text[], boolean)', 'hybrid._scope_size(integer, text[], jsonb, integer)', 'hybrid._or_tsquery(text, regconfig)',
        'hybrid._visible(text, boolean, text[], text, text[], boolean)',
        'hybrid._rrf_term(double precision, double precision, integer)',
        'hybrid._fusion_term(text, double precision, double precision, integer, double precision, double precision, double precision, double precision, double precision)',
        'hybrid._check_fusion(text)', 'hybrid._no_such(text, text)', 'hybrid._fuse_lists',
        'hybrid._branch_score(text, double precision)', 'hybrid._blend_score(text, double precision)',
        'hybrid._fusion_score(text, text, double precision)',
        'hybrid._lexical_strength(integer, integer, integer)', 'hybrid._term_match(text, text[])',
        'hybrid._graph_score(double precision, double precision, double precision, double precision, double precision)',
        'hybrid._explain_term(text, jsonb, double precision, double precision, text, integer, double precision)',
        'hybrid._explain_bound(text, double precision, jsonb)',
        'hybrid._check_range(text, integer, integer, integer, text)',
        'hybrid._check_number(text, double precision, boolean)', 'hybrid._check_flag(text, boolean)',
        'hybrid._check_text(text, text, integer)', 'hybrid._check_scores(text, double precision[])', 'hybrid._shown(text)',
        'hybrid._caller()', 'hybrid.register_edge_type(text)', 'hybrid._chunk_stage_columns()',
        'hybrid._stage_columns(text)'
    ] LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO hybrid_user',
                       CASE WHEN strpos(fn, '(') > 0 THEN fn::regprocedure ELSE fn::regproc::regprocedure END);
    END LOOP;
END
$grants$;

-- hybrid_definer, the owner of hybrid.finish_edges: what that function reads and calls as it (its
-- graph privileges come from hybrid._secure_graph). It is no member of hybrid_user.
GRANT USAGE ON SCHEMA hybrid TO hybrid_definer;
GRANT SELECT ON hybrid.setting, hybrid.tenant, hybrid.tenant_grant TO hybrid_definer;
GRANT UPDATE (abstain_floor) ON hybrid.tenant TO hybrid_definer;  -- hybrid.calibrate_abstention
GRANT SELECT, INSERT, UPDATE, DELETE ON hybrid.corpus, hybrid.chunk TO hybrid_definer;
GRANT SELECT, INSERT ON hybrid.edge_type TO hybrid_definer;
GRANT SELECT ON hybrid.chunk_audit_sample, hybrid.chunk_audit_sample_state TO hybrid_definer;  -- hybrid.search_dense's audit
-- the BM25 statistics: written by hybrid.chunk's statement triggers (definer rights), read by the SQL scorer for
-- the caller's tenant; no tenant role reads them (every tenant's vocabulary)
GRANT SELECT ON hybrid.bm25_tenant_stats, hybrid.bm25_term_stats, hybrid.bm25_audit TO hybrid_definer;
GRANT EXECUTE ON FUNCTION hybrid._caller(), hybrid._current_tenant(), hybrid._only_tenant(), hybrid._current_acl(), hybrid._acl_all(),
    hybrid._with_all_labels(), hybrid._edge_label(text, boolean), hybrid._may_write(), hybrid._check_writer(), hybrid._edge_types_seen(text[]),
    hybrid._trusted(name), hybrid._check_pool_writer(),
    hybrid._entities_seen(integer, text[], text, text[], boolean), hybrid._entity_seen(text, text, text[], boolean),
    hybrid._check_stage(text, text, text), hybrid._stage_columns(text), hybrid._chunk_stage_columns(),
    hybrid.embedding_dim(), hybrid.content_hash(text, integer, text, text[], jsonb, text),
    hybrid._scope_size(integer, text[], jsonb, integer), hybrid._or_tsquery(text, regconfig), hybrid._text_config(integer), hybrid.bm25_available(),
    hybrid._tenant_key(text), hybrid._pooled(integer), hybrid._writer_key(text), hybrid._scope(), hybrid._writer_scope(), hybrid._corpus_writer(text), hybrid._chunk_partition(integer), hybrid._analyze_partition(integer, bigint),
    hybrid._visible_chunk_ids(integer, text[], text[], jsonb, text, text[], boolean),
    hybrid._bm25_ready(regclass), hybrid._bm25_partition_index(integer), hybrid._bm25_scan_exact(regclass), hybrid._bm25_written(integer), hybrid._audit_sample_written(integer), hybrid._audit_sample_rows(regclass, integer),
    hybrid._visible(text, boolean, text[], text, text[], boolean),
    hybrid._rrf_term(double precision, double precision, integer), hybrid.rrf_fuse(jsonb, double precision[], double precision, integer),
    hybrid._check_range(text, integer, integer, integer, text), hybrid._check_number(text, double precision, boolean),
    hybrid._check_flag(text, boolean), hybrid._check_text(text, text, integer), hybrid._check_scores(text, double precision[]),
    hybrid._shown(text), hybrid.graph_context(text[]),
    hybrid._sparse(text), hybrid._sparse_rule(text), hybrid._check_tsvector_sizes(),
    hybrid._embedder_rule(jsonb), hybrid._embedder(jsonb, text), hybrid._same_embedder(jsonb, jsonb),
    hybrid._embedder_shown(jsonb), hybrid._writable_corpus(text, boolean, boolean),
    hybrid._lexical_hits(text, integer, text[], jsonb, text, text[]), hybrid._terms_held(tsvector, text[]),
    hybrid._bm25_scorer(integer), hybrid._bm25_sql_hits(integer, text, text[], boolean, text, integer, text[], jsonb, text[]),
    hybrid._bm25_index_hits(integer, text, text[], boolean, text, integer, text[], jsonb, text[], text),
    hybrid._matched_tsv_length(tsvector, tsquery), hybrid._bm25_fieldnorm(integer), hybrid._lexeme_tsquery(text[]),
    hybrid._bm25_must_match(text[], double precision[], double precision[], double precision, integer, integer),
    hybrid._bm25_sql_scored(integer, text, text[], boolean, text[], jsonb, tsquery, text[], double precision[], double precision[], double precision, tsquery, integer, integer),
    hybrid._graph_walk(text[], integer, integer, text[], jsonb, text[]), hybrid._edge_type_tables(text[]),
    hybrid._fusion_term(text, double precision, double precision, integer, double precision, double precision, double precision, double precision, double precision),
    hybrid._check_fusion(text), hybrid._no_such(text, text), hybrid.fusion_methods(), hybrid._branch_score(text, double precision), hybrid._blend_score(text, double precision),
    hybrid._fusion_score(text, text, double precision),
    hybrid._lexical_strength(integer, integer, integer), hybrid._term_match(text, text[]),
    hybrid._term_match_in(integer, text, text[], boolean, text, text[]),
    hybrid._graph_score(double precision, double precision, double precision, double precision, double precision),
    hybrid._hydrate(integer, text, text[], boolean, text[], double precision[], text[], integer[], text[], integer[],
                    double precision[], integer, integer, boolean, integer, boolean),
    hybrid._fuse_lists(text, double precision, text[], double precision[], integer[], text[], double precision[]),
    hybrid._graph_stage(text[], double precision[], text[], integer, integer, text[], double precision, double precision,
                        double precision, integer, boolean, text[], jsonb),
    hybrid._diversify(integer, text, text[], boolean, text[], double precision[], double precision, integer),
    hybrid._abstains(text, double precision[], boolean, boolean),
    hybrid._dense_plan(integer, text[], jsonb, integer, integer), hybrid._hnsw_dense_vectors(regclass), hybrid._dense_kind(integer), hybrid._ivfflat_plan(integer),
    hybrid._dense_statement(text, integer),
    hybrid._dense_index_list(integer, text, integer, integer, text, text[], boolean, text[], jsonb, vector, integer),
    hybrid._dense_audit_miss(integer, regclass, boolean, integer, text, text[], boolean, text[], jsonb, vector, double precision, text[]),
    hybrid._valid_dense_kind(text, integer, text), hybrid._default_dense_kind(integer),
    hybrid._explain_branch(text, timestamptz, text[], double precision[], double precision, integer, text) TO hybrid_definer;

-- hybrid.retrieve's stages, by name: their arguments grow with the branches (hybrid.branch)
GRANT EXECUTE ON FUNCTION hybrid._check_retrieve, hybrid._list_stage, hybrid._run_branch, hybrid._branch_plan TO hybrid_definer;

-- the loaders and every branch's search function (hybrid.branch, read here so that a new branch needs no line) run
-- as hybrid_definer (ALTER ... OWNER needs that role to hold CREATE on the schema meanwhile); a search function is
-- callable by hybrid_user too (a SECURITY DEFINER function reading the caller's tenant)
DO $owners$
DECLARE
    fn regprocedure;
BEGIN
    FOR fn IN SELECT b.search FROM hybrid.branch b WHERE b.search IS NOT NULL LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO hybrid_user, hybrid_definer', fn);
    END LOOP;
    FOREACH fn IN ARRAY ARRAY['hybrid.finish_ingest(text)', 'hybrid.delete_document(text, text)',
                              'hybrid.unchanged_documents(text, jsonb)',
                              'hybrid.classify_ids(text[])',
                              'hybrid.documents(text, text, text[])', 'hybrid.corpora()', 'hybrid.set_corpus_root(text, text)',
                              'hybrid.use_embedder(text, jsonb, boolean)', 'hybrid.begin_reembed(text, jsonb)',
                              'hybrid.reembed_batch(text, integer)', 'hybrid.reembed_chunks(text, text[], text[], text[])',
                              'hybrid.finish_reembed(text)', 'hybrid.corpus_embedders(text[])',
                              'hybrid.prune_documents(text, text[], text, boolean)',
                              'hybrid.finish_edges()', 'hybrid.register_edge_type(text)',
                              'hybrid.graph_context(text[])', 'hybrid.edge_types()', 'hybrid.edge_type_label(text)',
                              'hybrid._entity_seen(text, text, text[], boolean)', 'hybrid._term_match(text, text[])',
                              'hybrid.calibrate_abstention(double precision, integer)']::regprocedure[]
               || ('hybrid.retrieve'::regproc::regprocedure) || ('hybrid.hydrate'::regproc::regprocedure)
               || ARRAY(SELECT b.search FROM hybrid.branch b WHERE b.search IS NOT NULL ORDER BY b.position) LOOP
        IF (SELECT p.proowner FROM pg_proc p WHERE p.oid = fn) <> 'hybrid_definer'::regrole THEN
            GRANT CREATE ON SCHEMA hybrid TO hybrid_definer;
            EXECUTE format('ALTER FUNCTION %s OWNER TO hybrid_definer', fn);
            REVOKE CREATE ON SCHEMA hybrid FROM hybrid_definer;
        END IF;
    END LOOP;
END
$owners$;

-- The extensions' own functions: PUBLIC (so every tenant login role) may call only what pyhybrid's
-- invoker-rights code and RLS policies need. AGE's traversal functions (age_vle and friends) walk the
-- graph around RLS and age_vertex_stats crashes the backend on an unknown vertex id; pg_textsearch's
-- maintenance functions dump or summarise every tenant's index. Raw Cypher is therefore off for
-- hybrid_user roles: graph reads go through hybrid.search_graph and hybrid.graph_context. An extension
-- update (ALTER EXTENSION ... UPDATE) re-creates functions with PUBLIC EXECUTE: pyhybrid migrate --reapply
-- revokes them again, and tests/golden/privileges.txt shows what PUBLIC may still execute.
DO $extensions$
DECLARE
    fn regprocedure;
BEGIN
    IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'age') THEN
        EXECUTE 'REVOKE ALL ON ALL FUNCTIONS IN SCHEMA ag_catalog FROM PUBLIC';
        FOR fn IN
            SELECT p.oid FROM pg_proc p
            WHERE p.pronamespace = 'ag_catalog'::regnamespace AND p.proname = ANY (ARRAY[
                -- graphid comparisons: graph hops join the edge tables on start_id / end_id
                'graphid_eq', 'graphid_ne', 'graphid_lt', 'graphid_le', 'graphid_gt', 'graphid_ge',
                -- the label tables' RLS policies, index expressions and column defaults
                'agtype_object_field_text', 'agtype_access_operator', '_graphid', '_label_id', 'agtype_build_map'])
        LOOP
            EXECUTE format('REVOKE ALL ON FUNCTION %s FROM hybrid_user', fn);
            EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO hybrid_app, hybrid_definer', fn);
        END LOOP;
    END IF;
    IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'pg_textsearch') THEN
        -- scoring any text against the shared index (<@>, to_bm25query) is an oracle for every tenant's
        -- vocabulary: only the lexical branch, run as hybrid_definer for the caller's tenant, may score
        FOR fn IN
            SELECT p.oid FROM pg_proc p JOIN pg_depend d ON d.objid = p.oid AND d.classid = 'pg_proc'::regclass
                 AND d.deptype = 'e' JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'pg_textsearch'
        LOOP
            EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', fn);
            IF (SELECT p.proname FROM pg_proc p WHERE p.oid = fn) NOT IN
               ('bm25_dump_index', 'bm25_summarize_index', 'bm25_spill_index', 'bm25_force_merge') THEN
                EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO hybrid_definer', fn);
            END IF;
        END LOOP;
    END IF;
END
$extensions$;

SELECT hybrid._secure_graph();

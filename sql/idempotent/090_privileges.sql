-- Every privilege pyhybrid grants, in one place. Roles get them through hybrid_user.
GRANT USAGE ON SCHEMA hybrid TO hybrid_user;
GRANT SELECT ON hybrid.setting TO hybrid_user;
GRANT SELECT ON hybrid.tenant, hybrid.tenant_grant TO hybrid_user;
GRANT SELECT, INSERT, UPDATE, DELETE ON hybrid.corpus, hybrid.chunk TO hybrid_user;

REVOKE ALL ON ALL FUNCTIONS IN SCHEMA hybrid FROM PUBLIC;
GRANT EXECUTE ON FUNCTION
    hybrid._current_tenant(), hybrid._current_acl(), hybrid._acl_all(), hybrid._with_all_labels(), hybrid.embedding_dim(),
    hybrid.begin_ingest(), hybrid.finish_ingest(text), hybrid.delete_document(text, text),
    hybrid.begin_edges(), hybrid.finish_edges(), hybrid._ensure_edge_label(text),
    hybrid._scope_size(text[], jsonb, integer), hybrid._or_tsquery(text), hybrid.bm25_available(), hybrid._bm25_ready(),
    hybrid.search_dense(vector, integer, text[], jsonb, integer),
    hybrid.search_lexical(text, integer, text[], jsonb, text),
    hybrid.search_graph(text[], integer, integer, text[], jsonb),
    hybrid._check_fusion_args(double precision[], double precision, integer),
    hybrid.rrf_fuse(jsonb, double precision[], double precision, integer),
    hybrid.graph_context(text[]),
    hybrid.retrieve(vector, text, text[], text[], integer, integer, double precision, double precision,
                    double precision, double precision, jsonb, integer, text, integer, boolean, boolean)
TO hybrid_user;

REVOKE ALL ON FUNCTION public.hybrid_retrieve(vector, text, text[], text[], integer, integer, double precision,
    double precision, double precision, double precision, jsonb, integer, text, integer, boolean, boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.hybrid_retrieve(vector, text, text[], text[], integer, integer, double precision,
    double precision, double precision, double precision, jsonb, integer, text, integer, boolean, boolean) TO hybrid_user;

SELECT hybrid._secure_graph();

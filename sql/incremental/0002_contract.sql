-- pyhybrid 0.2: one contract. Runs exactly once per database (Alembic revision 0002).
-- Named row types for what the branches and hybrid_retrieve return, so their columns are written
-- once. The functions whose signature or result type changed are dropped here; sql/idempotent/
-- re-creates them (with their grants and comments) in the same transaction, at the end of the upgrade.

CREATE TYPE hybrid.branch_hit AS (
    chunk_id text,
    rank     integer,
    value    double precision
);
COMMENT ON TYPE hybrid.branch_hit IS
'A row of one branch''s ranked list: chunk_id, rank (1 = best) and the branch''s own measure: cosine distance (dense, lower is better), BM25 or ts_rank score (lexical, higher is better), hop count (graph).';

CREATE TYPE hybrid.retrieve_row AS (
    chunk_id        text,
    document_id     text,
    corpus_id       text,
    tenant_id       text,
    score           double precision,
    vector_rank     integer,
    keyword_rank    integer,
    graph_rank      integer,
    vector_distance double precision,
    keyword_score   double precision,
    graph_distance  integer,
    content         text,
    metadata        jsonb,
    acl_labels      text[],
    "position"      integer,
    graph_context   jsonb
);
COMMENT ON TYPE hybrid.retrieve_row IS
'A row of hybrid_retrieve: the chunk, its fused RRF score, its rank and raw measure in each branch (NULL where the branch did not find it), and its graph neighbourhood when asked for.';

DROP FUNCTION IF EXISTS public.hybrid_retrieve(vector, text, text[], text[], integer, integer, double precision,
    double precision, double precision, double precision, jsonb, integer, text, integer, boolean, boolean);
DROP FUNCTION IF EXISTS hybrid.retrieve(vector, text, text[], text[], integer, integer, double precision,
    double precision, double precision, double precision, jsonb, integer, text, integer, boolean, boolean);
DROP FUNCTION IF EXISTS hybrid.search_dense(vector, integer, text[], jsonb, integer);
DROP FUNCTION IF EXISTS hybrid.search_lexical(text, integer, text[], jsonb, text);
DROP FUNCTION IF EXISTS hybrid.search_graph(text[], integer, integer, text[], jsonb);
DROP FUNCTION IF EXISTS hybrid.rrf_fuse(jsonb, double precision[], double precision, integer);
DROP FUNCTION IF EXISTS hybrid._check_fusion_args(double precision[], double precision, integer);

COMMENT ON TABLE hybrid.setting IS
'Install-wide settings, one row a key: embedding_dim (the vector dimension, fixed at install), graph (the AGE graph''s name, where AGE is installed), version (the pyhybrid release the SQL comes from), sql_digest (a digest of sql/idempotent/, to re-apply it only when it changed), vector_index_suspended (present while hybrid.suspend_vector_index holds the HNSW index off for a bulk load), and the optional tuning keys exact_threshold (dense search is exact up to this many visible chunks) and hnsw_ef_search (the HNSW search breadth, default 100).';

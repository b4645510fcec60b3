-- pyhybrid 0.3: per-branch score floors (min_vector_score, min_keyword_score, min_graph_score) in
-- hybrid_retrieve. Runs exactly once per database (Alembic revision 0009). The functions whose argument
-- list changes are dropped here; sql/idempotent/ re-creates them (with grants and comments) in the same
-- transaction.

DROP FUNCTION IF EXISTS public.hybrid_retrieve(vector, text, text[], text[], integer, integer, double precision,
    double precision, double precision, double precision, jsonb, integer, text, integer, boolean, boolean,
    text, integer, integer, text[]);
DROP FUNCTION IF EXISTS hybrid.explain_retrieve(vector, text, text[], text[], integer, integer, double precision,
    double precision, double precision, double precision, jsonb, integer, text, integer, boolean, boolean,
    text, integer, integer, text[]);
DROP FUNCTION IF EXISTS hybrid.retrieve_many(vector[], text[], text[], text[], integer, integer, double precision,
    double precision, double precision, double precision, jsonb, integer, text, integer, boolean, boolean,
    text, integer, integer, text[]);
DROP FUNCTION IF EXISTS hybrid.retrieve(vector, text, text[], text[], integer, integer, double precision,
    double precision, double precision, double precision, jsonb, integer, text, integer, boolean, boolean,
    text, integer, integer, text[]);

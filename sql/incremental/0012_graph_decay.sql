-- pyhybrid 0.4: graph_decay in hybrid_retrieve (a chunk reached only through the graph scores below the
-- seed that reached it). Runs exactly once per database (Alembic revision 0010). The functions whose
-- argument list changes are dropped here; sql/idempotent/ re-creates them (with grants and comments) in
-- the same transaction.

DROP FUNCTION IF EXISTS public.hybrid_retrieve(vector, text, text[], text[], integer, integer, double precision,
    double precision, double precision, double precision, jsonb, integer, text, integer, boolean, boolean,
    text, integer, integer, text[], double precision, double precision, double precision);
DROP FUNCTION IF EXISTS hybrid.explain_retrieve(vector, text, text[], text[], integer, integer, double precision,
    double precision, double precision, double precision, jsonb, integer, text, integer, boolean, boolean,
    text, integer, integer, text[], double precision, double precision, double precision);
DROP FUNCTION IF EXISTS hybrid.retrieve_many(vector[], text[], text[], text[], integer, integer, double precision,
    double precision, double precision, double precision, jsonb, integer, text, integer, boolean, boolean,
    text, integer, integer, text[], double precision, double precision, double precision);
DROP FUNCTION IF EXISTS hybrid.retrieve(vector, text, text[], text[], integer, integer, double precision,
    double precision, double precision, double precision, jsonb, integer, text, integer, boolean, boolean,
    text, integer, integer, text[], double precision, double precision, double precision);

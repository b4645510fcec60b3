-- pyhybrid 0.3: fusion methods, pages, sibling chunks and edge-type filters in hybrid_retrieve.
-- Runs exactly once per database (Alembic revision 0005). The functions whose argument list changes
-- are dropped here; sql/idempotent/ re-creates them (with grants and comments) in the same transaction.

ALTER TYPE hybrid.retrieve_row ADD ATTRIBUTE siblings jsonb;
COMMENT ON TYPE hybrid.retrieve_row IS
'A row of hybrid_retrieve: the chunk, its fused score, its rank and raw measure in each branch (NULL where the branch did not find it), its graph neighbourhood and its neighbouring chunks of the same document when asked for.';

DROP FUNCTION IF EXISTS public.hybrid_retrieve(vector, text, text[], text[], integer, integer, double precision,
    double precision, double precision, double precision, jsonb, integer, text, integer, boolean, boolean);
DROP FUNCTION IF EXISTS hybrid.retrieve(vector, text, text[], text[], integer, integer, double precision,
    double precision, double precision, double precision, jsonb, integer, text, integer, boolean, boolean);
DROP FUNCTION IF EXISTS hybrid.search_graph(text[], integer, integer, text[], jsonb);

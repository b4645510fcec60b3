-- pyhybrid 0.4: term_coverage in hybrid_retrieve (a lexical list none of whose hits holds two of the
-- query's terms weighs less) and abstain (no rows when nothing clears the tenant's calibrated floor). Runs exactly once per database (Alembic revision 0013). The functions whose
-- argument list changes are dropped here; sql/idempotent/ re-creates them (with grants and comments) in
-- the same transaction.

DROP FUNCTION IF EXISTS public.hybrid_retrieve(vector, text, text[], text[], integer, integer, double precision,
    double precision, double precision, double precision, jsonb, integer, text, integer, boolean, boolean,
    text, integer, integer, text[], double precision, double precision, double precision, double precision);
DROP FUNCTION IF EXISTS hybrid.explain_retrieve(vector, text, text[], text[], integer, integer, double precision,
    double precision, double precision, double precision, jsonb, integer, text, integer, boolean, boolean,
    text, integer, integer, text[], double precision, double precision, double precision, double precision);
DROP FUNCTION IF EXISTS hybrid.retrieve_many(vector[], text[], text[], text[], integer, integer, double precision,
    double precision, double precision, double precision, jsonb, integer, text, integer, boolean, boolean,
    text, integer, integer, text[], double precision, double precision, double precision, double precision);
DROP FUNCTION IF EXISTS hybrid.retrieve(vector, text, text[], text[], integer, integer, double precision,
    double precision, double precision, double precision, jsonb, integer, text, integer, boolean, boolean,
    text, integer, integer, text[], double precision, double precision, double precision, double precision);
DROP FUNCTION IF EXISTS hybrid.documents(text, text);  -- document_ids added

-- the tenant's abstention floor (hybrid.calibrate_abstention; NULL until calibrated)
ALTER TABLE hybrid.tenant ADD COLUMN IF NOT EXISTS abstain_floor double precision;

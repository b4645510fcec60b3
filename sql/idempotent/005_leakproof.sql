-- Under RLS only leakproof operators can be index conditions. Two operators pyhybrid's searches
-- filter on are leakproof in fact but not marked so; marking them needs a superuser. Elsewhere the
-- searches stay correct, only slower (pyhybrid doctor reports it).
--  * tsvector @@ tsquery reads its two arguments and raises no data-dependent error: ts_rank search
--    can then use the GIN index instead of testing every row of the tenant.
--  * AGE's graphid comparisons compare two integers: edge lookups by start_id / end_id stay index
--    conditions (else every graph hop scans all edges).
DO $leakproof$
BEGIN
    IF NOT (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN
        RETURN;
    END IF;
    ALTER FUNCTION pg_catalog.ts_match_vq(tsvector, tsquery) LEAKPROOF;
    IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'age') THEN
        ALTER FUNCTION ag_catalog.graphid_eq(ag_catalog.graphid, ag_catalog.graphid) LEAKPROOF;
        ALTER FUNCTION ag_catalog.graphid_ne(ag_catalog.graphid, ag_catalog.graphid) LEAKPROOF;
        ALTER FUNCTION ag_catalog.graphid_lt(ag_catalog.graphid, ag_catalog.graphid) LEAKPROOF;
        ALTER FUNCTION ag_catalog.graphid_le(ag_catalog.graphid, ag_catalog.graphid) LEAKPROOF;
        ALTER FUNCTION ag_catalog.graphid_gt(ag_catalog.graphid, ag_catalog.graphid) LEAKPROOF;
        ALTER FUNCTION ag_catalog.graphid_ge(ag_catalog.graphid, ag_catalog.graphid) LEAKPROOF;
    END IF;
END
$leakproof$;

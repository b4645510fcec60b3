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

-- hybrid.chunk's foreign key to hybrid.corpus goes: its ON DELETE CASCADE runs on the partitioned parent
-- without the tenant key, so deleting a corpus (drop_tenant deletes a tenant's corpora) planned and
-- locked every tenant's partition and its indexes, 7 locks each: "out of shared memory" from about
-- 5,000 tenants (bench/results/tenants.md). Chunks reach a corpus only through hybrid.finish_ingest,
-- which creates the corpus first, and leave with their partition (hybrid.drop_tenant).
DO $fk$
DECLARE
    c name;
BEGIN
    FOR c IN SELECT conname FROM pg_constraint
             WHERE conrelid = 'hybrid.chunk'::regclass AND contype = 'f' AND confrelid = 'hybrid.corpus'::regclass LOOP
        EXECUTE format('ALTER TABLE hybrid.chunk DROP CONSTRAINT %I', c);
    END LOOP;
END
$fk$;

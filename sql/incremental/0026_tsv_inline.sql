-- pyhybrid 0.5: the chunk's tsvector kept in its row where the row stays small. Runs exactly once per database
-- (Alembic revision 0026).
--  * The SQL BM25 scorer, ts_rank and term coverage read each candidate's tsv; out of line (STORAGE EXTERNAL,
--    revision 0016) each read was a TOAST index probe and page reads: reading the tsv of one query's 354 candidates
--    at 9,657 chunks took 2.0 to 2.7 ms out of line and 0.6 ms in the row, of about 3.4 ms to score them.
--  * With 384-d vectors a row with its tsv in it is about 3.4 kB once the content goes out of line: two fit a page.
--    tsv becomes STORAGE MAIN (kept in the row unless the row would not fit a page) and each leaf partition's
--    toast_tuple_target 4000 (the row size above which PostgreSQL compresses and moves values out, 2032 by default:
--    the content goes first, then, only past a page, the tsv). New partitions copy the pool's setting
--    (hybrid._partition_table).
--  * Only where the vector leaves room: past 500 dimensions (2,008 bytes a vector) a row with its tsv would take a
--    page of its own, and tsv stays EXTERNAL.
--  * Catalog only, instant: rows written from now on. A row already written keeps its tsv out of line until it is
--    written again (re-ingest, a tenant's move, VACUUM FULL of its partition).
DO $$
DECLARE
    r record;
BEGIN
    IF (SELECT a.atttypmod FROM pg_attribute a
        WHERE a.attrelid = 'hybrid.chunk'::regclass AND a.attname = 'embedding') > 500 THEN
        RETURN;
    END IF;
    ALTER TABLE hybrid.chunk ALTER COLUMN tsv SET STORAGE MAIN;
    FOR r IN SELECT t.relid FROM pg_partition_tree('hybrid.chunk') t WHERE t.isleaf ORDER BY 1 LOOP
        EXECUTE format('ALTER TABLE %s SET (toast_tuple_target = 4000)', r.relid::regclass);
    END LOOP;
END
$$;

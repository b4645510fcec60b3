-- pyhybrid 0.4: the chunk's tsvector stored without a compression attempt (STORAGE EXTERNAL). Runs exactly
-- once per database (Alembic revision 0016). A 384-d chunk's row passes PostgreSQL's ~2 kB TOAST threshold
-- (the vector alone is 1,544 bytes, kept in the row: revision 0006), so each write first tries pglz on the
-- largest compressible values, the tsvector and the content, then moves them out of line. A tsvector
-- (lexemes and positions) rarely compresses by the quarter pglz requires: on the 1M benchmark's chunks no
-- tsvector was stored compressed, and pglz_compress took 10.5% of a bulk load's CPU samples (perf, 200,000
-- chunks). EXTERNAL moves it out of line as before, without the attempt. Catalog only, instant: rows
-- written from now on; new partitions copy it (hybrid.create_tenant: LIKE ... INCLUDING STORAGE).
ALTER TABLE hybrid.chunk ALTER COLUMN tsv SET STORAGE EXTERNAL;

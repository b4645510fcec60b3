-- pyhybrid 0.5: a bound on each lexeme's BM25 term score, so that the SQL scorer prunes by what a term can really
-- add. Runs exactly once per database (Alembic revision 0025).
--  * hybrid.bm25_term_stats gains max_tf (the most times the lexeme stands in one counted row) and min_dl_tf (the least
--    quantized length over term count, hybrid._bm25_fieldnorm(length) / tf, of those rows). A term's score grows with
--    tf and falls with length / tf, so idf * w(max_tf, min_dl_tf) bounds it for any mean length; by about half of the
--    k1 + 1 it was bounded by before, for the usual term that stands once in a row of about the mean length.
--  * Maxima and minima: a delete leaves them (still bounds, looser); a recount (hybrid.rebuild_bm25_stats) tightens
--    them. NULL: unknown, and the scorer bounds that term by k1 + 1 as before. The lexemes already counted are
--    bounded here from their rows.
--  * hybrid._bm25_counted returns the two beside df (a new row type: dropped here, sql/idempotent/ re-creates it).
ALTER TABLE hybrid.bm25_term_stats ADD COLUMN max_tf integer, ADD COLUMN min_dl_tf real;
COMMENT ON COLUMN hybrid.bm25_term_stats.max_tf IS
'The most times the lexeme stands in one of the tenant''s counted rows (since they were last recounted; a delete leaves it). NULL: unknown.';
COMMENT ON COLUMN hybrid.bm25_term_stats.min_dl_tf IS
'The least hybrid._bm25_fieldnorm(length) / tf over the tenant''s counted rows holding the lexeme (since they were last recounted; a delete leaves it). NULL: unknown.';
DROP FUNCTION IF EXISTS hybrid._bm25_counted(integer, regclass);
-- the rows already counted. This runs before sql/idempotent/ (hybrid._tsv_length and hybrid._bm25_fieldnorm may
-- not exist yet), so a row's length is summed here and taken at 0.8888, below its quantized length (which is the length
-- up to 39, then loses less than a ninth): a bound a little looser than the triggers keep, until a recount; the
-- length once a row (OFFSET 0), not again for each of its lexemes
UPDATE hybrid.bm25_term_stats d SET max_tf = b.max_tf, min_dl_tf = b.min_dl_tf
FROM (SELECT c.tenant_key, u.lexeme COLLATE "C" AS lexeme, max(coalesce(cardinality(u.positions), 1)) AS max_tf,
             min(l.dl / coalesce(cardinality(u.positions), 1))::real AS min_dl_tf
      FROM hybrid.chunk c
      CROSS JOIN LATERAL (SELECT sum(coalesce(cardinality(p.positions), 1)) * 0.8888 AS dl  -- under 8/9, rounding too
                          FROM unnest(c.tsv) p OFFSET 0) l
      CROSS JOIN LATERAL unnest(c.tsv) u
      GROUP BY 1, 2) b
WHERE d.tenant_key = b.tenant_key AND d.lexeme = b.lexeme;

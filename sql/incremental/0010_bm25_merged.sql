-- pyhybrid 0.4: the lexical branch trusts the BM25 index scan's own scores where the index has one
-- segment. pg_textsearch before 1.3.1 can under-report a row's score when the index has several
-- segments (timescale/pg_textsearch#365, fixed in 1.2.0) and return a row twice with two scores
-- (#417, fixed in 1.3.1), so the branch re-scores every fetched row with <@> (~0.2 ms a row). This
-- table says which indexes have one segment and no write since: hybrid.merge_bm25 records them,
-- hybrid.finish_ingest and hybrid.delete_document forget them.
CREATE TABLE hybrid.bm25_merged (
    index_oid oid PRIMARY KEY,
    segments  integer NOT NULL CHECK (segments >= 0),
    merged_at timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE hybrid.bm25_merged IS
'BM25 indexes with at most one segment and no write since hybrid.merge_bm25 left them so: their index scan''s scores are exact, and the lexical branch skips the re-score. No tenant data.';
REVOKE ALL ON hybrid.bm25_merged FROM PUBLIC;

-- hybrid._bm25_summary gains the segment count (a new OUT column)
DROP FUNCTION IF EXISTS hybrid._bm25_summary(regclass);

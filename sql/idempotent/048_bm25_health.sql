-- BM25 index health: find the pg_textsearch indexes a server restart left stale, and rebuild them.
--
-- pg_textsearch 1.0.0 keeps each index's recent documents and its corpus statistics in shared
-- memory. After a restart or a crash it reloads the documents from disk but not the statistics:
-- the index then answers nothing (or, after a write, with wrong scores) until it is rebuilt.
-- After a crash, documents that were only in memory are lost from the index altogether.
-- The signs, read from bm25_summarize_index with the owner's rights (a count seen through RLS
-- would be 0 for a non-superuser and would miss superseded and dead rows):
--  * an index whose statistics count fewer documents than it holds (memtable + segments);
--  * the sentinel, hybrid.bm25_sentinel, a two-row table whose index always has one document in
--    memory: after a restart its statistics fall behind that document, after a crash the document
--    is gone. Either says "shared memory was reset since the last heal": then every index with an
--    in-memory part (after a restart), or every non-empty index (after a crash), is stale.
-- Newer pg_textsearch versions that keep their statistics leave the sentinel healthy: then nothing
-- is ever rebuilt (a REINDEX at every start would be costly and leaks shared memory, pg_textsearch#470).

-- hybrid._bm25_summary: one BM25 index's document counts
CREATE OR REPLACE FUNCTION hybrid._bm25_summary(index_name regclass,
    OUT total_docs bigint, OUT memtable_docs bigint, OUT segment_docs bigint, OUT recovery_docids bigint)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET client_min_messages = warning
AS $$
DECLARE
    v_schema name := (SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
                      WHERE e.extname = 'pg_textsearch');
    v_text text;
BEGIN
    IF v_schema IS NULL THEN
        RETURN;
    END IF;
    EXECUTE format('SELECT %I.bm25_summarize_index($1)', v_schema) INTO v_text USING index_name::text;
    total_docs := (regexp_match(v_text, 'total_docs:\s*(\d+)'))[1]::bigint;
    memtable_docs := (regexp_match(v_text, 'Memtable:\s*terms:\s*\d+\s*documents:\s*(\d+)'))[1]::bigint;
    recovery_docids := (regexp_match(v_text, 'Recovery Pages:\s*pages:\s*\d+\s*docids:\s*(\d+)'))[1]::bigint;
    segment_docs := coalesce((regexp_match(v_text, 'Total:\s*\d+ segments?[^\n]*?(\d+) docs'))[1]::bigint, 0);
END
$$;
COMMENT ON FUNCTION hybrid._bm25_summary(regclass) IS
'The counts of one BM25 index from pg_textsearch''s bm25_summarize_index: documents in its corpus statistics, in memory, in segments, on recovery pages (NULL where the summary cannot be read). Admin only.';
REVOKE ALL ON FUNCTION hybrid._bm25_summary(regclass) FROM PUBLIC;

-- hybrid._bm25_restart_kind: what the sentinel says happened since the last heal
CREATE OR REPLACE FUNCTION hybrid._bm25_restart_kind() RETURNS text
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    s record;
BEGIN
    IF to_regclass('hybrid.bm25_sentinel_bm25') IS NULL THEN
        RETURN 'unknown';
    END IF;
    s := hybrid._bm25_summary('hybrid.bm25_sentinel_bm25');
    IF s.total_docs IS NULL THEN
        RETURN 'unknown';
    ELSIF s.memtable_docs = 0 AND s.recovery_docids = 0 THEN
        -- a crash: the sentinel's in-memory document is gone, not even on its recovery pages
        RETURN 'crash';
    ELSIF s.total_docs < s.memtable_docs + s.segment_docs THEN
        RETURN 'restart';
    END IF;
    RETURN NULL;
END
$$;
COMMENT ON FUNCTION hybrid._bm25_restart_kind() IS
'What the BM25 sentinel says happened since it was last reset: NULL (nothing), restart (shared memory reset, in-memory documents reloaded from disk), crash (in-memory documents lost), unknown (no sentinel, or an unreadable summary). Admin only.';
REVOKE ALL ON FUNCTION hybrid._bm25_restart_kind() FROM PUBLIC;

-- hybrid._bm25_sentinel_reset: (re)create the sentinel in its healthy state
CREATE OR REPLACE FUNCTION hybrid._bm25_sentinel_reset(fresh boolean DEFAULT false) RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET client_min_messages = warning
AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'pg_textsearch') THEN
        RETURN;
    END IF;
    IF fresh THEN
        -- a new table and index, with new OIDs (a database cloned from a template shares the
        -- template's: pg_textsearch keys its shared state by index OID, pg_textsearch#464)
        DROP TABLE IF EXISTS hybrid.bm25_sentinel;
    END IF;
    IF to_regclass('hybrid.bm25_sentinel') IS NULL THEN
        CREATE TABLE hybrid.bm25_sentinel (id integer PRIMARY KEY, body text NOT NULL);
        COMMENT ON TABLE hybrid.bm25_sentinel IS
            'Two rows whose BM25 index keeps one document in memory: it goes stale at every server restart that loses pg_textsearch state (see hybrid.bm25_status). No tenant data.';
        EXECUTE 'CREATE INDEX bm25_sentinel_bm25 ON hybrid.bm25_sentinel USING bm25 (body) WITH (text_config = ''simple'')';
    END IF;
    -- one document written into a segment by the rebuild, one kept in memory after it
    DELETE FROM hybrid.bm25_sentinel;
    INSERT INTO hybrid.bm25_sentinel VALUES (1, 'sentinel');
    REINDEX INDEX hybrid.bm25_sentinel_bm25;
    INSERT INTO hybrid.bm25_sentinel VALUES (2, 'sentinel');
END
$$;
COMMENT ON FUNCTION hybrid._bm25_sentinel_reset(boolean) IS
'(Re)creates the BM25 sentinel in its healthy state; fresh => true makes a new table. Admin only.';
REVOKE ALL ON FUNCTION hybrid._bm25_sentinel_reset(boolean) FROM PUBLIC;

-- hybrid.bm25_status: every BM25 index and whether it is stale (admin)
CREATE OR REPLACE FUNCTION hybrid.bm25_status()
RETURNS TABLE (index_name text, table_name text, total_docs bigint, memtable_docs bigint, segment_docs bigint,
               state text, reason text)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_restart text := hybrid._bm25_restart_kind();
    r record;
    s record;
BEGIN
    FOR r IN
        SELECT i.indexrelid::regclass AS idx, i.indrelid::regclass AS tbl
        FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am a ON a.oid = c.relam
        WHERE a.amname = 'bm25' AND c.relkind = 'i' AND i.indexrelid <> to_regclass('hybrid.bm25_sentinel_bm25')
        ORDER BY 1::text
    LOOP
        s := hybrid._bm25_summary(r.idx);
        index_name := r.idx::text;
        table_name := r.tbl::text;
        total_docs := s.total_docs;
        memtable_docs := s.memtable_docs;
        segment_docs := s.segment_docs;
        IF s.total_docs IS NULL OR s.memtable_docs IS NULL THEN
            state := 'unknown';
            reason := 'bm25_summarize_index gave no document counts (another pg_textsearch version?)';
        ELSIF s.total_docs < s.memtable_docs + s.segment_docs THEN
            state := 'stale';
            reason := format('its statistics count %s documents but it holds %s (state lost at a server restart)',
                             s.total_docs, s.memtable_docs + s.segment_docs);
        ELSIF v_restart = 'restart' AND (s.memtable_docs > 0 OR s.recovery_docids > 0) THEN
            state := 'stale';
            reason := 'the server restarted since the last check and this index''s in-memory part was reloaded from disk without its statistics';
        ELSIF v_restart = 'crash' AND (s.total_docs > 0 OR s.memtable_docs > 0 OR s.segment_docs > 0
                                       OR pg_relation_size(r.tbl) > 0) THEN
            -- what was only in memory is gone, and nothing on disk says how much: rebuild from the table
            state := 'stale';
            reason := 'the server crashed since the last check: documents held only in memory were lost';
        ELSE
            state := 'ok';
            reason := NULL;
        END IF;
        RETURN NEXT;
    END LOOP;
END
$$;
COMMENT ON FUNCTION hybrid.bm25_status() IS
'Every BM25 (pg_textsearch) index of the database, partitions included, with its document counts and state: ok, stale (lost its statistics at a server restart: rebuild with hybrid.heal_bm25()) or unknown. Admin only.';
REVOKE ALL ON FUNCTION hybrid.bm25_status() FROM PUBLIC;

-- hybrid.heal_bm25: rebuild the stale BM25 indexes (admin)
CREATE OR REPLACE FUNCTION hybrid.heal_bm25() RETURNS TABLE (index_name text, action text, reason text)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET client_min_messages = warning
AS $$
DECLARE
    r record;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'pg_textsearch') THEN
        RETURN;
    END IF;
    -- one healer at a time; readers that find the sentinel healthy wait for it to commit (hybrid._bm25_ready)
    PERFORM pg_advisory_xact_lock(hashtext('hybrid.heal_bm25'));
    FOR r IN SELECT * FROM hybrid.bm25_status() s WHERE s.state = 'stale' LOOP
        index_name := r.index_name;
        reason := r.reason;
        IF pg_has_role((SELECT c.relowner FROM pg_class c WHERE c.oid = r.index_name::regclass), 'USAGE') THEN
            EXECUTE format('REINDEX INDEX %s', r.index_name::regclass);
            action := 'rebuilt';
        ELSE
            action := format('skipped: %I does not own it', current_user);
        END IF;
        RETURN NEXT;
    END LOOP;
    -- last, so that a reader never finds the sentinel healthy before the indexes are
    IF hybrid._bm25_restart_kind() IS NOT NULL THEN
        PERFORM hybrid._bm25_sentinel_reset(false);
    END IF;
END
$$;
COMMENT ON FUNCTION hybrid.heal_bm25() IS
'Rebuilds (REINDEX) every BM25 index that hybrid.bm25_status() finds stale and resets the sentinel; returns what it rebuilt and why. Runs on its own at the first lexical search after a restart; pyhybrid server start, migrate and doctor --heal call it too. Admin only.';
REVOKE ALL ON FUNCTION hybrid.heal_bm25() FROM PUBLIC;

-- hybrid._bm25_ready: the query-time check: heal once per session after a restart
CREATE OR REPLACE FUNCTION hybrid._bm25_ready() RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_stale boolean;
BEGIN
    -- no backend outlives a restart or a crash, so one check per session is enough
    IF current_setting('hybrid.bm25_checked', true) = 'on' THEN
        RETURN true;
    END IF;
    -- pg_textsearch 1.0 keeps an index's newest documents and its statistics in memory, which WAL
    -- does not carry: a hot standby's BM25 answers from what it last read from disk, and a standby
    -- cannot rebuild. Never trust it there (the lexical branch ranks by ts_rank, with a WARNING).
    IF pg_is_in_recovery() THEN
        RETURN false;
    END IF;
    v_stale := hybrid._bm25_restart_kind() IS NOT NULL
               AND EXISTS (SELECT 1 FROM hybrid.bm25_status() s WHERE s.state = 'stale');
    IF v_stale THEN
        IF current_setting('transaction_read_only') = 'on' THEN
            RETURN false;
        END IF;
        PERFORM hybrid.heal_bm25();
    ELSE
        -- a healer that has reset the sentinel may not have committed its rebuilds yet
        PERFORM pg_advisory_xact_lock_shared(hashtext('hybrid.heal_bm25'));
    END IF;
    PERFORM set_config('hybrid.bm25_checked', 'on', false);
    RETURN true;
END
$$;
COMMENT ON FUNCTION hybrid._bm25_ready() IS
'Whether the BM25 indexes can be trusted in this session: after a server restart, the first call rebuilds the stale ones (as the schema owner, one session at a time); false where that cannot be done (a read-only transaction, a standby).';
REVOKE ALL ON FUNCTION hybrid._bm25_ready() FROM PUBLIC;

DO $sentinel$
BEGIN
    IF to_regclass('hybrid.bm25_sentinel') IS NULL THEN
        PERFORM hybrid._bm25_sentinel_reset(false);
    END IF;
END
$sentinel$;

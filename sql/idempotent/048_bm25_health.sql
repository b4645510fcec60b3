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

-- hybrid._textsearch_schema: where pg_textsearch's functions live (NULL: not installed)
CREATE OR REPLACE FUNCTION hybrid._textsearch_schema() RETURNS name
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'pg_textsearch'
$$;
COMMENT ON FUNCTION hybrid._textsearch_schema() IS
'The schema of the pg_textsearch extension''s functions, NULL where it is not installed.';
REVOKE ALL ON FUNCTION hybrid._textsearch_schema() FROM PUBLIC;

-- hybrid._bm25_summary: one BM25 index's document and segment counts
CREATE OR REPLACE FUNCTION hybrid._bm25_summary(index_name regclass,
    OUT total_docs bigint, OUT memtable_docs bigint, OUT segment_docs bigint, OUT recovery_docids bigint,
    OUT segments integer)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET client_min_messages = warning
AS $$
DECLARE
    v_schema name := hybrid._textsearch_schema();
    v_text text;
BEGIN
    IF v_schema IS NULL THEN
        RETURN;
    END IF;
    -- pg_textsearch 1.0's first access to an index after a restart (the summary included) takes the
    -- index's LWLock until the end of the transaction (a transaction over ~70 such indexes failed
    -- with "too many LWLocks taken"), and a REINDEX of that index in the same transaction leaves it
    -- held for the rest of the session (one session healing ~78 indexes failed so). Ending the read
    -- in an error rolls its subtransaction back, which releases every LWLock (pg_textsearch's own
    -- bookkeeping checks LWLockHeldByMe before it releases).
    BEGIN
        EXECUTE format('SELECT %I.bm25_summarize_index($1)', v_schema) INTO v_text USING index_name::text;
        RAISE SQLSTATE 'HYB25';
    EXCEPTION WHEN SQLSTATE 'HYB25' THEN
        NULL;
    END;
    total_docs := (regexp_match(v_text, 'total_docs:\s*(\d+)'))[1]::bigint;
    memtable_docs := (regexp_match(v_text, 'Memtable:\s*terms:\s*\d+\s*documents:\s*(\d+)'))[1]::bigint;
    recovery_docids := (regexp_match(v_text, 'Recovery Pages:\s*pages:\s*\d+\s*docids:\s*(\d+)'))[1]::bigint;
    segment_docs := coalesce((regexp_match(v_text, 'Total:\s*\d+ segments?[^\n]*?(\d+) docs'))[1]::bigint, 0);
    segments := CASE WHEN v_text IS NOT NULL
                     THEN coalesce((regexp_match(v_text, 'Total:\s*(\d+) segments?'))[1]::integer, 0) END;
END
$$;
COMMENT ON FUNCTION hybrid._bm25_summary(regclass) IS
'The counts of one BM25 index from pg_textsearch''s bm25_summarize_index: documents in its corpus statistics, in memory, in segments, on recovery pages, and its segments (NULL where the summary cannot be read). Admin only.';
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

-- hybrid._bm25_generation: the current generation (each shared-memory reset the sentinel revealed)
CREATE OR REPLACE FUNCTION hybrid._bm25_generation() RETURNS bigint
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan  -- no chunk read, planned once a session (hybrid._hnsw_dense_vectors)
AS $$ SELECT coalesce(max(g.generation), 0) FROM hybrid.bm25_generation g $$;
COMMENT ON FUNCTION hybrid._bm25_generation() IS
'The current BM25 generation: 0 at install, one more at each pg_textsearch shared-memory reset (restart or crash) the sentinel revealed. Admin only.';
REVOKE ALL ON FUNCTION hybrid._bm25_generation() FROM PUBLIC;

-- hybrid._bm25_begin_generation: record a reset the sentinel shows, once
CREATE OR REPLACE FUNCTION hybrid._bm25_begin_generation() RETURNS text
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET client_min_messages = warning
AS $$
DECLARE
    v_kind text := hybrid._bm25_restart_kind();
BEGIN
    IF v_kind IS NULL OR v_kind NOT IN ('restart', 'crash') THEN
        RETURN NULL;
    END IF;
    -- one session opens the generation; the others wait for it, then find the sentinel healthy
    -- (reading it waits for the reset's REINDEX anyway)
    PERFORM pg_advisory_xact_lock(hashtext('hybrid.heal_bm25'));
    v_kind := hybrid._bm25_restart_kind();
    IF v_kind IS NULL OR v_kind NOT IN ('restart', 'crash') THEN
        RETURN NULL;
    END IF;
    INSERT INTO hybrid.bm25_generation (generation, kind) VALUES (hybrid._bm25_generation() + 1, v_kind);
    -- indexes dropped since (a tenant dropped) are forgotten here, once per reset
    DELETE FROM hybrid.bm25_index_checked c WHERE NOT EXISTS (SELECT 1 FROM hybrid._bm25_indexes() x WHERE x.index_name = c.index_oid);
    PERFORM hybrid._bm25_sentinel_reset(false);
    RETURN v_kind;
END
$$;
COMMENT ON FUNCTION hybrid._bm25_begin_generation() IS
'When the BM25 sentinel shows a shared-memory reset (restart or crash), opens a new generation and resets the sentinel: from then on every BM25 index not checked in this generation is checked (and rebuilt if stale) at its next use or heal. Returns the kind of reset, or NULL. Admin only.';
REVOKE ALL ON FUNCTION hybrid._bm25_begin_generation() FROM PUBLIC;

-- hybrid._bm25_check: one index's counts and state (read only)
CREATE OR REPLACE FUNCTION hybrid._bm25_check(index_name regclass, pending text DEFAULT NULL,
    OUT total_docs bigint, OUT memtable_docs bigint, OUT segment_docs bigint, OUT state text, OUT reason text)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_checked bigint := coalesce((SELECT c.generation FROM hybrid.bm25_index_checked c
                                  WHERE c.index_oid = _bm25_check.index_name), 0);
    v_since text;  -- the worst reset since the index was last checked: crash, restart or NULL
    s record;
BEGIN
    -- pending: a reset the sentinel shows that no generation records yet (a read-only caller)
    SELECT CASE WHEN bool_or(k = 'crash') THEN 'crash' WHEN bool_or(k = 'restart') THEN 'restart' END
    INTO v_since
    FROM (SELECT g.kind AS k FROM hybrid.bm25_generation g WHERE g.generation > v_checked
          UNION ALL SELECT pending) x;
    s := hybrid._bm25_summary(index_name);
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
    ELSIF v_since = 'crash' AND (s.total_docs > 0 OR s.memtable_docs > 0 OR s.segment_docs > 0
                                 OR pg_relation_size((SELECT i.indrelid FROM pg_index i WHERE i.indexrelid = index_name)) > 0) THEN
        -- what was only in memory is gone, and nothing on disk says how much: rebuild from the table
        state := 'stale';
        reason := 'the server crashed since this index was last checked: documents held only in memory were lost';
    ELSIF v_since IS NOT NULL AND (s.memtable_docs > 0 OR s.recovery_docids > 0) THEN
        state := 'stale';
        reason := 'the server restarted since this index was last checked, and its in-memory part was reloaded from disk without its statistics';
    ELSE
        state := 'ok';
        reason := NULL;
    END IF;
END
$$;
COMMENT ON FUNCTION hybrid._bm25_check(regclass, text) IS
'One BM25 index''s document counts and state (ok, stale, unknown) from its summary and the resets since it was last checked; pending: a reset the sentinel shows that no generation records yet. Changes nothing. Admin only.';
REVOKE ALL ON FUNCTION hybrid._bm25_check(regclass, text) FROM PUBLIC;

-- hybrid._bm25_reindex: rebuild one BM25 index
CREATE OR REPLACE FUNCTION hybrid._bm25_reindex(index_name regclass) RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_workers text;
BEGIN
    BEGIN
        EXECUTE format('REINDEX INDEX %s', index_name);
    EXCEPTION WHEN SQLSTATE '53000' THEN
        -- pg_textsearch builds an index of 100,000 rows or more in parallel and fails when no
        -- worker can start ("could not launch any workers": every slot taken, or
        -- max_parallel_workers 0), where PostgreSQL's own builds go on alone: build it alone
        v_workers := current_setting('max_parallel_maintenance_workers');
        PERFORM set_config('max_parallel_maintenance_workers', '0', true);
        EXECUTE format('REINDEX INDEX %s', index_name);
        PERFORM set_config('max_parallel_maintenance_workers', v_workers, true);
    END;
    -- possibly a parallel build, whose scan scores were not measured: re-scored until merge_bm25; and its
    -- statistics counted afresh, so an audit's verdict on the old build no longer holds
    DELETE FROM hybrid.bm25_merged m WHERE m.index_oid = index_name;
    DELETE FROM hybrid.bm25_audit a WHERE a.index_oid = index_name;
END
$$;
COMMENT ON FUNCTION hybrid._bm25_reindex(regclass) IS
'REINDEX of one BM25 index (built without parallel workers where none can start); forgets that it was merged (hybrid.bm25_merged) and its last audit (hybrid.bm25_audit). Admin only.';
REVOKE ALL ON FUNCTION hybrid._bm25_reindex(regclass) FROM PUBLIC;

-- hybrid._bm25_heal_index: check one index in the current generation, rebuild it if stale
CREATE OR REPLACE FUNCTION hybrid._bm25_heal_index(target regclass, unchecked_only boolean DEFAULT false)
RETURNS TABLE (index_name text, action text, reason text)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET client_min_messages = warning
AS $$
DECLARE
    v_index regclass := target;
    v_gen bigint := hybrid._bm25_generation();
    s record;
BEGIN
    IF v_index IS NULL THEN  -- dropped meanwhile
        RETURN;
    END IF;
    -- one healer per index; a second one waits, then finds it checked
    PERFORM pg_advisory_xact_lock(hashtext('hybrid.heal_bm25:' || v_index::oid::text));
    IF unchecked_only AND coalesce((SELECT c.generation FROM hybrid.bm25_index_checked c
                                    WHERE c.index_oid = v_index), 0) >= v_gen THEN
        RETURN;
    END IF;
    s := hybrid._bm25_check(v_index);
    IF s.state = 'stale' THEN
        index_name := v_index::text;
        reason := s.reason;
        IF NOT pg_has_role((SELECT c.relowner FROM pg_class c WHERE c.oid = v_index), 'USAGE') THEN
            action := format('skipped: %I does not own it', current_user);
            RETURN NEXT;
            RETURN;
        END IF;
        PERFORM hybrid._bm25_reindex(v_index);
        action := 'rebuilt';
        RETURN NEXT;
    END IF;
    INSERT INTO hybrid.bm25_index_checked AS c (index_oid, generation) VALUES (v_index, v_gen)
    ON CONFLICT (index_oid) DO UPDATE SET generation = excluded.generation, checked_at = now();
END
$$;
COMMENT ON FUNCTION hybrid._bm25_heal_index(regclass, boolean) IS
'Checks one BM25 index and rebuilds (REINDEX) it if stale, then records it as checked in the current generation; unchecked_only: do nothing if it was checked in this generation already. Returns a row only for a stale index (rebuilt, or skipped with the reason). Admin only.';
REVOKE ALL ON FUNCTION hybrid._bm25_heal_index(regclass, boolean) FROM PUBLIC;

-- hybrid._bm25_indexes: every BM25 index but the sentinel's
CREATE OR REPLACE FUNCTION hybrid._bm25_indexes() RETURNS TABLE (index_name regclass, table_name regclass)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT i.indexrelid::regclass, i.indrelid::regclass
    FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am a ON a.oid = c.relam
    WHERE a.amname = 'bm25' AND c.relkind = 'i' AND i.indexrelid <> coalesce(to_regclass('hybrid.bm25_sentinel_bm25'), 0)
      -- not the pool's leaves': no pooled tenant is scored through them (hybrid._bm25_scorer), so a stale one is
      -- neither read nor worth a rebuild
      AND i.indrelid NOT IN (SELECT h.inhrelid FROM pg_inherits h WHERE h.inhparent = to_regclass('hybrid.chunk_pool'))
    ORDER BY 1::text
$$;
COMMENT ON FUNCTION hybrid._bm25_indexes() IS
'Every BM25 (pg_textsearch) index of the database, partitions included, but the sentinel''s and those of the pool''s leaves (never read: pooled tenants are scored by the SQL scorer). Admin only.';
REVOKE ALL ON FUNCTION hybrid._bm25_indexes() FROM PUBLIC;

-- hybrid.bm25_status: every BM25 index and whether it is stale (admin)
CREATE OR REPLACE FUNCTION hybrid.bm25_status()
RETURNS TABLE (index_name text, table_name text, total_docs bigint, memtable_docs bigint, segment_docs bigint,
               state text, reason text)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_pending text := hybrid._bm25_restart_kind();
    r record;
    s record;
BEGIN
    FOR r IN SELECT * FROM hybrid._bm25_indexes() LOOP
        s := hybrid._bm25_check(r.index_name, CASE WHEN v_pending IN ('restart', 'crash') THEN v_pending END);
        index_name := r.index_name::text;
        table_name := r.table_name::text;
        total_docs := s.total_docs;
        memtable_docs := s.memtable_docs;
        segment_docs := s.segment_docs;
        state := s.state;
        reason := s.reason;
        RETURN NEXT;
    END LOOP;
END
$$;
COMMENT ON FUNCTION hybrid.bm25_status() IS
'Every BM25 (pg_textsearch) index of the database, partitions included, with its document counts and state: ok, stale (lost its statistics at a server restart: rebuilt at its next search, or by hybrid.heal_bm25()) or unknown. Changes nothing. Admin only.';
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
    PERFORM hybrid._bm25_begin_generation();
    FOR r IN SELECT x.index_name FROM hybrid._bm25_indexes() x LOOP
        RETURN QUERY SELECT * FROM hybrid._bm25_heal_index(r.index_name);
    END LOOP;
END
$$;
COMMENT ON FUNCTION hybrid.heal_bm25() IS
'Rebuilds (REINDEX) every BM25 index that a server restart left stale and is not rebuilt yet; returns what it rebuilt and why. Each tenant''s first lexical search after a restart rebuilds that tenant''s index on its own; pyhybrid server start, migrate and doctor --heal heal them all, one transaction per index. Admin only.';
REVOKE ALL ON FUNCTION hybrid.heal_bm25() FROM PUBLIC;

-- hybrid._bm25_ready: the query-time check of one index, rebuilt here if a restart left it stale
DROP FUNCTION IF EXISTS hybrid._bm25_ready();
CREATE OR REPLACE FUNCTION hybrid._bm25_ready(index_name regclass) RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- its statements and the health functions it calls read no chunk: planned once a session (hybrid._hnsw_dense_vectors)
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    v_read_only boolean := current_setting('transaction_read_only') = 'on';
    v_pending text;
    r record;
BEGIN
    IF index_name IS NULL THEN
        RETURN false;
    END IF;
    -- pg_textsearch before 1.3.0 keeps an index's newest documents and its statistics in memory, which WAL
    -- does not carry: a hot standby's BM25 answers from what it last read from disk, and a standby
    -- cannot rebuild. Never trust it there (the exact SQL scorer answers). From 1.3.0 neither a restart nor a
    -- standby loses anything: no check
    IF pg_is_in_recovery() AND NOT hybrid._bm25_fixed('standby') THEN
        RETURN false;
    ELSIF hybrid._bm25_fixed('restart') THEN
        RETURN true;
    END IF;
    -- no backend outlives a restart or a crash: the sentinel is read once per session
    IF current_setting('hybrid.bm25_checked', true) IS DISTINCT FROM 'on' THEN
        v_pending := hybrid._bm25_restart_kind();
        IF v_pending IN ('restart', 'crash') AND NOT v_read_only THEN
            PERFORM hybrid._bm25_begin_generation();
            v_pending := NULL;
        END IF;
        IF v_pending IN ('restart', 'crash') THEN
            -- a read-only transaction cannot record the reset: judge this index with it in mind
            RETURN (SELECT s.state <> 'stale' FROM hybrid._bm25_check(index_name, v_pending) s);
        END IF;
        PERFORM set_config('hybrid.bm25_checked', 'on', false);
    END IF;
    -- the common case: the index was checked since the last reset (two index lookups). A session
    -- that found the sentinel reset by another one reads the new generation once that one commits
    -- (the reset's REINDEX of the sentinel holds readers until then); under REPEATABLE READ a
    -- snapshot taken before that commit still shows the old generation, for that one transaction.
    IF coalesce((SELECT c.generation FROM hybrid.bm25_index_checked c WHERE c.index_oid = _bm25_ready.index_name), 0)
       >= hybrid._bm25_generation() THEN
        RETURN true;
    END IF;
    IF v_read_only THEN
        RETURN (SELECT s.state <> 'stale' FROM hybrid._bm25_check(index_name) s);
    END IF;
    FOR r IN SELECT * FROM hybrid._bm25_heal_index(index_name, unchecked_only => true) LOOP
        IF r.action <> 'rebuilt' THEN
            RETURN false;
        END IF;
    END LOOP;
    RETURN true;
END
$$;
COMMENT ON FUNCTION hybrid._bm25_ready(regclass) IS
'Whether one BM25 index can be trusted: after a server restart, the first call for it rebuilds it if stale (as the schema owner, one session at a time, that index alone); false where that cannot be done (a read-only transaction, a standby).';
REVOKE ALL ON FUNCTION hybrid._bm25_ready(regclass) FROM PUBLIC;

-- hybrid._bm25_version: the loaded pg_textsearch's version as integers
CREATE OR REPLACE FUNCTION hybrid._bm25_version() RETURNS integer[]
LANGUAGE sql STABLE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
    -- the library's own version (the SQL objects' extversion can lag an upgraded binary)
    SELECT string_to_array(substring(coalesce(current_setting('pg_textsearch.library_version', true),
                                              (SELECT e.extversion FROM pg_extension e WHERE e.extname = 'pg_textsearch'))
                                     FROM '^[0-9]+(?:\.[0-9]+)*'), '.')::integer[]
$$;
COMMENT ON FUNCTION hybrid._bm25_version() IS
'The loaded pg_textsearch library''s version as an integer array ({1,0,0}), NULL without the extension.';
REVOKE ALL ON FUNCTION hybrid._bm25_version() FROM PUBLIC;

-- hybrid._bm25_fixed: whether the loaded pg_textsearch fixed a 1.0.0 bug pyhybrid works around
CREATE OR REPLACE FUNCTION hybrid._bm25_fixed(bug text, version integer[] DEFAULT hybrid._bm25_version())
RETURNS boolean
LANGUAGE sql STABLE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
    -- the releases that fixed them (shared/DESIGN.md, pg_textsearch's changelog): a fixed server skips the workaround
    SELECT coalesce((SELECT _bm25_fixed.version >= f.fixed_in
                     FROM (VALUES ('restart', ARRAY[1, 3, 0]),    -- statistics lost at a restart (#374: memtable on disk)
                                  ('standby', ARRAY[1, 3, 0]),    -- a hot standby's index not current (#342, #347, #374)
                                  ('rescan', ARRAY[1, 3, 1]),     -- partial or duplicate scan scores (#365, #417)
                                  ('write_lock', ARRAY[1, 1, 0])  -- a writer holds the index to its end (#307)
                          ) f(bug, fixed_in)
                     WHERE f.bug = _bm25_fixed.bug), false)
$$;
COMMENT ON FUNCTION hybrid._bm25_fixed(text, integer[]) IS
'Whether pg_textsearch at version (default: the loaded library''s) fixed a bug of 1.0.0 that pyhybrid works around: restart (an index''s statistics lost at a server restart: the heal), standby (a hot standby''s index not current: the SQL scorer answers there), rescan (a scan''s partial or duplicate scores on several segments: the re-score and the serial builds), write_lock (a transaction that wrote to an index holds its lock, beyond every timeout, to its end: hybrid._check_pool_writer). False for an unknown bug or without pg_textsearch.';
REVOKE ALL ON FUNCTION hybrid._bm25_fixed(text, integer[]) FROM PUBLIC;

-- hybrid._bm25_record_segments: record whether an index has at most one segment (caller holds writers off)
CREATE OR REPLACE FUNCTION hybrid._bm25_record_segments(index_name regclass) RETURNS integer
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    s record := hybrid._bm25_summary(index_name);
BEGIN
    IF s.segments IS NOT NULL AND s.segments <= 1 AND s.memtable_docs = 0 THEN
        INSERT INTO hybrid.bm25_merged AS m (index_oid, segments) VALUES (index_name, s.segments)
        ON CONFLICT (index_oid) DO UPDATE SET segments = excluded.segments, merged_at = now();
    ELSE
        DELETE FROM hybrid.bm25_merged m WHERE m.index_oid = index_name;
    END IF;
    RETURN s.segments;
END
$$;
COMMENT ON FUNCTION hybrid._bm25_record_segments(regclass) IS
'Reads one BM25 index''s segments and records it in hybrid.bm25_merged when it has at most one and nothing in memory (else forgets it); returns the segment count. The caller holds writers off (a SHARE lock on the table, as REINDEX and hybrid.merge_bm25 do). Admin only.';
REVOKE ALL ON FUNCTION hybrid._bm25_record_segments(regclass) FROM PUBLIC;

-- hybrid._bm25_written: a write to a tenant's partition forgets that its index was merged
CREATE OR REPLACE FUNCTION hybrid._bm25_written(tenant_key integer) RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER  -- plpgsql: hybrid._bm25_partition_index comes later (050_search.sql)
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    DELETE FROM hybrid.bm25_merged m WHERE m.index_oid = to_regclass(hybrid._bm25_partition_index(_bm25_written.tenant_key));
    PERFORM hybrid._audit_sample_written(_bm25_written.tenant_key);  -- and the dense audit's cached sample
END
$$;
COMMENT ON FUNCTION hybrid._bm25_written(integer) IS
'Called by every writer of a tenant''s chunks (hybrid.finish_ingest, hybrid.delete_document): its partition''s BM25 index may have new segments or documents in memory, so the lexical branch re-scores until the next hybrid.merge_bm25; and the dense audit''s cached sample is forgotten (hybrid._audit_sample_written).';
REVOKE ALL ON FUNCTION hybrid._bm25_written(integer) FROM PUBLIC;

-- hybrid._bm25_scan_exact: whether an index scan's own scores equal <@>'s
CREATE OR REPLACE FUNCTION hybrid._bm25_scan_exact(index_name regclass) RETURNS boolean
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan  -- no chunk read, planned once a session (hybrid._hnsw_dense_vectors)
AS $$
    -- before 1.2.0 a segment's multi-term scan can leave a term out of a row's score
    -- (timescale/pg_textsearch#365) and before 1.3.1 a scan can return a row twice with two scores
    -- (#417); on 1.0.0 they equal <@>'s on one segment that a serial rebuild wrote (hybrid.merge_bm25)
    SELECT hybrid._bm25_fixed('rescan')
        OR EXISTS (SELECT 1 FROM hybrid.bm25_merged m WHERE m.index_oid = _bm25_scan_exact.index_name AND m.segments <= 1)
$$;
COMMENT ON FUNCTION hybrid._bm25_scan_exact(regclass) IS
'Whether the lexical branch may take a BM25 index scan''s own scores (bm25_get_current_score()) instead of re-scoring each row with <@>: pg_textsearch 1.3.1 or later, or an index recorded in hybrid.bm25_merged (one segment, no write since).';
REVOKE ALL ON FUNCTION hybrid._bm25_scan_exact(regclass) FROM PUBLIC;

-- hybrid._bm25_build_memory: maintenance_work_mem for a serial rebuild of a partition's BM25 index
CREATE OR REPLACE FUNCTION hybrid._bm25_build_memory(part regclass) RETURNS bigint
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
-- pg_textsearch 1.0's serial build writes a segment each time its postings fill maintenance_work_mem: at the default
-- 64MB a 100,000-chunk tenant of ~110 words a chunk was rebuilt as two segments (70,612 and 29,388 documents, ~8.6
-- bytes a word of text), so its scan's scores could not be taken; at 256MB, one (measured). 16 bytes a word of the
-- tenant's text (its statistics' total length), at least the setting, at most 8GB (hybrid._hnsw_build_memory's cap)
AS $$ SELECT greatest(pg_size_bytes(current_setting('maintenance_work_mem')), least(pg_size_bytes('8GB'),
          16 * coalesce((SELECT s.total_len FROM hybrid.bm25_tenant_stats s
                         WHERE s.tenant_key = substring((SELECT c.relname FROM pg_class c WHERE c.oid = part)
                                                        FROM '^chunk_p([0-9]+)$')::integer), 0))) $$;
COMMENT ON FUNCTION hybrid._bm25_build_memory(regclass) IS
'The maintenance_work_mem hybrid.merge_bm25 rebuilds a partition''s BM25 index with, in bytes: 16 a word of its tenant''s text (hybrid.bm25_tenant_stats), at least the setting and at most 8GB, so that pg_textsearch''s serial build writes one segment. Admin only.';
REVOKE ALL ON FUNCTION hybrid._bm25_build_memory(regclass) FROM PUBLIC;

-- hybrid.merge_bm25: merge the partitions' BM25 indexes into one segment each (admin)
CREATE OR REPLACE FUNCTION hybrid.merge_bm25(tenant_id text DEFAULT NULL)
RETURNS TABLE (index_name text, segments_before integer, segments_after integer, action text)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET client_min_messages = warning
AS $$
DECLARE
    v_schema name := hybrid._textsearch_schema();
    v_key integer := hybrid._tenant_key(merge_bm25.tenant_id);
    v_workers text;
    v_mem text;
    r record;
    s record;
BEGIN
    IF merge_bm25.tenant_id IS NOT NULL AND v_key IS NULL THEN
        RAISE EXCEPTION 'tenant_id % does not exist', hybrid._shown(merge_bm25.tenant_id) USING ERRCODE = '22023';
    END IF;
    -- after the loads a merge follows, the dense audit's sample is cached too
    BEGIN
        PERFORM hybrid.refresh_audit_samples(merge_bm25.tenant_id);
    EXCEPTION WHEN insufficient_privilege THEN
        NULL;  -- an owner under RLS: the audit reads its sample from the partition, as before
    END;
    IF v_schema IS NULL THEN
        RETURN;
    END IF;
    DELETE FROM hybrid.bm25_merged m WHERE NOT EXISTS (SELECT 1 FROM hybrid._bm25_indexes() x WHERE x.index_name = m.index_oid);
    FOR r IN SELECT i.inhrelid::regclass AS idx, x.indrelid::regclass AS tbl
             FROM pg_inherits i JOIN pg_index x ON x.indexrelid = i.inhrelid JOIN pg_class ic ON ic.oid = i.inhrelid
             -- the partitions' indexes (relkind i); not the pool's (relkind I, over its leaves): no pooled tenant is
             -- scored through it (hybrid._bm25_scorer)
             WHERE i.inhparent = to_regclass('hybrid.chunk_content_bm25') AND ic.relkind = 'i'
               AND (v_key IS NULL OR x.indrelid = hybrid._chunk_partition(v_key))
             ORDER BY 1::text LOOP
        index_name := r.idx::text;
        IF NOT pg_has_role((SELECT c.relowner FROM pg_class c WHERE c.oid = r.idx), 'USAGE') THEN
            segments_before := NULL; segments_after := NULL;
            action := format('skipped: %I does not own it', current_user);
            RETURN NEXT;
            CONTINUE;
        END IF;
        -- writers in flight commit first and new ones wait for this transaction, so what is merged
        -- below is what hybrid.bm25_merged records (they forget it when they write: _bm25_written)
        EXECUTE format('LOCK TABLE %s IN SHARE MODE', r.tbl);
        PERFORM hybrid._bm25_heal_index(r.idx, unchecked_only => true);  -- a restart's stale index first
        s := hybrid._bm25_summary(r.idx);
        segments_before := s.segments;
        action := 'none';
        IF hybrid._bm25_fixed('rescan') THEN
            -- the scan's scores are exact on any number of segments: merging only speeds it up
            IF s.memtable_docs > 0 THEN
                EXECUTE format('SELECT %I.bm25_spill_index($1)', v_schema) USING r.idx::text;
                action := 'spilled';
                s := hybrid._bm25_summary(r.idx);
            END IF;
            IF s.segments > 1 THEN
                EXECUTE format('SELECT %I.bm25_force_merge($1)', v_schema) USING r.idx::text;
                action := 'merged';
            END IF;
        ELSIF NOT EXISTS (SELECT 1 FROM hybrid.bm25_merged m WHERE m.index_oid = r.idx) THEN
            -- pg_textsearch 1.0: a serial rebuild writes one segment whose scan ranks exactly (measured,
            -- tests/test_bm25_segments.py). Its force merge does not: it stops at the first level with one
            -- segment (one at L0 beside one at L1 stays two), and the scan of a merged segment missed a row
            -- of the exact top there, as may one that compaction merged (segments_per_level): an index
            -- counts as merged only after this rebuild, with no write since. A parallel build (>= 100,000
            -- rows) merges its workers' segments: not used. A rebuild past memtable_spill_threshold, or past its
            -- maintenance_work_mem (hybrid._bm25_build_memory sets it), writes several segments: then nothing is recorded.
            v_workers := current_setting('max_parallel_maintenance_workers');
            v_mem := current_setting('maintenance_work_mem');
            PERFORM set_config('max_parallel_maintenance_workers', '0', true);
            PERFORM set_config('maintenance_work_mem', (hybrid._bm25_build_memory(r.tbl) / 1024)::text || 'kB', true);
            EXECUTE format('REINDEX INDEX %s', r.idx);
            PERFORM set_config('max_parallel_maintenance_workers', v_workers, true);
            PERFORM set_config('maintenance_work_mem', v_mem, true);
            DELETE FROM hybrid.bm25_audit a WHERE a.index_oid = r.idx;  -- its statistics counted afresh
            action := 'rebuilt';
        END IF;
        segments_after := hybrid._bm25_record_segments(r.idx);
        RETURN NEXT;
    END LOOP;
END
$$;
COMMENT ON FUNCTION hybrid.merge_bm25(text) IS
'Leaves each tenant''s BM25 index (or one tenant''s) with one segment and nothing in memory, and records it in hybrid.bm25_merged: the lexical branch then takes the index scan''s own scores there until the next write, where pg_textsearch before 1.3.1 re-scores every fetched row. Before 1.3.1 a serial REINDEX does it (searches of that tenant wait for it); from 1.3.1 a spill and a force merge. Holds writes to each partition off while it runs. Also caches the dense audit''s samples of those tenants (hybrid.refresh_audit_samples, where its owner bypasses RLS). Run after bulk loads (pyhybrid.maintenance.merge_bm25: one transaction per tenant). Admin only.';
REVOKE ALL ON FUNCTION hybrid.merge_bm25(text) FROM PUBLIC;

-- hybrid._bm25_compare: one query's top k by a tenant's BM25 index against the exact SQL scorer
CREATE OR REPLACE FUNCTION hybrid._bm25_compare(tenant_key integer, index_name text, query_text text, k integer,
                                                OUT disagrees boolean, OUT worst double precision)
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, public, pg_temp
AS $$
DECLARE
    v_tenant text := (SELECT t.tenant_id FROM hybrid.tenant t WHERE t.tenant_key = _bm25_compare.tenant_key);
BEGIN
    -- every label: the index and the statistics count every row. A row in one list alone disagrees unless it ties
    -- the lowest score both full lists reach (ties at the cut may fall either way); scores agree to 1e-5 relative
    -- (the scan's float4 arithmetic is within 2e-7 of <@>, which the SQL scorer equals to the bit)
    WITH a AS (SELECT h.chunk_id, h.value FROM hybrid._bm25_index_hits(tenant_key, v_tenant, '{}', true, query_text, k,
                                                                        NULL, NULL, NULL, index_name) h),
         b AS (SELECT h.chunk_id, h.value FROM hybrid._bm25_sql_hits(tenant_key, v_tenant, '{}', true, query_text, k,
                                                                      NULL, NULL, NULL) h),
         cut AS (SELECT CASE WHEN (SELECT count(*) FROM a) >= k AND (SELECT count(*) FROM b) >= k
                             THEN greatest((SELECT min(a.value) FROM a), (SELECT min(b.value) FROM b)) ELSE 0 END AS v)
    SELECT coalesce(bool_or(CASE WHEN a.chunk_id IS NULL OR b.chunk_id IS NULL
                                 THEN coalesce(a.value, b.value) > cut.v * (1 + 1e-5)
                                 ELSE abs(a.value - b.value) > 1e-5 * greatest(abs(a.value), abs(b.value)) END), false),
           coalesce(max(abs(a.value - b.value) / nullif(greatest(abs(a.value), abs(b.value)), 0)), 0)
    INTO disagrees, worst
    FROM a FULL JOIN b ON b.chunk_id = a.chunk_id CROSS JOIN cut;
END
$$;
COMMENT ON FUNCTION hybrid._bm25_compare(integer, text, text, integer) IS
'Whether query_text''s top k of a tenant key by its BM25 index (index_name) disagrees with the exact SQL scorer''s (a row found by one alone above the cut, or a score off by more than 1e-5 relative), and the largest relative score difference of the rows both found. Admin only (hybrid.audit_bm25).';
REVOKE ALL ON FUNCTION hybrid._bm25_compare(integer, text, text, integer) FROM PUBLIC;

-- hybrid.audit_bm25: sampled queries through each BM25 index against the exact SQL scorer; rebuild what disagrees
CREATE OR REPLACE FUNCTION hybrid.audit_bm25(tenant_id text DEFAULT NULL, queries integer DEFAULT 20,
                                             k integer DEFAULT 100, heal boolean DEFAULT true)
RETURNS TABLE (tenant text, index_name text, audited integer, mismatches integer, worst double precision, action text)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
SET client_min_messages = warning
AS $$
#variable_conflict use_column
DECLARE
    r record; c record;
    v_query text; v_example text;
    i integer; pass integer;
BEGIN
    PERFORM hybrid._check_range('queries', queries, 1, 1000);
    PERFORM hybrid._check_range('k', k, 1, 1000);
    PERFORM hybrid._check_flag('heal', heal);
    FOR r IN SELECT t.tenant_id AS tid, t.tenant_key AS key, hybrid._bm25_partition_index(t.tenant_key) AS idx
             FROM hybrid._tenants_chosen('hybrid.audit_bm25(text, integer, integer, boolean)', audit_bm25.tenant_id) t LOOP
        CONTINUE WHEN r.idx IS NULL OR NOT hybrid._bm25_ready(r.idx::regclass);
        tenant := r.tid; index_name := r.idx; action := 'none';
        FOR pass IN 1..2 LOOP
            audited := 0; mismatches := 0; worst := 0; v_example := NULL;
            -- the queries: one to three of the tenant's lexemes held by two chunks or more, in a fixed pseudo-random order
            FOR i IN 1..queries LOOP
                SELECT string_agg(l.lexeme, ' ') INTO v_query
                FROM (SELECT d.lexeme FROM hybrid.bm25_term_stats d WHERE d.tenant_key = r.key AND d.df > 1
                      ORDER BY hashtext(d.lexeme || ':' || i), d.lexeme LIMIT 1 + i % 3) l;
                EXIT WHEN v_query IS NULL;
                c := hybrid._bm25_compare(r.key, r.idx, v_query, k);
                audited := audited + 1;
                worst := greatest(worst, c.worst);
                IF c.disagrees THEN
                    mismatches := mismatches + 1;
                    v_example := coalesce(v_example, v_query);
                END IF;
            END LOOP;
            INSERT INTO hybrid.bm25_audit AS a (index_oid, tenant_key, queries, mismatches, worst, example)
            VALUES (r.idx::regclass, r.key, audited, mismatches, worst, v_example)
            ON CONFLICT (index_oid) DO UPDATE SET audited_at = now(), queries = excluded.queries,
                mismatches = excluded.mismatches, worst = excluded.worst, example = excluded.example;
            EXIT WHEN mismatches = 0 OR NOT heal OR pass = 2;
            PERFORM hybrid._bm25_reindex(r.idx::regclass);
            action := 'rebuilt';
        END LOOP;
        IF mismatches > 0 THEN
            RAISE WARNING 'hybrid.audit_bm25: tenant %''s BM25 index % disagreed with the exact scores on % of % sampled queries (largest relative difference %); the SQL scorer answers its BM25 searches until it is rebuilt',
                hybrid._shown(r.tid), r.idx, mismatches, audited, round(worst::numeric, 6)
                USING HINT = 'SELECT * FROM hybrid.audit_bm25(tenant_id => ..., heal => true) rebuilds it and audits again.';
        END IF;
        RETURN NEXT;
    END LOOP;
END
$$;
COMMENT ON FUNCTION hybrid.audit_bm25(text, integer, integer, boolean) IS
'The lexical audit: for each tenant (or one) whose partition has a current BM25 index, queries sampled from its own lexemes (one to three, held by two chunks or more) are answered through the index and by the exact SQL scorer, top k each; a query disagrees when a row is in one top k alone (above the cut) or a score differs by more than 1e-5 relative. The verdict is kept in hybrid.bm25_audit: an index that disagreed is not answered from (the SQL scorer answers, explain says why) until it is rebuilt; heal rebuilds it at once (REINDEX) and audits again. pg_textsearch 1.0 keeps counting deleted and updated rows until a rebuild, so an index drifts after deletes. Returns each audited index with its verdict and what was done; a WARNING names an index that still disagrees. Admin only; its owner must bypass RLS.';
REVOKE ALL ON FUNCTION hybrid.audit_bm25(text, integer, integer, boolean) FROM PUBLIC;

DO $sentinel$
BEGIN
    IF to_regclass('hybrid.bm25_sentinel') IS NULL THEN
        PERFORM hybrid._bm25_sentinel_reset(false);
    END IF;
END
$sentinel$;

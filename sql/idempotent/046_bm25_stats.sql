-- BM25 statistics per tenant in ordinary tables (revision 0019), and the arithmetic pg_textsearch scores with, so
-- that hybrid._bm25_sql_hits (050_search.sql) ranks by BM25 on any PostgreSQL.
--
-- What is counted is what a freshly built pg_textsearch index of the tenant's partition counts: every row whose
-- tsv (to_tsvector of the tenant's configuration, content) holds a lexeme, superseded versions too until they are pruned. A
-- document's length is the sum of its lexemes' position counts (stop words hold none). Statement-level AFTER
-- triggers on hybrid.chunk keep the counters in the writing transaction (MVCC: a search sees the statistics of
-- its snapshot, never another transaction's uncommitted rows, unlike pg_textsearch 1.0's shared counters).
-- Each write statement updates its tenant's row of hybrid.bm25_tenant_stats first, so writers of one tenant
-- serialize from their first write to commit (pg_textsearch 1.0 holds its index's lock as long); a transaction
-- that writes two tenants in opposite orders to another can deadlock, one write statement never does (tenants,
-- then lexemes, each in key order). Statement triggers of a partitioned table fire only for statements that
-- name it: pyhybrid writes only through hybrid.chunk; hybrid.bm25_stats_drift finds a counter that went wrong
-- and hybrid.rebuild_bm25_stats recounts.

-- hybrid._tsv_length: a document's BM25 length
CREATE OR REPLACE FUNCTION hybrid._tsv_length(tsv tsvector) RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT coalesce(sum(coalesce(cardinality(u.positions), 1)), 0)::integer FROM pg_catalog.unnest(tsv) u $$;
COMMENT ON FUNCTION hybrid._tsv_length(tsvector) IS
'A document''s length as BM25 (pg_textsearch) counts it: the sum over its lexemes of their position counts (1 for a lexeme without positions).';
REVOKE ALL ON FUNCTION hybrid._tsv_length(tsvector) FROM PUBLIC;

-- hybrid._matched_tsv_length: the same length, cheaply, for a document that matches a tsquery
CREATE OR REPLACE FUNCTION hybrid._matched_tsv_length(tsv tsvector, query tsquery) RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE
-- no SET clause: inlined into hybrid._bm25_sql_hits' scan
AS $$ SELECT round(pg_catalog.ts_rank(tsv, query)::float8 / pg_catalog.ts_rank(tsv, query, 2))::integer $$;
COMMENT ON FUNCTION hybrid._matched_tsv_length(tsvector, tsquery) IS
'hybrid._tsv_length(tsv) for a document that matches query, at a sixth of its cost: ts_rank''s normalization 2 divides the rank by the document length, counted as hybrid._tsv_length counts it, so the ratio of the two ranks is that length (rounded: both are float4). tests/test_bm25_sql.py holds the two equal.';
REVOKE ALL ON FUNCTION hybrid._matched_tsv_length(tsvector, tsquery) FROM PUBLIC;

-- hybrid._bm25_fieldnorm: pg_textsearch's quantized document length (Lucene's SmallFloat, the floor bucket)
DO $fieldnorm$
DECLARE
    v_table text;
BEGIN
    -- the 256 lengths: 0-39 exactly, then 8 steps a doubling group (pg_textsearch src/segment/fieldnorm.h)
    SELECT array_agg(v ORDER BY v)::text INTO v_table
    FROM (SELECT generate_series(0, 39)::bigint AS v
          UNION ALL
          SELECT 24 + (16::bigint << g) + m * (2::bigint << g) FROM generate_series(0, 26) g, generate_series(0, 7) m) s;
    EXECUTE format($f$
        CREATE OR REPLACE FUNCTION hybrid._bm25_fieldnorm(len integer) RETURNS integer
        LANGUAGE sql IMMUTABLE PARALLEL SAFE
        AS %L$f$, format('SELECT (%1$L::integer[])[pg_catalog.width_bucket(len, %1$L::integer[])]', v_table));
END
$fieldnorm$;
COMMENT ON FUNCTION hybrid._bm25_fieldnorm(integer) IS
'The document length pg_textsearch scores with: the largest of its 256 quantized lengths (0-39 exact, then eight steps a doubling) not above len.';
REVOKE ALL ON FUNCTION hybrid._bm25_fieldnorm(integer) FROM PUBLIC;

-- hybrid._lexeme_tsquery: lexemes as an OR tsquery, each taken literally (no dictionary)
CREATE OR REPLACE FUNCTION hybrid._lexeme_tsquery(lexemes text[]) RETURNS tsquery
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT string_agg('''' || replace(replace(l, '\', '\\'), '''', '''''') || '''', ' | ')::tsquery FROM unnest(lexemes) l
$$;
COMMENT ON FUNCTION hybrid._lexeme_tsquery(text[]) IS
'An OR tsquery of lexemes, each quoted so that it stands as written (a lexeme of a tsvector, already normalized).';
REVOKE ALL ON FUNCTION hybrid._lexeme_tsquery(text[]) FROM PUBLIC;

-- hybrid._bm25_stats_add: add (sign 1) or take away (sign -1) documents from their tenants' statistics
CREATE OR REPLACE FUNCTION hybrid._bm25_stats_add(tenant_keys integer[], tsvs tsvector[], signs integer[])
RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    -- each row's length, read once for both statements (reading a tsv's positions is what a row costs here)
    v_lens integer[] := ARRAY(SELECT hybrid._tsv_length(t) FROM unnest(tsvs) t);
    v_norms integer[] := ARRAY(SELECT hybrid._bm25_fieldnorm(l) FROM unnest(v_lens) l);  -- quantized, as scored
BEGIN
    -- tenants first, in key order, then their lexemes in (tenant, lexeme) order: one statement never deadlocks
    INSERT INTO hybrid.bm25_tenant_stats AS t (tenant_key, n_docs, total_len)
    SELECT r.k, coalesce(sum(r.s) FILTER (WHERE length(r.tsv) > 0), 0), coalesce(sum(r.s * r.len), 0)
    FROM unnest(tenant_keys, tsvs, signs, v_lens) r(k, tsv, s, len)
    GROUP BY r.k ORDER BY r.k
    ON CONFLICT (tenant_key) DO UPDATE
        SET n_docs = t.n_docs + excluded.n_docs, total_len = t.total_len + excluded.total_len;
    -- each lexeme's bounds (max_tf, min_dl_tf) take in the rows added, even where the statement takes away as many
    -- (text updated in place); a lexeme no counted row holds (df 0) starts them again
    INSERT INTO hybrid.bm25_term_stats AS d (tenant_key, lexeme, df, max_tf, min_dl_tf)
    SELECT r.k, u.lexeme COLLATE "C", sum(r.s),
           max(coalesce(cardinality(u.positions), 1)) FILTER (WHERE r.s > 0),
           min(r.dl::real / coalesce(cardinality(u.positions), 1)) FILTER (WHERE r.s > 0)
    FROM unnest(tenant_keys, tsvs, signs, v_norms) r(k, tsv, s, dl), unnest(r.tsv) u
    GROUP BY 1, 2 HAVING sum(r.s) <> 0 OR bool_or(r.s > 0) ORDER BY 1, 2
    ON CONFLICT (tenant_key, lexeme) DO UPDATE
        SET df = d.df + excluded.df,
            max_tf = CASE WHEN d.df <= 0 THEN excluded.max_tf
                          WHEN d.max_tf IS NOT NULL THEN greatest(d.max_tf, excluded.max_tf) END,
            min_dl_tf = CASE WHEN d.df <= 0 THEN excluded.min_dl_tf
                             WHEN d.min_dl_tf IS NOT NULL THEN least(d.min_dl_tf, excluded.min_dl_tf) END;
END
$$;
COMMENT ON FUNCTION hybrid._bm25_stats_add(integer[], tsvector[], integer[]) IS
'Adds documents (their tenant keys and tsv, sign 1) to the BM25 statistics of their tenants, or takes them away (sign -1). hybrid.chunk''s statement triggers call it, as the schema owner.';
REVOKE ALL ON FUNCTION hybrid._bm25_stats_add(integer[], tsvector[], integer[]) FROM PUBLIC;

-- the statement triggers, one function for every event (a trigger with transition tables takes one event, so each
-- event has its trigger). Definer rights: they count what the statement wrote (under RLS, whoever wrote it), into
-- tables no tenant role can write. Until 0.5 each event had a function of its own
DROP FUNCTION IF EXISTS hybrid._bm25_stats_insert() CASCADE;
DROP FUNCTION IF EXISTS hybrid._bm25_stats_delete() CASCADE;
DROP FUNCTION IF EXISTS hybrid._bm25_stats_update() CASCADE;
DROP FUNCTION IF EXISTS hybrid._bm25_stats_truncate() CASCADE;
CREATE OR REPLACE FUNCTION hybrid._bm25_stats_trigger() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        DELETE FROM hybrid.bm25_term_stats;
        UPDATE hybrid.bm25_tenant_stats SET n_docs = 0, total_len = 0;
    ELSIF TG_OP = 'INSERT' THEN
        PERFORM hybrid._bm25_stats_add(array_agg(n.tenant_key), array_agg(n.tsv), array_agg(1))
        FROM bm25_new n HAVING count(*) > 0;
    ELSIF TG_OP = 'DELETE' THEN
        PERFORM hybrid._bm25_stats_add(array_agg(o.tenant_key), array_agg(o.tsv), array_agg(-1))
        FROM bm25_old o HAVING count(*) > 0;
    ELSE
        -- only rows whose text or tenant changed (superseding a row changes neither: it stays counted until pruned)
        PERFORM hybrid._bm25_stats_add(array_agg(x.k), array_agg(x.tsv), array_agg(x.s))
        FROM (SELECT o.tenant_key AS k, o.tsv, -1 AS s
              FROM bm25_old o LEFT JOIN bm25_new n ON n.tenant_id = o.tenant_id AND n.chunk_id = o.chunk_id
              WHERE n.tenant_key IS DISTINCT FROM o.tenant_key OR n.tsv IS DISTINCT FROM o.tsv
              UNION ALL
              SELECT n.tenant_key, n.tsv, 1
              FROM bm25_new n LEFT JOIN bm25_old o ON o.tenant_id = n.tenant_id AND o.chunk_id = n.chunk_id
              WHERE o.tenant_key IS DISTINCT FROM n.tenant_key OR o.tsv IS DISTINCT FROM n.tsv) x
        HAVING count(*) > 0;
    END IF;
    RETURN NULL;
END
$$;
COMMENT ON FUNCTION hybrid._bm25_stats_trigger() IS
'hybrid.chunk''s statement triggers: inserted rows join their tenants'' BM25 statistics, deleted rows leave them, rows whose text or tenant changed move in them, TRUNCATE empties every tenant''s.';
REVOKE ALL ON FUNCTION hybrid._bm25_stats_trigger() FROM PUBLIC;

CREATE OR REPLACE TRIGGER bm25_stats_insert AFTER INSERT ON hybrid.chunk
    REFERENCING NEW TABLE AS bm25_new FOR EACH STATEMENT EXECUTE FUNCTION hybrid._bm25_stats_trigger();
CREATE OR REPLACE TRIGGER bm25_stats_update AFTER UPDATE ON hybrid.chunk
    REFERENCING OLD TABLE AS bm25_old NEW TABLE AS bm25_new FOR EACH STATEMENT EXECUTE FUNCTION hybrid._bm25_stats_trigger();
CREATE OR REPLACE TRIGGER bm25_stats_delete AFTER DELETE ON hybrid.chunk
    REFERENCING OLD TABLE AS bm25_old FOR EACH STATEMENT EXECUTE FUNCTION hybrid._bm25_stats_trigger();
CREATE OR REPLACE TRIGGER bm25_stats_truncate AFTER TRUNCATE ON hybrid.chunk
    FOR EACH STATEMENT EXECUTE FUNCTION hybrid._bm25_stats_trigger();

-- hybrid._bm25_counted: a tenant's statistics counted from its rows
CREATE OR REPLACE FUNCTION hybrid._bm25_counted(tenant_key integer, rel regclass DEFAULT NULL)
RETURNS TABLE (lexeme text, df bigint, n_docs bigint, total_len bigint, max_tf integer, min_dl_tf real)
LANGUAGE plpgsql STABLE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    -- the key a literal: the tenant's partition alone is read. Its id too where the key is its tenant's now: a
    -- pooled tenant's rows are found by the pool's (tenant_id, ...) indexes, none of which leads with the key (by
    -- the key alone, each pooled tenant's count read its whole leaf)
    v_rows text := format('c.tenant_key = %s', tenant_key)
        || coalesce(format(' AND c.tenant_id = %L', (SELECT t.tenant_id FROM hybrid.tenant t
                                                     WHERE t.tenant_key = _bm25_counted.tenant_key)), '');
BEGIN
    -- one row with lexeme NULL for the tenant's totals, then one a lexeme
    RETURN QUERY EXECUTE format(
        'SELECT NULL::text, NULL::bigint, count(*), coalesce(sum(hybrid._tsv_length(c.tsv)), 0)::bigint, NULL, NULL '
        'FROM %1$s c WHERE %2$s AND length(c.tsv) > 0 '
        'UNION ALL '
        'SELECT u.lexeme COLLATE "C", count(*), NULL, NULL, max(coalesce(cardinality(u.positions), 1)), '
        '       min(l.dl::real / coalesce(cardinality(u.positions), 1))::real '
        'FROM %1$s c CROSS JOIN LATERAL (SELECT hybrid._bm25_fieldnorm(hybrid._tsv_length(c.tsv)) AS dl OFFSET 0) l, '
        '     unnest(c.tsv) u WHERE %2$s GROUP BY 1',
        coalesce(rel, 'hybrid.chunk'::regclass), v_rows);
END
$$;
COMMENT ON FUNCTION hybrid._bm25_counted(integer, regclass) IS
'A tenant''s BM25 statistics counted from its rows (in hybrid.chunk, or in rel, a table shaped as it), as the triggers count them: a first row with lexeme NULL holds n_docs and total_len, then one row a lexeme with its df and its term-score bounds (max_tf, min_dl_tf).';
REVOKE ALL ON FUNCTION hybrid._bm25_counted(integer, regclass) FROM PUBLIC;

-- hybrid._bm25_recount: replace a tenant's BM25 statistics by a count of its rows (caller holds its writers off)
CREATE OR REPLACE FUNCTION hybrid._bm25_recount(tenant_key integer, rel regclass DEFAULT NULL)
RETURNS TABLE (n_docs bigint, lexemes bigint)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_key integer := tenant_key;
BEGIN
    INSERT INTO hybrid.bm25_tenant_stats AS s (tenant_key, n_docs, total_len) VALUES (v_key, 0, 0)
    ON CONFLICT (tenant_key) DO UPDATE SET n_docs = 0, total_len = 0;
    DELETE FROM hybrid.bm25_term_stats d WHERE d.tenant_key = v_key;
    CREATE TEMP TABLE IF NOT EXISTS hybrid_bm25_recount (lexeme text, df bigint, n_docs bigint, total_len bigint,
                                                         max_tf integer, min_dl_tf real);
    TRUNCATE pg_temp.hybrid_bm25_recount;
    INSERT INTO pg_temp.hybrid_bm25_recount SELECT * FROM hybrid._bm25_counted(v_key, rel);
    UPDATE hybrid.bm25_tenant_stats s SET n_docs = r.n_docs, total_len = r.total_len
    FROM pg_temp.hybrid_bm25_recount r WHERE s.tenant_key = v_key AND r.lexeme IS NULL;
    INSERT INTO hybrid.bm25_term_stats (tenant_key, lexeme, df, max_tf, min_dl_tf)
    SELECT v_key, r.lexeme, r.df, r.max_tf, r.min_dl_tf FROM pg_temp.hybrid_bm25_recount r WHERE r.lexeme IS NOT NULL
    ORDER BY 2;
    RETURN QUERY SELECT (SELECT r.n_docs FROM pg_temp.hybrid_bm25_recount r WHERE r.lexeme IS NULL),
                        (SELECT count(*) FROM pg_temp.hybrid_bm25_recount r WHERE r.lexeme IS NOT NULL);
    DROP TABLE pg_temp.hybrid_bm25_recount;
END
$$;
COMMENT ON FUNCTION hybrid._bm25_recount(integer, regclass) IS
'Replaces the BM25 statistics of tenant_key by a count of its rows (hybrid._bm25_counted: in hybrid.chunk, or in rel); returns its documents and lexemes. The caller holds the tenant''s writers off (its row of hybrid.bm25_tenant_stats, locked first here, or its partition). Admin only.';
REVOKE ALL ON FUNCTION hybrid._bm25_recount(integer, regclass) FROM PUBLIC;

-- hybrid.bm25_stats_drift: where the kept statistics differ from the rows
CREATE OR REPLACE FUNCTION hybrid.bm25_stats_drift(tenant_id text DEFAULT NULL)
RETURNS TABLE (tenant text, lexeme text, kept bigint, counted bigint)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    t record;
BEGIN
    FOR t IN SELECT x.tenant_id, x.tenant_key FROM hybrid._tenants_chosen('hybrid.bm25_stats_drift(text)',
                                                                     bm25_stats_drift.tenant_id) x LOOP
        RETURN QUERY
        WITH cnt AS (SELECT * FROM hybrid._bm25_counted(t.tenant_key)),
        kp AS (SELECT d.lexeme, d.df FROM hybrid.bm25_term_stats d WHERE d.tenant_key = t.tenant_key AND d.df <> 0)
        SELECT t.tenant_id, v.name, v.kept, v.counted
        FROM (SELECT s.n_docs, s.total_len FROM hybrid.bm25_tenant_stats s WHERE s.tenant_key = t.tenant_key
              UNION ALL SELECT 0, 0 WHERE NOT EXISTS (SELECT 1 FROM hybrid.bm25_tenant_stats s WHERE s.tenant_key = t.tenant_key)
              LIMIT 1) k,
             (SELECT x.n_docs, x.total_len FROM cnt x WHERE x.lexeme IS NULL) c,
             LATERAL (VALUES ('(documents)', k.n_docs, c.n_docs), ('(total length)', k.total_len, c.total_len)) v(name, kept, counted)
        WHERE v.kept <> v.counted
        UNION ALL
        SELECT t.tenant_id, coalesce(a.lexeme, b.lexeme), coalesce(a.df, 0), coalesce(b.df, 0)
        FROM kp a FULL JOIN (SELECT x.lexeme, x.df FROM cnt x WHERE x.lexeme IS NOT NULL) b ON b.lexeme = a.lexeme
        WHERE a.df IS DISTINCT FROM b.df;
    END LOOP;
END
$$;
COMMENT ON FUNCTION hybrid.bm25_stats_drift(text) IS
'The BM25 statistics (of one tenant, or of all) that differ from a count of the rows: each differing lexeme''s document frequency, and ''(documents)'' and ''(total length)''. No rows: exact. A write that bypassed hybrid.chunk (DML naming a partition, triggers disabled) is the only way to drift; hybrid.rebuild_bm25_stats recounts. 22023 for a tenant_id that does not exist. Admin only.';
REVOKE ALL ON FUNCTION hybrid.bm25_stats_drift(text) FROM PUBLIC;

-- hybrid.rebuild_bm25_stats: recount statistics from the rows
CREATE OR REPLACE FUNCTION hybrid.rebuild_bm25_stats(tenant_id text DEFAULT NULL)
RETURNS TABLE (tenant text, n_docs bigint, lexemes bigint)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    t record;
BEGIN
    FOR t IN SELECT x.tenant_id, x.tenant_key FROM hybrid._tenants_chosen('hybrid.rebuild_bm25_stats(text)',
                                                                     rebuild_bm25_stats.tenant_id) x LOOP
        -- the tenant's row first (it exists, locked): its writers wait, and the recount is of committed rows
        RETURN QUERY SELECT t.tenant_id, r.n_docs, r.lexemes FROM hybrid._bm25_recount(t.tenant_key) r;
    END LOOP;
END
$$;
COMMENT ON FUNCTION hybrid.rebuild_bm25_stats(text) IS
'Recounts the BM25 statistics of one tenant (or of all, one after another) from its rows, under the lock its writers take, and returns each tenant''s document and lexeme counts. For statistics hybrid.bm25_stats_drift found wrong. 22023 for a tenant_id that does not exist. Admin only.';
REVOKE ALL ON FUNCTION hybrid.rebuild_bm25_stats(text) FROM PUBLIC;

-- A text-search language per tenant (hybrid.tenant.text_config, english by default): the configuration its
-- partition's tsv is generated with, its BM25 index's text_config, and what turns its queries into lexemes
-- (ts_rank, the SQL BM25 scorer, term coverage, abstention).

-- hybrid._or_tsquery: user text as an OR tsquery that never raises
CREATE OR REPLACE FUNCTION hybrid._or_tsquery(query_text text, config regconfig) RETURNS tsquery
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, public, pg_temp
AS $$
    -- plainto_tsquery never raises on user text; its AND/phrase operators become OR so that
    -- lexical search ranks partial matches instead of requiring every word
    SELECT regexp_replace(plainto_tsquery(config, query_text)::text, ' (&|<->|<[0-9]+>) ', ' | ', 'g')::tsquery
$$;
COMMENT ON FUNCTION hybrid._or_tsquery(text, regconfig) IS
'query_text as a tsquery of config (the tenant''s, hybrid._text_config) whose terms are OR-ed: plainto_tsquery, which never raises on user text, with its AND and phrase operators turned into OR.';

-- hybrid._language: a language name checked against this server's text search configurations
CREATE OR REPLACE FUNCTION hybrid._language(language text) RETURNS text
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    -- a configuration of pg_catalog by its name (german), any other by its qualified name (myschema.klingon)
    v_config regconfig := (SELECT c.oid::regconfig FROM pg_ts_config c JOIN pg_namespace n ON n.oid = c.cfgnamespace
                           WHERE (n.nspname = 'pg_catalog' AND c.cfgname = language)
                              OR n.nspname || '.' || c.cfgname = language);
BEGIN
    IF v_config IS NULL THEN
        RAISE EXCEPTION 'language must be a text search configuration of this server (one of %), got %',
            (SELECT string_agg(c.cfgname, ', ' ORDER BY c.cfgname) FROM pg_ts_config c
             WHERE c.cfgnamespace = 'pg_catalog'::regnamespace), hybrid._shown(language)
            USING ERRCODE = '22023',
                  HINT = 'simple lowercases words and neither stems nor drops stop words: for a language PostgreSQL has no stemmer for.';
    END IF;
    RETURN v_config::text;
END
$$;
COMMENT ON FUNCTION hybrid._language(text) IS
'A language (a text search configuration: german, french, spanish, simple, ... of pg_catalog by its name, another by its qualified name) as hybrid.tenant.text_config stores it; 22023 naming the configurations this server has for anything else.';
REVOKE ALL ON FUNCTION hybrid._language(text) FROM PUBLIC;

-- hybrid._swap_partition: a tenant's partition copied into one of another configuration and swapped in (admin)
CREATE OR REPLACE FUNCTION hybrid._swap_partition(tenant_key integer, config text) RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, public, pg_temp
SET client_min_messages = warning
AS $$
DECLARE
    v_old regclass := hybrid._chunk_partition(tenant_key);
    v_name text := 'chunk_p' || tenant_key;
    v_new regclass;
    m record;
    v_lock_timeout text := current_setting('lock_timeout');
    attempt integer;
    r record;
BEGIN
    -- the tenant's writers wait from here to the commit; its readers go on reading the old partition
    EXECUTE format('LOCK TABLE %s IN SHARE MODE', v_old);
    v_new := hybrid._partition_table(v_name || '_new', config);
    EXECUTE format('ALTER TABLE %s ADD CONSTRAINT %I CHECK (tenant_key IS NOT NULL AND tenant_key = %s)',
                   v_new, v_name || '_new_key', tenant_key);  -- so that ATTACH need not scan the rows
    SELECT * INTO m FROM hybrid._move_select(v_new, tenant_key, config);  -- the rows, in the new configuration
    EXECUTE format('INSERT INTO %s (%s) SELECT %s FROM %s c', v_new, m.cols, m.exprs, v_old);
    -- the old partition's indexes built again on the new table (its BM25 one in the new configuration), so that
    -- ATTACH adopts them instead of building any: a constraint's index as its constraint
    FOR r IN SELECT x.indexrelid::regclass AS idx, c.relname, k.conname, pg_get_constraintdef(k.oid) AS condef,
                    pg_get_indexdef(x.indexrelid) AS def
             FROM pg_index x JOIN pg_class c ON c.oid = x.indexrelid
             LEFT JOIN pg_constraint k ON k.conindid = x.indexrelid AND k.conrelid = v_old
             WHERE x.indrelid = v_old LOOP
        IF r.conname IS NOT NULL THEN
            EXECUTE format('ALTER TABLE %s ADD CONSTRAINT %I %s', v_new, r.conname || '_new', r.condef);
        ELSE
            EXECUTE regexp_replace(regexp_replace(
                replace(r.def, format(' ON %s ', v_old), format(' ON %s ', v_new)),
                '^(CREATE (UNIQUE )?INDEX )(\S+)', '\1' || quote_ident(r.relname || '_new')),
                'text_config=\w+', 'text_config=' || config);
        END IF;
    END LOOP;
    -- its BM25 statistics, counted from the new rows (readers see them at the commit, with the new partition)
    PERFORM hybrid._bm25_recount(tenant_key, v_new);
    -- the swap: ACCESS EXCLUSIVE on hybrid.chunk to the commit, after the copy and the builds (quick from here on).
    -- A search that holds hybrid.chunk and then asks for the old partition waits behind this request: rather than
    -- deadlock with it, give up after a moment, let the searches through and ask again
    FOR attempt IN 1..40 LOOP
        BEGIN
            PERFORM set_config('lock_timeout', '500ms', true);
            EXECUTE format('ALTER TABLE hybrid.chunk DETACH PARTITION %s', v_old);
            EXECUTE format('ALTER TABLE hybrid.chunk ATTACH PARTITION %s FOR VALUES IN (%s)', v_new, tenant_key);
            EXIT;
        EXCEPTION WHEN lock_not_available OR deadlock_detected THEN
            IF attempt = 40 THEN
                RAISE EXCEPTION 'could not swap the partition of tenant key %: hybrid.chunk stayed busy (40 tries)',
                    tenant_key USING ERRCODE = '55P03', HINT = 'A long transaction holds hybrid.chunk; try again.';
            END IF;
            PERFORM pg_sleep(0.02 * attempt);
        END;
    END LOOP;
    PERFORM set_config('lock_timeout', v_lock_timeout, true);
    EXECUTE format('ALTER TABLE %s DROP CONSTRAINT %I', v_new, v_name || '_new_key');
    EXECUTE format('ALTER TABLE %s RENAME TO %I', v_old, v_name || '_old');
    EXECUTE format('ALTER TABLE %s RENAME TO %I', v_new, v_name);
    FOR r IN SELECT c.relname, k.conname FROM pg_index x JOIN pg_class c ON c.oid = x.indexrelid
             LEFT JOIN pg_constraint k ON k.conindid = x.indexrelid AND k.conrelid = v_old
             WHERE x.indrelid = v_old LOOP  -- free the old names, then give them to the new indexes
        EXECUTE format('ALTER INDEX hybrid.%I RENAME TO %I', r.relname, r.relname || '_old');
        EXECUTE format('ALTER INDEX hybrid.%I RENAME TO %I', coalesce(r.conname, r.relname) || '_new', r.relname);
    END LOOP;
    PERFORM hybrid._secure_chunks(v_new);
    PERFORM hybrid._forget_bm25_indexes(v_old);
    PERFORM hybrid._audit_sample_written(tenant_key);
    -- last: dropping a BM25 index frees pg_textsearch's shared state at once, even if the transaction then rolls
    -- back (timescale/pg_textsearch#506), so nothing may fail after it
    EXECUTE format('DROP TABLE %s', v_old);
END
$$;
COMMENT ON FUNCTION hybrid._swap_partition(integer, text) IS
'Rebuilds the partition of tenant_key with its tsv in config: copies its rows into a new table (the tenant''s writers wait, its readers go on), builds its indexes there (the BM25 one with text_config config) and recounts its BM25 statistics from it, then swaps it in for the old one (ACCESS EXCLUSIVE on hybrid.chunk for the swap alone, asked for at most 500 ms at a time, 40 times, so that searches are never deadlocked with it) and drops the old one, last. Admin only.';
REVOKE ALL ON FUNCTION hybrid._swap_partition(integer, text) FROM PUBLIC;

-- hybrid.set_tenant_language: a tenant's text-search language (admin)
CREATE OR REPLACE FUNCTION hybrid.set_tenant_language(tenant_id text, language text) RETURNS text
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
AS $$
DECLARE
    v_key integer := hybrid._tenant_key(tenant_id);
    v_config text := hybrid._language(language);
BEGIN
    IF v_key IS NULL THEN
        RAISE EXCEPTION 'tenant_id % does not exist', hybrid._shown(tenant_id) USING ERRCODE = '22023';
    END IF;
    IF (SELECT t.text_config FROM hybrid.tenant t WHERE t.tenant_key = v_key) = v_config THEN
        RETURN v_config;
    END IF;
    UPDATE hybrid.tenant t SET text_config = v_config WHERE t.tenant_key = v_key;
    IF hybrid._pooled(v_key) THEN
        -- in the pool each row's tsv is generated in its text_config: rewritten, the tenant's BM25 statistics
        -- recounted by hybrid.chunk's triggers; its writers wait (its row of hybrid.tenant is locked above)
        EXECUTE format('UPDATE hybrid.chunk c SET text_config = %L WHERE c.tenant_key = %s', v_config, v_key);
    ELSE
        PERFORM hybrid._swap_partition(v_key, v_config);  -- its BM25 statistics recounted with it
    END IF;
    RETURN v_config;
END
$$;
COMMENT ON FUNCTION hybrid.set_tenant_language(text, text) IS
'Sets the text-search language of tenant_id (a text search configuration of this server: english by default, german, french, spanish, ..., or simple for a language PostgreSQL has no stemmer for): its chunks'' lexemes (the partition''s generated tsv), its BM25 index''s text_config, its BM25 statistics, and what its queries become for ts_rank, the SQL BM25 scorer, term coverage and abstention. A change copies the tenant''s partition into a new one and builds its indexes there while the tenant''s searches go on and its writes wait, then swaps it in under a short ACCESS EXCLUSIVE lock on hybrid.chunk (hybrid._swap_partition); a pooled tenant''s rows are rewritten in the pool; call it as a transaction of its own (its last step drops the old partition''s BM25 index). Returns the configuration stored. Admin only.';
REVOKE ALL ON FUNCTION hybrid.set_tenant_language(text, text) FROM PUBLIC;

-- hybrid._bm25_text_configs: bring every partition's BM25 index to its tenant's configuration (admin)
CREATE OR REPLACE FUNCTION hybrid._bm25_text_configs() RETURNS integer
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, public, pg_temp
AS $$
DECLARE
    r record;
    v_fixed integer := 0;
BEGIN
    -- an index built for the parent's definition (CREATE INDEX on hybrid.chunk after a bulk load, or when
    -- pg_textsearch is installed later) has the parent's text_config: english
    FOR r IN SELECT t.tenant_key, t.text_config, x.indexrelid::regclass AS idx
             FROM hybrid.tenant t
             JOIN pg_index x ON x.indrelid = hybrid._chunk_partition(t.tenant_key)
             JOIN pg_inherits i ON i.inhrelid = x.indexrelid AND i.inhparent = to_regclass('hybrid.chunk_content_bm25')
             JOIN pg_class c ON c.oid = x.indexrelid
             WHERE t.text_config <> 'english'
               AND NOT coalesce(c.reloptions, '{}') @> ARRAY['text_config=' || t.text_config] LOOP
        EXECUTE format('ALTER INDEX %s SET (text_config = %L)', r.idx, r.text_config);
        PERFORM hybrid._bm25_reindex(r.idx);
        v_fixed := v_fixed + 1;
    END LOOP;
    RETURN v_fixed;
END
$$;
COMMENT ON FUNCTION hybrid._bm25_text_configs() IS
'Sets the text_config of every partition''s BM25 index whose tenant has another language (hybrid.set_tenant_language) and rebuilds it: after the parent index was created anew (a bulk load''s resume, pg_textsearch installed later), which gives each new partition index the parent''s english. Returns how many it rebuilt. Admin only.';
REVOKE ALL ON FUNCTION hybrid._bm25_text_configs() FROM PUBLIC;

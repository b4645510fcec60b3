-- Small tenants pooled (revision 0023): a pooled tenant's chunks live in hybrid.chunk_pool, hybrid.chunk's DEFAULT
-- partition (8 leaves hashed on tenant_key), under a key of 2^30 and up (hybrid._pooled); a dedicated tenant's in a
-- partition of its own under a key below. Each branch treats a pooled tenant as it treats a dedicated one, with its
-- own statistics: dense and sparse search exact over its rows (hybrid._dense_plan), BM25 the SQL scorer over its
-- own counts (hybrid._bm25_scorer), its tsv in its own language (the row's text_config). A tenant moves between
-- the two under a new key (hybrid.move_tenant) while its searches and writes go on.

-- hybrid._pool_write_check: raise when a login role would write a pooled tenant where that holds its leaf (admin)
CREATE OR REPLACE FUNCTION hybrid._pool_write_check(tenant text, role_name name) RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    -- pg_textsearch before 1.1.0 takes a BM25 index's lock at a transaction's first write to it and holds it to the
    -- transaction's end with interrupts held off: no statement_timeout, idle_in_transaction_session_timeout, cancel
    -- or pg_terminate_backend reaches that session, and the index's other writers wait as long, as unreachable
    -- (timescale/pg_textsearch#307). A pooled tenant's rows share their leaf's index with its neighbours, so a
    -- login role that wrote and kept its transaction open would stop their writes. App roles and superusers,
    -- trusted with every tenant, write pooled tenants; a tenant whose own login role writes gets a partition
    IF NOT coalesce(hybrid._pooled(hybrid._tenant_key(tenant)), false) OR hybrid._trusted(role_name)
       OR to_regclass('hybrid.chunk_content_bm25') IS NULL OR hybrid._bm25_fixed('write_lock') THEN
        RETURN;
    END IF;
    RAISE EXCEPTION 'role % may not write tenant % while it is pooled: pg_textsearch % keeps a written BM25 index locked until the transaction ends, beyond any timeout, and the pooled tenants of its leaf share that index',
        quote_ident(role_name), quote_literal(tenant), array_to_string(hybrid._bm25_version(), '.')
        USING ERRCODE = '42501',
              HINT = format('An admin moves the tenant to a partition of its own first: CALL hybrid.move_tenant(%L, ''dedicated'') (pyhybrid tenant move %s --dedicated); app roles write pooled tenants.',
                            tenant, tenant);
END
$$;
COMMENT ON FUNCTION hybrid._pool_write_check(text, name) IS
'Raises 42501 when role_name is a login role (not an app role or a superuser) and tenant is pooled, where pg_textsearch before 1.1.0 keeps a written BM25 index locked, beyond every timeout, until the writing transaction ends: the pooled tenants of a leaf share its index, so such a role could stop their writes. hybrid.grant_tenant calls it for a grant of every label, hybrid._check_pool_writer for each write. Admin only.';
REVOKE ALL ON FUNCTION hybrid._pool_write_check(text, name) FROM PUBLIC;

-- hybrid._check_pool_writer: the caller's write of its own tenant, checked by hybrid._pool_write_check
CREATE OR REPLACE FUNCTION hybrid._check_pool_writer() RETURNS void
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$ SELECT hybrid._pool_write_check(hybrid._current_tenant(), hybrid._caller()) $$;
COMMENT ON FUNCTION hybrid._check_pool_writer() IS
'hybrid._pool_write_check for the caller and its own tenant (of no other tenant, which a tenant role could otherwise probe): hybrid._check_writer calls it for each write.';
REVOKE ALL ON FUNCTION hybrid._check_pool_writer() FROM PUBLIC;

-- hybrid._move_select: a chunk relation's columns, as a SELECT list that gives the rows another key
CREATE OR REPLACE FUNCTION hybrid._move_select(rel regclass, new_key integer, config text, OUT cols text, OUT exprs text)
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT string_agg(quote_ident(a.attname), ', ' ORDER BY a.attnum),
           string_agg(CASE a.attname WHEN 'tenant_key' THEN new_key::text
                                     WHEN 'text_config' THEN quote_literal(config) || '::regconfig'
                                     ELSE 'c.' || quote_ident(a.attname) END,
                      ', ' ORDER BY a.attnum)
    FROM pg_attribute a
    WHERE a.attrelid = rel AND a.attnum > 0 AND NOT a.attisdropped AND a.attgenerated = ''
$$;
COMMENT ON FUNCTION hybrid._move_select(regclass, integer, text) IS
'The stored columns of rel (a partition or the pool; the generated tsv is left out), and the same as a SELECT list over alias c with tenant_key replaced by new_key and text_config by config (rows written before revision 0023 carry english whatever their tenant''s language): what hybrid._move_rows and hybrid._swap_partition copy. Admin only.';
REVOKE ALL ON FUNCTION hybrid._move_select(regclass, integer, text) FROM PUBLIC;

-- hybrid._move_rows: a tenant's rows and statistics moved to another key, in the caller's transaction (admin)
CREATE OR REPLACE FUNCTION hybrid._move_rows(tenant_id text, placement text) RETURNS regclass
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, public, pg_temp
AS $$
DECLARE
    v_key integer;
    v_new integer;
    v_from regclass;
    v_to regclass;
    m record;
BEGIN
    -- the tenant's writers (hybrid._writer_key) in flight finish first; those that start meanwhile wait for the
    -- commit and then write under the new key. Its readers go on: a snapshot before the commit sees the old key and
    -- rows, one after it the new
    PERFORM set_config('lock_timeout', '10s', true);
    SELECT t.tenant_key INTO v_key FROM hybrid.tenant t WHERE t.tenant_id = _move_rows.tenant_id FOR UPDATE;
    IF hybrid._pooled(v_key) = (placement = 'pool') THEN
        RETURN NULL;  -- moved there meanwhile
    END IF;
    IF placement = 'dedicated' THEN
        v_new := v_key - 1073741824;  -- its partition, attached beforehand (hybrid.move_tenant)
        v_from := 'hybrid.chunk_pool'::regclass;
        v_to := hybrid._chunk_partition(v_new);
    ELSE
        v_new := 1073741824 + nextval('hybrid.tenant_key_seq');
        v_from := hybrid._chunk_partition(v_key);
        v_to := 'hybrid.chunk_pool'::regclass;
    END IF;
    IF v_to IS NULL OR v_from IS NULL THEN
        RAISE EXCEPTION 'tenant % has no partition to move from or to', hybrid._shown(tenant_id) USING ERRCODE = '55000';
    END IF;
    -- by relation name, not through hybrid.chunk: its statement triggers would count the rows twice (their
    -- statistics move with the key, below); the key a constant, so that one leaf of the pool is read
    SELECT * INTO m FROM hybrid._move_select(v_to, v_new,
                                             (SELECT t.text_config FROM hybrid.tenant t WHERE t.tenant_key = v_key));
    EXECUTE format('INSERT INTO %s (%s) SELECT %s FROM %s c WHERE c.tenant_key = %s', v_to, m.cols, m.exprs, v_from, v_key);
    EXECUTE format('DELETE FROM %s c WHERE c.tenant_key = %s', v_from, v_key);
    -- the key, and with it (ON UPDATE CASCADE) its BM25 counts and cached audit sample; its term counts by hand
    UPDATE hybrid.tenant t SET tenant_key = v_new WHERE t.tenant_key = v_key;
    UPDATE hybrid.bm25_term_stats d SET tenant_key = v_new WHERE d.tenant_key = v_key;
    PERFORM hybrid._audit_sample_written(v_new);
    IF placement = 'dedicated' THEN
        EXECUTE format('ANALYZE %s', v_to);
        RETURN v_to;
    END IF;
    RETURN v_from;
END
$$;
COMMENT ON FUNCTION hybrid._move_rows(text, text) IS
'Moves tenant_id''s chunks from the pool to its partition (placement dedicated, the partition of key - 2^30, attached beforehand) or from its partition into the pool (placement pool, a new key of 2^30 and up), with its BM25 statistics, under its hybrid.tenant row locked FOR UPDATE (lock_timeout 10 s): writers wait, readers go on. Returns the partition it filled or emptied (NULL: the tenant was there already). Admin only: the caller must bypass RLS.';
REVOKE ALL ON FUNCTION hybrid._move_rows(text, text) FROM PUBLIC;

-- hybrid.move_tenant: a tenant moved between the pool and a partition of its own, online (admin)
CREATE OR REPLACE PROCEDURE hybrid.move_tenant(tenant_id text, placement text)
LANGUAGE plpgsql
-- no SET clause: a procedure with one cannot commit; every name is qualified
AS $$
DECLARE
    v_key integer := hybrid._tenant_key(tenant_id);
    v_part regclass;
    v_config text;
BEGIN
    IF v_key IS NULL THEN
        RAISE EXCEPTION 'tenant_id % does not exist', hybrid._shown(tenant_id) USING ERRCODE = '22023';
    END IF;
    IF placement IS NULL OR placement NOT IN ('pool', 'dedicated') THEN
        RAISE EXCEPTION 'placement must be pool or dedicated, got %', hybrid._shown(placement) USING ERRCODE = '22023';
    END IF;
    -- the tables force RLS: only a caller that bypasses it moves every row
    IF NOT (SELECT r.rolsuper OR r.rolbypassrls FROM pg_catalog.pg_roles r WHERE r.rolname = current_user) THEN
        RAISE EXCEPTION 'hybrid.move_tenant must be called by a superuser or a BYPASSRLS role, not %', current_user
            USING ERRCODE = '42501';
    END IF;
    IF hybrid._pooled(v_key) = (placement = 'pool') THEN
        RETURN;
    END IF;
    IF placement = 'dedicated' THEN
        -- 1. its partition, empty, attached under the key it will have (a moment of ACCESS EXCLUSIVE on the pool,
        --    whose CHECK proves it holds no row of that key), committed
        v_config := (SELECT t.text_config FROM hybrid.tenant t WHERE t.tenant_id = move_tenant.tenant_id);
        PERFORM hybrid._create_partition(v_key - 1073741824, v_config);
        COMMIT;
        -- 2. its rows and statistics moved there and its key changed, in one transaction
        PERFORM hybrid._move_rows(tenant_id, placement);
        COMMIT;
        -- 3. its BM25 index, filled row by row, merged to one segment, and its dense audit's sample cached, as after
        --    a load (hybrid.merge_bm25: a transaction of its own, the tenant's writes wait for it)
        PERFORM hybrid.merge_bm25(tenant_id);
        COMMIT;
        RETURN;
    END IF;
    -- 1. its rows into the pool under a new key, in one transaction; 2. its emptied partition detached (ACCESS
    --    EXCLUSIVE on hybrid.chunk for a moment, asked for 500 ms at a time) and dropped, last
    v_part := hybrid._move_rows(tenant_id, placement);
    COMMIT;
    IF v_part IS NOT NULL THEN
        PERFORM hybrid._drop_partition(v_part);
        COMMIT;
    END IF;
END
$$;
COMMENT ON PROCEDURE hybrid.move_tenant(text, text) IS
'Moves a tenant to placement: dedicated (a partition of its own, with its own indexes: first attached empty, then its rows, BM25 statistics and key moved in one transaction, then its BM25 index merged and its dense audit sample cached: hybrid.merge_bm25) or pool (its rows into hybrid.chunk_pool under a new key, then its old partition detached and dropped). Its searches go on throughout (a snapshot sees it in one place or the other, whole); its writes wait for the move''s last transaction and then write where it is. CALL it outside a transaction block: it commits between its steps. Admin only (a superuser or a BYPASSRLS role).';
REVOKE ALL ON PROCEDURE hybrid.move_tenant(text, text) FROM PUBLIC;

-- hybrid._forget_bm25_indexes: what is recorded of a partition's BM25 indexes, forgotten before it goes (admin)
CREATE OR REPLACE FUNCTION hybrid._forget_bm25_indexes(part regclass) RETURNS void
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
    DELETE FROM hybrid.bm25_merged m WHERE m.index_oid IN (SELECT x.indexrelid FROM pg_index x WHERE x.indrelid = part);
    DELETE FROM hybrid.bm25_audit a WHERE a.index_oid IN (SELECT x.indexrelid FROM pg_index x WHERE x.indrelid = part);
    DELETE FROM hybrid.bm25_index_checked c WHERE c.index_oid IN (SELECT x.indexrelid FROM pg_index x WHERE x.indrelid = part);
$$;
COMMENT ON FUNCTION hybrid._forget_bm25_indexes(regclass) IS
'Deletes what hybrid.bm25_merged, bm25_audit and bm25_index_checked record of the indexes of part (a partition about to be dropped: an index oid may be used again). hybrid._swap_partition and hybrid._drop_partition call it. Admin only.';
REVOKE ALL ON FUNCTION hybrid._forget_bm25_indexes(regclass) FROM PUBLIC;

-- hybrid._drop_partition: an emptied partition detached from hybrid.chunk and dropped (admin)
CREATE OR REPLACE FUNCTION hybrid._drop_partition(part regclass) RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, public, pg_temp
AS $$
DECLARE
    v_lock_timeout text := current_setting('lock_timeout');
BEGIN
    -- a search that holds hybrid.chunk and then asks for the partition waits behind this request: rather than
    -- deadlock with it, give up after a moment, let the searches through and ask again
    FOR attempt IN 1..40 LOOP
        BEGIN
            PERFORM set_config('lock_timeout', '500ms', true);
            EXECUTE format('ALTER TABLE hybrid.chunk DETACH PARTITION %s', part);
            EXIT;
        EXCEPTION WHEN lock_not_available OR deadlock_detected THEN
            IF attempt = 40 THEN
                RAISE EXCEPTION 'could not detach %: hybrid.chunk stayed busy (40 tries)', part
                    USING ERRCODE = '55P03', HINT = 'A long transaction holds hybrid.chunk; try again.';
            END IF;
            PERFORM pg_sleep(0.02 * attempt);
        END;
    END LOOP;
    PERFORM set_config('lock_timeout', v_lock_timeout, true);
    PERFORM hybrid._forget_bm25_indexes(part);
    -- last: dropping a BM25 index frees pg_textsearch's shared state at once, even if the transaction then rolls
    -- back (timescale/pg_textsearch#506), so nothing may fail after it
    EXECUTE format('DROP TABLE %s', part);
END
$$;
COMMENT ON FUNCTION hybrid._drop_partition(regclass) IS
'Detaches part from hybrid.chunk (ACCESS EXCLUSIVE on it, asked for at most 500 ms at a time, 40 times), forgets its BM25 indexes'' health records and drops it, last. Admin only.';
REVOKE ALL ON FUNCTION hybrid._drop_partition(regclass) FROM PUBLIC;

-- hybrid.pool_due: the pooled tenants large enough for a partition of their own (admin)
CREATE OR REPLACE FUNCTION hybrid.pool_due() RETURNS TABLE (tenant_id text, chunks bigint)
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT t.tenant_id, s.n_docs
    FROM hybrid.tenant t JOIN hybrid.bm25_tenant_stats s ON s.tenant_key = t.tenant_key
    WHERE hybrid._pooled(t.tenant_key)
      AND s.n_docs > coalesce((SELECT x.value::bigint FROM hybrid.setting x WHERE x.key = 'pool_max_chunks'), 2000)
    ORDER BY s.n_docs DESC, t.tenant_id
$$;
COMMENT ON FUNCTION hybrid.pool_due() IS
'The pooled tenants holding more chunks (their BM25 document count) than setting pool_max_chunks (default 2,000), largest first: what pyhybrid.maintenance.place_tenants moves to partitions of their own (hybrid.move_tenant). Admin only.';
REVOKE ALL ON FUNCTION hybrid.pool_due() FROM PUBLIC;

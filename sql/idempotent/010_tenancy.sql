-- Tenant context and tenant administration. Safe to run again.

-- hybrid._caller: the role that called, also inside SECURITY DEFINER functions
CREATE OR REPLACE FUNCTION hybrid._caller() RETURNS name
LANGUAGE sql STABLE PARALLEL SAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
    -- current_user is the definer inside a SECURITY DEFINER function; the role set by SET ROLE (an
    -- authenticator switching to an app role, as README's SQL example does), else the session's
    -- login role, is who called. Neither can be set to a role the session may not become.
    SELECT coalesce(nullif(current_setting('role'), 'none'), session_user)::name
$$;
COMMENT ON FUNCTION hybrid._caller() IS
'The calling role: the role set by SET ROLE, else the session user. Unlike current_user it stays the caller inside SECURITY DEFINER functions, so the tenant rules hold there too.';

-- hybrid._only_tenant: the one tenant of a login role granted exactly one, or NULL
CREATE OR REPLACE FUNCTION hybrid._only_tenant() RETURNS text
LANGUAGE plpgsql STABLE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    -- plpgsql, so that _current_tenant's inlined CASE holds a call, not a subquery that every RLS
    -- policy's plan would carry (5% of a graph hop, measured)
    RETURN (SELECT min(g.tenant_id) FROM hybrid.tenant_grant g WHERE g.role_name = hybrid._caller() HAVING count(*) = 1);
END
$$;
COMMENT ON FUNCTION hybrid._only_tenant() IS
'The tenant of a login role granted exactly one tenant (its implicit context), else NULL.';

-- hybrid._current_tenant: the tenant the caller acts for, or NULL
CREATE OR REPLACE FUNCTION hybrid._current_tenant() RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT CASE
        -- a tenant login role granted exactly one tenant acts for it without setting anything
        WHEN s.t IS NULL THEN hybrid._only_tenant()
        WHEN pg_has_role(hybrid._caller(), 'hybrid_app', 'MEMBER') THEN s.t
        WHEN EXISTS (SELECT 1 FROM hybrid.tenant_grant g
                     WHERE g.role_name = hybrid._caller() AND g.tenant_id = s.t) THEN s.t
    END
    FROM (SELECT nullif(btrim(current_setting('hybrid.tenant_id', true)), '') AS t) s
$$;
COMMENT ON FUNCTION hybrid._current_tenant() IS
'The tenant the caller acts for: hybrid.tenant_id when the caller is a trusted app role (member of hybrid_app) or a login role granted that tenant; with hybrid.tenant_id unset, the one tenant of a login role granted exactly one; NULL otherwise (fail closed).';

-- hybrid._current_acl: the ACL labels the caller holds
CREATE OR REPLACE FUNCTION hybrid._current_acl() RETURNS text[]
LANGUAGE sql STABLE PARALLEL SAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
    WITH requested AS (
        SELECT CASE WHEN nullif(btrim(current_setting('hybrid.acl_labels', true)), '') IS NULL THEN NULL
                    ELSE ARRAY(SELECT btrim(x) FROM unnest(string_to_array(current_setting('hybrid.acl_labels', true), ',')) x
                               WHERE btrim(x) <> '')
               END AS labels
    )
    SELECT CASE
        WHEN hybrid._current_tenant() IS NULL THEN '{}'::text[]
        WHEN pg_has_role(hybrid._caller(), 'hybrid_app', 'MEMBER') THEN coalesce(r.labels, '{}'::text[])
        ELSE coalesce((SELECT CASE WHEN '*' = ANY (g.acl_labels) THEN coalesce(r.labels, '{}'::text[])
                                   ELSE ARRAY(SELECT l FROM unnest(g.acl_labels) l WHERE r.labels IS NULL OR l = ANY (r.labels)) END
                       FROM hybrid.tenant_grant g
                       WHERE g.role_name = hybrid._caller() AND g.tenant_id = hybrid._current_tenant()), '{}'::text[])
    END
    FROM requested r
$$;
COMMENT ON FUNCTION hybrid._current_acl() IS
'ACL labels the caller holds: hybrid.acl_labels (comma-separated) for app roles and for tenant login roles granted every label (''*''); for other tenant login roles the labels granted to them, narrowed to hybrid.acl_labels when set. A chunk with ACL labels is visible only to callers holding at least one of them.';

-- hybrid._acl_all: whether the caller acts with every ACL label
CREATE OR REPLACE FUNCTION hybrid._acl_all() RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT CASE
        WHEN pg_has_role(hybrid._caller(), 'hybrid_app', 'MEMBER') THEN s.v = '*'
        -- a tenant login role granted every label holds them all unless it narrows them
        ELSE s.v IN ('', '*') AND EXISTS (SELECT 1 FROM hybrid.tenant_grant g
                                          WHERE g.role_name = hybrid._caller() AND g.tenant_id = hybrid._current_tenant()
                                            AND '*' = ANY (g.acl_labels))
    END
    FROM (SELECT coalesce(btrim(current_setting('hybrid.acl_labels', true)), '') AS v) s
$$;
COMMENT ON FUNCTION hybrid._acl_all() IS
'True when the caller sees every chunk of its tenant whatever the ACL: a trusted app role that set hybrid.acl_labels to ''*'', or a tenant login role granted every label (''*'') that did not narrow them (ingestion lifts writers to this).';

-- hybrid._trusted: whether a role is trusted with every tenant
CREATE OR REPLACE FUNCTION hybrid._trusted(role_name name) RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT pg_has_role(role_name, 'hybrid_app', 'MEMBER')
        OR coalesce((SELECT r.rolsuper FROM pg_roles r WHERE r.rolname = role_name), false)
$$;
COMMENT ON FUNCTION hybrid._trusted(name) IS
'Whether role_name is trusted with every tenant: an app role (member of hybrid_app) or a superuser.';

-- hybrid._may_write: whether the caller may write its tenant's chunks and graph
CREATE OR REPLACE FUNCTION hybrid._may_write() RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
    -- A writer sees every row it could collide with. A role whose ACL hides some chunks could
    -- otherwise tell a hidden chunk id from an unused one by writing it: refused, overwritten, or
    -- forked into a second row of the same id (which every full-visibility reader, export and
    -- fusion by id would then meet twice). So a login role writes only when granted every label.
    SELECT hybrid._trusted(hybrid._caller())
        OR EXISTS (SELECT 1 FROM hybrid.tenant_grant g
                   WHERE g.role_name = hybrid._caller() AND g.tenant_id = hybrid._current_tenant()
                     AND '*' = ANY (g.acl_labels))
$$;
COMMENT ON FUNCTION hybrid._may_write() IS
'Whether the caller may write its tenant (ingest, delete, load edges, register edge types): app roles and superusers, and tenant login roles granted every ACL label (''*''). Decided by the grant alone, never by the data.';

-- hybrid._check_writer: refuse a write by a role that may only read
CREATE OR REPLACE FUNCTION hybrid._check_writer() RETURNS void
LANGUAGE plpgsql STABLE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF NOT hybrid._may_write() THEN
        RAISE EXCEPTION 'role % may read tenant % but not write it: writing needs a grant of every ACL label',
            quote_ident(hybrid._caller()), quote_literal(hybrid._current_tenant())
            USING ERRCODE = '42501',
                  HINT = format('An admin grants it: SELECT hybrid.grant_tenant(%L, %L, ARRAY[''*'']).',
                                hybrid._caller(), hybrid._current_tenant());
    END IF;
    PERFORM hybrid._check_pool_writer();
END
$$;
COMMENT ON FUNCTION hybrid._check_writer() IS
'Raises 42501 unless hybrid._may_write(): the same answer for every write of a reading role, whatever the ids it names; and for a login role of a pooled tenant where a write would hold its leaf (hybrid._check_pool_writer).';

-- hybrid._check_bypasses_rls: an admin function that must see every tenant's rows checks its owner
CREATE OR REPLACE FUNCTION hybrid._check_bypasses_rls(fn regprocedure) RETURNS void
LANGUAGE plpgsql STABLE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    -- the tables force RLS: only an owner that bypasses it sees every tenant's rows
    IF NOT (SELECT r.rolsuper OR r.rolbypassrls FROM pg_roles r WHERE r.rolname = current_user) THEN
        RAISE EXCEPTION '% must be owned by a superuser or a BYPASSRLS role, not %', split_part(fn::text, '(', 1),
            current_user USING ERRCODE = '42501', HINT = format('ALTER FUNCTION %s OWNER TO a role that bypasses RLS.', fn);
    END IF;
END
$$;
COMMENT ON FUNCTION hybrid._check_bypasses_rls(regprocedure) IS
'Raises 42501 (naming fn and how to fix it) unless the current user, the owner of the SECURITY DEFINER function fn that calls it, is a superuser or bypasses RLS.';
REVOKE ALL ON FUNCTION hybrid._check_bypasses_rls(regprocedure) FROM PUBLIC;

-- hybrid._tenants_chosen: the tenants a maintenance function works on, one or all, every row of theirs in sight
CREATE OR REPLACE FUNCTION hybrid._tenants_chosen(fn regprocedure, chosen text)
RETURNS TABLE (tenant_id text, tenant_key integer)
LANGUAGE plpgsql STABLE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
BEGIN
    PERFORM hybrid._check_bypasses_rls(fn);
    IF chosen IS NOT NULL AND NOT EXISTS (SELECT 1 FROM hybrid.tenant t WHERE t.tenant_id = chosen) THEN
        RAISE EXCEPTION 'tenant_id % does not exist', hybrid._shown(chosen) USING ERRCODE = '22023';
    END IF;
    RETURN QUERY SELECT t.tenant_id, t.tenant_key FROM hybrid.tenant t WHERE chosen IS NULL OR t.tenant_id = chosen
                 ORDER BY t.tenant_key;
END
$$;
COMMENT ON FUNCTION hybrid._tenants_chosen(regprocedure, text) IS
'The tenants of fn, a maintenance function that works on one tenant or all (hybrid.rebuild_bm25_stats, bm25_stats_drift, audit_bm25, refresh_audit_samples): the tenant chosen (22023 naming it tenant_id if there is none such), or every tenant when it is NULL, in tenant_key order. First hybrid._check_bypasses_rls(fn): such a function must see every row.';
REVOKE ALL ON FUNCTION hybrid._tenants_chosen(regprocedure, text) FROM PUBLIC;

-- hybrid._with_all_labels: lift the ACL restriction for a writer
CREATE OR REPLACE FUNCTION hybrid._with_all_labels() RETURNS text
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    previous text := coalesce(current_setting('hybrid.acl_labels', true), '');
BEGIN
    IF hybrid._may_write() THEN
        PERFORM set_config('hybrid.acl_labels', '*', true);
    END IF;
    RETURN previous;
END
$$;
COMMENT ON FUNCTION hybrid._with_all_labels() IS
'For writers (hybrid._may_write), lifts the ACL restriction for the rest of the transaction (returns the previous labels to restore).';

-- hybrid._tenant_key: a tenant's partition key
CREATE OR REPLACE FUNCTION hybrid._tenant_key(tenant_id text) RETURNS integer
LANGUAGE sql STABLE PARALLEL SAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan  -- one btree lookup, planned once a session (hybrid._hnsw_dense_vectors)
AS $$ SELECT t.tenant_key FROM hybrid.tenant t WHERE t.tenant_id = _tenant_key.tenant_id $$;
COMMENT ON FUNCTION hybrid._tenant_key(text) IS
'The opaque integer that keys a tenant''s partition of hybrid.chunk (NULL for no such tenant). Statements on hybrid.chunk carry it as a constant (custom plans), so that the planner prunes to that one partition and locks nothing else.';
REVOKE ALL ON FUNCTION hybrid._tenant_key(text) FROM PUBLIC;

-- hybrid._scope: the caller's tenant, its partition key and ACL labels, read once by each function that reads chunks
CREATE OR REPLACE FUNCTION hybrid._scope(OUT tenant text, OUT key integer, OUT acl text[], OUT acl_all boolean)
LANGUAGE sql STABLE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT t.id, hybrid._tenant_key(t.id), hybrid._current_acl(), hybrid._acl_all()
    FROM (SELECT hybrid._current_tenant() AS id) t
$$;
COMMENT ON FUNCTION hybrid._scope() IS
'The caller''s tenant (hybrid._current_tenant), its partition key (hybrid._tenant_key; NULL for no such tenant), its ACL labels (hybrid._current_acl) and whether they are every label (hybrid._acl_all): what a function reading chunks checks each row against, written once.';
REVOKE ALL ON FUNCTION hybrid._scope() FROM PUBLIC;

-- hybrid._pooled: whether a tenant key is a pooled tenant's
CREATE OR REPLACE FUNCTION hybrid._pooled(tenant_key integer) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT tenant_key >= 1073741824 $$;
COMMENT ON FUNCTION hybrid._pooled(integer) IS
'Whether tenant_key is a pooled tenant''s: pooled tenants have keys of 2^30 and up (their rows route to hybrid.chunk_pool, the DEFAULT partition, whose CHECK says so), dedicated ones keys below, each its partition hybrid.chunk_p<key>.';
REVOKE ALL ON FUNCTION hybrid._pooled(integer) FROM PUBLIC;

-- hybrid._writer_key: a tenant's key for a write, held until the transaction ends
CREATE OR REPLACE FUNCTION hybrid._writer_key(tenant text) RETURNS integer
LANGUAGE sql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$ SELECT t.tenant_key FROM hybrid.tenant t WHERE t.tenant_id = _writer_key.tenant FOR KEY SHARE $$;
COMMENT ON FUNCTION hybrid._writer_key(text) IS
'The key of tenant (NULL for none) for a loader, its hybrid.tenant row locked FOR KEY SHARE to the end of the transaction: a tenant''s move between the pool and a partition of its own (hybrid.move_tenant) changes the key under FOR UPDATE, so it waits for the writes in flight, and a write that starts meanwhile waits for it and then writes under the new key.';
REVOKE ALL ON FUNCTION hybrid._writer_key(text) FROM PUBLIC;

-- hybrid._writer_scope: the caller's tenant and partition key for a write, or why there is none
CREATE OR REPLACE FUNCTION hybrid._writer_scope(OUT tenant text, OUT key integer)
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    tenant := hybrid._current_tenant();
    IF tenant IS NULL THEN
        RAISE EXCEPTION 'no tenant: set hybrid.tenant_id to a tenant this role may act for'
            USING ERRCODE = '42501';
    END IF;
    key := hybrid._writer_key(tenant);
    IF key IS NULL THEN
        RAISE EXCEPTION 'tenant_id % does not exist', hybrid._shown(tenant)
            USING ERRCODE = '22023', HINT = 'An admin creates it first: SELECT hybrid.create_tenant(...).';
    END IF;
END
$$;
COMMENT ON FUNCTION hybrid._writer_scope() IS
'The caller''s tenant (hybrid._current_tenant) and its key, held for the transaction (hybrid._writer_key), for a loader: 42501 without a tenant, 22023 for a tenant that does not exist.';
REVOKE ALL ON FUNCTION hybrid._writer_scope() FROM PUBLIC;

-- hybrid._corpus_writer: the caller's tenant and partition key for a write to a corpus, or why there is none
CREATE OR REPLACE FUNCTION hybrid._corpus_writer(corpus_id text, OUT tenant text, OUT key integer)
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    SELECT s.tenant, s.key INTO tenant, key FROM hybrid._writer_scope() s;  -- or why there is none
    IF corpus_id IS NULL OR btrim(corpus_id) = '' THEN
        RAISE EXCEPTION 'corpus_id must not be empty' USING ERRCODE = '22023';
    END IF;
    PERFORM hybrid._check_writer();
END
$$;
COMMENT ON FUNCTION hybrid._corpus_writer(text) IS
'The caller''s tenant and partition key (hybrid._writer_scope) for a write to corpus_id: also 22023 for an empty corpus_id and 42501 for a role that may only read (hybrid._check_writer).';
REVOKE ALL ON FUNCTION hybrid._corpus_writer(text) FROM PUBLIC;

-- hybrid._chunk_partition: the partition of a tenant key
CREATE OR REPLACE FUNCTION hybrid._chunk_partition(tenant_key integer) RETURNS regclass
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan  -- planned once a session: 24 against 7 us a call under the branches' force_custom_plan
AS $$ SELECT to_regclass(format('hybrid.%I', 'chunk_p' || tenant_key)) $$;
COMMENT ON FUNCTION hybrid._chunk_partition(integer) IS
'hybrid.chunk_p<tenant_key>: the partition of hybrid.chunk holding one tenant''s chunks (named by the opaque key, never by the tenant id).';
REVOKE ALL ON FUNCTION hybrid._chunk_partition(integer) FROM PUBLIC;

-- hybrid._text_config: a tenant's text search configuration, by its partition key
CREATE OR REPLACE FUNCTION hybrid._text_config(tenant_key integer) RETURNS regconfig
LANGUAGE sql STABLE PARALLEL SAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan  -- one btree lookup, planned once a session (hybrid._tenant_key)
AS $$
    SELECT coalesce((SELECT t.text_config FROM hybrid.tenant t WHERE t.tenant_key = _text_config.tenant_key),
                    'english')::regconfig
$$;
COMMENT ON FUNCTION hybrid._text_config(integer) IS
'The text search configuration of the tenant with this partition key (hybrid.tenant.text_config; english for none): what its queries are turned into lexemes with, as its partition''s tsv and BM25 index turn its content.';
REVOKE ALL ON FUNCTION hybrid._text_config(integer) FROM PUBLIC;

-- hybrid._partition_table: a plain table shaped as a partition of hybrid.chunk, its tsv in a configuration (admin)
CREATE OR REPLACE FUNCTION hybrid._partition_table(name text, config text) RETURNS regclass
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, public, pg_temp
AS $$
BEGIN
    -- LIKE copies the columns' storage, not the table's: toast_tuple_target as the pool's (revision 0026)
    EXECUTE format('CREATE TABLE hybrid.%I (LIKE hybrid.chunk INCLUDING DEFAULTS INCLUDING GENERATED INCLUDING CONSTRAINTS INCLUDING STORAGE)%s',
                   name, coalesce((SELECT ' WITH (' || string_agg(o, ', ') || ')' FROM pg_class k, unnest(k.reloptions) o
                                   WHERE k.oid = to_regclass('hybrid.chunk_pool_0') AND o LIKE 'toast_tuple_target=%'), ''));
    IF config <> 'english' THEN  -- a partition may generate its column its own way (PostgreSQL 18); empty: instant
        EXECUTE format('ALTER TABLE hybrid.%I ALTER COLUMN tsv SET EXPRESSION AS (to_tsvector(%L::regconfig, content))',
                       name, config);
    END IF;
    RETURN format('hybrid.%I', name)::regclass;
END
$$;
COMMENT ON FUNCTION hybrid._partition_table(text, text) IS
'Creates hybrid.<name>, a plain table shaped as hybrid.chunk (defaults, generated column, constraints, storage; the pool''s toast_tuple_target) whose tsv is to_tsvector(config, content): what hybrid._create_partition and hybrid._swap_partition attach. Admin only.';
REVOKE ALL ON FUNCTION hybrid._partition_table(text, text) FROM PUBLIC;

-- hybrid._create_partition: a tenant's partition with its indexes (admin)
CREATE OR REPLACE FUNCTION hybrid._create_partition(tenant_key integer, config text DEFAULT NULL) RETURNS regclass
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, public, pg_temp
SET client_min_messages = warning
AS $$
DECLARE
    v_name text := 'chunk_p' || tenant_key;
    v_config text := coalesce(config, hybrid._text_config(tenant_key)::text);
    attempt integer;
BEGIN
    IF hybrid._chunk_partition(tenant_key) IS NOT NULL THEN
        RETURN hybrid._chunk_partition(tenant_key);
    END IF;
    -- a plain table first, then ATTACH: that takes SHARE UPDATE EXCLUSIVE on hybrid.chunk, which
    -- readers and writers do not wait for (CREATE TABLE ... PARTITION OF would take ACCESS EXCLUSIVE
    -- and queue every tenant's retrieval behind any open transaction); ATTACH builds the parent's
    -- indexes on the empty table
    PERFORM hybrid._partition_table(v_name, v_config);
    IF v_config <> 'english' AND to_regclass('hybrid.chunk_content_bm25') IS NOT NULL THEN
        -- its BM25 index in its tenant's language, which ATTACH adopts (it would build one in the parent's)
        EXECUTE hybrid._text_index_sql('bm25', format('hybrid.%I', v_name)::regclass, v_name || '_content_idx');
    END IF;
    FOR attempt IN 1..5 LOOP
        BEGIN
            PERFORM set_config('lock_timeout', '2s', true);
            -- (ACCESS EXCLUSIVE on the pool, hybrid.chunk's DEFAULT partition, for a moment: its CHECK proves it holds
            -- no row of this key without a scan)
            EXECUTE format('ALTER TABLE hybrid.chunk ATTACH PARTITION hybrid.%I FOR VALUES IN (%s)', v_name, tenant_key);
            EXIT;
        EXCEPTION WHEN lock_not_available THEN
            IF attempt = 5 THEN
                RAISE EXCEPTION 'could not attach the partition of a new tenant: hybrid.chunk stayed locked (5 tries of 2 s)'
                    USING ERRCODE = '55P03', HINT = 'An open transaction holds a lock on hybrid.chunk; retry create_tenant.';
            END IF;
        END;
    END LOOP;
    PERFORM hybrid._secure_chunks(hybrid._chunk_partition(tenant_key));
    RETURN hybrid._chunk_partition(tenant_key);
END
$$;
COMMENT ON FUNCTION hybrid._create_partition(integer, text) IS
'Creates and attaches hybrid.chunk_p<tenant_key> (idempotent): a plain table (hybrid._partition_table, its tsv in config, by default the language of the tenant of that key) attached with SHARE UPDATE EXCLUSIVE on hybrid.chunk (lock_timeout 2 s, 5 tries), which gets the parent''s indexes (its BM25 one built beforehand in the tenant''s language), RLS forced and the parent''s policies. Admin only.';
REVOKE ALL ON FUNCTION hybrid._create_partition(integer, text) FROM PUBLIC;

-- hybrid._analyze_partition: refresh a tenant partition's statistics when a load outgrew them
CREATE OR REPLACE FUNCTION hybrid._analyze_partition(tenant_key integer, added bigint) RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_part regclass := hybrid._chunk_partition(tenant_key);
    v_rows real := (SELECT c.reltuples FROM pg_class c WHERE c.oid = v_part);
BEGIN
    -- A partition the planner has no statistics for looks tiny: joins against it (finish_edges
    -- asking which nodes are chunks) went to nested loops over it, quadratic in the batch (15 s for
    -- 30,000 edges of a new tenant at 1M chunks). Refresh them when a load at least doubles what they
    -- describe; autovacuum would, later.
    IF v_part IS NULL OR added < 1000 OR (v_rows >= 0 AND added < v_rows) THEN
        RETURN false;
    END IF;
    EXECUTE format('ANALYZE %s', v_part);
    RETURN true;
END
$$;
COMMENT ON FUNCTION hybrid._analyze_partition(integer, bigint) IS
'ANALYZEs a tenant''s partition when a load of added rows (at least 1,000) at least doubles what its statistics describe; returns whether it did. hybrid.finish_ingest calls it.';
REVOKE ALL ON FUNCTION hybrid._analyze_partition(integer, bigint) FROM PUBLIC;

-- hybrid._placement: a placement checked, or the install's default for none
CREATE OR REPLACE FUNCTION hybrid._placement(placement text) RETURNS text
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v text := coalesce(placement, (SELECT s.value FROM hybrid.setting s WHERE s.key = 'tenant_placement'), 'pool');
BEGIN
    IF v NOT IN ('pool', 'dedicated') THEN
        RAISE EXCEPTION '% must be pool or dedicated, got %',
            CASE WHEN placement IS NULL THEN 'setting tenant_placement' ELSE 'placement' END, hybrid._shown(v)
            USING ERRCODE = '22023';
    END IF;
    RETURN v;
END
$$;
COMMENT ON FUNCTION hybrid._placement(text) IS
'placement checked (pool or dedicated, else 22023 naming it), or for NULL setting tenant_placement (default pool).';
REVOKE ALL ON FUNCTION hybrid._placement(text) FROM PUBLIC;

-- hybrid.create_tenant: create a tenant (admin)
CREATE OR REPLACE FUNCTION hybrid.create_tenant(tenant_id text, language text DEFAULT NULL, placement text DEFAULT NULL)
RETURNS text
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_config text := CASE WHEN language IS NOT NULL THEN hybrid._language(language) END;
    v_placement text := hybrid._placement(placement);
    v_had text;
    v_key integer;
BEGIN
    IF tenant_id IS NULL OR tenant_id !~ '^[A-Za-z0-9][A-Za-z0-9_.:-]{0,62}$' THEN
        RAISE EXCEPTION 'tenant_id must match ^[A-Za-z0-9][A-Za-z0-9_.:-]{0,62}$, got %', hybrid._shown(tenant_id)
            USING ERRCODE = '22023', HINT = 'Use letters, digits, and _ . : - (at most 63 characters).';
    END IF;
    v_had := (SELECT t.text_config FROM hybrid.tenant t WHERE t.tenant_id = create_tenant.tenant_id);
    IF v_had IS NOT NULL AND v_config IS NOT NULL AND v_had <> v_config THEN
        RAISE EXCEPTION 'tenant % exists in language %, not %', hybrid._shown(tenant_id), v_had, v_config
            USING ERRCODE = '22023', HINT = 'Change it with hybrid.set_tenant_language (it rebuilds the tenant''s lexical side).';
    END IF;
    -- a pooled tenant is a row here and nothing more (its chunks go to the pool under a key of 2^30 and up); a
    -- dedicated one gets its partition. An existing tenant stays where it is (hybrid.move_tenant moves it)
    INSERT INTO hybrid.tenant AS t (tenant_id, text_config, tenant_key)
    VALUES (create_tenant.tenant_id, coalesce(v_config, 'english'),
            nextval('hybrid.tenant_key_seq') + CASE v_placement WHEN 'pool' THEN 1073741824 ELSE 0 END)
    ON CONFLICT ON CONSTRAINT tenant_pkey DO NOTHING;
    v_key := hybrid._tenant_key(tenant_id);
    IF NOT hybrid._pooled(v_key) THEN
        PERFORM hybrid._create_partition(v_key);
    END IF;
    RETURN tenant_id;
END
$$;
COMMENT ON FUNCTION hybrid.create_tenant(text, text, text) IS
'Creates a tenant (idempotent) in language (a text search configuration, hybrid.set_tenant_language; default english) and placement: pool (its chunks in hybrid.chunk_pool, no relation of its own) or dedicated (its own partition of hybrid.chunk); NULL: setting tenant_placement (default pool). Returns its id; 22023 for an existing tenant of another language (an existing one keeps its placement: hybrid.move_tenant moves it). Admin only.';
REVOKE ALL ON FUNCTION hybrid.create_tenant(text, text, text) FROM PUBLIC;

-- hybrid.drop_tenant: remove a tenant and everything it holds (admin)
CREATE OR REPLACE FUNCTION hybrid.drop_tenant(tenant_id text)
RETURNS TABLE (what text, removed bigint)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_chunks bigint := 0;
    v_corpora bigint := 0;
    v_grants bigint := 0;
    v_nodes bigint := 0;
    v_vertices bigint := 0;
    v_edges bigint := 0;
    v_part regclass;
    v_fk name;
BEGIN
    PERFORM hybrid._check_bypasses_rls('hybrid.drop_tenant(text)');  -- it must see every row it removes
    IF tenant_id IS NULL OR NOT EXISTS (SELECT 1 FROM hybrid.tenant t WHERE t.tenant_id = drop_tenant.tenant_id) THEN
        RAISE EXCEPTION 'tenant_id % does not exist', hybrid._shown(tenant_id)
            USING ERRCODE = '22023';
    END IF;
    -- no loader of this tenant's graph runs meanwhile (hybrid.finish_edges takes the same lock)
    PERFORM pg_advisory_xact_lock(hashtext('hybrid.finish_edges'), hashtext(tenant_id));
    IF to_regclass('hybrid.graph_node') IS NOT NULL THEN
        -- edges join only nodes of one tenant, so the tenant's vertices find all its edges, by the
        -- start_id / end_id btrees of every edge label (no scan of other tenants' edges)
        EXECUTE $sql$
            WITH x AS (DELETE FROM hybrid_graph._ag_label_edge x USING hybrid.graph_node g
                       WHERE g.tenant_id = $1 AND x.start_id OPERATOR(ag_catalog.=) g.vertex_id RETURNING 1)
            SELECT count(*) FROM x$sql$ INTO v_edges USING tenant_id;
        EXECUTE $sql$
            WITH x AS (DELETE FROM hybrid_graph._ag_label_edge x USING hybrid.graph_node g
                       WHERE g.tenant_id = $1 AND x.end_id OPERATOR(ag_catalog.=) g.vertex_id RETURNING 1)
            SELECT count(*) FROM x$sql$ INTO v_nodes USING tenant_id;
        v_edges := v_edges + v_nodes;
        EXECUTE $sql$
            WITH x AS (DELETE FROM hybrid_graph._ag_label_vertex x USING hybrid.graph_node g
                       WHERE g.tenant_id = $1 AND x.id OPERATOR(ag_catalog.=) g.vertex_id RETURNING 1)
            SELECT count(*) FROM x$sql$ INTO v_vertices USING tenant_id;
        EXECUTE 'WITH x AS (DELETE FROM hybrid.graph_node g WHERE g.tenant_id = $1 RETURNING 1) SELECT count(*) FROM x'
            INTO v_nodes USING tenant_id;
    END IF;
    WITH x AS (DELETE FROM hybrid.tenant_grant g WHERE g.tenant_id = drop_tenant.tenant_id RETURNING 1)
    SELECT count(*) INTO v_grants FROM x;
    v_part := hybrid._chunk_partition(hybrid._tenant_key(tenant_id));
    IF hybrid._pooled(hybrid._writer_key(tenant_id)) THEN
        -- a pooled tenant's rows out of the pool (its statistics follow, by hybrid.chunk's triggers), the key a
        -- constant so that one leaf is planned; no move of it runs meanwhile (hybrid._writer_key)
        EXECUTE format('WITH x AS (DELETE FROM hybrid.chunk c WHERE c.tenant_key = %s AND c.tenant_id = $1 RETURNING 1) '
                       'SELECT count(*) FROM x', hybrid._tenant_key(tenant_id))
        INTO v_chunks USING tenant_id;
        v_part := NULL;
    ELSIF v_part IS NOT NULL THEN
        EXECUTE format('SELECT count(*) FROM %s', v_part) INTO v_chunks;
        -- out of hybrid.chunk first (ACCESS EXCLUSIVE on it, briefly: lock_timeout 5 s); a foreign key
        -- to corpus it may carry from before 0.3 is dropped, so deleting the corpora does not cascade
        PERFORM set_config('lock_timeout', '5s', true);
        EXECUTE format('ALTER TABLE hybrid.chunk DETACH PARTITION %s', v_part);
        FOR v_fk IN SELECT conname FROM pg_constraint WHERE conrelid = v_part AND contype = 'f' LOOP
            EXECUTE format('ALTER TABLE %s DROP CONSTRAINT %I', v_part, v_fk);
        END LOOP;
    END IF;
    WITH x AS (DELETE FROM hybrid.corpus c WHERE c.tenant_id = drop_tenant.tenant_id RETURNING 1)
    SELECT count(*) INTO v_corpora FROM x;
    -- its BM25 statistics (its row of hybrid.bm25_tenant_stats goes with the tenant's)
    DELETE FROM hybrid.bm25_term_stats s WHERE s.tenant_key = hybrid._tenant_key(drop_tenant.tenant_id);
    DELETE FROM hybrid.tenant t WHERE t.tenant_id = drop_tenant.tenant_id;
    IF v_part IS NOT NULL THEN
        -- last: dropping a BM25 index frees pg_textsearch's shared state at once, even if the
        -- transaction then rolls back (timescale/pg_textsearch#506), so nothing may fail after it
        EXECUTE format('DROP TABLE %s', v_part);
    END IF;
    RETURN QUERY VALUES ('chunks', v_chunks), ('corpora', v_corpora), ('graph_nodes', v_nodes),
                        ('vertices', v_vertices), ('edges', v_edges), ('grants', v_grants);
END
$$;
COMMENT ON FUNCTION hybrid.drop_tenant(text) IS
'Removes a tenant and everything it holds: its chunks (superseded ones too), corpora, graph nodes, AGE vertices and edges, and its role bindings (the roles themselves stay). Returns how many of each it removed. One transaction: all or nothing. Admin only.';
REVOKE ALL ON FUNCTION hybrid.drop_tenant(text) FROM PUBLIC;

-- hybrid._grant_base: what every pyhybrid role gets
CREATE OR REPLACE FUNCTION hybrid._grant_base(role_name name) RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles r WHERE r.rolname = role_name) THEN
        RAISE EXCEPTION 'role_name % does not exist', quote_ident(role_name)
            USING ERRCODE = '42704', HINT = 'CREATE ROLE it first.';
    END IF;
    EXECUTE format('GRANT hybrid_user TO %I', role_name);
    -- A non-superuser cannot LOAD 'age'; preloading it per role lets Cypher work for it.
    IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'age')
       AND (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN
        EXECUTE format('ALTER ROLE %I SET session_preload_libraries = %L', role_name, 'age');
    END IF;
END
$$;
REVOKE ALL ON FUNCTION hybrid._grant_base(name) FROM PUBLIC;

-- hybrid.grant_tenant: bind a login role to a tenant (admin)
CREATE OR REPLACE FUNCTION hybrid.grant_tenant(role_name name, tenant_id text, acl_labels text[] DEFAULT '{}')
RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_setting text;
    v_value text;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM hybrid.tenant t WHERE t.tenant_id = grant_tenant.tenant_id) THEN
        RAISE EXCEPTION 'tenant_id % does not exist', hybrid._shown(tenant_id)
            USING ERRCODE = '22023', HINT = 'Call hybrid.create_tenant first.';
    END IF;
    IF '*' = ANY (acl_labels) AND cardinality(acl_labels) > 1 THEN
        RAISE EXCEPTION 'acl_labels: ''*'' (every label) stands alone, got %', acl_labels
            USING ERRCODE = '22023';
    END IF;
    PERFORM hybrid._grant_base(role_name);
    IF '*' = ANY (acl_labels) THEN
        PERFORM hybrid._pool_write_check(tenant_id, role_name);  -- a writer of a pooled tenant: refused where it holds
    END IF;
    -- a tenant login role holding a transaction open, or a lock, would stall every tenant's DDL paths
    -- (tenant creation, REINDEX, migrate): bound it, unless an admin already chose a value here
    IF (SELECT r.rolsuper OR r.rolcreaterole FROM pg_roles r WHERE r.rolname = current_user) THEN
        FOR v_setting, v_value IN VALUES ('statement_timeout', '30s'), ('lock_timeout', '5s'),
                                         ('idle_in_transaction_session_timeout', '60s') LOOP
            IF NOT EXISTS (SELECT 1 FROM pg_db_role_setting d, unnest(d.setconfig) c
                           WHERE d.setrole = (SELECT oid FROM pg_roles WHERE rolname = role_name)
                             AND d.setdatabase = (SELECT oid FROM pg_database WHERE datname = current_database())
                             AND c LIKE v_setting || '=%') THEN
                EXECUTE format('ALTER ROLE %I IN DATABASE %I SET %s = %L', role_name, current_database(),
                               v_setting, v_value);
            END IF;
        END LOOP;
    END IF;
    INSERT INTO hybrid.tenant_grant AS g (role_name, tenant_id, acl_labels)
    VALUES (grant_tenant.role_name, grant_tenant.tenant_id, coalesce(grant_tenant.acl_labels, '{}'))
    ON CONFLICT ON CONSTRAINT tenant_grant_pkey DO UPDATE SET acl_labels = excluded.acl_labels;
END
$$;
COMMENT ON FUNCTION hybrid.grant_tenant(name, text, text[]) IS
'Binds an existing login role to a tenant (and the ACL labels it may claim there; ARRAY[''*''] for every label, which writing the tenant needs, refused for a pooled tenant on pg_textsearch before 1.1.0 with 42501: hybrid._pool_write_check). A role granted one tenant acts for it; one granted several acts for the one it sets in hybrid.tenant_id. In this database the role gets statement_timeout 30s, lock_timeout 5s and idle_in_transaction_session_timeout 60s unless already set (ALTER ROLE ... IN DATABASE ... SET changes them). Admin only.';
REVOKE ALL ON FUNCTION hybrid.grant_tenant(name, text, text[]) FROM PUBLIC;

-- hybrid.revoke_tenant: unbind a login role from a tenant (admin)
CREATE OR REPLACE FUNCTION hybrid.revoke_tenant(role_name name, tenant_id text) RETURNS void
LANGUAGE sql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    DELETE FROM hybrid.tenant_grant g WHERE g.role_name = revoke_tenant.role_name AND g.tenant_id = revoke_tenant.tenant_id;
$$;
COMMENT ON FUNCTION hybrid.revoke_tenant(name, text) IS 'Removes a role''s binding to a tenant. Admin only.';
REVOKE ALL ON FUNCTION hybrid.revoke_tenant(name, text) FROM PUBLIC;

-- hybrid.grant_app: make a role a trusted app role (admin)
CREATE OR REPLACE FUNCTION hybrid.grant_app(role_name name) RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM hybrid._grant_base(role_name);
    EXECUTE format('GRANT hybrid_app TO %I', role_name);
END
$$;
COMMENT ON FUNCTION hybrid.grant_app(name) IS
'Makes an existing role a trusted application role: it may act for any tenant by setting hybrid.tenant_id (and hybrid.acl_labels) per transaction. Admin only.';
REVOKE ALL ON FUNCTION hybrid.grant_app(name) FROM PUBLIC;

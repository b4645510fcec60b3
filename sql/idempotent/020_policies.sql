-- Row-level security policies: a caller sees and writes only the rows of the tenant it acts for.
-- (SELECT fn()) runs once per statement as an InitPlan, and lets the tenant btree serve the filter.

DROP POLICY IF EXISTS tenant_visible ON hybrid.tenant;
CREATE POLICY tenant_visible ON hybrid.tenant FOR SELECT
    USING (tenant_id = (SELECT hybrid._current_tenant()));

-- hybrid.calibrate_abstention (owned by hybrid_definer) writes the current tenant's floor, and nothing else
DROP POLICY IF EXISTS tenant_floor ON hybrid.tenant;
CREATE POLICY tenant_floor ON hybrid.tenant FOR UPDATE TO hybrid_definer
    USING (tenant_id = (SELECT hybrid._current_tenant())) WITH CHECK (tenant_id = (SELECT hybrid._current_tenant()));

DROP POLICY IF EXISTS tenant_grant_own ON hybrid.tenant_grant;
CREATE POLICY tenant_grant_own ON hybrid.tenant_grant FOR SELECT
    USING (role_name = hybrid._caller());

DROP POLICY IF EXISTS corpus_select ON hybrid.corpus;
DROP POLICY IF EXISTS corpus_insert ON hybrid.corpus;
DROP POLICY IF EXISTS corpus_update ON hybrid.corpus;
DROP POLICY IF EXISTS corpus_delete ON hybrid.corpus;
CREATE POLICY corpus_select ON hybrid.corpus FOR SELECT
    USING (tenant_id = (SELECT hybrid._current_tenant()));
CREATE POLICY corpus_insert ON hybrid.corpus FOR INSERT
    WITH CHECK (tenant_id = (SELECT hybrid._current_tenant()));
CREATE POLICY corpus_update ON hybrid.corpus FOR UPDATE
    USING (tenant_id = (SELECT hybrid._current_tenant()))
    WITH CHECK (tenant_id = (SELECT hybrid._current_tenant()));
CREATE POLICY corpus_delete ON hybrid.corpus FOR DELETE
    USING (tenant_id = (SELECT hybrid._current_tenant()));

-- hybrid._secure_chunks: the chunk policies, on hybrid.chunk and (a second wall) on each partition
CREATE OR REPLACE FUNCTION hybrid._secure_chunks(tbl regclass) RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET client_min_messages = warning
AS $$
DECLARE
    -- ACL: a chunk with labels is visible only to a caller holding at least one of them
    v_see text := '(tenant_id = (SELECT hybrid._current_tenant()) AND (acl_labels = ''{}'' OR acl_labels && '
                  '(SELECT hybrid._current_acl()) OR (SELECT hybrid._acl_all())))';
    v_own text := '(tenant_id = (SELECT hybrid._current_tenant()))';
    p text;
BEGIN
    FOREACH p IN ARRAY ARRAY['select', 'insert', 'update', 'delete'] LOOP
        EXECUTE format('DROP POLICY IF EXISTS %I ON %s', 'chunk_' || p, tbl);
    END LOOP;
    EXECUTE format('CREATE POLICY chunk_select ON %s FOR SELECT USING %s', tbl, v_see);
    EXECUTE format('CREATE POLICY chunk_insert ON %s FOR INSERT WITH CHECK %s', tbl, v_own);
    EXECUTE format('CREATE POLICY chunk_update ON %s FOR UPDATE USING %s WITH CHECK %s', tbl, v_see, v_own);
    EXECUTE format('CREATE POLICY chunk_delete ON %s FOR DELETE USING %s', tbl, v_see);
    EXECUTE format('ALTER TABLE %s ENABLE ROW LEVEL SECURITY', tbl);
    EXECUTE format('ALTER TABLE %s FORCE ROW LEVEL SECURITY', tbl);
    IF tbl <> 'hybrid.chunk'::regclass THEN
        -- a partition queried by name gets no policy of the parent's: nobody but its owner holds a
        -- privilege on it, and its own policies are a second wall
        EXECUTE format('REVOKE ALL ON %s FROM PUBLIC', tbl);
        -- the BM25 branch reads the tenant's partition by name (pg_textsearch scores a partition's
        -- rows right only through its own index), as hybrid_definer, under these policies
        EXECUTE format('GRANT SELECT ON %s TO hybrid_definer', tbl);
    END IF;
END
$$;
COMMENT ON FUNCTION hybrid._secure_chunks(regclass) IS
'(Re)creates the chunk policies (tenant and ACL) on hybrid.chunk or one of its partitions and forces RLS there; a partition also loses every privilege but its owner''s and hybrid_definer''s SELECT (the BM25 branch reads it by name). hybrid._create_partition calls it for a new partition. Admin only.';
REVOKE ALL ON FUNCTION hybrid._secure_chunks(regclass) FROM PUBLIC;

-- hybrid._chunks_secured: whether a partition already is as hybrid._secure_chunks leaves it (read from the catalogs)
CREATE OR REPLACE FUNCTION hybrid._chunks_secured(tbl regclass) RETURNS boolean
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    -- RLS enabled and forced; the parent's four policies, alike; no privilege but the owner's and hybrid_definer's
    -- SELECT. Catalog reads lock no partition, so re-applying sql/idempotent at any tenant count locks only the
    -- partitions that need it (docs/tenancy.md#many-tenants-and-the-lock-table)
    SELECT c.relrowsecurity AND c.relforcerowsecurity
       AND (SELECT count(*) FROM pg_policy x WHERE x.polrelid = tbl) = 4
       AND (SELECT count(*) FROM pg_policy x JOIN pg_policy y ON y.polrelid = 'hybrid.chunk'::regclass
                AND y.polname = x.polname AND y.polcmd = x.polcmd AND y.polpermissive = x.polpermissive
                AND y.polroles = x.polroles
                AND pg_get_expr(y.polqual, y.polrelid) IS NOT DISTINCT FROM pg_get_expr(x.polqual, x.polrelid)
                AND pg_get_expr(y.polwithcheck, y.polrelid) IS NOT DISTINCT FROM pg_get_expr(x.polwithcheck, x.polrelid)
            WHERE x.polrelid = tbl) = 4
       AND EXISTS (SELECT 1 FROM aclexplode(c.relacl) a
                   WHERE a.grantee = 'hybrid_definer'::regrole AND a.privilege_type = 'SELECT' AND NOT a.is_grantable)
       AND NOT EXISTS (SELECT 1 FROM aclexplode(c.relacl) a
                       WHERE a.grantee <> c.relowner AND NOT (a.grantee = 'hybrid_definer'::regrole
                                                                AND a.privilege_type = 'SELECT'))
    FROM pg_class c WHERE c.oid = tbl
$$;
COMMENT ON FUNCTION hybrid._chunks_secured(regclass) IS
'Whether a partition of hybrid.chunk already has what hybrid._secure_chunks gives it (RLS forced, the parent''s four policies, only its owner''s privileges and hybrid_definer''s SELECT), read from the catalogs without locking it.';
REVOKE ALL ON FUNCTION hybrid._chunks_secured(regclass) FROM PUBLIC;

-- a wrapper of _secure_chunks an earlier 0.3 development build installed
DROP FUNCTION IF EXISTS hybrid._secure_partition(regclass);

-- every dedicated tenant has its partition (one missing, say after a restore of hybrid.tenant alone, is created)
SELECT hybrid._create_partition(t.tenant_key) FROM hybrid.tenant t
WHERE NOT hybrid._pooled(t.tenant_key) AND hybrid._chunk_partition(t.tenant_key) IS NULL;
SELECT hybrid._secure_chunks('hybrid.chunk');
-- the partitions, and the pool's leaves under hybrid.chunk_pool (pg_inherits: pg_partition_tree would lock them all)
WITH RECURSIVE part AS (SELECT i.inhrelid FROM pg_inherits i WHERE i.inhparent = 'hybrid.chunk'::regclass
                        UNION ALL
                        SELECT i.inhrelid FROM pg_inherits i JOIN part p ON i.inhparent = p.inhrelid)
SELECT hybrid._secure_chunks(p.inhrelid::regclass) FROM part p
WHERE NOT coalesce(hybrid._chunks_secured(p.inhrelid::regclass), false);

-- edge type names are tenant data: the loaders (hybrid_definer) read and register the caller's
-- tenant's; app roles may read them; nobody else sees a row
DROP POLICY IF EXISTS edge_type_definer ON hybrid.edge_type;
DROP POLICY IF EXISTS edge_type_app ON hybrid.edge_type;
CREATE POLICY edge_type_definer ON hybrid.edge_type TO hybrid_definer
    USING (tenant_id = (SELECT hybrid._current_tenant()))
    WITH CHECK (tenant_id = (SELECT hybrid._current_tenant()));
CREATE POLICY edge_type_app ON hybrid.edge_type FOR SELECT TO hybrid_app
    USING (tenant_id = (SELECT hybrid._current_tenant()));

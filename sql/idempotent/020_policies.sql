-- Row-level security policies: a caller sees and writes only the rows of the tenant it acts for.
-- (SELECT fn()) runs once per statement as an InitPlan, and lets the tenant btree serve the filter.

DROP POLICY IF EXISTS tenant_visible ON hybrid.tenant;
CREATE POLICY tenant_visible ON hybrid.tenant FOR SELECT
    USING (tenant_id = (SELECT hybrid._current_tenant()));

DROP POLICY IF EXISTS tenant_grant_own ON hybrid.tenant_grant;
CREATE POLICY tenant_grant_own ON hybrid.tenant_grant FOR SELECT
    USING (role_name = hybrid._caller());

DO $policies$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['corpus', 'chunk'] LOOP
        EXECUTE format('DROP POLICY IF EXISTS %I ON hybrid.%I', t || '_select', t);
        EXECUTE format('DROP POLICY IF EXISTS %I ON hybrid.%I', t || '_insert', t);
        EXECUTE format('DROP POLICY IF EXISTS %I ON hybrid.%I', t || '_update', t);
        EXECUTE format('DROP POLICY IF EXISTS %I ON hybrid.%I', t || '_delete', t);
    END LOOP;
END
$policies$;

CREATE POLICY corpus_select ON hybrid.corpus FOR SELECT
    USING (tenant_id = (SELECT hybrid._current_tenant()));
CREATE POLICY corpus_insert ON hybrid.corpus FOR INSERT
    WITH CHECK (tenant_id = (SELECT hybrid._current_tenant()));
CREATE POLICY corpus_update ON hybrid.corpus FOR UPDATE
    USING (tenant_id = (SELECT hybrid._current_tenant()))
    WITH CHECK (tenant_id = (SELECT hybrid._current_tenant()));
CREATE POLICY corpus_delete ON hybrid.corpus FOR DELETE
    USING (tenant_id = (SELECT hybrid._current_tenant()));

-- ACL: a chunk with labels is visible only to a caller holding at least one of them.
CREATE POLICY chunk_select ON hybrid.chunk FOR SELECT
    USING (tenant_id = (SELECT hybrid._current_tenant())
           AND (acl_labels = '{}' OR acl_labels && (SELECT hybrid._current_acl()) OR (SELECT hybrid._acl_all())));
CREATE POLICY chunk_insert ON hybrid.chunk FOR INSERT
    WITH CHECK (tenant_id = (SELECT hybrid._current_tenant()));
CREATE POLICY chunk_update ON hybrid.chunk FOR UPDATE
    USING (tenant_id = (SELECT hybrid._current_tenant())
           AND (acl_labels = '{}' OR acl_labels && (SELECT hybrid._current_acl()) OR (SELECT hybrid._acl_all())))
    WITH CHECK (tenant_id = (SELECT hybrid._current_tenant()));
CREATE POLICY chunk_delete ON hybrid.chunk FOR DELETE
    USING (tenant_id = (SELECT hybrid._current_tenant())
           AND (acl_labels = '{}' OR acl_labels && (SELECT hybrid._current_acl()) OR (SELECT hybrid._acl_all())));

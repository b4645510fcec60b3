-- Graph tenancy and bulk edge loading over the AGE graph hybrid_graph. Every function here
-- uses only dynamic SQL or run-time casts, so it can be created where AGE is missing.

-- hybrid._secure_label: RLS and grants on one AGE label table of hybrid_graph
CREATE OR REPLACE FUNCTION hybrid._secure_label(tbl regclass) RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET client_min_messages = warning
AS $$
DECLARE
    tenant_qual text := $q$(properties OPERATOR(ag_catalog.->>) 'tenant_id'::text) = (SELECT hybrid._current_tenant())$q$;
    node_seen text := 'EXISTS (SELECT 1 FROM hybrid.graph_node n WHERE n.vertex_id OPERATOR(ag_catalog.=) %I)';
    v_seq text;
BEGIN
    -- Two policies per table, by role. hybrid_definer (the API's functions, which check ACL
    -- visibility themselves, hop by hop against hybrid.chunk) gets the tenant rule alone, so its
    -- plans carry nothing more. Trusted app roles reading the graph tables directly also get the ACL
    -- rule: a chunk's node only where they see the chunk (hybrid.chunk's own policy, tenant and ACL,
    -- applies inside the EXISTS), an entity's node only where they see a chunk linked to it
    -- (hybrid._entity_seen), a vertex only where they see its node, an edge only where they see both
    -- ends. Any other role matches no policy and sees nothing.
    EXECUTE format('ALTER TABLE %s ENABLE ROW LEVEL SECURITY', tbl);
    EXECUTE format('ALTER TABLE %s FORCE ROW LEVEL SECURITY', tbl);
    EXECUTE format('DROP POLICY IF EXISTS tenant_rows ON %s', tbl);
    EXECUTE format('DROP POLICY IF EXISTS app_rows ON %s', tbl);
    EXECUTE format('CREATE POLICY tenant_rows ON %s TO hybrid_definer USING (%s) WITH CHECK (%s)',
                   tbl, tenant_qual, tenant_qual);
    EXECUTE format('CREATE POLICY app_rows ON %s FOR SELECT TO hybrid_app USING (%s AND %s)', tbl, tenant_qual,
                   CASE WHEN EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = tbl AND a.attname = 'start_id')
                        THEN format(node_seen, 'start_id') || ' AND ' || format(node_seen, 'end_id')
                        ELSE format(node_seen, 'id') END);
    -- the API reads and writes the graph as hybrid_definer (only hybrid.finish_edges writes); trusted
    -- app roles may read it directly under RLS; tenant login roles hold nothing on it
    EXECUTE format('REVOKE ALL ON %s FROM hybrid_user', tbl);
    EXECUTE format('GRANT SELECT ON %s TO hybrid_app', tbl);
    EXECUTE format('GRANT SELECT, INSERT ON %s TO hybrid_definer', tbl);
    -- vertex and edge ids come from the label's sequence: a tenant drawing them could squat another
    -- tenant's next ids
    SELECT l.seq_name INTO v_seq FROM ag_catalog.ag_label l WHERE l.relation = tbl;
    IF v_seq IS NOT NULL THEN
        EXECUTE format('REVOKE ALL ON SEQUENCE hybrid_graph.%I FROM hybrid_user', v_seq);
        EXECUTE format('GRANT USAGE ON SEQUENCE hybrid_graph.%I TO hybrid_definer', v_seq);
    END IF;
END
$$;
COMMENT ON FUNCTION hybrid._secure_label(regclass) IS
'Enables and forces RLS with the tenant policy (and the app roles'' ACL policy) on one AGE label table of hybrid_graph, and gives it and its id sequence the grants of every label. Takes locks on that table alone: hybrid._edge_label runs it for a label it creates inside a tenant writer''s transaction.';
REVOKE ALL ON FUNCTION hybrid._secure_label(regclass) FROM PUBLIC;

-- hybrid._secure_graph: RLS and grants on every AGE label table
CREATE OR REPLACE FUNCTION hybrid._secure_graph() RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET client_min_messages = warning
AS $$
DECLARE
    tbl regclass;
BEGIN
    IF to_regclass('hybrid.graph_node') IS NULL THEN
        RETURN;
    END IF;
    EXECUTE 'DROP POLICY IF EXISTS graph_node_tenant ON hybrid.graph_node';
    EXECUTE 'DROP POLICY IF EXISTS graph_node_app ON hybrid.graph_node';
    EXECUTE 'CREATE POLICY graph_node_tenant ON hybrid.graph_node TO hybrid_definer '
            'USING (tenant_id = (SELECT hybrid._current_tenant())) WITH CHECK (tenant_id = (SELECT hybrid._current_tenant()))';
    EXECUTE 'CREATE POLICY graph_node_app ON hybrid.graph_node FOR SELECT TO hybrid_app '
            'USING (tenant_id = (SELECT hybrid._current_tenant()) AND CASE WHEN kind = ''entity'' '
            'THEN hybrid._entity_seen(node_id, tenant_id, (SELECT hybrid._current_acl()), (SELECT hybrid._acl_all())) '
            'ELSE EXISTS (SELECT 1 FROM hybrid.chunk c WHERE c.tenant_id = graph_node.tenant_id AND c.chunk_id = graph_node.node_id) END)';
    FOR tbl IN
        SELECT l.relation
        FROM ag_catalog.ag_label l JOIN ag_catalog.ag_graph g ON g.graphid = l.graph
        WHERE g.name = 'hybrid_graph'
    LOOP
        PERFORM hybrid._secure_label(tbl);
    END LOOP;
    EXECUTE 'REVOKE ALL ON SCHEMA hybrid_graph FROM hybrid_user';
    EXECUTE 'GRANT USAGE ON SCHEMA hybrid_graph TO hybrid_app, hybrid_definer';
    EXECUTE 'REVOKE ALL ON ALL SEQUENCES IN SCHEMA hybrid_graph FROM hybrid_user';
    EXECUTE 'GRANT USAGE ON ALL SEQUENCES IN SCHEMA hybrid_graph TO hybrid_definer';
    EXECUTE 'REVOKE ALL ON hybrid.graph_node FROM hybrid_user';
    EXECUTE 'GRANT SELECT ON hybrid.graph_node TO hybrid_app';
    EXECUTE 'GRANT SELECT, INSERT ON hybrid.graph_node TO hybrid_definer';
    EXECUTE 'REVOKE ALL ON SCHEMA ag_catalog FROM hybrid_user';
    EXECUTE 'REVOKE ALL ON ALL TABLES IN SCHEMA ag_catalog FROM hybrid_user';
    EXECUTE 'GRANT USAGE ON SCHEMA ag_catalog TO hybrid_app, hybrid_definer';
    EXECUTE 'GRANT SELECT ON ALL TABLES IN SCHEMA ag_catalog TO hybrid_app, hybrid_definer';
END
$$;
COMMENT ON FUNCTION hybrid._secure_graph() IS
'The policies of hybrid.graph_node, hybrid._secure_label on every label table of hybrid_graph (AGE parent tables included), and the schema and catalog grants. Run at install and upgrade: it locks every label table.';
REVOKE ALL ON FUNCTION hybrid._secure_graph() FROM PUBLIC;

-- hybrid._edge_label: the opaque label of one of the caller's tenant's edge types (writers)
CREATE OR REPLACE FUNCTION hybrid._edge_label(rel text, register boolean) RETURNS text
LANGUAGE plpgsql VOLATILE SECURITY DEFINER  -- owned by the installer: creates AGE labels
SET search_path = ag_catalog, pg_catalog, pg_temp  -- create_elabel names AGE's opclass unqualified
SET client_min_messages = warning
AS $$
DECLARE
    v_tenant text := hybrid._current_tenant();  -- the caller's (hybrid._caller), never a parameter
    v_slot integer;
    v_label text;
BEGIN
    IF v_tenant IS NULL THEN
        RAISE EXCEPTION 'no tenant: set hybrid.tenant_id to a tenant this role may act for'
            USING ERRCODE = '42501';
    END IF;
    -- decided by the grant alone, before any lookup: a reader learns nothing of which names are types
    -- (only hybrid_definer's loaders may call this; the check is the second wall)
    PERFORM hybrid._check_writer();
    IF rel IS NULL OR rel !~ '^[A-Z][A-Z0-9_]{0,62}$' THEN
        RAISE EXCEPTION 'rel must be an UPPER_SNAKE_CASE name matching ^[A-Z][A-Z0-9_]{0,62}$, got %', hybrid._shown(rel)
            USING ERRCODE = '22023';
    END IF;
    IF rel IN ('CHUNK', 'ENTITY') THEN
        RAISE EXCEPTION 'rel % is reserved', rel USING ERRCODE = '22023';
    END IF;
    -- edge types are the tenant's own names (hybrid.edge_type, under RLS); the label that holds a
    -- type's edges is named by its slot alone, the same slot numbers in every tenant
    SELECT et.slot INTO v_slot FROM hybrid.edge_type et WHERE et.tenant_id = v_tenant AND et.name = rel;
    IF NOT FOUND THEN
        IF NOT register THEN
            RETURN NULL;
        END IF;
        PERFORM pg_advisory_xact_lock(hashtext('hybrid.edge_type'), hashtext(v_tenant));
        SELECT et.slot INTO v_slot FROM hybrid.edge_type et WHERE et.tenant_id = v_tenant AND et.name = rel;
        IF NOT FOUND THEN
            SELECT coalesce(max(et.slot) + 1, 0) INTO v_slot FROM hybrid.edge_type et WHERE et.tenant_id = v_tenant;
            IF v_slot >= 1000 THEN
                RAISE EXCEPTION 'a tenant has at most 1000 edge types; % would be one more', rel
                    USING ERRCODE = '54000', HINT = 'Reuse a type and tell the relations apart by an edge property.';
            END IF;
            INSERT INTO hybrid.edge_type (tenant_id, name, slot) VALUES (v_tenant, rel, v_slot);
        END IF;
    END IF;
    v_label := 'rel_' || v_slot;
    IF to_regclass('hybrid_graph.' || v_label) IS NULL THEN
        -- the first tenant to use this many types creates the label, under the tenant policy; one
        -- creator at a time, and the one that waited reads ag_label anew (a statement's fresh
        -- snapshot: to_regclass may still answer from the catalog as it was before the wait).
        -- Only locks no reader or writer of an existing label waits on, held to the end of the caller's
        -- transaction: SHARE UPDATE EXCLUSIVE on hybrid_graph._ag_label_edge (create_elabel; readers take
        -- ACCESS SHARE, loaders ROW EXCLUSIVE) and the new label's own. Securing every label table here
        -- (hybrid._secure_graph) locked them all exclusively and stalled every tenant's graph (issue 48).
        PERFORM pg_advisory_xact_lock(hashtext('hybrid._edge_label'));
        IF NOT EXISTS (SELECT 1 FROM ag_catalog.ag_label l JOIN ag_catalog.ag_graph g ON g.graphid = l.graph
                       WHERE g.name = 'hybrid_graph' AND l.name = v_label) THEN
            PERFORM ag_catalog.create_elabel('hybrid_graph'::cstring, v_label::cstring);
            PERFORM hybrid._secure_label(format('hybrid_graph.%I', v_label)::regclass);
        END IF;
    END IF;
    RETURN v_label;
END
$$;
COMMENT ON FUNCTION hybrid._edge_label(text, boolean) IS
'For a writer of the current tenant (hybrid._check_writer first: a reader gets 42501 whatever it names), the opaque AGE edge label (rel_<slot>) holding the tenant''s edges of type rel; with register, registers rel for the tenant first if it is new (at most 1,000 types a tenant) and creates the label if no tenant used that slot yet, locking only the new label; without, NULL for a name the tenant has not registered. Callable by hybrid_definer''s loaders alone.';
REVOKE ALL ON FUNCTION hybrid._edge_label(text, boolean) FROM PUBLIC;

-- hybrid.register_edge_type: register an edge type for the caller's tenant
CREATE OR REPLACE FUNCTION hybrid.register_edge_type(rel text) RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER  -- owned by hybrid_definer: tenant login roles call no label helper
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF to_regclass('hybrid.graph_node') IS NULL THEN
        RAISE EXCEPTION 'the graph is not installed: the age extension is missing'
            USING ERRCODE = '0A000', HINT = 'Install Apache AGE and run pyhybrid migrate again.';
    END IF;
    PERFORM hybrid._check_writer();  -- by the grant alone, before any lookup: one 42501 for a reader
    PERFORM hybrid._edge_label(rel, true);
END
$$;
COMMENT ON FUNCTION hybrid.register_edge_type(text) IS
'Registers the edge type rel (UPPER_SNAKE_CASE) for the current tenant, idempotent. Writers only: a reader gets one 42501 whatever it names. Loading an edge of a new type registers it too: types are each tenant''s own names, invisible to other tenants.';
REVOKE ALL ON FUNCTION hybrid.register_edge_type(text) FROM PUBLIC;

-- hybrid._edge_types_seen: which of the tenant's edge types the caller may know of
CREATE OR REPLACE FUNCTION hybrid._edge_types_seen(names text[]) RETURNS text[]
LANGUAGE plpgsql STABLE SECURITY INVOKER  -- called by the definer functions, as hybrid_definer
SET search_path = pg_catalog, ag_catalog, public, pg_temp  -- graphid operators live in ag_catalog
AS $$
DECLARE
    v_tenant text; v_key integer;
    v_acl text[] := hybrid._current_acl();
    v_all boolean := hybrid._acl_all() OR hybrid._may_write();
    v_out text[] := '{}';
    et record;
    v_src text[];
    v_dst text[];
    v_seen text[];
    v_batch integer;
BEGIN
    SELECT s.tenant, s.key INTO v_tenant, v_key FROM hybrid._scope() s;
    -- a type name is the tenant's vocabulary: a caller who sees every chunk knows every type; any
    -- other knows a type once it sees one of its edges (both ends visible), so a type used only
    -- around chunks it cannot see is as unknown to it as a name nobody uses. Looked for in batches
    -- of 1,000 edges, at most 100 batches: past that a type counts as unseen.
    FOR et IN SELECT t.name, t.slot FROM hybrid.edge_type t
              WHERE t.tenant_id = v_tenant AND (names IS NULL OR t.name = ANY (names)) ORDER BY t.name LOOP
        IF v_all THEN
            v_out := v_out || et.name;
            CONTINUE;
        END IF;
        FOR v_batch IN 0..99 LOOP
            -- the label table holds every tenant's edges of this slot; RLS gives hybrid_definer the tenant's
            EXECUTE format($sql$
                SELECT array_agg(a.node_id), array_agg(b.node_id)
                FROM (SELECT e.start_id, e.end_id FROM hybrid_graph.%I e ORDER BY e.id LIMIT 1000 OFFSET $2) e
                JOIN hybrid.graph_node a ON a.tenant_id = $1 AND a.vertex_id = e.start_id
                JOIN hybrid.graph_node b ON b.tenant_id = $1 AND b.vertex_id = e.end_id
            $sql$, 'rel_' || et.slot) INTO v_src, v_dst USING v_tenant, v_batch * 1000;
            EXIT WHEN v_src IS NULL;
            v_seen := hybrid._visible_chunk_ids(v_key, v_src || v_dst, NULL, NULL, v_tenant, v_acl, false)
                      || hybrid._entities_seen(v_key, v_src || v_dst, v_tenant, v_acl, false);
            IF EXISTS (SELECT 1 FROM unnest(v_src, v_dst) AS x(s, d) WHERE x.s = ANY (v_seen) AND x.d = ANY (v_seen)) THEN
                v_out := v_out || et.name;
                EXIT;
            END IF;
            EXIT WHEN cardinality(v_src) < 1000;
        END LOOP;
    END LOOP;
    RETURN v_out;
END
$$;
COMMENT ON FUNCTION hybrid._edge_types_seen(text[]) IS
'The names among names (NULL: all) of the current tenant''s edge types that the caller may know of: all of them for a caller who sees every chunk (hybrid._acl_all, or a writer), else those of which it sees at least one edge (both ends visible; the first 100,000 edges are looked at).';

-- hybrid.edge_type_label: the AGE label to name one of the tenant's edge types in Cypher
CREATE OR REPLACE FUNCTION hybrid.edge_type_label(rel text) RETURNS text
LANGUAGE plpgsql STABLE SECURITY DEFINER  -- owned by hybrid_definer: tenant login roles read no table
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_label text;
BEGIN
    IF to_regclass('hybrid.graph_node') IS NULL THEN
        RAISE EXCEPTION 'the graph is not installed: the age extension is missing'
            USING ERRCODE = '0A000', HINT = 'Install Apache AGE and run pyhybrid migrate again.';
    END IF;
    SELECT 'rel_' || et.slot INTO v_label FROM hybrid.edge_type et
    WHERE et.tenant_id = hybrid._current_tenant() AND et.name = rel AND et.name = ANY (hybrid._edge_types_seen(ARRAY[rel]));
    IF v_label IS NULL THEN
        -- another tenant's type, one whose edges the caller cannot see and a name nobody uses: one answer
        RAISE EXCEPTION 'rel % is not an edge type of this tenant', hybrid._shown(rel)
            USING ERRCODE = '22023', HINT = 'SELECT name FROM hybrid.edge_types() lists them.';
    END IF;
    RETURN v_label;
END
$$;
COMMENT ON FUNCTION hybrid.edge_type_label(text) IS
'The opaque AGE label (rel_<slot>) of the current tenant''s edge type rel, for app roles that name a type in a Cypher MATCH (-[:rel_3]->). 22023 for a name the tenant does not use, whoever else uses it.';
REVOKE ALL ON FUNCTION hybrid.edge_type_label(text) FROM PUBLIC;

-- hybrid.edge_types: the tenant's edge types
CREATE OR REPLACE FUNCTION hybrid.edge_types() RETURNS TABLE (name text, label text)
LANGUAGE plpgsql STABLE SECURITY DEFINER  -- owned by hybrid_definer: tenant login roles read no table
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN QUERY SELECT et.name, 'rel_' || et.slot FROM hybrid.edge_type et
                 WHERE et.tenant_id = hybrid._current_tenant() AND et.name = ANY (hybrid._edge_types_seen(NULL))
                 ORDER BY et.name;
END
$$;
COMMENT ON FUNCTION hybrid.edge_types() IS
'The current tenant''s edge types (name) that the caller may know of (hybrid._edge_types_seen: all for a caller who sees every chunk, else those with an edge it sees) and the opaque AGE label holding each one''s edges (label).';

-- hybrid._entities_seen: which entity nodes of a tenant the caller may see
CREATE OR REPLACE FUNCTION hybrid._entities_seen(tenant_key integer, ids text[], tenant text, acl text[],
                                                 acl_all boolean) RETURNS text[]
LANGUAGE plpgsql STABLE SECURITY INVOKER
SET search_path = pg_catalog, ag_catalog, public, pg_temp  -- graphid operators live in ag_catalog
SET plan_cache_mode = force_custom_plan  -- tenant_key a constant: the tenant's partition alone is planned
AS $$
BEGIN
    IF ids IS NULL OR cardinality(ids) = 0 THEN
        RETURN '{}';
    END IF;
    -- an entity is the tenant's name for something its chunks mention: the caller sees it exactly
    -- when at least one chunk the caller can see links to it (in either direction)
    RETURN (
        SELECT coalesce(array_agg(g.node_id), '{}') FROM hybrid.graph_node g
        WHERE g.tenant_id = tenant AND g.node_id = ANY (ids) AND g.kind = 'entity'
          AND EXISTS (
              SELECT 1 FROM (SELECT e.end_id AS vid FROM hybrid_graph._ag_label_edge e WHERE e.start_id = g.vertex_id
                             UNION ALL
                             SELECT e.start_id FROM hybrid_graph._ag_label_edge e WHERE e.end_id = g.vertex_id) nb
              JOIN hybrid.graph_node n ON n.vertex_id = nb.vid AND n.tenant_id = tenant AND n.kind = 'chunk'
              JOIN hybrid.chunk c ON c.tenant_key = _entities_seen.tenant_key AND c.tenant_id = tenant
                                 AND c.chunk_id = n.node_id
              WHERE hybrid._visible(c.tenant_id, c.superseded, c.acl_labels, tenant, acl, acl_all)));
END
$$;
COMMENT ON FUNCTION hybrid._entities_seen(integer, text[], text, text[], boolean) IS
'The ids among ids of the tenant''s entity nodes that the caller may see: those linked to at least one live chunk the caller can see. Every graph path (seeds, hops, graph_context, classify_ids, the app roles'' graph_node policy) asks it.';

-- hybrid._entity_seen: the app roles' graph_node policy for an entity
CREATE OR REPLACE FUNCTION hybrid._entity_seen(node_id text, tenant text, acl text[], acl_all boolean) RETURNS boolean
LANGUAGE plpgsql STABLE SECURITY DEFINER  -- owned by hybrid_definer, whose graph policies are the tenant's alone:
-- reading graph_node and the edges as the app role would recurse through their own policies (42P17)
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    -- tenant, acl and acl_all come from the policy's once-per-statement InitPlans (the caller's own); a
    -- caller passing others gains nothing: RLS on graph_node and hybrid.chunk still applies the real ones
    RETURN node_id = ANY (hybrid._entities_seen((SELECT t.tenant_key FROM hybrid.tenant t WHERE t.tenant_id = tenant),
                                                ARRAY[node_id], tenant, acl, acl_all));
END
$$;
COMMENT ON FUNCTION hybrid._entity_seen(text, text, text[], boolean) IS
'Whether the caller may see the entity node_id of tenant (hybrid._entities_seen), with its labels acl and acl_all: the app roles'' policy on hybrid.graph_node.';


-- hybrid._stage_columns: a temporary staging table's columns, name and type in order
CREATE OR REPLACE FUNCTION hybrid._stage_columns(stage text) RETURNS text
LANGUAGE sql STABLE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT string_agg(a.attname || ' ' || format_type(a.atttypid, a.atttypmod), ', ' ORDER BY a.attnum)
    FROM pg_attribute a WHERE a.attrelid = to_regclass('pg_temp.' || quote_ident(stage)) AND a.attnum > 0 AND NOT a.attisdropped
$$;
COMMENT ON FUNCTION hybrid._stage_columns(text) IS
'The columns of pg_temp.<stage> (name and type, in order, comma-separated), NULL where there is none: what hybrid._check_stage compares and hybrid.begin_ingest keeps or makes again.';
REVOKE ALL ON FUNCTION hybrid._stage_columns(text) FROM PUBLIC;

-- hybrid._check_stage: refuse a staging table the caller rigged, before a definer reads it
CREATE OR REPLACE FUNCTION hybrid._check_stage(stage text, columns text, maker text) RETURNS void
LANGUAGE plpgsql STABLE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v record;
BEGIN
    -- the staging table belongs to the caller, who could have made it a view, or given it triggers,
    -- rules or a policy whose functions would run with the definer's rights: accept only the plain
    -- temporary table with the expected columns that the begin_ function creates
    SELECT c.relkind, c.relpersistence, c.relhastriggers, c.relhasrules, c.relrowsecurity,
           hybrid._stage_columns(stage) AS cols
    INTO v
    FROM pg_class c WHERE c.oid = to_regclass('pg_temp.' || quote_ident(stage));
    IF NOT FOUND OR v.relkind <> 'r' OR v.relpersistence <> 't' OR v.relhastriggers OR v.relhasrules
       OR v.relrowsecurity OR v.cols IS DISTINCT FROM columns THEN
        RAISE EXCEPTION 'pg_temp.% is not the staging table % creates', stage, maker
            USING ERRCODE = '42501', HINT = format('Call %s first, in the same transaction.', maker);
    END IF;
END
$$;
COMMENT ON FUNCTION hybrid._check_stage(text, text, text) IS
'Raises 42501 unless pg_temp.<stage> is a plain temporary table with exactly these columns and no triggers, rules or policy: what a SECURITY DEFINER loader checks before reading the caller''s staging table.';

-- hybrid.begin_edges: the staging table edges are COPYed into
CREATE OR REPLACE FUNCTION hybrid.begin_edges() RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    CREATE TEMP TABLE IF NOT EXISTS hybrid_edge_stage (
        ord  bigserial,
        src  text,
        dst  text,
        rel  text,
        properties jsonb
    ) ON COMMIT DROP;
    TRUNCATE pg_temp.hybrid_edge_stage;
    -- hybrid.finish_edges reads and empties it as hybrid_definer
    GRANT SELECT, TRUNCATE ON pg_temp.hybrid_edge_stage TO hybrid_definer;
END
$$;
COMMENT ON FUNCTION hybrid.begin_edges() IS
'Creates the transaction-scoped staging table pg_temp.hybrid_edge_stage(src, dst, rel, properties) to COPY edges into; hybrid.finish_edges() loads them.';

-- hybrid.finish_edges: load the staged edges for the current tenant
CREATE OR REPLACE FUNCTION hybrid.finish_edges(OUT edges_added bigint, OUT edges_present bigint, OUT nodes_added bigint)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER  -- owned by hybrid_definer: the only writer of the graph
SET search_path = pg_catalog, ag_catalog, pg_temp  -- graphid operators live in ag_catalog
SET plan_cache_mode = force_custom_plan  -- v_key a constant: only the tenant's partition is planned
AS $$
DECLARE
    v_tenant text; v_key integer;  -- the caller's tenant (hybrid._caller), not the definer's
    bad record;
    r text;
    n bigint;
    i integer;
    v_labels text;
    v_rels text[] := '{}';
    v_rel_labels text[] := '{}';
BEGIN
    SELECT s.tenant, s.key INTO v_tenant, v_key FROM hybrid._writer_scope() s;  -- or why there is none
    IF to_regclass('hybrid.graph_node') IS NULL THEN
        RAISE EXCEPTION 'the graph is not installed: the age extension is missing'
            USING ERRCODE = '0A000', HINT = 'Install Apache AGE and run pyhybrid migrate again.';
    END IF;
    PERFORM hybrid._check_writer();
    PERFORM hybrid._check_stage('hybrid_edge_stage', 'ord bigint, src text, dst text, rel text, properties jsonb',
                                'hybrid.begin_edges()');
    SELECT ord, src, dst, rel INTO bad FROM pg_temp.hybrid_edge_stage
    WHERE src IS NULL OR btrim(src) = '' OR dst IS NULL OR btrim(dst) = ''
       OR rel IS NULL OR rel !~ '^[A-Z][A-Z0-9_]{0,62}$' OR rel IN ('CHUNK', 'ENTITY') OR src = dst
    ORDER BY ord LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'edge row %: %', bad.ord,
            CASE WHEN bad.src IS NULL OR btrim(bad.src) = '' THEN 'src is missing'
                 WHEN bad.dst IS NULL OR btrim(bad.dst) = '' THEN 'dst is missing'
                 WHEN bad.src = bad.dst THEN 'src and dst are the same node'
                 ELSE format('rel must be UPPER_SNAKE_CASE (^[A-Z][A-Z0-9_]{0,62}$), got %s', hybrid._shown(bad.rel)) END
            USING ERRCODE = '22023';
    END IF;

    -- one loader at a time per tenant: two loads meeting the same new node would both create it (and
    -- fail on the node's key), and both could add the same edge
    PERFORM pg_advisory_xact_lock(hashtext('hybrid.finish_edges'), hashtext(v_tenant));
    v_labels := hybrid._with_all_labels();  -- an ACL-restricted chunk is still a Chunk vertex
    -- the batch in a table of the definer's own, analyzed: without statistics on the staged rows the
    -- planner took them for a few and joined them by a nested loop over the whole batch, quadratic
    -- (25 s for a 30k-edge batch of a tenant the statistics had not seen, 0.45 s once analyzed)
    CREATE TEMP TABLE hybrid_edge_batch ON COMMIT DROP AS
    SELECT s.ord, s.src, s.dst, s.rel, s.properties FROM pg_temp.hybrid_edge_stage s;
    ANALYZE pg_temp.hybrid_edge_batch;
    -- and the tenant's partition, if the batch outnumbers what its statistics describe (a new
    -- tenant's partition looked empty to the planner: the chunk lookup below went quadratic)
    PERFORM hybrid._analyze_partition(v_key, (SELECT count(*) FROM pg_temp.hybrid_edge_batch));
    -- each type's opaque label, registering the tenant's new types
    FOR r IN SELECT DISTINCT s.rel FROM pg_temp.hybrid_edge_batch s ORDER BY 1 LOOP  -- slots in name order
        v_rels := v_rels || r;
        v_rel_labels := v_rel_labels || hybrid._edge_label(r, true);
    END LOOP;

    -- vertices for nodes seen for the first time: chunks of this tenant are Chunk, the rest Entity
    CREATE TEMP TABLE hybrid_new_node ON COMMIT DROP AS
    SELECT DISTINCT x.node_id,
           CASE WHEN EXISTS (SELECT 1 FROM hybrid.chunk c WHERE c.tenant_key = v_key AND c.tenant_id = v_tenant
                             AND c.chunk_id = x.node_id)
                THEN 'chunk' ELSE 'entity' END AS kind
    FROM (SELECT src AS node_id FROM pg_temp.hybrid_edge_batch UNION SELECT dst FROM pg_temp.hybrid_edge_batch) x
    WHERE NOT EXISTS (SELECT 1 FROM hybrid.graph_node g WHERE g.tenant_id = v_tenant AND g.node_id = x.node_id);
    ANALYZE pg_temp.hybrid_new_node;

    FOR r IN SELECT unnest(ARRAY['chunk', 'entity']) LOOP
        EXECUTE format($sql$
            WITH v AS (
                INSERT INTO hybrid_graph.%I (properties)
                SELECT jsonb_build_object('node_id', n.node_id, 'tenant_id', $1)::text::ag_catalog.agtype
                FROM pg_temp.hybrid_new_node n WHERE n.kind = $2
                RETURNING id, properties
            )
            INSERT INTO hybrid.graph_node (tenant_id, node_id, kind, vertex_id)
            SELECT $1, v.properties OPERATOR(ag_catalog.->>) 'node_id'::text, $2, v.id FROM v
        $sql$, initcap(r)) USING v_tenant, r;
    END LOOP;
    SELECT count(*) INTO nodes_added FROM pg_temp.hybrid_new_node;
    DROP TABLE pg_temp.hybrid_new_node;
    -- the batch's nodes and their vertices, looked up one by one through graph_node's key (LATERAL:
    -- a plan that cannot go quadratic) into an analyzed table of the call's own. Joined to graph_node
    -- itself, whose statistics had not seen the nodes this call created, the planner expected one
    -- node and nested-looped over all of them for each edge: 24 s for a new tenant's 30k-edge batch
    -- at 1M chunks and 2M edges (1,240 edges/s, edges_1m_23a5b3d.md at commit 49a26d2, bench/FINDINGS.md#edge-loading-for-tenants-the-statistics-have-not-seen-edges-edges_compare)
    CREATE TEMP TABLE hybrid_batch_vertex ON COMMIT DROP AS
    SELECT x.node_id, g.vertex_id
    FROM (SELECT src AS node_id FROM pg_temp.hybrid_edge_batch UNION SELECT dst FROM pg_temp.hybrid_edge_batch) x
    CROSS JOIN LATERAL (SELECT n.vertex_id FROM hybrid.graph_node n
                        WHERE n.tenant_id = v_tenant AND n.node_id = x.node_id) g;
    ANALYZE pg_temp.hybrid_batch_vertex;

    edges_added := 0;
    FOR i IN 1..coalesce(cardinality(v_rels), 0) LOOP
        EXECUTE format($sql$
            INSERT INTO hybrid_graph.%I (start_id, end_id, properties)
            SELECT DISTINCT ON (a.vertex_id, b.vertex_id) a.vertex_id, b.vertex_id,
                   (coalesce(s.properties, '{}'::jsonb) || jsonb_build_object('tenant_id', $1))::text::ag_catalog.agtype
            FROM pg_temp.hybrid_edge_batch s
            JOIN pg_temp.hybrid_batch_vertex a ON a.node_id = s.src
            JOIN pg_temp.hybrid_batch_vertex b ON b.node_id = s.dst
            WHERE s.rel = $2
              AND NOT EXISTS (SELECT 1 FROM hybrid_graph.%I e WHERE e.start_id = a.vertex_id AND e.end_id = b.vertex_id)
            ORDER BY a.vertex_id, b.vertex_id, s.ord
        $sql$, v_rel_labels[i], v_rel_labels[i]) USING v_tenant, v_rels[i];
        GET DIAGNOSTICS n = ROW_COUNT;
        edges_added := edges_added + n;
    END LOOP;
    SELECT count(*) INTO edges_present FROM pg_temp.hybrid_edge_batch;
    edges_present := edges_present - edges_added;
    TRUNCATE pg_temp.hybrid_edge_stage;
    DROP TABLE pg_temp.hybrid_edge_batch;
    DROP TABLE pg_temp.hybrid_batch_vertex;
    PERFORM set_config('hybrid.acl_labels', v_labels, true);
END
$$;
COMMENT ON FUNCTION hybrid.finish_edges() IS
'Loads the staged edges into hybrid_graph for the current tenant: validates every row (naming the first bad one, SQLSTATE 22023), registers the tenant''s new edge types (hybrid.edge_type; their edges go to opaque labels rel_<slot>), creates missing vertices (a node that is a chunk of the tenant becomes a Chunk vertex, any other an Entity), and inserts edges straight into the label tables, skipping ones already present. Writers only (hybrid._may_write): they see every chunk of the tenant. Returns counts.';

-- pyhybrid 0.3: edge types that reveal nothing. Until now an edge type was an AGE label named after
-- it, so every role could read every tenant's type names in pg_class and pg_stat_user_tables. Type
-- names are now tenant data, in hybrid.edge_type under RLS, and each maps to an opaque label
-- rel_<slot> shared by all tenants (slot = the type's number within its tenant): the labels reveal
-- no more than how many types the largest tenant uses, and the graph holds at most that many edge
-- labels (AGE caps a graph at 65,535; every hop reads the edge parent with its children).
CREATE TABLE hybrid.edge_type (
    tenant_id  text NOT NULL REFERENCES hybrid.tenant ON DELETE CASCADE,
    name       text NOT NULL CONSTRAINT edge_type_name_format CHECK (name ~ '^[A-Z][A-Z0-9_]{0,62}$'),
    slot       integer NOT NULL CONSTRAINT edge_type_slot_range CHECK (slot >= 0 AND slot < 1000),
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, name),
    CONSTRAINT edge_type_slot_unique UNIQUE (tenant_id, slot)
);
COMMENT ON TABLE hybrid.edge_type IS
'Each tenant''s edge types: the name its loaders use and the slot whose opaque AGE label (hybrid_graph.rel_<slot>) holds its edges. Tenant data, under RLS.';
ALTER TABLE hybrid.edge_type ENABLE ROW LEVEL SECURITY;
ALTER TABLE hybrid.edge_type FORCE ROW LEVEL SECURITY;
REVOKE ALL ON hybrid.edge_type FROM PUBLIC;

-- what 0.2 used to create and check type names: replaced by hybrid._edge_label
DROP FUNCTION IF EXISTS hybrid._ensure_edge_label(text);

-- The edges of every type-named label move to the opaque label of their tenant's slot for that type
-- (edge ids change; start, end and properties are kept), then the named label is dropped.
DO $move$
DECLARE
    l record;
    t record;
    v_slot integer;
    v_label text;
BEGIN
    IF to_regclass('hybrid.graph_node') IS NULL THEN
        RETURN;
    END IF;
    PERFORM set_config('search_path', 'ag_catalog, pg_catalog, public', true);  -- create_elabel names AGE's opclass unqualified
    FOR l IN
        SELECT al.name::text AS name, al.relation
        FROM ag_catalog.ag_label al JOIN ag_catalog.ag_graph g ON g.graphid = al.graph
        WHERE g.name = 'hybrid_graph' AND al.kind = 'e' AND al.name <> '_ag_label_edge'
          AND al.name::text !~ '^rel_[0-9]+$'
        ORDER BY al.name
    LOOP
        -- an edge's tenant is its start vertex's (edges join nodes of one tenant)
        FOR t IN EXECUTE format(
            'SELECT DISTINCT n.tenant_id FROM %s e JOIN hybrid.graph_node n ON n.vertex_id OPERATOR(ag_catalog.=) e.start_id '
            'ORDER BY 1', l.relation)
        LOOP
            IF l.name !~ '^[A-Z][A-Z0-9_]{0,62}$' THEN
                RAISE EXCEPTION 'edge label % of hybrid_graph is not an UPPER_SNAKE_CASE type name', quote_literal(l.name)
                    USING ERRCODE = '22023', HINT = 'Rename or drop it, then run pyhybrid migrate again.';
            END IF;
            INSERT INTO hybrid.edge_type (tenant_id, name, slot)
            SELECT t.tenant_id, l.name, coalesce(max(et.slot) + 1, 0) FROM hybrid.edge_type et WHERE et.tenant_id = t.tenant_id
            RETURNING slot INTO v_slot;
            v_label := 'rel_' || v_slot;
            IF NOT EXISTS (SELECT 1 FROM ag_catalog.ag_label al JOIN ag_catalog.ag_graph g ON g.graphid = al.graph
                           WHERE g.name = 'hybrid_graph' AND al.name = v_label) THEN
                PERFORM ag_catalog.create_elabel('hybrid_graph'::cstring, v_label::cstring);
            END IF;
            EXECUTE format(
                'INSERT INTO hybrid_graph.%I (start_id, end_id, properties) '
                'SELECT e.start_id, e.end_id, e.properties FROM %s e '
                'JOIN hybrid.graph_node n ON n.vertex_id OPERATOR(ag_catalog.=) e.start_id WHERE n.tenant_id = $1 '
                'ORDER BY e.id', v_label, l.relation) USING t.tenant_id;
        END LOOP;
        PERFORM ag_catalog.drop_label('hybrid_graph'::name, l.name::name);
    END LOOP;
END
$move$;

-- The AGE graph hybrid_graph: runs once, only where the age extension is available.
CREATE EXTENSION IF NOT EXISTS age;
-- create_vlabel names AGE's opclass unqualified, so ag_catalog must be on the path
SET LOCAL search_path = ag_catalog, public;

SELECT ag_catalog.create_graph('hybrid_graph');
SELECT ag_catalog.create_vlabel('hybrid_graph', 'Chunk');
SELECT ag_catalog.create_vlabel('hybrid_graph', 'Entity');

-- Maps a tenant's node ids (chunk ids and entity ids) to AGE vertices. Lookups by node id use
-- this btree (text equality is leakproof, so it stays an index condition under RLS).
CREATE TABLE hybrid.graph_node (
    tenant_id text NOT NULL REFERENCES hybrid.tenant ON DELETE CASCADE,
    node_id   text NOT NULL,
    kind      text NOT NULL CONSTRAINT graph_node_kind CHECK (kind IN ('chunk', 'entity')),
    vertex_id ag_catalog.graphid NOT NULL UNIQUE,
    PRIMARY KEY (tenant_id, node_id)
);
ALTER TABLE hybrid.graph_node ENABLE ROW LEVEL SECURITY;
ALTER TABLE hybrid.graph_node FORCE ROW LEVEL SECURITY;

CREATE INDEX chunk_vertex_node_idx ON hybrid_graph."Chunk"
    ((properties OPERATOR(ag_catalog.->>) 'node_id'::text));
CREATE INDEX entity_vertex_node_idx ON hybrid_graph."Entity"
    ((properties OPERATOR(ag_catalog.->>) 'node_id'::text));
CREATE INDEX chunk_vertex_prop_idx ON hybrid_graph."Chunk"
    (ag_catalog.agtype_access_operator(VARIADIC ARRAY[properties, '"node_id"'::ag_catalog.agtype]));
CREATE INDEX entity_vertex_prop_idx ON hybrid_graph."Entity"
    (ag_catalog.agtype_access_operator(VARIADIC ARRAY[properties, '"node_id"'::ag_catalog.agtype]));

INSERT INTO hybrid.setting (key, value) VALUES ('graph', 'hybrid_graph');

RESET search_path;
